import Foundation

/// What an app asks SD for beyond the original: a thumbnail size and transformers (SPEC
/// section 3, `imageThumbnailPixelSize`, `imagePreserveAspectRatio`, `imageTransformer`).
public struct VariantRequest: Sendable, Equatable {
  package var thumbnail: ThumbnailSize?
  package var preserveAspectRatio = true
  /// `nil`: no transformer; an empty list is SD's empty pipeline.
  package var transformers: [ImageTransformer]?
  /// Points to pixels, from the key (SD's `SDImageScaleFactorForKey`).
  package var scale = 1.0
  /// `imageEncodeOptions.compressionQuality`, SD's default 1.0.
  package var compressionQuality = 1.0

  package init(
    thumbnail: ThumbnailSize? = nil, preserveAspectRatio: Bool = true,
    transformers: [ImageTransformer]? = nil
  ) {
    self.thumbnail = thumbnail
    self.preserveAspectRatio = preserveAspectRatio
    self.transformers = transformers
  }

  /// Whether the request derives a key of its own (SD appends a thumbnail size even of 0x0).
  public var isEmpty: Bool { thumbnail == nil && transformers == nil }

  /// The key SD derives from `key` for this request (on iOS 17 and later, unless told).
  public func derivedKey(for key: String, on system: DerivedKey.System = .iOS17AndLater)
    -> String
  {
    DerivedKey.key(
      for: key, thumbnail: thumbnail.map { ($0.width, $0.height) },
      preserveAspectRatio: preserveAspectRatio, transformers: transformers, on: system)
  }

  /// The files an app looks for this request's variant of `key` in: the name of the key iOS
  /// 17 and later derive, then, when it differs, the name SD before iOS 17 gives the key it
  /// derives there (which may be another key, see ``DerivedKey/key(for:thumbnail:preserveAspectRatio:transformers:on:)``).
  package func derivedFileNames(for key: String) -> [String] {
    let current = CacheFileName.fileName(forKey: derivedKey(for: key))
    let older = CacheFileName.fileNameBeforeiOS17(forKey: derivedKey(for: key, on: .beforeiOS17))
    return older == current ? [current] : [current, older]
  }
}

/// A transformer of SD's `imageTransformer` context, as far as its cache key goes
/// (SDWebImage 5.21.5, `SDImageTransformer.m`): each prints its parameters in its own format.
public enum ImageTransformer: Sendable, Equatable {
  public enum ScaleMode: UInt, Sendable, CaseIterable {
    case fill = 0
    case aspectFit = 1
    case aspectFill = 2

    package var name: String {
      switch self {
      case .fill: "fill"
      case .aspectFit: "aspectFit"
      case .aspectFill: "aspectFill"
      }
    }
  }

  /// UIRectCorner bits.
  public struct Corners: OptionSet, Sendable, Equatable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    package static let topLeft = Corners(rawValue: 1)
    package static let topRight = Corners(rawValue: 2)
    package static let bottomLeft = Corners(rawValue: 4)
    package static let bottomRight = Corners(rawValue: 8)
    /// `UIRectCornerAllCorners` is `~0UL`, not the four bits.
    package static let all = Corners(rawValue: UInt.max)
  }

  /// A colour as SD prints it: `#aarrggbb`, from `A<<24|R<<16|G<<8|B`, lowercase.
  public struct Color: Sendable, Equatable {
    package var argb: UInt32

    package init(argb: UInt32) { self.argb = argb }

    /// `#rrggbb` (opaque) or `#aarrggbb`.
    package init?(hex: String) {
      guard hex.hasPrefix("#"), let value = UInt32(hex.dropFirst(), radix: 16) else { return nil }
      switch hex.count {
      case 7: argb = 0xFF00_0000 | value
      case 9: argb = value
      default: return nil
      }
    }

    package var keyText: String { "#" + String(format: "%08x", argb) }
  }

  case resizing(width: Double, height: Double, scaleMode: ScaleMode)
  case cropping(x: Double, y: Double, width: Double, height: Double)
  case flipping(horizontal: Bool, vertical: Bool)
  case rotation(angle: Double, fitSize: Bool)
  case roundCorner(radius: Double, corners: Corners, borderWidth: Double, borderColor: Color?)
  case tint(color: Color, blendMode: Int)
  case blur(radius: Double)

  /// The transformer's `transformerKey`.
  package var key: String {
    func f(_ value: Double) -> String { String(format: "%f", value) }
    func d(_ value: Bool) -> String { value ? "1" : "0" }
    switch self {
    case .resizing(let width, let height, let mode):
      return "SDImageResizingTransformer({\(f(width)),\(f(height))},\(mode.rawValue))"
    case .cropping(let x, let y, let width, let height):
      return "SDImageCroppingTransformer({\(f(x)),\(f(y)),\(f(width)),\(f(height))})"
    case .flipping(let horizontal, let vertical):
      return "SDImageFlippingTransformer(\(d(horizontal)),\(d(vertical)))"
    case .rotation(let angle, let fitSize):
      return "SDImageRotationTransformer(\(f(angle)),\(d(fitSize)))"
    case .roundCorner(let radius, let corners, let borderWidth, let borderColor):
      return "SDImageRoundCornerTransformer(\(f(radius)),\(corners.rawValue),\(f(borderWidth)),"
        + "\(borderColor?.keyText ?? "(null)"))"
    case .tint(let color, let blendMode):
      return "SDImageTintTransformer(\(color.keyText),\(blendMode))"
    case .blur(let radius):
      return "SDImageBlurTransformer(\(f(radius)))"
    }
  }
}

/// The cache keys SD derives for thumbnails and transformed images (SDWebImage 5.21.5,
/// `SDThumbnailedKeyForKey` and `SDTransformedKeyForKey`): the suffix goes before the key's
/// path extension, on the decoded path of a URL key, which is then re-encoded; a key with no
/// path extension gets `-<suffix>` appended as it is.
///
/// The derivation depends on the system the app runs on (SPEC section 3.1): each step parses
/// the key with `[NSURL URLWithString:]`, which before iOS 17 refuses what iOS 17 encodes (see
/// ``CacheFileName/isURLStringBeforeiOS17(_:)``). A key appended raw in the thumbnail step
/// (`https://a.com/x-Thumbnail({10.000000,20.000000},1)`) then takes the transformer step
/// through the raw string on the older systems, and the two chains end at different keys.
public enum DerivedKey {
  /// The Foundation SD's key functions run on.
  public enum System: Sendable, Equatable {
    /// iOS 17, macOS 14 and later: NSURL parses RFC 3986 and encodes what it cannot keep.
    case iOS17AndLater
    /// Earlier systems: NSURL refuses a string with characters outside RFC 2396.
    case beforeiOS17
  }

  /// `Thumbnail({w,h},preserve)` with C's `%f`.
  public static func thumbnailSuffix(width: Double, height: Double, preserveAspectRatio: Bool)
    -> String
  {
    "Thumbnail({\(String(format: "%f", width)),\(String(format: "%f", height))},"
      + "\(preserveAspectRatio ? 1 : 0))"
  }

  /// A pipeline's key: its transformers' keys joined with `-`.
  public static func transformerSuffix(_ transformers: [ImageTransformer]) -> String {
    transformers.map(\.key).joined(separator: "-")
  }

  /// The key of `key` with a thumbnail size and then transformers, as SD's manager derives it
  /// (`cacheKeyForURL:context:`): thumbnail first, then the transformers. Any size given is
  /// appended, 0x0 included; `nil` transformers add nothing, while an empty pipeline adds its
  /// empty key after a `-`, as SD's `SDImagePipelineTransformer` does.
  package static func key(
    for key: String, thumbnail: (width: Double, height: Double)? = nil,
    preserveAspectRatio: Bool = true, transformers: [ImageTransformer]? = nil,
    on system: System = .iOS17AndLater
  ) -> String {
    var derived = key
    if let thumbnail {
      derived = transformed(
        derived,
        suffix: thumbnailSuffix(
          width: thumbnail.width, height: thumbnail.height,
          preserveAspectRatio: preserveAspectRatio),
        on: system)
    }
    if let transformers {
      derived = transformed(derived, suffix: transformerSuffix(transformers), on: system)
    }
    return derived
  }

  /// `SDTransformedKeyForKey(key, suffix)` (SDWebImage 5.21.5, `SDImageTransformer.m`).
  ///
  /// Its lines 23-24 read `NSURL *keyURL = [NSURL URLWithString:key]; NSString *ext = keyURL ?
  /// keyURL.pathExtension : key.pathExtension;`. Before iOS 17 `keyURL` is nil for a key that
  /// holds raw braces (any key the thumbnail step appended to without an extension), so the
  /// extension is the raw string's (`000000},1)` for `.../x-Thumbnail({10.000000,20.000000},1)`)
  /// and line 34 builds the key with NSString's path methods:
  /// `[[[key.stringByDeletingPathExtension stringByAppendingString:@"-"]
  /// stringByAppendingString:transformerKey] stringByAppendingPathExtension:ext]`, unencoded.
  /// Those methods take the string for a file path: they fold every run of `/` into one
  /// (so `https://` becomes `https:/`) and drop a trailing `/` (swift-corelibs-foundation's
  /// `NSPathUtilities.swift`, `_stringByFixingSlashes`, which models Apple's NSString; the
  /// NSString of this Foundation is what runs here). `https://a.com/x` with a 10x20 thumbnail
  /// and a blur of 1 is `https://a.com/x-Thumbnail(%7B10.000000,20-SDImageBlurTransformer(1.000000).000000%7D,1)`
  /// on iOS 17 and `https:/a.com/x-Thumbnail({10.000000,20-SDImageBlurTransformer(1.000000).000000},1)`
  /// before.
  public static func transformed(
    _ key: String, suffix: String, on system: System = .iOS17AndLater
  ) -> String {
    let url =
      system == .beforeiOS17 && !CacheFileName.isURLStringBeforeiOS17(key) ? nil : URL(string: key)
    let ext = url.map(\.pathExtension) ?? (key as NSString).pathExtension
    guard !ext.isEmpty else { return key + "-" + suffix }
    if let url, !url.isFileURL,
      var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
    {
      // Everything but the path (the query, the fragment) stays as it was.
      let stem = (components.path as NSString).deletingPathExtension
      components.path = ((stem + "-" + suffix) as NSString).appendingPathExtension(ext) ?? stem
      if let absolute = components.url?.absoluteString { return absolute }
    }
    let stem = (key as NSString).deletingPathExtension
    return ((stem + "-" + suffix) as NSString).appendingPathExtension(ext) ?? key
  }
}
/// `imageThumbnailPixelSize`: pixels, not points.
package struct ThumbnailSize: Sendable, Equatable {
  package var width: Double
  package var height: Double

  package init(width: Double, height: Double) {
    self.width = width
    self.height = height
  }

  /// `[w, h]` or `"WxH"`, non-negative numbers.
  package init?(_ value: JSONValue) {
    switch value {
    case .array(let items):
      guard items.count == 2, case .number(let w) = items[0], case .number(let h) = items[1]
      else { return nil }
      (width, height) = (w, h)
    case .string(let text):
      let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
      guard parts.count == 2, let w = Double(parts[0]), let h = Double(parts[1]) else {
        return nil
      }
      (width, height) = (w, h)
    default:
      return nil
    }
    guard width >= 0, height >= 0, width.isFinite, height.isFinite else { return nil }
  }
}

/// SD's `SDImageScaleFactorForKey`: 2 or 3 when the key names an `@2x.`/`@3x.` file (or, for
/// an http(s) key, `%402x.`/`%403x.`), else 1. Transformer sizes are points of that scale.
package func imageScaleFactor(forKey key: String) -> Double {
  guard key.utf16.count >= 8 else { return 1 }
  let isURL = key.hasPrefix("http://") || key.hasPrefix("https://")
  for factor in [2, 3] {
    if key.contains("@\(factor)x.") { return Double(factor) }
    if isURL && key.contains("%40\(factor)x.") { return Double(factor) }
  }
  return 1
}
