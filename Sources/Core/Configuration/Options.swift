import Foundation

/// A configuration mistake in a job, a manifest line or the command line: names where it is and
/// which field, so that a user can fix it (exit code 2).
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
  package var source: String
  package var line: Int?
  package var field: String?
  package var message: String
  /// A whole input (a manifest or sitemap) that could not be read to its end, not one line of
  /// it: a failure of the run that its exit code shows (SPEC section 11), not a skipped line.
  package var wholeInput: Bool
  /// A whole input that is no manifest at all (an image, binary data): the command was given
  /// the wrong thing, a usage error (exit 2) rather than an input that failed.
  package var notAManifest: Bool

  public init(
    source: String, line: Int? = nil, field: String? = nil, message: String,
    wholeInput: Bool = false, notAManifest: Bool = false
  ) {
    self.source = source
    self.line = line
    self.field = field
    self.message = message
    self.wholeInput = wholeInput
    self.notAManifest = notAManifest
  }

  public var description: String {
    var location = source
    if let line { location += ":\(line)" }
    return location + ": " + (field.map { "field '\($0)': " } ?? "") + message
  }
}

extension ConfigurationError: ExitStatusProviding {
  package var exitStatus: ExitStatus { .usage }
}

/// SD's `SDWebImageOptions` that mean something to a cache warmer (SPEC section 3).
public enum ImageOption: String, Sendable, Codable, CaseIterable {
  case retryFailed
  case refreshCached
  case fromCacheOnly
  case fromLoaderOnly
  case highPriority
  case lowPriority
  case handleCookies
  case allowInvalidSSLCertificates
  case scaleDownLargeImages
  case queryMemoryData
  case waitStoreCache

  /// SD options that only matter to a UI: accepted with a warning, then ignored.
  package static let uiOnly: Set<String> = [
    "progressiveLoad", "continueInBackground", "delayPlaceholder", "transformAnimatedImage",
    "avoidAutoSetImage", "queryMemoryDataSync", "queryDiskDataSync", "forceTransition",
    "avoidDecodeImage", "decodeFirstFrameOnly", "preloadAllFrames", "matchAnimatedImageClass",
    "transformVectorImage", "avoidAutoCancelImage", "waitTransition",
  ]

  /// Options a later version brings; refused rather than silently ignored.
  package static let notSupportedYet: Set<ImageOption> = [.scaleDownLargeImages]
}

/// A set of ``ImageOption``s.
public struct ImageOptions: Sendable, Equatable {
  package var set: Set<ImageOption>

  public init(_ options: Set<ImageOption> = []) {
    set = options
  }

  package func contains(_ option: ImageOption) -> Bool { set.contains(option) }

  /// Parses option names (SD's names without the `SDWebImage` prefix, any case of the first
  /// letter). Unknown names are errors, UI-only names give warnings (naming the source, line
  /// and field as an error does), and options that are not supported yet are refused.
  package static func parse(
    _ names: [String], source: String, line: Int? = nil, field: String = "options"
  ) throws(ConfigurationError) -> (ImageOptions, warnings: [ConfigurationError]) {
    var options = ImageOptions()
    var warnings: [ConfigurationError] = []
    for rawName in names {
      var name = rawName.trimmingCharacters(in: .whitespaces)
      if name.hasPrefix("SDWebImage") { name.removeFirst("SDWebImage".count) }
      name = name.prefix(1).lowercased() + name.dropFirst()
      if let option = ImageOption(rawValue: name) {
        if ImageOption.notSupportedYet.contains(option) {
          throw ConfigurationError(
            source: source, line: line, field: field,
            message: "option \(name) is not supported yet")
        }
        options.set.insert(option)
      } else if ImageOption.uiOnly.contains(name) {
        warnings.append(
          ConfigurationError(
            source: source, line: line, field: field,
            message: "option \(name) only matters to a UI; ignored"))
      } else {
        throw ConfigurationError(
          source: source, line: line, field: field,
          message: "unknown option \(rawName.debugDescription) (known: "
            + ImageOption.allCases.map(\.rawValue).joined(separator: ", ") + ")")
      }
    }
    if options.contains(.fromCacheOnly) && options.contains(.fromLoaderOnly) {
      throw ConfigurationError(
        source: source, line: line, field: field,
        message: "fromCacheOnly and fromLoaderOnly cannot be used together")
    }
    return (options, warnings)
  }

  package func union(_ other: ImageOptions) -> ImageOptions { ImageOptions(set.union(other.set)) }
}

/// SD's cache-key filter (`SDWebImageCacheKeyFilter`): how a URL becomes a cache key.
package enum CacheKeyFilter: Sendable, Equatable {
  /// The URL's absolute string, query included (SD's default).
  case url
  /// The URL without its query.
  case stripQuery
  /// The URL without the named query parameters (say, signatures and tokens).
  case stripQueryParameters([String])

  /// The cache key of `url`.
  package func cacheKey(for url: URL) -> String {
    switch self {
    case .url:
      return url.absoluteString
    case .stripQuery:
      guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
        return url.absoluteString
      }
      components.percentEncodedQuery = nil
      return components.url?.absoluteString ?? url.absoluteString
    case .stripQueryParameters(let names):
      guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false),
        let items = components.percentEncodedQueryItems
      else { return url.absoluteString }
      let kept = items.filter { !names.contains($0.name) }
      components.percentEncodedQueryItems = kept.isEmpty ? nil : kept
      return components.url?.absoluteString ?? url.absoluteString
    }
  }
}

/// SD's `SDWebImageContext` keys that a cache warmer uses (SPEC section 3).
public struct ImageContext: Sendable, Equatable {
  package var cacheKeyFilter: CacheKeyFilter = .url
  /// Extra request headers (SD's request modifier).
  package var headers: [String: String] = [:]
  /// Origins besides the URL's own that `headers` go to when a redirect leads there, as
  /// curl's `--location-trusted` but per origin (SPEC section 5). Default: none.
  package var trustedOrigins: Set<Origin> = []
  package var storeCacheType: CacheType = .all
  package var queryCacheType: CacheType = .all
  /// Another namespace of the same cache directory for this URL.
  package var namespace: String?
  /// The idle timeout of the download; the job's timeout when unset.
  package var downloadTimeout: TimeInterval?
  /// A thumbnail and transformers: the variant stored under a derived key (SPEC section 3).
  package var variant = VariantRequest()
  /// Where the original is looked up and stored when a variant is asked for (SD's defaults:
  /// disk both).
  package var originalQueryCacheType: CacheType = .disk
  package var originalStoreCacheType: CacheType = .disk

  public init() {}

  package static let knownKeys = [
    "cacheKeyFilter", "headers", "storeCacheType", "queryCacheType", "namespace",
    "downloadTimeout", "imageThumbnailPixelSize", "imagePreserveAspectRatio", "imageTransformer",
    "originalQueryCacheType", "originalStoreCacheType", "imageEncodeOptions", "trustedOrigins",
  ]

  /// This context with the keys of `object` applied on top (headers are merged; every other key,
  /// `trustedOrigins` included, replaces). Unknown keys and bad values are errors naming the key.
  package func applying(
    _ object: [String: JSONValue], source: String, line: Int? = nil
  ) throws(ConfigurationError) -> ImageContext {
    var context = self
    func fail(_ key: String, _ message: String) -> ConfigurationError {
      ConfigurationError(source: source, line: line, field: "context.\(key)", message: message)
    }
    for (key, value) in object.sorted(by: { $0.key < $1.key }) {
      switch key {
      case "cacheKeyFilter":
        switch value {
        case .string("url"), .string("none"): context.cacheKeyFilter = .url
        case .string("stripQuery"): context.cacheKeyFilter = .stripQuery
        case .object(let filter) where filter.keys.sorted() == ["stripQueryParameters"]:
          guard case .array(let names)? = filter["stripQueryParameters"],
            let strings = names.stringValues, !strings.isEmpty
          else { throw fail(key, "stripQueryParameters takes a list of parameter names") }
          context.cacheKeyFilter = .stripQueryParameters(strings)
        default:
          throw fail(
            key, "expected \"url\", \"stripQuery\" or {\"stripQueryParameters\": [names]}")
        }
      case "headers":
        guard case .object(let headers) = value else {
          throw fail(key, "expected an object of header names to values")
        }
        for (name, headerValue) in headers {
          // A name is echoed in the message only when it is safe to print as it is.
          let field = "\(key).\(name.containsControlCharacter() ? name.debugDescription : name)"
          guard case .string(let string) = headerValue else {
            throw fail(field, "a header value must be a string")
          }
          guard !name.isEmpty, !name.containsControlCharacter(),
            !name.contains(where: { $0 == ":" || $0 == " " })
          else { throw fail(field, "not a valid header name") }
          guard !string.containsControlCharacter(allowingTab: true) else {
            throw fail(
              field, "a header value must not hold NUL, CR, LF or other control characters")
          }
          context.headers[name] = string
        }
      case "trustedOrigins":
        guard case .array(let values) = value, let texts = values.stringValues else {
          throw fail(key, "expected a list of origins such as [\"https://cdn.example.com\"]")
        }
        var origins: Set<Origin> = []
        for (index, text) in texts.enumerated() {
          guard let origin = Origin(parsing: text) else {
            throw fail(
              "\(key)[\(index)]",
              "\(text.debugDescription) is not an origin: expected http(s)://host or http(s)://host:port, with no "
                + "path, query or user")
          }
          origins.insert(origin)
        }
        context.trustedOrigins = origins
      case "storeCacheType", "queryCacheType", "originalQueryCacheType",
        "originalStoreCacheType":
        guard case .string(let name) = value, let type = CacheType(rawValue: name) else {
          throw fail(key, "expected one of none, disk, memory, all")
        }
        switch key {
        case "storeCacheType": context.storeCacheType = type
        case "queryCacheType": context.queryCacheType = type
        case "originalQueryCacheType": context.originalQueryCacheType = type
        default: context.originalStoreCacheType = type
        }
      case "namespace":
        guard case .string(let name) = value else { throw fail(key, "expected a folder name") }
        if let problem = CacheLocation.namespaceProblem(name) { throw fail(key, problem) }
        context.namespace = name
      case "downloadTimeout":
        // Seconds as a number, or a duration as text; 1ms to 100 years either way.
        let text: String
        switch value {
        case .number(let seconds): text = "\(seconds)"
        case .string(let string): text = string
        default: throw fail(key, "expected a positive duration such as 15s")
        }
        do {
          context.downloadTimeout = try parseDuration(text, allowed: .positive)
        } catch {
          throw fail(key, error.description)
        }
      case "imageThumbnailPixelSize":
        if case .null = value {
          context.variant.thumbnail = nil
        } else {
          guard let size = ThumbnailSize(value) else {
            throw fail(key, "expected [width, height] or \"WxH\" in pixels, not negative")
          }
          context.variant.thumbnail = size
        }
      case "imagePreserveAspectRatio":
        guard case .bool(let preserve) = value else { throw fail(key, "expected true or false") }
        context.variant.preserveAspectRatio = preserve
      case "imageTransformer":
        do throws(TransformerError) {
          context.variant.transformers = try ImageTransformer.parse(value)
        } catch {
          throw fail(key, error.message)
        }
      case "imageEncodeOptions":
        guard case .object(let options) = value else {
          throw fail(key, "expected an object such as {\"compressionQuality\": 0.8}")
        }
        for (name, option) in options {
          guard name == "compressionQuality" else {
            throw fail("\(key).\(name)", "unknown encode option (known: compressionQuality)")
          }
          guard case .number(let quality) = option, quality >= 0, quality <= 1 else {
            throw fail("\(key).\(name)", "expected a number from 0 to 1")
          }
          context.variant.compressionQuality = quality
        }
      default:
        throw fail(key, "unknown context key (known: \(Self.knownKeys.joined(separator: ", ")))")
      }
    }
    return context
  }
}

extension Array where Element == JSONValue {
  var stringValues: [String]? {
    var strings: [String] = []
    for element in self {
      guard case .string(let string) = element else { return nil }
      strings.append(string)
    }
    return strings
  }
}
