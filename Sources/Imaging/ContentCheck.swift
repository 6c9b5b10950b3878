import Core
import Foundation

/// Judges a cache file's content the way an app reading the cache would meet it: an image of a
/// known format whose container holds together, or a reason it is not one, worded for a
/// person (`verify`'s `bad` outcome). Never allocates by what a header claims. The full level
/// decodes a JPEG's pixels as the prefetch's `full` validation does (an eighth of it, in grey),
/// every frame of a GIF (giflib) and of a WebP (libwebp) as it does too, and inflates a PNG's
/// image data and checks its rows' filter types without unfiltering them
/// (``PNGDecoder/checkData(_:maxPixels:)``: libpng's decode finds no more in data whose CRCs
/// the structure walk checked), unless the image has more than `maxPixels`.
public struct ContentCheck: Sendable {
  public var level: VerifyLevel
  /// The full level decodes no image with more pixels (its structure is still walked):
  /// `verify --max-pixels`, by default the prefetch's `maxPixels` default, which refused larger
  /// images before they were stored.
  public var maxPixels: Int

  public init(level: VerifyLevel, maxPixels: Int = 100_000_000) {
    self.level = level
    self.maxPixels = maxPixels
  }

  /// Whether the image has more pixels than the full level decodes.
  public func isTooLargeToDecode(_ info: ImageInfo) -> Bool {
    guard let width = info.width, let height = info.height else { return false }
    let pixels = width.multipliedReportingOverflow(by: height)
    return pixels.overflow || pixels.partialValue > maxPixels
  }

  /// The formats the full level decodes; the others get their structure walked only.
  public static let decodedFormats: Set<ImageFormat> = [.jpeg, .png, .gif, .webp]

  /// Whether this level decodes the image: one of ``decodedFormats`` at the full level, unless
  /// too large.
  func decodes(_ info: ImageInfo) -> Bool {
    guard level == .full, let format = info.format else { return false }
    return Self.decodedFormats.contains(format) && !isTooLargeToDecode(info)
  }

  /// How many bytes the header level reads: enough for a JPEG's EXIF and ICC segments before
  /// its frame header. A file whose header runs past them is read whole.
  public static let headerBytes = 256 << 10

  /// The image `data` holds, or why it holds none. `complete`: `data` is the whole file; the
  /// header level may be given only its start, and says `nil` when that was not enough.
  public func check(_ data: Data, complete: Bool = true) -> Result<ImageInfo, ContentProblem>? {
    guard !data.isEmpty else { return .failure(ContentProblem("empty file (0 bytes)")) }
    if Self.looksLikeHTML(data) {
      return .failure(
        ContentProblem("an HTML page, not an image (\(ImageValidator.describeStart(of: data)))"))
    }
    guard let format = ImageFormat.detect(data) else {
      let start = ImageValidator.describeStart(of: data)
      return .failure(
        ContentProblem(
          Self.looksLikeText(data)
            ? "text, not an image (\(start))" : "unknown format, not an image (\(start))"))
    }
    do {
      let info = try data.withUnsafeBytes { raw in
        try StructureCheck(bytes: ByteReader(raw), format: format, headerOnly: level == .header)
          .run()
      }
      if decodes(info) {
        do throws(ImageCacheError) {
          switch format {
          case .jpeg: try JPEGDecoder.decode(data)
          case .png: try PNGDecoder.checkData(data, maxPixels: maxPixels)
          case .gif: try GIFDecoder.decode(data, maxPixels: maxPixels)
          case .webp: try WebPDecoder.decode(data, maxPixels: maxPixels)
          default: break
          }
        } catch {
          switch error {
          case .badImageData(let reason), .overPixelLimit(let reason):
            return .failure(ContentProblem("\(reason) (full decode)"))
          default:
            return .failure(ContentProblem("\(format.rawValue): \(error)"))
          }
        }
      }
      return .success(info)
    } catch let failure as StructureFailure {
      // The header ran past the bytes read: the caller reads the whole file and asks again.
      if !complete && failure.reason.hasPrefix("truncated") { return nil }
      return .failure(ContentProblem("\(format.rawValue): \(failure.reason)"))
    } catch {
      return .failure(ContentProblem("\(format.rawValue): \(error)"))
    }
  }

  /// An HTML document, whatever else it holds (an inline `<svg>` must not make an error page an
  /// SVG image): what a server's error or login page saved as an image looks like.
  static func looksLikeHTML(_ data: Data) -> Bool {
    // Most files are images: a byte tells, before any text is made of them.
    let start = data.prefix(64).drop { [0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) }
    guard start.first == UInt8(ascii: "<") else { return false }
    let head = String(decoding: data.prefix(1024), as: UTF8.self).lowercased()
    let trimmed = head.drop { $0.isWhitespace || $0 == "\u{FEFF}" }
    return trimmed.hasPrefix("<!doctype html") || trimmed.hasPrefix("<html")
      || (trimmed.hasPrefix("<") && (head.contains("<head") || head.contains("<body")))
  }

  /// Printable UTF-8 with line breaks and tabs, as far as the first 512 bytes go: a JSON error,
  /// a plain-text message.
  static func looksLikeText(_ data: Data) -> Bool {
    let head = data.prefix(512)
    guard
      let text = String(data: head, encoding: .utf8)
        ?? String(data: head.dropLast(3), encoding: .utf8)
    else { return false }
    return text.unicodeScalars.allSatisfy {
      $0.value >= 0x20 || "\n\r\t".unicodeScalars.contains($0)
    }
      && !text.unicodeScalars.contains { $0.value == 0x7F }
  }
}

/// Why a file's content is no usable image, in words (`verify`'s reason).
public struct ContentProblem: Error, Sendable, Equatable, CustomStringConvertible {
  public var description: String
  public init(_ description: String) { self.description = description }
}
