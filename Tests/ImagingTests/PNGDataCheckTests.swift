import CPNG
import Core
import Imaging
import TestSupport
import XCTest

/// `verify --level full` checks a PNG's image data without unfiltering it (inflated whole, each
/// row's filter type checked, the length matched to the header): on every image it must agree
/// with libpng's full decode, which the prefetch's `full` validation runs.
final class PNGDataCheckTests: XCTestCase {
  /// Channels per colour type, and the bit depths PNG allows for it.
  let colorTypes: [(type: UInt8, channels: Int, depths: [UInt8])] = [
    (0, 1, [1, 2, 4, 8, 16]), (2, 3, [8, 16]), (3, 1, [1, 2, 4, 8]), (4, 2, [8, 16]),
    (6, 4, [8, 16]),
  ]

  /// The bytes of the rows: a filter-type byte (0, none) then zeros, row by row, pass by pass
  /// (Adam7's seven when `interlaced`).
  func rows(width: Int, height: Int, bitsPerPixel: Int, interlaced: Bool) -> [UInt8] {
    let passes: [(x0: Int, dx: Int, y0: Int, dy: Int)] =
      interlaced
      ? [
        (0, 8, 0, 8), (4, 8, 0, 8), (0, 4, 4, 8), (2, 4, 0, 4), (0, 2, 2, 4), (1, 2, 0, 2),
        (0, 1, 1, 2),
      ]
      : [(0, 1, 0, 1)]
    var bytes: [UInt8] = []
    for pass in passes {
      let columns = width > pass.x0 ? (width - pass.x0 + pass.dx - 1) / pass.dx : 0
      let lines = height > pass.y0 ? (height - pass.y0 + pass.dy - 1) / pass.dy : 0
      guard columns > 0 else { continue }
      for _ in 0..<lines {
        bytes += [0] + [UInt8](repeating: 0, count: (columns * bitsPerPixel + 7) / 8)
      }
    }
    return bytes
  }

  func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
    let typed = Array(type.utf8) + body
    let crc = UInt32(
      typed.withUnsafeBufferPointer { CPNG.crc32(0, $0.baseAddress, UInt32($0.count)) })
    return bigEndian(UInt32(body.count)) + typed + bigEndian(crc)
  }

  func bigEndian(_ value: UInt32) -> [UInt8] {
    (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
  }

  func deflate(_ bytes: [UInt8]) -> [UInt8] {
    var size = compressBound(UInt(bytes.count))
    var out = [UInt8](repeating: 0, count: Int(size))
    XCTAssertEqual(compress2(&out, &size, bytes, UInt(bytes.count), 9), Z_OK)
    return Array(out.prefix(Int(size)))
  }

  /// A PNG of `width` x `height` whose pixels are all zero; `raw` edits the rows' bytes before
  /// they are deflated, `stream` the zlib stream, and `chunks` the list of chunks (each a type
  /// and a body) before they are written.
  func png(
    width: Int, height: Int, colorType: UInt8 = 2, depth: UInt8 = 8, interlaced: Bool = false,
    idatCount: Int = 1, raw: (inout [UInt8]) -> Void = { _ in },
    stream: (inout [UInt8]) -> Void = { _ in },
    chunks: (inout [(String, [UInt8])]) -> Void = { _ in }
  ) -> Data {
    let channels = colorTypes.first { $0.type == colorType }!.channels
    var data = rows(
      width: width, height: height, bitsPerPixel: channels * Int(depth), interlaced: interlaced)
    raw(&data)
    var compressed = deflate(data)
    stream(&compressed)
    let ihdr =
      bigEndian(UInt32(width)) + bigEndian(UInt32(height))
      + [depth, colorType, 0, 0, interlaced ? 1 : 0]
    var list: [(String, [UInt8])] = [("IHDR", ihdr)]
    if colorType == 3 { list.append(("PLTE", [UInt8](repeating: 0x80, count: 3 * 2))) }
    let piece = (compressed.count + idatCount - 1) / idatCount
    for start in stride(from: 0, to: compressed.count, by: piece) {
      list.append(("IDAT", Array(compressed[start..<min(start + piece, compressed.count)])))
    }
    list.append(("IEND", []))
    chunks(&list)
    return Data(
      [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + list.flatMap { chunk($0.0, $0.1) })
  }

  /// What the full level says of `data`, after checking that libpng's full decode agrees.
  func verdict(_ data: Data, _ label: String, file: StaticString = #filePath, line: UInt = #line)
    -> String?
  {
    let problem: String?
    switch ContentCheck(level: .full).check(data) {
    case .failure(let failure): problem = failure.description
    default: problem = nil
    }
    let libpng = Result { try ImageValidator(level: .full, maxPixels: 100_000_000).validate(data) }
    XCTAssertEqual(
      problem == nil, (try? libpng.get()) != nil,
      "\(label): verify says \(problem ?? "ok"), libpng \(libpng)", file: file, line: line)
    return problem
  }

  func testEveryColourTypeDepthAndInterlaceOfAnySizeIsWhole() {
    for (type, _, depths) in colorTypes {
      for depth in depths {
        for interlaced in [false, true] {
          for (width, height) in [(1, 1), (3, 5), (9, 9), (17, 2), (2, 17), (33, 7)] {
            let label =
              "type \(type), depth \(depth), \(interlaced ? "Adam7" : "plain"), \(width)x\(height)"
            XCTAssertNil(
              verdict(
                png(
                  width: width, height: height, colorType: type, depth: depth,
                  interlaced: interlaced), label),
              label)
          }
        }
      }
    }
  }

  func testImageDataSplitOverManyIDATChunksIsWhole() {
    XCTAssertNil(verdict(png(width: 40, height: 30, idatCount: 7), "7 IDATs"))
    XCTAssertNil(verdict(png(width: 40, height: 30, interlaced: true, idatCount: 3), "3 IDATs"))
  }

  /// Image data that inflates to more than the 4 MiB libdeflate takes whole, or whose zlib
  /// header declares a window under 32 KiB, is streamed through zlib instead: the same answers.
  func testImageDataPastTheWholeInflatesBudgetIsCheckedTheSame() {
    let big = { (raw: (inout [UInt8]) -> Void, stream: (inout [UInt8]) -> Void) in
      self.png(width: 1100, height: 1000, colorType: 6, raw: raw, stream: stream)
    }
    XCTAssertNil(verdict(big({ _ in }, { _ in }), "4.4 MB of rows"))
    XCTAssertEqual(
      verdict(big({ $0.removeLast(3) }, { _ in }), "4.4 MB, 3 bytes short"),
      "png: Not enough image data (full decode)")
    XCTAssertEqual(
      verdict(big({ _ in }, { $0[$0.count - 2] ^= 0x55 }), "4.4 MB, adler"),
      "png: IDAT: incorrect data check (full decode)")
    let smallWindow = png(
      width: 40, height: 30,
      stream: {
        $0[0] = 0x28  // deflate, a window of 1 KiB: the zero rows' matches are 1 byte back
        $0[1] = UInt8(31 - (0x2800 % 31))
      })
    XCTAssertNil(verdict(smallWindow, "a 1 KiB window"))
  }

  func testAFilterTypeOverFourIsCorrupt() {
    let data = png(width: 8, height: 4, raw: { $0[2 * (1 + 8 * 3)] = 5 })  // the third row's
    XCTAssertEqual(verdict(data, "filter 5"), "png: bad adaptive filter value (full decode)")
  }

  func testImageDataShortOfTheRowsIsNotEnough() {
    XCTAssertEqual(
      verdict(png(width: 8, height: 4, raw: { $0.removeLast(3) }), "3 bytes short"),
      "png: Not enough image data (full decode)")
    XCTAssertEqual(
      verdict(
        png(width: 8, height: 4, interlaced: true, raw: { $0.removeLast() }), "Adam7, a byte short"),
      "png: Not enough image data (full decode)")
  }

  func testImageDataPastTheRowsIsTooMuch() {
    XCTAssertNotNil(verdict(png(width: 8, height: 4, raw: { $0 += [0, 0] }), "2 bytes more"))
  }

  func testACorruptZlibStreamNamesZlibsMessage() {
    let data = png(width: 40, height: 30, stream: { $0[$0.count - 2] ^= 0x55 })  // in the Adler-32
    XCTAssertEqual(verdict(data, "adler"), "png: IDAT: incorrect data check (full decode)")
    let corrupt = EntropyDamagedImage.corruptPNGDeflateData.data
    XCTAssertTrue(verdict(corrupt, "fixture")?.hasPrefix("png: IDAT:") == true)
  }

  /// Bytes after the zlib stream's end in its last IDAT chunk are corrupt; a whole IDAT chunk
  /// after it is skipped, as libpng skips it.
  func testCompressedDataAfterTheStreamsEndIsCorruptInItsChunk() {
    XCTAssertNotNil(verdict(png(width: 8, height: 4, stream: { $0 += [1, 2, 3] }), "extra"))
    XCTAssertNil(
      verdict(
        png(width: 8, height: 4, chunks: { $0.insert(("IDAT", [1, 2, 3]), at: $0.count - 1) }),
        "an IDAT after the stream's end"))
  }

  func testAStreamCutShortIsCorrupt() {
    XCTAssertNotNil(
      verdict(png(width: 40, height: 30, stream: { $0.removeLast(4) }), "no Adler-32"))
  }

  func testIDATChunksMustFollowOneAnother() {
    let data = png(
      width: 40, height: 30, idatCount: 2,
      chunks: { $0.insert(("tEXt", Array("Comment\0between".utf8)), at: 2) })
    XCTAssertNotNil(verdict(data, "tEXt between IDATs"))
  }

  func testAPaletteImageNeedsItsPalette() {
    let data = png(width: 8, height: 4, colorType: 3, chunks: { $0.removeAll { $0.0 == "PLTE" } })
    XCTAssertNotNil(verdict(data, "no PLTE"))
  }

  func testAPaletteOutOfPlaceOrOfAWrongLengthIsCorrupt() {
    let cases: [(String, (inout [(String, [UInt8])]) -> Void, UInt8)] = [
      ("PLTE in a greyscale image", { $0.insert(("PLTE", [0, 0, 0]), at: 1) }, 0),
      ("PLTE after IDAT", { $0.insert($0.remove(at: 1), at: $0.count - 1) }, 3),
      ("PLTE of 4 bytes", { $0[1].1 = [0, 0, 0, 0] }, 3),
      ("PLTE of 257 entries", { $0[1].1 = [UInt8](repeating: 0, count: 3 * 257) }, 3),
    ]
    for (label, edit, type) in cases {
      XCTAssertNotNil(
        verdict(png(width: 8, height: 4, colorType: type, chunks: edit), label), label)
    }
  }

  func testAnUnknownCriticalChunkIsCorrupt() {
    let data = png(width: 8, height: 4, chunks: { $0.insert(("ABCD", [0]), at: 1) })
    XCTAssertNotNil(verdict(data, "ABCD"))
  }

  func testIHDRFieldsPNGDoesNotAllowAreCorrupt() {
    for (depth, type) in [(UInt8(3), UInt8(0)), (16, 3), (4, 2), (8, 5)] {
      let data = png(
        width: 8, height: 4,
        chunks: {
          $0[0].1[8] = depth
          $0[0].1[9] = type
        })
      XCTAssertNotNil(verdict(data, "depth \(depth), type \(type)"))
    }
  }
}
