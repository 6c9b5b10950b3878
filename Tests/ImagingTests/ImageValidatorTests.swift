import CPNG
import TestSupport
import XCTest

@testable import Core
@testable import Imaging

final class ImageFormatTests: XCTestCase {
  func testDetectsFormatsByMagicBytes() {
    XCTAssertEqual(ImageFormat.detect(Fixtures.jpeg), .jpeg)
    XCTAssertEqual(ImageFormat.detect(Fixtures.png), .png)
    XCTAssertEqual(ImageFormat.detect(Fixtures.gif), .gif)
    XCTAssertEqual(ImageFormat.detect(Fixtures.webpLossless), .webp)
    XCTAssertEqual(ImageFormat.detect(Data("II*\0\u{8}\0\0\0".utf8)), .tiff)
    XCTAssertEqual(ImageFormat.detect(Data([0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 8])), .tiff)
    XCTAssertEqual(ImageFormat.detect(Data("BM\0\0\0\0".utf8)), .bmp)
    XCTAssertEqual(ImageFormat.detect(Data("%PDF-1.4\n".utf8)), .pdf)
    XCTAssertEqual(
      ImageFormat.detect(Data("<?xml version=\"1.0\"?>\n<svg xmlns=\"x\"></svg>".utf8)), .svg)
    XCTAssertEqual(ImageFormat.detect(isoMedia(brand: "heic")), .heic)
    XCTAssertEqual(ImageFormat.detect(isoMedia(brand: "mif1")), .heif)
    XCTAssertEqual(ImageFormat.detect(isoMedia(brand: "avif")), .avif)
    XCTAssertNil(ImageFormat.detect(Data("<!DOCTYPE html><html></html>".utf8)))
    XCTAssertNil(ImageFormat.detect(Data()))
  }
}

final class ImageValidatorTests: XCTestCase {
  private func assertBadImageData(
    _ data: Data, level: ValidationLevel, containing text: String,
    file: StaticString = #filePath, line: UInt = #line
  ) {
    XCTAssertThrowsError(try ImageValidator(level: level).validate(data), file: file, line: line) {
      error in
      guard case .badImageData(let reason) = error as? ImageCacheError else {
        return XCTFail("expected badImageData, got \(error)", file: file, line: line)
      }
      XCTAssertTrue(reason.contains(text), "\(reason)", file: file, line: line)
      XCTAssertEqual((error as? ImageCacheError)?.code, 1001, file: file, line: line)
    }
  }

  func testValidImagesPassEveryLevelWithDimensions() throws {
    for level in [ValidationLevel.structure, .full] {
      let validator = ImageValidator(level: level)
      XCTAssertEqual(
        try validator.validate(Fixtures.jpeg), ImageInfo(format: .jpeg, width: 64, height: 48))
      XCTAssertEqual(
        try validator.validate(Fixtures.png), ImageInfo(format: .png, width: 64, height: 48))
      XCTAssertEqual(
        try validator.validate(Fixtures.gif), ImageInfo(format: .gif, width: 1, height: 1))
      XCTAssertEqual(
        try validator.validate(Fixtures.webpLossless), ImageInfo(format: .webp, width: 1, height: 1)
      )
      XCTAssertEqual(
        try validator.validate(Fixtures.webpLossy), ImageInfo(format: .webp, width: 1, height: 1))
    }
  }

  func testEmptyBodyFailsAtEveryLevel() {
    for level in ValidationLevel.allCases {
      assertBadImageData(Data(), level: level, containing: "empty")
    }
  }

  func testLevelNoneAcceptsAnyNonEmptyBody() throws {
    XCTAssertEqual(
      try ImageValidator(level: .none).validate(Data("<html>".utf8)), ImageInfo(format: nil))
  }

  func testHTMLServedAsAnImageIsRejected() {
    assertBadImageData(
      Data("<!DOCTYPE html><html><body>Not found</body></html>".utf8), level: .structure,
      containing: "unrecognised image format")
  }

  func testTruncatedJPEGIsCaughtByStructure() {
    let truncated = Fixtures.jpeg.prefix(Fixtures.jpeg.count - 300)
    assertBadImageData(Data(truncated), level: .structure, containing: "truncated")
    assertBadImageData(
      Data(Fixtures.jpeg.prefix(Fixtures.jpeg.count - 2)), level: .structure, containing: "EOI")
  }

  func testTruncatedJPEGWithForgedEOIIsCaughtOnlyByFullDecode() throws {
    // Cut into the scan data and append EOI: the container looks whole, the decoder sees
    // premature end of data, a warning that the full level treats as a failure.
    var forged = Data(Fixtures.jpeg.prefix(Fixtures.jpeg.count / 2))
    forged.append(contentsOf: [0xFF, 0xD9])
    XCTAssertNoThrow(try ImageValidator(level: .structure).validate(forged))
    assertBadImageData(forged, level: .full, containing: "jpeg:")
  }

  /// A 16x16 grey progressive JPEG (cjpeg -progressive), its frame header claiming `side` x
  /// `side` pixels: its scans then end long before the image does, which only a decode finds.
  private func progressiveJPEG(claiming side: Int) throws -> Data {
    var jpeg = try XCTUnwrap(
      Data(
        base64Encoded:
          "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAMCAgMCAgMDAwMEAwMEBQgFBQQEBQoHBwYIDAoMDAsKCwsNDhIQDQ4R"
          + "DgsLEBYQERMUFRUVDA8XGBYUGBIUFRT/wgALCAAQABABAREA/8QAFQABAQAAAAAAAAAAAAAAAAAACAf/2gAI"
          + "AQEAAAABj6qKqq//xAAVEAEBAAAAAAAAAAAAAAAAAAAABv/aAAgBAQABBQKbTabTb//EABUQAQEAAAAAAAAA"
          + "AAAAAAAAAAAC/9oACAEBAAY/ApSlL//EABQQAQAAAAAAAAAAAAAAAAAAACD/2gAIAQEAAT8hH/8A/9oACAEB"
          + "AAAAEF//xAAVEAEBAAAAAAAAAAAAAAAAAAAAwf/aAAgBAQABPxCCCCD/2Q=="))
    let frame = try XCTUnwrap(jpeg.firstRange(of: Data([0xFF, 0xC2]))).lowerBound
    let size = [UInt8(side >> 8), UInt8(side & 0xFF)]
    jpeg.replaceSubrange((frame + 5)..<(frame + 9), with: size + size)
    return jpeg
  }

  /// libjpeg buffers a progressive JPEG's coefficients whole, at any scale: one over the
  /// budget (8192 x 8192 in grey, 128 MiB of them) is checked to its structure and passes, its
  /// missing scan data undecoded; one under it is decoded, and its missing data found.
  func testAProgressiveJPEGOverTheBufferBudgetIsCheckedToItsStructure() throws {
    let over = try progressiveJPEG(claiming: 8192)
    XCTAssertGreaterThan(
      over.withUnsafeBytes { JPEGDecoder.bufferedCoefficientBytes($0) } ?? 0,
      JPEGDecoder.bufferedBudget)
    XCTAssertEqual(
      try ImageValidator(level: .full).validate(over),
      ImageInfo(format: .jpeg, width: 8192, height: 8192))
    assertBadImageData(try progressiveJPEG(claiming: 1024), level: .full, containing: "jpeg:")
  }

  func testCorruptJPEGHeaderIsRejected() {
    var corrupt = Fixtures.jpeg
    corrupt[4] = 0x00  // the APP0 segment claims a length of 1 byte
    corrupt[5] = 0x01
    assertBadImageData(corrupt, level: .structure, containing: "segment length 1")
  }

  /// Rewrites one chunk of a PNG, with a correct CRC, so that only what is inside it is wrong.
  private func png(_ data: Data, replacing type: String, with edit: (inout [UInt8]) -> Void) -> Data
  {
    var bytes = [UInt8](data)
    var offset = 8
    while offset + 8 <= bytes.count {
      let length =
        Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16
        | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
      if String(decoding: bytes[(offset + 4)..<(offset + 8)], as: UTF8.self) == type {
        var body = Array(bytes[(offset + 8)..<(offset + 8 + length)])
        edit(&body)
        bytes.replaceSubrange((offset + 8)..<(offset + 8 + length), with: body)
        let crc = (Array(type.utf8) + body).withUnsafeBufferPointer {
          UInt32(crc32(0, $0.baseAddress, UInt32($0.count)))
        }
        let crcOffset = offset + 8 + length
        for index in 0..<4 {
          bytes[crcOffset + index] = UInt8(truncatingIfNeeded: crc >> (24 - 8 * index))
        }
        break
      }
      offset += 12 + length
    }
    return Data(bytes)
  }

  func testAPNGDeclaringMoreThanMaxPixelsIsRefusedBeforeDecoding() throws {
    // 60000 x 60000 in IHDR, a few hundred bytes of data: it would take 14 GB to decode.
    let bomb = png(Fixtures.png, replacing: "IHDR") { ihdr in
      ihdr.replaceSubrange(0..<8, with: [0, 0, 0xEA, 0x60, 0, 0, 0xEA, 0x60])
    }
    for level in [ValidationLevel.structure, .full] {
      assertOverPixelLimit(bomb, level: level, maxPixels: 100_000_000)
    }
    assertOverPixelLimit(Fixtures.png, level: .full, maxPixels: 10)
  }

  /// Over `maxPixels` is the run's limit, not the data's fault: its own case (never
  /// blacklisted), with SD's code and name for bad image data.
  private func assertOverPixelLimit(
    _ data: Data, level: ValidationLevel, maxPixels: Int, file: StaticString = #filePath,
    line: UInt = #line
  ) {
    XCTAssertThrowsError(
      try ImageValidator(level: level, maxPixels: maxPixels).validate(data), file: file, line: line
    ) { error in
      guard case .overPixelLimit(let reason) = error as? ImageCacheError else {
        return XCTFail("expected overPixelLimit, got \(error)", file: file, line: line)
      }
      XCTAssertTrue(reason.contains("(maxPixels); not decoded"), reason, file: file, line: line)
      XCTAssertEqual((error as? ImageCacheError)?.code, 1001, file: file, line: line)
      XCTAssertEqual((error as? ImageCacheError)?.name, "badImageData", file: file, line: line)
      XCTAssertEqual((error as? ImageCacheError)?.blacklistsURL, false, file: file, line: line)
    }
  }

  /// `maxPixels` is the largest image kept: one of exactly that many pixels passes every level,
  /// one pixel over is refused before it is decoded.
  func testAnImageOfExactlyMaxPixelsPassesAndOneMoreIsRefused() throws {
    let pixels = 64 * 48  // Fixtures.png
    for level in [ValidationLevel.structure, .full] {
      XCTAssertEqual(
        try ImageValidator(level: level, maxPixels: pixels).validate(Fixtures.png),
        ImageInfo(format: .png, width: 64, height: 48), "\(level)")
      assertOverPixelLimit(Fixtures.png, level: level, maxPixels: pixels - 1)
    }
  }

  func testCorruptPNGImageDataIsCaughtOnlyByTheRowByRowDecode() throws {
    let corrupt = png(Fixtures.png, replacing: "IDAT") { idat in
      for index in (idat.count / 2)..<min(idat.count / 2 + 8, idat.count - 4) {
        idat[index] ^= 0x5A
      }
    }
    XCTAssertNoThrow(try ImageValidator(level: .structure).validate(corrupt))
    assertBadImageData(corrupt, level: .full, containing: "png:")
  }

  func testTruncatedPNGIsCaughtByStructure() {
    assertBadImageData(
      Data(Fixtures.png.prefix(Fixtures.png.count - 12)), level: .structure, containing: "truncated"
    )
    assertBadImageData(Data(Fixtures.png.prefix(100)), level: .structure, containing: "truncated")
  }

  func testPNGWithBadCRCIsRejected() {
    var corrupt = Fixtures.png
    corrupt[Fixtures.png.count / 2] ^= 0xFF  // inside the IDAT chunk
    assertBadImageData(corrupt, level: .structure, containing: "CRC")
    assertBadImageData(corrupt, level: .full, containing: "CRC")
  }

  func testTruncatedGIFIsCaughtByStructure() {
    assertBadImageData(Data(Fixtures.gif.dropLast()), level: .structure, containing: "truncated")
    assertBadImageData(Data(Fixtures.gif.prefix(30)), level: .structure, containing: "truncated")
  }

  func testCorruptGIFBlockIsRejected() {
    var corrupt = Fixtures.gif
    corrupt[19] = 0x99  // after the 6-byte global colour table: where the first block starts
    assertBadImageData(corrupt, level: .structure, containing: "unknown block")
  }

  func testTruncatedWebPIsRejected() {
    assertBadImageData(
      Data(Fixtures.webpLossy.dropLast(4)), level: .structure, containing: "truncated")
  }

  func testOtherFormatsChecked() throws {
    let svg = Data("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\"><rect/></svg>".utf8)
    XCTAssertEqual(try ImageValidator().validate(svg).format, .svg)
    assertBadImageData(
      Data("<svg xmlns=\"http://www.w3.org/2000/svg\"><rect".utf8), level: .structure,
      containing: "</svg>")

    let pdf = Data("%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n%%EOF\n".utf8)
    XCTAssertEqual(try ImageValidator().validate(pdf).format, .pdf)
    assertBadImageData(Data("%PDF-1.4\n1 0 obj\n".utf8), level: .structure, containing: "%%EOF")

    let bmp = Self.bmp(width: 2, height: 3)
    XCTAssertEqual(try ImageValidator().validate(bmp), ImageInfo(format: .bmp, width: 2, height: 3))
    assertBadImageData(Data(bmp.dropLast(5)), level: .structure, containing: "truncated")

    let heic = isoMedia(brand: "heic", width: 640, height: 480)
    XCTAssertEqual(
      try ImageValidator().validate(heic), ImageInfo(format: .heic, width: 640, height: 480))
    assertBadImageData(Data(heic.dropLast(3)), level: .structure, containing: "truncated")
  }

  /// A minimal 24-bit BMP with a BITMAPINFOHEADER.
  static func bmp(width: Int, height: Int) -> Data {
    let rowSize = (width * 3 + 3) / 4 * 4
    let pixels = rowSize * height
    var data = Data("BM".utf8)
    func le32(_ v: Int) {
      withUnsafeBytes(of: UInt32(v).littleEndian) { data.append(contentsOf: $0) }
    }
    func le16(_ v: Int) {
      withUnsafeBytes(of: UInt16(v).littleEndian) { data.append(contentsOf: $0) }
    }
    le32(54 + pixels)
    le32(0)
    le32(54)
    le32(40)
    le32(width)
    le32(height)
    le16(1)
    le16(24)
    le32(0)
    le32(pixels)
    le32(2835)
    le32(2835)
    le32(0)
    le32(0)
    data.append(Data(count: pixels))
    return data
  }
}

/// A minimal ISO base media file: `ftyp` with `brand`, and a `meta` box holding an `ispe`.
func isoMedia(brand: String, width: Int = 1, height: Int = 1) -> Data {
  func box(_ type: String, _ payload: Data) -> Data {
    var data = Data()
    withUnsafeBytes(of: UInt32(8 + payload.count).bigEndian) { data.append(contentsOf: $0) }
    data.append(Data(type.utf8))
    data.append(payload)
    return data
  }
  func be32(_ v: Int) -> Data { withUnsafeBytes(of: UInt32(v).bigEndian) { Data($0) } }
  let ftyp = box("ftyp", Data(brand.utf8) + be32(0) + Data("mif1".utf8) + Data(brand.utf8))
  let ispe = box("ispe", be32(0) + be32(width) + be32(height))
  let meta = box("meta", be32(0) + box("iprp", box("ipco", ispe)))
  return ftyp + meta + box("mdat", Data(count: 16))
}

extension ImageValidator {
  /// SPEC section 2's default limit of 100 megapixels.
  init(level: ValidationLevel = .structure) {
    self.init(level: level, maxPixels: 100_000_000)
  }
}
