import Foundation

/// One damaged cache file per kind of damage `imagecache verify` names, each made from a valid
/// fixture, with the start of the reason it must be given (issue 45).
public enum DamagedImage: String, CaseIterable, Sendable {
  case truncatedJPEG
  case truncatedPNG
  case brokenPNGCRC
  case flippedJPEGHeaderByte
  case zeroBytes
  case htmlPage
  case text
  case unknownFormat

  public var data: Data {
    switch self {
    case .truncatedJPEG:
      // Cut inside the scan: the headers are whole, the EOI marker is gone.
      return Fixtures.jpeg.prefix(Fixtures.jpeg.count - 100)
    case .truncatedPNG:
      return Fixtures.png.prefix(Fixtures.png.count - 20)
    case .brokenPNGCRC:
      var png = Fixtures.png
      let idat = png.range(of: Data("IDAT".utf8))!.lowerBound
      png[idat + 6] ^= 0x55
      return png
    case .flippedJPEGHeaderByte:
      // The 0xFF of the marker after the first segment: the header no longer holds together.
      var jpeg = Fixtures.jpeg
      let firstSegment = Int(jpeg[4]) << 8 | Int(jpeg[5])
      jpeg[4 + firstSegment] ^= 0xFF
      return jpeg
    case .zeroBytes:
      return Data()
    case .htmlPage:
      return Data(
        "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body>gone</body></html>\n"
          .utf8)
    case .text:
      return Data("{\"error\": \"rate limited, try again later\"}\n".utf8)
    case .unknownFormat:
      return Data([0x1F, 0x8B, 0x08, 0x00] + [UInt8](repeating: 0, count: 60))
    }
  }

  /// How the reason `verify` gives begins.
  public var reason: String {
    switch self {
    case .truncatedJPEG: "jpeg: truncated"
    case .truncatedPNG: "png: truncated"
    case .brokenPNGCRC: "png: corrupt: CRC mismatch in chunk \"IDAT\""
    case .flippedJPEGHeaderByte: "jpeg: corrupt: expected a marker at byte"
    case .zeroBytes: "empty file (0 bytes)"
    case .htmlPage: "an HTML page, not an image"
    case .text: "text, not an image"
    case .unknownFormat: "unknown format, not an image"
    }
  }

  /// Whether the damage is in the header, which `--level header` reads; the rest is found by
  /// `--level structure` only.
  public var isInHeader: Bool {
    switch self {
    case .truncatedJPEG, .truncatedPNG, .brokenPNGCRC: false
    default: true
    }
  }

  /// The URL it was fetched from, as the cache names it: the extension an app's URL had.
  public var url: String {
    let ext = ["truncatedPNG": "png", "brokenPNGCRC": "png", "htmlPage": "png"][rawValue] ?? "jpg"
    return "https://images.example/damaged/\(rawValue).\(ext)"
  }
}

/// The valid fixtures, by the URL a cache would have them under: `verify` must flag none.
public let validCacheImages: [(url: String, data: Data)] = [
  ("https://images.example/photo.jpg", Fixtures.jpeg),
  ("https://images.example/large.jpg?w=400", Fixtures.largeJPEG),
  ("https://images.example/oriented.jpeg", Fixtures.orientedJPEG),
  ("https://images.example/image.png", Fixtures.png),
  ("https://images.example/alpha.png", Fixtures.alphaPNG),
  ("https://images.example/anim.gif", Fixtures.gif),
  ("https://images.example/lossless.webp", Fixtures.webpLossless),
  ("https://images.example/lossy.webp", Fixtures.webpLossy),
  ("https://images.example/noextension", Fixtures.jpeg),
]
