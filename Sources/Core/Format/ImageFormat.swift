import Foundation

/// Image formats recognised by their magic bytes, as SD's `NSData+ImageContentType`.
public enum ImageFormat: String, Sendable, Codable, CaseIterable {
  case jpeg
  case png
  case gif
  case webp
  case heic
  case heif
  case avif
  case tiff
  case bmp
  case svg
  case pdf

  /// Detects the format of `data` from its first bytes, or `nil` when it is none of these.
  package static func detect(_ data: Data) -> ImageFormat? {
    let bytes = [UInt8](data.prefix(64))
    guard let first = bytes.first else { return nil }
    switch first {
    case 0xFF where bytes.starts(with: [0xFF, 0xD8, 0xFF]):
      return .jpeg
    case 0x89 where bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]):
      return .png
    case 0x47
    where bytes.starts(with: Array("GIF87a".utf8)) || bytes.starts(with: Array("GIF89a".utf8)):
      return .gif
    case 0x49 where bytes.starts(with: [0x49, 0x49, 0x2A, 0x00]),
      0x4D where bytes.starts(with: [0x4D, 0x4D, 0x00, 0x2A]):
      return .tiff
    case 0x42 where bytes.starts(with: Array("BM".utf8)):
      return .bmp
    case 0x52
    where bytes.count >= 12 && bytes[0..<4].elementsEqual("RIFF".utf8)
      && bytes[8..<12].elementsEqual("WEBP".utf8):
      return .webp
    case 0x25 where bytes.starts(with: Array("%PDF".utf8)):
      return .pdf
    default:
      break
    }
    if let brandFormat = isoMediaFormat(bytes) { return brandFormat }
    if looksLikeSVG(data) { return .svg }
    return nil
  }

  /// HEIC, HEIF and AVIF: an ISO base media `ftyp` box whose major brand names the format.
  private static func isoMediaFormat(_ bytes: [UInt8]) -> ImageFormat? {
    guard bytes.count >= 12, bytes[4..<8].elementsEqual("ftyp".utf8) else { return nil }
    let brand = String(decoding: bytes[8..<12], as: UTF8.self)
    switch brand {
    case "heic", "heix", "hevc", "hevx", "heim", "heis": return .heic
    case "mif1", "msf1": return .heif
    case "avif", "avis": return .avif
    default: return nil
    }
  }

  /// SVG is text: an `<svg` element near the start, after an optional XML prolog, comments or
  /// a doctype, as SD checks for `<svg` in the data.
  private static func looksLikeSVG(_ data: Data) -> Bool {
    let head = data.prefix(4096)
    guard let text = String(data: head, encoding: .utf8) ?? String(data: head, encoding: .isoLatin1)
    else { return false }
    let trimmed = text.drop { $0.isWhitespace || $0 == "\u{FEFF}" }
    guard trimmed.hasPrefix("<") else { return false }
    return text.range(of: "<svg", options: .caseInsensitive) != nil
  }
}

/// How thoroughly a downloaded body is checked before it is stored (SPEC section 2, step 6).
public enum ValidationLevel: String, Sendable, Codable, CaseIterable {
  /// Only that the body is not empty.
  case none
  /// Magic bytes, the header parsed for dimensions, and the end of the data checked (JPEG's EOI
  /// marker, PNG's IEND chunk and chunk CRCs, GIF's trailer): catches truncation cheaply.
  case structure
  /// `structure`, then a complete decode of JPEG (libjpeg-turbo), PNG (libpng), and every frame
  /// of GIF (giflib) and WebP (libwebp), a decoder warning counting as a failure.
  case full
}

/// What validation learned about an image, for the report.
public struct ImageInfo: Sendable, Equatable, Codable {
  package var format: ImageFormat?
  package var width: Int?
  package var height: Int?

  public init(format: ImageFormat?, width: Int? = nil, height: Int? = nil) {
    self.format = format
    self.width = width
    self.height = height
  }
}
