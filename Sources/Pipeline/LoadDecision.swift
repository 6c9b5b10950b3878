import Core
import Foundation
import HTTP

/// What a load needs, decided from the URL, the blacklist and the cache (SPEC section 2, steps
/// 1-4) and nothing else: the one statement of SD's steps before the network. A run carries it
/// out (``ImageManager/carryOut(_:)``); a dry run reads its ``planned`` action. Deciding
/// changes nothing but a hit's access time, and not even that in a planning manager.
public struct LoadDecision: Sendable {
  enum Kind: Sendable {
    /// Over before the network: a hit, a refusal by the blacklist, a miss under
    /// `fromCacheOnly`, a line whose namespace cannot be used.
    case finished(LoadResult)
    /// Not a URL SD fetches: failed, and blacklisted as SD 5 blacklists it.
    case invalid(ImageCacheError, blacklistKey: String, namespace: ImageManager.NamespaceState)
    /// The variant is made from the original the cache holds: nothing is downloaded.
    case render(Render)
    /// A request to send; with `revalidates`, a conditional one for what the cache holds.
    case download(ImageManager.PendingDownload, revalidates: Bool)
  }

  /// A variant to make from the original in the cache.
  struct Render: Sendable {
    /// The original's bytes: `nil` in a planning manager, which reads none.
    var original: Data?
    var source: CacheHitSource
    var url: String
    var originalKey: String
    var key: String
    var paths: DiskCache.KeyPaths
    var context: ImageContext
    var namespace: ImageManager.NamespaceState
  }

  let kind: Kind

  /// What a dry run says of a load: its action, and the reason of one the run would fail at
  /// once.
  public struct Planned: Sendable {
    public var action: PlannedAction
    public var reason: String?
  }

  /// What a dry run says of the load: the same decision, named (`download`, `hit`...), with
  /// the reason of one the run would fail at once.
  public var planned: Planned {
    switch kind {
    case .finished(let result):
      switch result.outcome {
      case .memoryHit, .diskHit, .notModified, .downloaded: Planned(action: .hit)
      case .cacheMiss: Planned(action: .miss)
      case .blacklisted: Planned(action: .blacklisted)
      case .failed(.invalidURL(_, let reason), _): Planned(action: .invalid, reason: reason)
      case .failed(let error, _): Planned(action: .failed, reason: error.message)
      }
    case .invalid(.invalidURL(_, let reason), _, _): Planned(action: .invalid, reason: reason)
    case .invalid(let error, _, _): Planned(action: .invalid, reason: error.message)
    case .render: Planned(action: .hit)
    case .download(_, let revalidates): Planned(action: revalidates ? .revalidate : .download)
    }
  }
}

extension ImageManager {
  /// A load up to the network: finished (a hit, a miss under `fromCacheOnly`, a refusal, a
  /// variant made from the original in the cache), or a download to make.
  public enum PreparedLoad: Sendable {
    case finished(LoadResult)
    case download(PendingDownload)
  }

  /// Everything of a load before the download (SPEC section 2, steps 1-4), without suspending:
  /// ``decide(_:options:context:parsed:)``, then ``carryOut(_:)``.
  public func prepare(
    _ rawURL: String, options: ImageOptions, context: ImageContext, parsed: URL? = nil
  ) -> PreparedLoad {
    carryOut(decide(rawURL, options: options, context: context, parsed: parsed))
  }

  /// SD's steps before the network (SPEC section 2, steps 1-4), in its order: the URL, the
  /// blacklist, the cache keys, the cache query (the derived key, then the original a variant
  /// is made from), `fromCacheOnly`. Records nothing but a hit's access time (a planning
  /// manager not even that).
  ///
  /// - Parameter parsed: `URL(string: rawURL)`, when the caller has parsed it already.
  public func decide(
    _ rawURL: String, options: ImageOptions, context: ImageContext, parsed: URL? = nil
  ) -> LoadDecision {
    func finished(_ result: LoadResult) -> LoadDecision { LoadDecision(kind: .finished(result)) }
    let trimmed = rawURL.trimmingWhitespace(keepingLineBreaks: true)
    guard !trimmed.isEmpty else {
      return finished(
        LoadResult(
          outcome: .failed(.invalidURL(rawURL, reason: "empty URL"), blacklisted: false)))
    }
    let namespace: NamespaceState
    do {
      namespace = try state(for: context.namespace)
    } catch ImageCacheError.namespaceLocked(let name) {
      // Another run holds it: its lines fail, the others go on.
      return finished(LoadResult(outcome: .failed(.namespaceLocked(name), blacklisted: false)))
    } catch {
      // Another namespace's state that cannot be opened fails the lines that name it.
      return finished(stateFailed(error, endsRun: false))
    }
    let parsed = (trimmed == rawURL ? parsed : nil) ?? URL(string: trimmed)
    // Kept with its password masked, as the state keeps it (SPEC section 11).
    let blacklistKey = (parsed?.absoluteString ?? trimmed).maskingURLPasswords
    if !options.contains(.retryFailed) {
      do {
        if try isBlacklisted(blacklistKey, in: namespace) {
          return finished(LoadResult(outcome: .blacklisted))
        }
      } catch is CancellationError {
        return finished(LoadResult(outcome: .failed(.cancelled, blacklisted: false)))
      } catch {
        return finished(stateFailed(error))
      }
    }
    let url: URL
    switch Self.fetchableURL(trimmed, parsed: parsed) {
    case .success(let checked): url = checked
    case .failure(let error):
      return LoadDecision(kind: .invalid(error, blacklistKey: blacklistKey, namespace: namespace))
    }

    let (originalKey, key) = Self.cacheKeys(for: url, context: context)
    let cache = namespace.cache
    // The file names, once: the query and the store both need them.
    // The key is usually the URL itself, already parsed.
    let paths = cache.disk.paths(forKey: key, parsedKey: key == trimmed ? url : nil)
    var revalidates = false
    if !options.contains(.fromLoaderOnly) {
      do {
        if let hit = try lookUp(key, in: cache, cacheType: context.queryCacheType, paths: paths) {
          // fromCacheOnly never downloads, not even to revalidate.
          guard options.contains(.refreshCached) && !options.contains(.fromCacheOnly) else {
            return finished(LoadResult(outcome: hit.source == .memory ? .memoryHit : .diskHit))
          }
          // What is revalidated is the original's download; one in memory only is
          // downloaded again, unconditionally.
          revalidates =
            try (key == originalKey && hit.source == .disk)
            || cache.disk.containsData(forKey: originalKey)
        } else if key != originalKey && context.originalQueryCacheType != .none {
          if let original = try lookUp(
            originalKey, in: cache, cacheType: context.originalQueryCacheType, readsData: true)
          {
            // The original is in the cache: the variant is made from it, nothing is
            // downloaded.
            return LoadDecision(
              kind: .render(
                LoadDecision.Render(
                  original: original.data, source: original.source, url: rawURL,
                  originalKey: originalKey, key: key, paths: paths, context: context,
                  namespace: namespace)))
          }
        }
      } catch {
        return finished(queryFailed(error))
      }
      if options.contains(.fromCacheOnly) {
        return finished(LoadResult(outcome: .cacheMiss))
      }
    }

    var request = DownloadRequest(url: url)
    request.headers = context.headers
    request.trustedOrigins = context.trustedOrigins
    request.timeout = context.downloadTimeout
    request.allowInvalidSSLCertificates = options.contains(.allowInvalidSSLCertificates)
    request.handleCookies = options.contains(.handleCookies)
    request.priority = DownloadPriority(options)
    request.spillFolder = namespace.cache.disk.path
    return LoadDecision(
      kind: .download(
        PendingDownload(
          request: request,
          loadKey: LoadKey(
            namespace: context.namespace ?? defaultNamespace, url: url, cacheKey: key,
            options: options, context: context),
          rawURL: rawURL, blacklistKey: blacklistKey, originalKey: originalKey, key: key,
          paths: paths, options: options, context: context, namespace: namespace),
        revalidates: revalidates))
  }

  /// Carries `decision` out up to the network: blacklists an invalid URL, makes a variant from
  /// the original in the cache, reads a revalidation's validators. A planning manager carries
  /// nothing out.
  public func carryOut(_ decision: consuming LoadDecision) -> PreparedLoad {
    precondition(!readOnly, "a planning manager decides loads, it carries none out")
    switch decision.kind {
    case .finished(let result):
      return .finished(result)
    case .invalid(let error, let blacklistKey, let namespace):
      return .finished(fail(error, url: blacklistKey, in: namespace))
    case .render(let render):
      guard let original = render.original else {
        preconditionFailure("a run's decision to render holds the original's bytes")
      }
      return .finished(
        storeVariant(
          from: original, originalSource: render.source, url: render.url,
          originalKey: render.originalKey, key: render.key, paths: render.paths,
          context: render.context, in: render.namespace,
          outcome: render.source == .memory ? .memoryHit : .diskHit))
    case .download(var pending, let revalidates):
      if revalidates {
        do {
          try pending.namespace.flush()
          pending.request.validators = try pending.namespace.validatorStore.validators(
            forKey: pending.originalKey)
        } catch {
          return .finished(stateFailed(error))
        }
      }
      return .download(pending)
    }
  }

  /// Looks `key` up in the tiers `cacheType` allows, as the run's query does: a disk hit sets
  /// the file's access time, and with `readsData` the bytes are read. A planning manager only
  /// asks whether the file is there (its memory tier is empty).
  private func lookUp(
    _ key: String, in cache: ImageCache, cacheType: CacheType, readsData: Bool = false,
    paths: DiskCache.KeyPaths? = nil
  ) throws -> CacheHit? {
    guard readOnly else {
      return try cache.query(key: key, cacheType: cacheType, readData: readsData, paths: paths)
    }
    if cacheType.includesMemory && cache.memory.containsData(forKey: key) {
      return CacheHit(source: .memory, data: nil)
    }
    guard cacheType.includesDisk, try cache.disk.containsData(forKey: key) else { return nil }
    return CacheHit(source: .disk, data: nil)
  }
}
