import TestSupport
import XCTest

@testable import Core
@testable import Imaging

/// The full level's decode of GIF (giflib) and WebP (libwebp), every frame of each (issue 45):
/// what it passes, what it finds that the structure walk does not, and how it words it.
final class FrameDecodeTests: XCTestCase {
  private func reason(_ decode: () throws(ImageCacheError) -> Void) -> String? {
    do throws(ImageCacheError) {
      try decode()
      return nil
    } catch {
      guard case .badImageData(let reason) = error else { return "\(error)" }
      return reason
    }
  }

  private func reason(_ data: Data, level: ValidationLevel) -> String? {
    reason { () throws(ImageCacheError) in _ = try ImageValidator(level: level).validate(data) }
  }

  func testEveryFrameOfAValidGIFOrWebPDecodes() throws {
    let images: [(String, Data, ImageFormat, Int, Int)] = [
      ("1x1 GIF, two frames", Fixtures.gif, .gif, 1, 1),
      ("interlaced still GIF", Fixtures.stillGIF, .gif, 64, 48),
      ("animated GIF", Fixtures.animatedGIF, .gif, 64, 48),
      ("1x1 lossy WebP", Fixtures.webpLossy, .webp, 1, 1),
      ("1x1 lossless WebP", Fixtures.webpLossless, .webp, 1, 1),
      ("lossy WebP", Fixtures.lossyWebP, .webp, 64, 48),
      ("lossless WebP with alpha", Fixtures.losslessAlphaWebP, .webp, 64, 48),
      ("lossy WebP with alpha", Fixtures.lossyAlphaWebP, .webp, 64, 48),
      ("animated WebP", Fixtures.animatedWebP, .webp, 64, 48),
    ]
    for (name, data, format, width, height) in images {
      XCTAssertEqual(
        try ImageValidator(level: .full).validate(data),
        ImageInfo(format: format, width: width, height: height), name)
    }
  }

  /// Damage inside the compressed data of one frame, under a container that holds together:
  /// the structure walk passes it, the full decode names the frame and what broke.
  func testDamageInsideTheCompressedDataIsFoundOnlyByTheFullDecode() {
    for kind in EntropyDamagedImage.allCases {
      XCTAssertNil(reason(kind.data, level: .structure), "\(kind)")
      let found = reason(kind.data, level: .full)
      XCTAssertTrue(found?.hasPrefix(kind.reason) == true, "\(kind): \(found ?? "passed")")
    }
  }

  /// The LZW follower reads what encoders write: every minimum code size, the table filled to
  /// its 4,096 codes and then cleared or kept (a deferred clear), strings of many lengths.
  func testTheLZWFollowerReadsEveryCodeWidthAndAFullTable() {
    for minCodeSize in 2...8 {
      for clearWhenFull in [true, false] {
        let writer = GIFWriter(
          width: 300, height: 200, minCodeSize: minCodeSize, clearWhenFull: clearWhenFull)
        let pixels = writer.noise(seed: UInt64(minCodeSize))
        let codes = writer.codes(pixels)
        let clears = codes.filter { $0.code == 1 << minCodeSize }.count
        let name = "minimum code size \(minCodeSize), \(clearWhenFull ? "cleared" : "deferred")"
        XCTAssertTrue(codes.contains { $0.width == 12 }, name)
        XCTAssertTrue(clearWhenFull ? clears > 1 : clears == 1, name)
        XCTAssertNil(reason(writer.file(pixels), level: .full), name)
      }
    }
  }

  /// What the follower finds in a frame's LZW data, in its words: a code past the table's end
  /// (giflib would make other pixels of it), a string code with no string before it, the end
  /// code or the end of the data before the frame's last pixel. Codes after the last pixel are
  /// not read, as giflib does not read them.
  func testTheLZWFollowerNamesWhatIsWrongWithTheCodes() {
    let writer = GIFWriter(width: 300, height: 200, minCodeSize: 2, clearWhenFull: true)
    let pixels = writer.noise(seed: 7)
    let codes = writer.codes(pixels)
    let gif = { (codes: [(code: Int, width: Int)]) in
      writer.file(lzw: GIFWriter.pack(codes))
    }
    func full(_ codes: [(code: Int, width: Int)]) -> String? { reason(gif(codes), level: .full) }
    // codes[0] is the clear code (4), codes[1] a colour; the table then ends at 5 (the end code).
    var past = codes
    past[2].code = 7
    XCTAssertEqual(full(past), "gif: frame 1: corrupt LZW data: code 7 where the table ends at 5")
    var noString = codes
    noString[1].code = 6
    XCTAssertEqual(
      full(noString), "gif: frame 1: corrupt LZW data: code 6 where the table ends at 5")
    var endEarly = codes
    endEarly[1].code = 5
    XCTAssertEqual(
      full(endEarly), "gif: frame 1: corrupt LZW data: the end code after 0 of its 60000 pixels")
    let short = full(Array(codes.dropLast(2)))
    XCTAssertTrue(
      short?.hasPrefix("gif: frame 1: corrupt LZW data: the data ends after ") == true
        && short?.hasSuffix(" of its 60000 pixels") == true, short ?? "passed")
    var trailing = Array(codes.dropLast())
    trailing.append((7, trailing.last!.width))
    XCTAssertNil(full(trailing))
    XCTAssertNil(reason(gif(codes), level: .structure))
  }

  /// giflib reads a frame wider than the logical screen without a word; the decode does not,
  /// so that one row of the screen's width holds any frame's row.
  func testAGIFFrameOutsideItsScreenIsRefused() {
    var gif = Fixtures.stillGIF
    let descriptor = gifImageData(gif, frame: 1).lowerBound - 10
    gif[descriptor + 5] = 65  // the frame's width, low byte: 65 on a screen of 64

    XCTAssertNil(reason(gif, level: .structure))
    XCTAssertEqual(
      reason(gif, level: .full), "gif: frame 1: 65x48 at (0, 0) is outside the 64x48 screen")
  }

  /// A GIF that lacks only its trailer is refused at every level: a body that stops at a
  /// frame's end is most likely a download cut there (see gif_frames.c).
  func testAGIFMissingOnlyItsTrailerIsTruncated() {
    let gif = Data(Fixtures.animatedGIF.dropLast())

    XCTAssertTrue(reason(gif, level: .structure)?.hasPrefix("gif: truncated") == true)
    XCTAssertEqual(
      reason { () throws(ImageCacheError) in try GIFDecoder.decode(gif, maxPixels: 1 << 20) },
      "gif: truncated: no trailer after frame 3")
  }

  /// The decoders name truncation themselves, wherever the data stops.
  func testTheDecodersCallDataThatStopsShortTruncated() {
    let gif = Fixtures.stillGIF.prefix(gifImageData(Fixtures.stillGIF, frame: 1).lowerBound + 40)
    XCTAssertEqual(
      reason { () throws(ImageCacheError) in try GIFDecoder.decode(gif, maxPixels: 1 << 20) },
      "gif: truncated: the data ends in frame 1")
    let webp = Fixtures.animatedWebP.dropLast(100)
    XCTAssertEqual(
      reason { () throws(ImageCacheError) in try WebPDecoder.decode(webp, maxPixels: 1 << 20) },
      "webp: truncated: the container ends early")
  }

  /// libwebp holds a lossless frame, or a lossy frame's alpha plane, whole: over 4096 x 4096
  /// pixels such a frame is checked to its bitstream header, and a 10000x10000 one, legitimate,
  /// passes without its pixels decoded (a flipped byte among them too), while its container is
  /// still parsed whole.
  func testAWebPFrameHeldWholeOverTheBudgetIsCheckedToItsHeader() {
    for (name, webp) in [
      ("lossless", Fixtures.largeLosslessWebP), ("lossy with alpha", Fixtures.largeLossyAlphaWebP),
    ] {
      XCTAssertEqual(
        try ImageValidator(level: .full).validate(webp),
        ImageInfo(format: .webp, width: 10000, height: 10000), name)
      var flipped = webp
      flipped[flipped.count / 2] ^= 0x55
      XCTAssertNil(
        reason { () throws(ImageCacheError) in
          try WebPDecoder.decode(flipped, maxPixels: 100_000_000)
        }, name)
      XCTAssertEqual(
        reason { () throws(ImageCacheError) in
          try WebPDecoder.decode(webp.dropLast(100), maxPixels: 100_000_000)
        }, "webp: truncated: the container ends early", name)
    }
  }

  /// The decoders refuse a screen or canvas over `maxPixels` before any frame, as the
  /// validator does before calling them, as the run's own limit (`overPixelLimit`, never
  /// blacklisted), not as bad data.
  func testTheDecodersRefuseAnImageOverMaxPixels() {
    let over = "3072 pixels, over the limit of 3071 (maxPixels)"
    let decodes: [(String, () throws(ImageCacheError) -> Void)] = [
      (
        "gif",
        { () throws(ImageCacheError) in try GIFDecoder.decode(Fixtures.animatedGIF, maxPixels: 3071)
        }
      ),
      (
        "webp",
        { () throws(ImageCacheError) in
          try WebPDecoder.decode(Fixtures.animatedWebP, maxPixels: 3071)
        }
      ),
      (
        "png rows",
        { () throws(ImageCacheError) in try PNGDecoder.decode(Fixtures.png, maxPixels: 3071) }
      ),
      (
        "png data",
        { () throws(ImageCacheError) in try PNGDecoder.checkData(Fixtures.png, maxPixels: 3071) }
      ),
    ]
    for (name, decode) in decodes {
      do throws(ImageCacheError) {
        try decode()
        XCTFail("\(name): decoded")
      } catch {
        guard case .overPixelLimit(let reason) = error else {
          XCTFail("\(name): \(error)")
          continue
        }
        XCTAssertTrue(reason.contains(over), "\(name): \(reason)")
      }
    }
    XCTAssertEqual(
      reason { () throws(ImageCacheError) in try PNGDecoder.decode(Fixtures.png, maxPixels: 3072) },
      nil, "exactly the limit decodes")
  }
}
