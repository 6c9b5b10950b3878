import Core
import Foundation
import HTTP
import Imaging
import Synchronization

/// How one load ended (SPEC section 2).
public enum LoadOutcome: Sendable, Equatable {
  case memoryHit
  case diskHit
  /// Downloaded, validated and stored.
  case downloaded(bytes: Int, info: ImageInfo)
  /// A `refreshCached` revalidation answered 304: the cached file stays.
  case notModified
  /// `fromCacheOnly` and not in the cache: a miss, not an error.
  case cacheMiss
  /// Refused up front: the URL is on the failed-URL blacklist.
  case blacklisted
  case failed(ImageCacheError, blacklisted: Bool)
}

/// One load's outcome plus what the prefetcher needs to decide on a retry.
public struct LoadResult: Sendable {
  public var outcome: LoadOutcome
  /// The server's `Retry-After`, for a failed download that sent one.
  public var retryAfter: TimeInterval?
  /// The variant made for a derived key (a thumbnail or transformers), when one was.
  public var variant: VariantReport?
  /// Why a transient failure was not tried again, when that is not obvious (a `Retry-After`
  /// over the cap, a wait past the deadline): added to the failure's message.
  public var note: String?

  package init(
    outcome: LoadOutcome, retryAfter: TimeInterval? = nil, variant: VariantReport? = nil,
    note: String? = nil
  ) {
    self.outcome = outcome
    self.retryAfter = retryAfter
    self.variant = variant
    self.note = note
  }
}

/// SD's `SDWebImageManager` for one cache directory: the pipeline of SPEC section 2 (URL check,
/// blacklist, cache key, cache query, download, validation, store) and SD 5's blacklist rules,
/// with the blacklist and the HTTP validators persisted in the state store.
public final class ImageManager: Sendable {
  public let directory: String
  public let defaultNamespace: String
  public let configuration: PipelineConfiguration
  /// A planning manager: it decides each load and carries none out. It looks the cache up
  /// without recording a hit (a `stat`, no access time set) and creates no folder; its
  /// namespaces are opened for reading.
  public let readOnly: Bool
  let memory: MemoryCache
  /// Opens the namespaces the lines name: the runner's takes their locks and state files.
  let namespaces: any NamespaceProvider
  let states: Mutex<[String: NamespaceState]>
  private let runEnding = Mutex<ImageCacheError?>(nil)

  /// What could not be read of the state files of the namespaces used (another shard's
  /// blacklist), for the run to say: the loads went on without it.
  public var warnings: [String] {
    states.withLock { states in states.keys.sorted().flatMap { states[$0]!.warnings } }
  }

  /// Releases what the namespaces provider took (the other namespaces' locks). Call it when
  /// the run is over.
  public func close() { namespaces.close() }

  /// The first store failure that ends the run (the disk is full, over quota or read-only):
  /// the prefetcher starts nothing more once it is set.
  public var runEndingFailure: ImageCacheError? { runEnding.withLock { $0 } }

  /// - Parameters:
  ///   - location: the cache directory and the default namespace.
  ///   - namespaces: where each namespace's blacklist and validators are kept; the default
  ///     namespace is opened now, others when a line first names them.
  public init(
    location: CacheLocation, configuration: PipelineConfiguration = PipelineConfiguration(),
    namespaces: any NamespaceProvider,
    memory: MemoryCache = MemoryCache(totalCostLimit: 64 << 20), readOnly: Bool = false
  ) throws {
    directory = location.directory
    defaultNamespace = location.namespace
    self.configuration = configuration
    self.readOnly = readOnly
    self.memory = memory
    self.namespaces = namespaces
    let state = try NamespaceState(
      location: location, memory: memory, createsFolder: !readOnly,
      opened: try namespaces.open(location, timeToLive: configuration.blacklistTTL))
    states = Mutex([location.namespace: state])
  }

  /// Every blacklisted URL of the default namespace, after the run.
  public func blacklistedURLs() throws -> [String] {
    var urls: [String] = []
    try forEachBlacklisted { urls.append($0.url) }
    return urls
  }

  /// Calls `body` with each blacklist entry of the default namespace, one at a time, oldest
  /// first failure first.
  public func forEachBlacklisted(_ body: (BlacklistEntry) throws -> Void) throws {
    try state(for: nil).blacklistStore.forEachBlacklisted(
      now: Date(), timeToLive: configuration.blacklistTTL, body)
  }

  /// A load that needs the network: the request to send, and what ``finish(_:_:)`` needs to
  /// finish the load once it is answered.
  public struct PendingDownload: Sendable {
    public internal(set) var request: DownloadRequest
    /// Loads with the same key are one download (SD coalesces them too).
    package let loadKey: LoadKey
    let rawURL: String
    let blacklistKey: String
    let originalKey: String
    let key: String
    let paths: DiskCache.KeyPaths
    let options: ImageOptions
    let context: ImageContext
    let namespace: NamespaceState

    /// The name of the file the download is stored as, in its namespace folder.
    package var fileName: String { (paths.current as NSString).lastPathComponent }
    /// The namespace folder the download is stored in.
    package var namespacePath: String { namespace.cache.disk.path }
  }

  /// `parsed` when it is a URL the downloader fetches (http or https, with a host), else the
  /// `invalidURL` failure SD blacklists it for (SPEC section 2, step 1).
  package static func fetchableURL(_ trimmed: String, parsed: URL?) -> Result<URL, ImageCacheError>
  {
    guard let url = parsed, let scheme = url.scheme?.lowercased() else {
      return .failure(.invalidURL(trimmed, reason: "not a URL"))
    }
    guard scheme == "http" || scheme == "https" else {
      return .failure(
        .invalidURL(trimmed, reason: "only http and https are fetched, not \(scheme)"))
    }
    guard let host = url.host, !host.isEmpty else {
      return .failure(.invalidURL(trimmed, reason: "no host"))
    }
    return .success(url)
  }

  /// The original key and the key looked up and stored: with a thumbnail or transformers, SD
  /// looks up the derived key first, then the original key, then downloads (SPEC section 3).
  package static func cacheKeys(for url: URL, context: ImageContext) -> (
    original: String, key: String
  ) {
    let originalKey = context.cacheKeyFilter.cacheKey(for: url)
    return (
      originalKey,
      context.variant.isEmpty ? originalKey : context.variant.derivedKey(for: originalKey)
    )
  }

  /// Keeps the first failure that ends the run; the prefetch starts nothing after it.
  func endRun(_ failure: ImageCacheError) {
    runEnding.withLock { $0 = $0 ?? failure }
  }
}
