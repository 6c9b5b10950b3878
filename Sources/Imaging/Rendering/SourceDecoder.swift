import CPNG
import CTurboJPEG
import Core
import Foundation

/// A source image decoded for rendering: its pixels (possibly reduced by libjpeg-turbo's scaled
/// decoding), its full pixel size and its EXIF orientation (1-8; not applied to the pixels).
struct DecodedSource {
  var surface: Surface
  var fullWidth: Int
  var fullHeight: Int
  var orientation: Int
}

/// Decodes the JPEG and PNG sources a variant is rendered from. Like validation, it never
/// allocates by what a header claims: an image over `maxPixels` is refused before any pixel is
/// decoded.
enum SourceDecoder {
  /// The pixel size in the header, without decoding.
  static func size(of data: Data, format: ImageFormat) throws(RenderError) -> (Int, Int) {
    switch format {
    case .jpeg:
      return try withJPEG(data) { handle, source, count throws(RenderError) in
        try jpegSize(handle, source, count)
      }
    case .png:
      return try withPNG(data) { image throws(RenderError) in
        (Int(image.pointee.width), Int(image.pointee.height))
      }
    default:
      throw RenderError("\(format.rawValue) is not decoded here")
    }
  }

  /// Decodes a JPEG at the smallest of libjpeg-turbo's reductions (1/8, 1/4, 1/2, 1) whose
  /// size is still at least `minimumWidth` x `minimumHeight`, so that the resampling that
  /// follows only ever reduces.
  static func decodeJPEG(
    _ data: Data, minimumWidth: Int, minimumHeight: Int, maxPixels: Int
  ) throws(RenderError) -> DecodedSource {
    let orientation = exifOrientation(ofJPEG: data)
    return try withJPEG(data) { handle, source, count throws(RenderError) in
      let (fullWidth, fullHeight) = try jpegSize(handle, source, count)
      try checkPixels(fullWidth, fullHeight, maxPixels: maxPixels)
      var denominator = 8
      while denominator > 1 {
        let scaledWidth = (fullWidth + denominator - 1) / denominator
        let scaledHeight = (fullHeight + denominator - 1) / denominator
        if scaledWidth >= minimumWidth && scaledHeight >= minimumHeight { break }
        denominator /= 2
      }
      let surface = try Surface(
        width: (fullWidth + denominator - 1) / denominator,
        height: (fullHeight + denominator - 1) / denominator)
      let status = surface.withPixels { pixels, stride in
        tjDecompress2(
          handle, source, count, pixels, Int32(surface.width), Int32(stride),
          Int32(surface.height), Int32(TJPF_BGRA.rawValue), 0)
      }
      // A warning (say, a few missing bytes at the end) still leaves an image, as ImageIO does.
      if status != 0 && tjGetErrorCode(handle) != Int32(TJERR_WARNING.rawValue) {
        throw RenderError("jpeg: \(String(cString: tjGetErrorStr2(handle)))")
      }
      return DecodedSource(
        surface: surface, fullWidth: fullWidth, fullHeight: fullHeight, orientation: orientation)
    }
  }

  /// Decodes a PNG in full (libpng's simplified API catches its own errors), premultiplied.
  static func decodePNG(_ data: Data, maxPixels: Int) throws(RenderError) -> DecodedSource {
    try withPNG(data) { image throws(RenderError) in
      let width = Int(image.pointee.width)
      let height = Int(image.pointee.height)
      try checkPixels(width, height, maxPixels: maxPixels)
      image.pointee.format = ic_png_format_bgra
      let surface = try Surface(width: width, height: height)
      let finished = surface.withPixels { pixels, stride in
        guard png_image_finish_read(image, nil, pixels, Int32(stride), nil) != 0 else {
          return false
        }
        premultiply(pixels, width: width, height: height, stride: stride)
        return true
      }
      guard finished else { throw RenderError("png: \(pngMessage(image.pointee))") }
      return DecodedSource(surface: surface, fullWidth: width, fullHeight: height, orientation: 1)
    }
  }

  /// The size in a JPEG's header.
  private static func jpegSize(_ handle: tjhandle, _ source: UnsafePointer<UInt8>, _ count: UInt)
    throws(RenderError) -> (Int, Int)
  {
    var width: Int32 = 0
    var height: Int32 = 0
    var subsampling: Int32 = 0
    var colorspace: Int32 = 0
    guard
      tjDecompressHeader3(handle, source, count, &width, &height, &subsampling, &colorspace) == 0
    else { throw RenderError("jpeg: \(String(cString: tjGetErrorStr2(handle)))") }
    return (Int(width), Int(height))
  }

  /// Runs `body` with a PNG's header read by libpng's simplified API (which catches its own
  /// errors), while the bytes it reads from stay valid.
  private static func withPNG<T>(
    _ data: Data, _ body: (UnsafeMutablePointer<png_image>) throws(RenderError) -> T
  ) throws(RenderError) -> T {
    var image = png_image()
    image.version = ic_png_image_version
    defer { png_image_free(&image) }
    let result: Result<T, RenderError> = data.withUnsafeBytes { raw in
      guard png_image_begin_read_from_memory(&image, raw.baseAddress, raw.count) != 0 else {
        return .failure(RenderError("png: \(pngMessage(image))"))
      }
      do throws(RenderError) {
        return .success(
          try withUnsafeMutablePointer(to: &image) { (pointer) throws(RenderError) in
            try body(pointer)
          })
      } catch {
        return .failure(error)
      }
    }
    return try result.get()
  }

  private static func checkPixels(_ width: Int, _ height: Int, maxPixels: Int)
    throws(RenderError)
  {
    let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
    guard width > 0, height > 0, !overflow, pixels <= maxPixels else {
      throw RenderError("\(width)x\(height) is over the limit of \(maxPixels) pixels")
    }
  }

  private static func withJPEG<T>(
    _ data: Data,
    _ body: (tjhandle, UnsafePointer<UInt8>, UInt) throws(RenderError) -> T
  ) throws(RenderError) -> T {
    guard let handle = tjInitDecompress() else {
      throw RenderError("jpeg: cannot start the decoder")
    }
    defer { tjDestroy(handle) }
    let result: Result<T, RenderError> = data.withUnsafeBytes { raw in
      do throws(RenderError) {
        return .success(
          try body(handle, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt(raw.count)))
      } catch {
        return .failure(error)
      }
    }
    return try result.get()
  }

  static func pngMessage(_ image: png_image) -> String {
    var message = image.message
    return withUnsafeBytes(of: &message) { raw in
      String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
  }

  /// Straight BGRA to premultiplied, in place.
  static func premultiply(
    _ pixels: UnsafeMutablePointer<UInt8>, width: Int, height: Int, stride: Int
  ) {
    for y in 0..<height {
      let row = pixels + y * stride
      for x in 0..<width {
        let pixel = row + x * 4
        let alpha = UInt32(pixel[3])
        guard alpha != 255 else { continue }
        for channel in 0..<3 {
          pixel[channel] = UInt8((UInt32(pixel[channel]) * alpha + 127) / 255)
        }
      }
    }
  }

  /// The EXIF orientation of a JPEG (tag 0x0112 of IFD0 in its APP1 `Exif` segment), 1 when
  /// there is none or it cannot be read.
  static func exifOrientation(ofJPEG data: Data) -> Int {
    let bytes = [UInt8](data.prefix(128 * 1024))
    var orientation = 1
    JPEGHeader.forEachSegment(in: bytes) { marker, body in
      guard marker != 0xDA else { return false }
      guard marker == 0xE1, body.count > 14,
        bytes[body.prefix(6)].elementsEqual([0x45, 0x78, 0x69, 0x66, 0, 0])
      else { return true }
      orientation = tiffOrientation(Array(bytes[body.dropFirst(6)])) ?? 1
      return false
    }
    return orientation
  }

  private static func tiffOrientation(_ tiff: [UInt8]) -> Int? {
    guard tiff.count >= 8 else { return nil }
    let little = tiff[0] == 0x49
    func u16(_ at: Int) -> Int? {
      guard at + 2 <= tiff.count else { return nil }
      return little
        ? Int(tiff[at]) | Int(tiff[at + 1]) << 8 : Int(tiff[at]) << 8 | Int(tiff[at + 1])
    }
    func u32(_ at: Int) -> Int? {
      guard let high = u16(little ? at + 2 : at), let low = u16(little ? at : at + 2) else {
        return nil
      }
      return high << 16 | low
    }
    guard let ifd = u32(4), let count = u16(ifd) else { return nil }
    for entry in 0..<count {
      let at = ifd + 2 + entry * 12
      guard let tag = u16(at) else { return nil }
      if tag == 0x0112, let value = u16(at + 8), (1...8).contains(value) { return value }
    }
    return nil
  }

  /// Whether a GIF has more than one frame, walking its blocks.
  static func isAnimatedGIF(_ data: Data) -> Bool {
    let bytes = [UInt8](data)
    guard bytes.count > 13 else { return false }
    var offset = 13
    if bytes[10] & 0x80 != 0 { offset += 3 << (Int(bytes[10] & 7) + 1) }
    var frames = 0
    func skipSubBlocks() {
      while offset < bytes.count {
        let size = Int(bytes[offset])
        offset += 1 + size
        if size == 0 { return }
      }
    }
    while offset < bytes.count {
      switch bytes[offset] {
      case 0x21:
        offset += 2
        skipSubBlocks()
      case 0x2C:
        frames += 1
        if frames > 1 { return true }
        guard offset + 10 <= bytes.count else { return false }
        let packed = bytes[offset + 9]
        offset += 10
        if packed & 0x80 != 0 { offset += 3 << (Int(packed & 7) + 1) }
        offset += 1
        skipSubBlocks()
      default:
        return false
      }
    }
    return false
  }

  /// Whether a PNG is an APNG: an `acTL` chunk before the first `IDAT`.
  static func isAnimatedPNG(_ data: Data) -> Bool {
    let bytes = [UInt8](data.prefix(1 << 20))
    var offset = 8
    while offset + 8 <= bytes.count {
      let length =
        Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8
        | Int(bytes[offset + 3])
      let type = bytes[offset + 4..<offset + 8]
      if type.elementsEqual("acTL".utf8) { return true }
      if type.elementsEqual("IDAT".utf8) { return false }
      offset += 12 + length
    }
    return false
  }
}
