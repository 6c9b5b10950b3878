import CImaging
import CPNG
import CTurboJPEG
import Core
import Foundation

/// Decides whether a body is an image worth caching; a refusal is SD's `badImageData`.
///
/// Validation never allocates by what a header claims (SPEC section 2, step 6): an image over
/// `maxPixels` is refused before any pixel is decoded, and a full decode holds one PNG row, a
/// JPEG at an eighth of its size, libwebp's rows of a lossy WebP frame or a GIF's LZW table at a
/// time. libwebp holds a lossless WebP frame, or a lossy one's alpha plane, whole: such a frame
/// is decoded only up to 4096 x 4096 pixels, a larger one checked to its bitstream header.
/// libjpeg holds a progressive JPEG's coefficients whole: one over 64 MiB of them is checked to
/// its structure.
public struct ImageValidator: Sendable {
  public var level: ValidationLevel
  /// Images with more pixels are `badImageData`, whatever their data.
  public var maxPixels: Int

  public init(level: ValidationLevel = .structure, maxPixels: Int) {
    self.level = level
    self.maxPixels = maxPixels
  }

  public func validate(_ data: Data) throws(ImageCacheError) -> ImageInfo {
    guard !data.isEmpty else { throw .badImageData(reason: "empty body") }
    let format = ImageFormat.detect(data)
    guard level != .none else { return ImageInfo(format: format) }
    guard let format else {
      throw .badImageData(reason: "unrecognised image format (\(Self.describeStart(of: data)))")
    }
    let info: ImageInfo
    do {
      info = try data.withUnsafeBytes { raw in
        try StructureCheck(bytes: ByteReader(raw), format: format).run()
      }
    } catch let failure as StructureFailure {
      throw .badImageData(reason: "\(format.rawValue): \(failure.reason)")
    } catch {
      throw .badImageData(reason: "\(format.rawValue): \(error)")
    }
    if let width = info.width, let height = info.height,
      width.multipliedReportingOverflow(by: height).partialValue > maxPixels
        || width.multipliedReportingOverflow(by: height).overflow
    {
      throw .overPixelLimit(
        reason:
          "\(format.rawValue): \(width)x\(height) is over the limit of \(maxPixels) pixels "
          + "(maxPixels); not decoded")
    }
    if level == .full {
      switch format {
      case .jpeg: try JPEGDecoder.decode(data)
      case .png: try PNGDecoder.decode(data, maxPixels: maxPixels)
      case .gif: try GIFDecoder.decode(data, maxPixels: maxPixels)
      case .webp: try WebPDecoder.decode(data, maxPixels: maxPixels)
      default: break
      }
    }
    return info
  }

  /// A short, printable view of the first bytes, so that "HTML served as an image" is obvious.
  static func describeStart(of data: Data) -> String {
    let head = data.prefix(16)
    if let text = String(data: head, encoding: .utf8),
      text.unicodeScalars.allSatisfy({ $0.value >= 0x20 || $0 == "\n" || $0 == "\r" || $0 == "\t" })
    {
      return "starts with \(text.debugDescription)"
    }
    return "starts with " + head.map { String(format: "%02x", $0) }.joined(separator: " ")
  }
}
/// Full JPEG decode with the TurboJPEG API, which reports errors as return codes (plain libjpeg
/// would longjmp through Swift frames). A warning such as "premature end of data" stops the
/// decode and counts as a failure. The image is decoded at an eighth of its size in grey: every
/// coefficient is still entropy-decoded (which is what finds truncated or corrupt data) while
/// the pixels take 1/192 of the full-size RGB buffer. A JPEG whose scans each hold part of the
/// image (progressive, or a first scan without every component) is decoded only when its
/// coefficients, which libjpeg then buffers whole at any scale, fit ``bufferedBudget``: a 391 KB
/// progressive 10000x10000 grey JPEG took 200 MB, one in colour 600 MB. A larger one gets what
/// the structure level checks, as a large lossless WebP does.
enum JPEGDecoder {
  /// The most bytes of coefficients decoded when libjpeg buffers them whole: 64 MiB, as WebP's
  /// whole-frame budget (a 4096 x 4096 colour image at 4:2:0 takes 48 MiB).
  static let bufferedBudget = 64 << 20

  static func decode(_ data: Data) throws(ImageCacheError) {
    guard let handle = tjInitDecompress() else {
      throw .badImageData(reason: "jpeg: cannot start the decoder")
    }
    defer { tjDestroy(handle) }
    let failure: String? = data.withUnsafeBytes { raw in
      if let buffered = bufferedCoefficientBytes(raw), buffered > bufferedBudget { return nil }
      let source = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
      var width: Int32 = 0
      var height: Int32 = 0
      var subsampling: Int32 = 0
      var colorspace: Int32 = 0
      guard
        tjDecompressHeader3(
          handle, source, UInt(raw.count), &width, &height, &subsampling, &colorspace) == 0
      else { return String(cString: tjGetErrorStr2(handle)) }
      let scaledWidth = (Int(width) + 7) / 8
      let scaledHeight = (Int(height) + 7) / 8
      var pixels = [UInt8](repeating: 0, count: scaledWidth * scaledHeight)
      let status = tjDecompress2(
        handle, source, UInt(raw.count), &pixels, Int32(scaledWidth), 0, Int32(scaledHeight),
        Int32(TJPF_GRAY.rawValue), TJFLAG_STOPONWARNING)
      return status == 0 ? nil : String(cString: tjGetErrorStr2(handle))
    }
    if let failure { throw .badImageData(reason: "jpeg: \(failure)") }
  }

  /// The bytes of coefficients libjpeg buffers for the whole image (128 a block of each
  /// component) when its first scan says it must: a progressive frame, or a scan without every
  /// component. `nil` when it decodes rows as they come, or the segments before the first scan
  /// do not say (the decode then finds what is wrong).
  static func bufferedCoefficientBytes(_ raw: UnsafeRawBufferPointer) -> Int? {
    func u16(_ offset: Int) -> Int { Int(raw[offset]) << 8 | Int(raw[offset + 1]) }
    var frame: (progressive: Bool, width: Int, height: Int, sampling: [(Int, Int)])?
    var buffered: Int?
    JPEGHeader.forEachSegment(in: raw) { marker, body in
      let length = body.count + 2
      switch marker {
      case 0xC0...0xCF where ![0xC4, 0xC8, 0xCC].contains(marker) && length >= 8:
        let count = Int(raw[body.lowerBound + 5])
        guard length >= 8 + 3 * count else { return false }
        let components = body.lowerBound + 6
        frame = (
          [0xC2, 0xC6, 0xCA, 0xCE].contains(marker), u16(body.lowerBound + 3),
          u16(body.lowerBound + 1),
          (0..<count).map {
            (Int(raw[components + 1 + 3 * $0] >> 4), Int(raw[components + 1 + 3 * $0] & 15))
          }
        )
      case 0xDA:
        guard length >= 3, let frame,
          frame.progressive || Int(raw[body.lowerBound]) < frame.sampling.count,
          let most = frame.sampling.map(\.0).max(), let tallest = frame.sampling.map(\.1).max(),
          most > 0, tallest > 0
        else { return false }
        buffered = frame.sampling.reduce(0) { total, factors in
          let across = (frame.width * factors.0 + most * 8 - 1) / (most * 8)
          let down = (frame.height * factors.1 + tallest * 8 - 1) / (tallest * 8)
          return total + across * down * 128
        }
      default:
        break
      }
      return true
    }
    return buffered
  }
}

/// PNG's image data checked by C code that catches libpng's errors (its longjmps must not
/// cross Swift frames).
enum PNGDecoder {
  /// Full decode, one row at a time (``ic_png_decode_rows``); a warning counts as a failure.
  static func decode(_ data: Data, maxPixels: Int) throws(ImageCacheError) {
    try CDecoder.run(ic_png_decode_rows, .png, data, maxPixels: maxPixels)
  }

  /// The image data inflated and each row's filter type checked, no pixel unfiltered
  /// (``ic_png_check_data``): what a decode finds in data whose chunks' CRCs the structure
  /// walk has checked, at a fraction of its cost.
  static func checkData(_ data: Data, maxPixels: Int) throws(ImageCacheError) {
    try CDecoder.run(ic_png_check_data, .png, data, maxPixels: maxPixels)
  }
}

/// Every frame of a GIF read to its last pixel (``ic_gif_decode_frames``: giflib walks the
/// blocks, each frame's LZW codes are followed without writing a pixel): a broken or short LZW
/// stream in any frame, or a frame outside the screen, fails.
enum GIFDecoder {
  static func decode(_ data: Data, maxPixels: Int) throws(ImageCacheError) {
    try CDecoder.run(ic_gif_decode_frames, .gif, data, maxPixels: maxPixels)
  }
}

/// Every frame of a WebP (lossy, lossless, alpha, animated) decoded with libwebp, cropped to
/// its bottom right corner (``ic_webp_decode_frames``): every macroblock or pixel is still
/// decoded, but for a lossless frame or a lossy one with alpha over 4096 x 4096 pixels, which
/// libwebp would hold whole: its bitstream header is checked, its pixels are not.
enum WebPDecoder {
  static func decode(_ data: Data, maxPixels: Int) throws(ImageCacheError) {
    try CDecoder.run(ic_webp_decode_frames, .webp, data, maxPixels: maxPixels)
  }
}

/// A decode in C (CImaging) that returns 0, or 1 and a message: the reason of a
/// `badImageData`, after the format's name (2: of an `overPixelLimit`).
enum CDecoder {
  /// CImaging's `IC_OVER_MAX_PIXELS`.
  static let overMaxPixels: Int32 = 2

  static func run(
    _ check: (UnsafePointer<UInt8>?, Int, UInt64, UnsafeMutablePointer<CChar>?, Int) -> Int32,
    _ format: ImageFormat, _ data: Data, maxPixels: Int
  ) throws(ImageCacheError) {
    var message = [CChar](repeating: 0, count: 256)
    let status = data.withUnsafeBytes { raw in
      check(
        raw.baseAddress!.assumingMemoryBound(to: UInt8.self), raw.count, UInt64(maxPixels),
        &message, message.count)
    }
    guard status != 0 else { return }
    let text = String(
      decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let reason = "\(format.rawValue): \(text)"
    throw status == Self.overMaxPixels
      ? .overPixelLimit(reason: reason) : .badImageData(reason: reason)
  }
}

extension ImageValidator {
  /// The decoders' versions, for `--version`: libjpeg-turbo and giflib as built against,
  /// libpng and libwebp as loaded.
  public static var libraryVersions: String {
    let webp = ic_webp_version()
    return "libjpeg-turbo \(String(cString: ic_jpeg_turbo_version())), "
      + "libpng \(String(cString: png_get_libpng_ver(nil))), "
      + "giflib \(String(cString: ic_gif_version())), "
      + "libwebp \(webp >> 16).\(webp >> 8 & 0xFF).\(webp & 0xFF)"
  }
}
