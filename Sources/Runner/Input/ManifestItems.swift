import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The items of one or more manifests, read lazily in order, each line's options and context
/// applied on top of the job's defaults. A bad line becomes a failure naming its file, line and
/// field; UI-only options become warnings.
public struct ManifestItems: Sequence, Sendable {
  public let paths: [String]
  /// URLs given one by one (``Job/urls``), read before the manifests.
  public let urls: [String]
  public let defaultOptions: ImageOptions
  public let defaultContext: ImageContext
  private let warningsBox = WarningList()

  public let sitemap: SitemapSettings
  /// The limits a sitemap is fetched and decompressed with: those of image downloads.
  public let configuration: PrefetchConfiguration
  /// The run's stop flag: a signal cancels a sitemap fetch in progress.
  public var stop: StopFlag?
  /// The run's downloader, whose transfer thread fetches sitemaps and manifests named by URL
  /// (with one of its own for each fetch when there is none: a dry run, the migrate pass).
  public var downloader: Downloader?

  public init(
    paths: [String], urls: [String] = [], defaultOptions: ImageOptions = ImageOptions(),
    defaultContext: ImageContext = ImageContext(), sitemap: SitemapSettings = SitemapSettings(),
    configuration: PrefetchConfiguration = PrefetchConfiguration()
  ) {
    self.paths = paths
    self.urls = urls
    self.defaultOptions = defaultOptions
    self.defaultContext = defaultContext
    self.sitemap = sitemap
    self.configuration = configuration
  }

  /// Whether a manifest is named by an http or https URL rather than a path.
  public static func isRemote(_ manifest: String) -> Bool {
    let lowercased = manifest.prefix(8).lowercased()
    return lowercased.hasPrefix("http://") || lowercased.hasPrefix("https://")
  }

  /// The manifest name that means standard input.
  public static let standardInput = "-"
  /// What a line error calls standard input.
  static let standardInputName = "(standard input)"

  /// Whether a manifest can be read only once, as it comes: standard input, a pipe, a FIFO
  /// (anything that is neither a URL nor a regular file).
  public static func isStream(_ manifest: String) -> Bool {
    guard !isRemote(manifest) else { return false }
    guard manifest != standardInput else { return true }
    var status = stat()
    return stat(manifest, &status) == 0 && status.st_mode & S_IFMT != S_IFREG
  }

  /// The number of lines of the manifests (those `counting` accepts), for a progress line's
  /// total, or `nil` when one of them is a sitemap or a URL (counting it would mean reading or
  /// fetching it twice), or not a regular file: a pipe, a FIFO or standard input can be read
  /// only once, by the run.
  public static func lineCount(
    of paths: [String],
    counting: (Result<ManifestEntry, ManifestLineError>) -> Bool = { _ in true }
  ) -> Int? {
    var total = 0
    for path in paths {
      guard !isRemote(path), !isStream(path) else { return nil }
      let descriptor = open(path, O_RDONLY | O_CLOEXEC)
      if descriptor >= 0 {
        defer { close(descriptor) }
        if looksLikeXML(descriptor) { return nil }
      }
      total += ManifestReader(path: path).count(where: counting)
    }
    return total
  }

  /// Whether a file holds XML (after an optional byte order mark and white space) or gzip,
  /// which manifests are only as sitemaps.
  static func looksLikeXML(_ descriptor: Int32) -> Bool {
    looksLikeXML(head(of: descriptor))
  }

  /// Whether the first bytes of a manifest are XML or gzip.
  static func looksLikeXML(_ head: ArraySlice<UInt8>) -> Bool {
    var bytes = head
    if bytes.starts(with: [0x1F, 0x8B]) { return true }
    if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
    let first = bytes.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
    return first == UInt8(ascii: "<")
  }

  /// Why a manifest whose first bytes are `head` is none, or `nil` (SPEC section 10): an image
  /// (the wget habit, `prefetch https://cdn/x.jpg`, or an image file's path) or other binary
  /// data (NUL bytes, over 1% of the first block), whose "lines" would be counted as URLs and
  /// fail. A stray NUL in text stays that line's error (SPEC section 10). Gzip is a compressed
  /// sitemap; SVG is XML, which the sitemap reader refuses itself.
  public static func notAManifest(_ head: ArraySlice<UInt8>) -> String? {
    guard !head.isEmpty, !head.starts(with: [0x1F, 0x8B]) else { return nil }
    let what: String
    if let format = ImageFormat.detect(Data(head)), format != .svg {
      what = "this is an image (\(format.rawValue.uppercased())), not a manifest"
    } else if head.count(where: { $0 == 0 }) * 100 > head.count {
      what = "this is binary data (it holds NUL bytes), not a manifest"
    } else {
      return nil
    }
    return what + ": a manifest lists image URLs, one a line. To fetch one URL: "
      + "imagecache prefetch --url URL, or echo URL | imagecache prefetch -"
  }

  /// How much of a manifest ``notAManifest(_:)`` looks at.
  static let headSize = 4096

  /// The first bytes of the file open as `descriptor`, read without moving its offset.
  static func head(of descriptor: Int32) -> ArraySlice<UInt8> {
    var head = [UInt8](repeating: 0, count: headSize)
    let count = head.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
    return head[0..<Swift.max(count, 0)]
  }

  /// The fetch of a sitemap or manifest URL, with the job's headers, trusted origins and TLS
  /// option. It blocks: the prefetcher reads items on a thread of their own.
  func fetch(_ url: URL) throws(ImageCacheError) -> Int32 {
    try DocumentFetcher.fetch(
      url, through: downloader, configuration: configuration.http, headers: defaultContext.headers,
      trustedOrigins: defaultContext.trustedOrigins,
      allowInvalidSSLCertificates: defaultOptions.contains(.allowInvalidSSLCertificates),
      stop: stop)
  }

  /// Warnings gathered so far (UI-only options on manifest lines).
  public var warnings: [ConfigurationError] { warningsBox.all }

  public func makeIterator() -> Iterator { Iterator(owner: self) }

  /// The cache keys of the items, lazily; bad lines go to `onError`.
  public func cacheKeys(onError: @escaping (ConfigurationError) -> Void) -> some Sequence<String> {
    lazy.compactMap { result -> String? in
      switch result {
      case .success(let item): return item.cacheKey
      case .failure(let error):
        onError(error)
        return nil
      }
    }
  }

  public struct Iterator: IteratorProtocol {
    let owner: ManifestItems
    var urlIndex = 0
    var pathIndex = 0
    var current: Lines?
    let visited = VisitedSitemaps()

    /// The entries of one manifest, whatever its kind.
    enum Lines {
      case text(ManifestReader.Iterator)
      case sitemap(SitemapManifest)
      /// A manifest that could not be opened: its one error.
      case failed(ManifestLineError?)

      mutating func next() -> Result<ManifestEntry, ManifestLineError>? {
        switch self {
        case .text(var reader):
          defer { self = .text(reader) }
          return reader.next()
        case .sitemap(let sitemap):
          return sitemap.next()
        case .failed(let error):
          self = .failed(nil)
          return error.map { .failure($0) }
        }
      }
    }

    public mutating func next() -> Result<PrefetchItem, ConfigurationError>? {
      if urlIndex < owner.urls.count {
        urlIndex += 1
        return owner.item(
          from: ManifestReader.Iterator.entry(
            owner.urls[urlIndex - 1], file: "--url", line: urlIndex))
      }
      while true {
        if current == nil {
          guard pathIndex < owner.paths.count else { return nil }
          current = open(owner.paths[pathIndex])
          pathIndex += 1
        }
        guard let line = current!.next() else {
          current = nil
          continue
        }
        return owner.item(from: line)
      }
    }

    /// Opens a manifest: a local file, standard input (`-`) or an http(s) URL, a sitemap (by
    /// its content) or lines. What cannot be opened fails as a whole input.
    func open(_ manifest: String) -> Lines {
      func failed(_ name: String, _ message: String, notAManifest: Bool = false) -> Lines {
        .failed(
          ManifestLineError(
            file: name, line: 0, field: nil, message: message, wholeInput: true,
            notAManifest: notAManifest))
      }
      let descriptor: Int32
      if ManifestItems.isRemote(manifest) {
        guard let url = URL(string: manifest) else { return failed(manifest, "not a valid URL") }
        do throws(ImageCacheError) {
          descriptor = try owner.fetch(url)
        } catch {
          return failed(manifest, "cannot fetch: \(error.message)")
        }
      } else if manifest == ManifestItems.standardInput {
        // A copy: closing it when the manifest is read leaves standard input itself alone, and
        // its flags (shared with whoever else holds it) are left as they are.
        let copy = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else {
          return failed(ManifestItems.standardInputName, String(cString: strerror(errno)))
        }
        return stream(copy, name: ManifestItems.standardInputName)
      } else {
        // Without O_NONBLOCK, opening a FIFO waits for a writer, and no signal ends the wait.
        descriptor = Glibc.open(manifest, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
          let reason = String(cString: strerror(errno))
          return failed(manifest, FileSystem.reason(reason, forUserPath: manifest))
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
        var status = stat()
        if fstat(descriptor, &status) != 0 || status.st_mode & S_IFMT != S_IFREG {
          return stream(descriptor, name: manifest)
        }
      }
      let head = ManifestItems.head(of: descriptor)
      if let problem = ManifestItems.notAManifest(head) {
        close(descriptor)
        return failed(manifest, problem, notAManifest: true)
      }
      guard ManifestItems.looksLikeXML(head) else {
        return .text(
          ManifestReader.Iterator(path: manifest, lines: LineReader(descriptor: descriptor)))
      }
      return .sitemap(
        SitemapManifest(
          descriptor: descriptor, name: manifest, settings: owner.sitemap,
          limit: owner.configuration.maxResponseSize, visited: visited, fetch: owner.fetch))
    }

    /// A manifest that is not a regular file (a pipe, a FIFO, a terminal): read once, as it
    /// comes, ending early when the run stops. A sitemap is not read from one: its reader
    /// needs the bytes already looked at to tell it from lines.
    func stream(_ descriptor: Int32, name: String) -> Lines {
      let lines = LineReader(descriptor: descriptor, stop: owner.stop ?? StopFlag())
      if let problem = ManifestItems.notAManifest(lines.peek()) {
        return .failed(
          ManifestLineError(
            file: name, line: 0, field: nil, message: problem, wholeInput: true,
            notAManifest: true))
      }
      guard !ManifestItems.looksLikeXML(lines.peek()) else {
        return .failed(
          ManifestLineError(
            file: name, line: 0, field: nil,
            message: "a sitemap is read from a file or an http(s) URL, not from a pipe",
            wholeInput: true))
      }
      return .text(ManifestReader.Iterator(path: name, lines: lines))
    }
  }

  func item(from line: Result<ManifestEntry, ManifestLineError>) -> Result<
    PrefetchItem, ConfigurationError
  > {
    let entry: ManifestEntry
    switch line {
    case .success(let value): entry = value
    case .failure(let error):
      return .failure(
        ConfigurationError(
          source: error.file, line: error.line > 0 ? error.line : nil, field: error.field,
          message: error.message, wholeInput: error.wholeInput, notAManifest: error.notAManifest))
    }
    do {
      let (options, warnings) = try ImageOptions.parse(
        entry.options, source: entry.file, line: entry.line)
      warningsBox.append(warnings)
      let context = try defaultContext.applying(entry.context, source: entry.file, line: entry.line)
      return .success(
        PrefetchItem(
          url: entry.url, options: defaultOptions.union(options), context: context,
          source: "\(entry.file):\(entry.line)"))
    } catch {
      return .failure(error)
    }
  }
}

/// Warnings gathered while a sequence is read, shared by its copies: the first
/// ``maxKept``, then a count of the rest. A manifest that names a UI-only option on every one
/// of its ten million lines would otherwise hold ten million warnings until the run's end, then
/// say each on the console and in the report (SPEC section 5: memory does not follow the
/// manifest's size).
final class WarningList: Sendable {
  /// The most warnings kept one by one, each with its file, line and field.
  static let maxKept = 100

  private struct Kept {
    var list: [ConfigurationError] = []
    /// The first warning not kept, and how many were not.
    var firstDropped: ConfigurationError?
    var dropped = 0
  }

  private let kept = Mutex(Kept())

  func append(_ warnings: [ConfigurationError]) {
    guard !warnings.isEmpty else { return }
    kept.withLock { kept in
      for warning in warnings {
        if kept.list.count < Self.maxKept {
          kept.list.append(warning)
        } else {
          kept.firstDropped = kept.firstDropped ?? warning
          kept.dropped += 1
        }
      }
    }
  }

  /// The warnings kept, then one that counts the others from where the first of them was.
  var all: [ConfigurationError] {
    kept.withLock { kept in
      guard let first = kept.firstDropped else { return kept.list }
      return kept.list + [
        ConfigurationError(
          source: first.source, line: first.line,
          message: "\(kept.dropped) more warnings like these (UI-only options, ignored) from "
            + "this line on, not listed one by one: only the first \(Self.maxKept) are")
      ]
    }
  }
}

extension Job {
  /// Whether the job names any URL to prefetch: a manifest or a `--url`.
  public var hasURLs: Bool { !manifests.isEmpty || !urls.isEmpty }

  /// The job's manifests, read lazily, with its options and context as every line's defaults.
  public var manifestItems: ManifestItems {
    ManifestItems(
      paths: manifests, urls: urls, defaultOptions: options, defaultContext: context,
      sitemap: sitemap,
      configuration: prefetch)
  }
}
