import Core
import Foundation
import HTTP
import Imaging
import Synchronization

/// The manager's steps after the download: the check and the store of an original or a
/// variant, and SD 5's rules for what a failure does to the blacklist.
extension ImageManager {
  /// Renders the variant of a derived key from the original's bytes and stores it, as SD's
  /// transform and store steps do: the original is stored under its own key too (per
  /// `originalStoreCacheType`) unless it came from the disk.
  func storeVariant(
    from original: Data, originalSource: CacheHitSource?, url: String, originalKey: String,
    key: String, paths: DiskCache.KeyPaths, context: ImageContext, in namespace: NamespaceState,
    outcome: LoadOutcome, spilled: SpilledBody? = nil
  ) -> LoadResult {
    let cache = namespace.cache
    // An original read from the disk is not written there again.
    let originalStore =
      originalSource == .disk
      ? context.originalStoreCacheType.withoutDisk : context.originalStoreCacheType
    var request = context.variant
    request.scale = imageScaleFactor(forKey: originalKey)
    var report = VariantReport(url: url, key: key)
    let variantData: Data?
    do {
      switch try VariantRenderer.render(
        original, request: request, maxPixels: configuration.maxPixels)
      {
      case .encoded(let data, let format, let width, let height):
        variantData = data
        (report.format, report.width, report.height) = (format, width, height)
      case .originalBytes:
        variantData = original
        report.originalBytes = true
        report.format = ImageFormat.detect(original)
      case .skipped(let reason):
        variantData = nil
        report.skipped = reason
      }
    } catch {
      variantData = nil
      report.skipped = "cannot render: \(error.message)"
    }
    do {
      if originalStore != .none {
        try cache.store(original, forKey: originalKey, cacheType: originalStore, spilled: spilled)
      }
      if let variantData {
        report.bytes = variantData.count
        try cache.store(variantData, forKey: key, cacheType: context.storeCacheType, paths: paths)
        if context.storeCacheType.includesDisk {
          // Where SD before iOS 17 looks: its own name for the key it derives there, which
          // is another key when the thumbnail step left raw braces (SPEC section 3.1).
          for name in context.variant.derivedFileNames(for: originalKey).dropFirst() {
            try FileSystem.writeAtomically(
              variantData, toPath: cache.disk.path + "/" + name, createsFolder: false)
          }
        }
      }
    } catch {
      return storeFailed(error)
    }
    return LoadResult(outcome: outcome, variant: report)
  }

  /// Finishes a load with its download's answer (SPEC section 2, steps 5-8): validation, the
  /// store (and a variant's rendering), validators, the blacklist. Runs on the caller's thread,
  /// never the transfer thread.
  public func finish(
    _ pending: PendingDownload, _ answer: Result<DownloadResponse, DownloadFailure>
  ) -> LoadResult {
    let (rawURL, blacklistKey, originalKey, key) = (
      pending.rawURL, pending.blacklistKey, pending.originalKey, pending.key
    )
    let (paths, options, context, namespace) = (
      pending.paths, pending.options, pending.context, pending.namespace
    )
    let response: DownloadResponse
    switch answer {
    case .success(let answered):
      response = answered
    case .failure(let error):
      var result = fail(
        error.error, url: blacklistKey, in: namespace,
        ownCertificateAuthorities: error.ownCertificateAuthorities)
      result.retryAfter = error.retryAfter
      return result
    }
    let cache = namespace.cache
    if response.notModified {
      let original: String?
      do {
        let touched = try cache.disk.touchedPath(paths)
        original =
          key == originalKey
          ? touched : try cache.disk.touchedPath(cache.disk.paths(forKey: originalKey))
      } catch {
        return storeFailed(error)
      }
      // The original's file learns its URL as a download's does (issue 45): a cache
      // prefetched before the state kept URLs learns them from its revalidations.
      if let original {
        do {
          try namespace.queue(
            storedURL: StoredURL(
              fileName: (original as NSString).lastPathComponent, url: blacklistKey,
              storedAt: Date()))
        } catch {
          endRun(.stateFailed(error))
        }
      }
      return LoadResult(outcome: .notModified)
    }
    let info: ImageInfo
    do {
      info = try ImageValidator(
        level: configuration.validation, maxPixels: configuration.maxPixels
      ).validate(response.body)
    } catch {
      return fail(error, url: blacklistKey, in: namespace)
    }
    do {
      try namespace.validatorStore.waitUntilWritable()
    } catch is CancellationError {
      return LoadResult(outcome: .failed(.cancelled, blacklisted: false))
    } catch {
      return stateFailed(error)
    }
    let outcome = LoadOutcome.downloaded(bytes: response.body.count, info: info)
    var result = LoadResult(outcome: outcome)
    if key == originalKey {
      do {
        try cache.store(
          response.body, forKey: key, cacheType: context.storeCacheType, paths: paths,
          spilled: response.spilledBody)
      } catch {
        return storeFailed(error)
      }
    } else {
      result = storeVariant(
        from: response.body, originalSource: nil, url: rawURL, originalKey: originalKey, key: key,
        paths: paths, context: context, in: namespace, outcome: outcome,
        spilled: response.spilledBody)
      if case .failed = result.outcome { return result }
    }
    do {
      let now = Date()
      let etag = CacheValidators.kept(response.etag)
      let lastModified = CacheValidators.kept(response.lastModified)
      let validators =
        etag != nil || lastModified != nil
        ? CacheValidators(
          cacheKey: originalKey, etag: etag, lastModified: lastModified, updatedAt: now) : nil
      // The original's file learns its URL, for `verify` to name and refetch (issue 45); a
      // variant's does not: it is made by the job's context, not downloaded.
      let storedOnDisk =
        key == originalKey
        ? context.storeCacheType.includesDisk : context.originalStoreCacheType.includesDisk
      let storedURL =
        storedOnDisk
        ? StoredURL(
          fileName: ((key == originalKey ? paths : cache.disk.paths(forKey: originalKey)).current
            as NSString).lastPathComponent,
          url: blacklistKey, storedAt: now) : nil
      if validators != nil || storedURL != nil {
        try namespace.queue(validators, storedURL: storedURL)
      }
      if validators == nil && options.contains(.refreshCached) {
        try namespace.validatorStore.removeValidators(forKey: originalKey)
      }
      if options.contains(.retryFailed) { try unblacklist(blacklistKey, in: namespace) }
    } catch {
      // The image is in the cache all the same: the URL keeps its outcome, the run ends.
      endRun(.stateFailed(error))
    }
    return result
  }

  /// A cache that could not be read: this machine's failure, not the URL's, so neither a miss
  /// (which would download over the file) nor a store failure.
  func queryFailed(_ error: any Error) -> LoadResult {
    LoadResult(
      outcome: .failed(
        .localFailure(reason: "could not read the cache: \(error)"), blacklisted: false))
  }

  /// A store that failed; one that every later store would meet too (a full or read-only disk)
  /// is kept as ``runEndingFailure``.
  func storeFailed(_ error: any Error) -> LoadResult {
    let fileError = error as? FileSystemError
    let errno = fileError?.errno ?? 0
    let folder = fileError.map { ($0.path as NSString).deletingLastPathComponent } ?? directory
    let reason =
      if errno == ENOENT || errno == ENOTDIR {
        "the cache folder \(folder) was removed or replaced during the run (\(error))"
      } else if OpenFileLimit.isExhausted(errno: errno) {
        "\(error); \(OpenFileLimit.advice(errno: errno))"
      } else {
        "\(error)"
      }
    let failure = ImageCacheError.storeFailed(reason: reason, cause: FailureCause(of: error))
    if failure.endsRun { endRun(failure) }
    return LoadResult(outcome: .failed(failure, blacklisted: false))
  }

  /// The state database could not be read or written for this URL. It ends the run (SPEC
  /// section 11): a state that cannot be written loses every later URL's blacklist entry and
  /// validators, as a full cache disk loses its stores.
  func stateFailed(_ error: any Error, endsRun: Bool = true) -> LoadResult {
    let failure = ImageCacheError.stateFailed(error)
    if endsRun { endRun(failure) }
    return LoadResult(outcome: .failed(failure, blacklisted: false))
  }

  /// Records a failure, blacklisting the URL when SD 5 would; never for a certificate that
  /// the operator's own CA certificates did not verify: the fault may be theirs, and a URL
  /// blacklisted for it would stay failed once they are fixed.
  func fail(
    _ error: ImageCacheError, url: String, in namespace: NamespaceState,
    ownCertificateAuthorities: Bool = false
  ) -> LoadResult {
    // Out of file descriptors: the machine's fault, not the URL's; every later URL would
    // meet it too.
    if error.endsRun {
      let said = error.withOpenFileAdvice
      endRun(said)
      return LoadResult(outcome: .failed(said, blacklisted: false))
    }
    if case .network(.serverCertificateUntrusted, _) = error, ownCertificateAuthorities {
      let said = error.adding(
        " (not blacklisted: the CA certificates are the run's own, from --cacert, "
          + "prefetch.caBundle, CURL_CA_BUNDLE, SSL_CERT_FILE or SSL_CERT_DIR)")
      return LoadResult(outcome: .failed(said, blacklisted: false))
    }
    guard error.blacklistsURL else {
      // SD has neither of the run's own limits: a run with a higher one asks again.
      let said = error.runsOwnLimit.map {
        error.adding(" (not blacklisted: the limit is the run's own, \($0))")
      }
      return LoadResult(outcome: .failed(said ?? error, blacklisted: false))
    }
    let now = Date()
    do {
      try namespace.blacklistStore.recordFailure(
        url: url, code: error.code, name: error.name, reason: error.message, at: now)
    } catch let stateError {
      // Not recorded, so not reported blacklisted: the URL keeps its own failure.
      endRun(.stateFailed(stateError))
      return LoadResult(outcome: .failed(error, blacklisted: false))
    }
    // Written at once: a later line of this run looks it up in the store.
    namespace.blacklistHashes.withLock { _ = $0.insert(BlacklistRule.hash(ofURL: url)) }
    namespace.unblacklisted.withLock { _ = $0.remove(url) }
    return LoadResult(outcome: .failed(error, blacklisted: true))
  }

  /// Whether `url` is on the namespace's blacklist: no store read unless its hash is held,
  /// then the entry itself, so that a hash shared with another URL refuses nothing.
  /// `CancellationError`: the run was stopped before its state opened.
  func isBlacklisted(_ url: String, in namespace: NamespaceState) throws -> Bool {
    let hash = BlacklistRule.hash(ofURL: url)
    guard namespace.blacklistHashes.withLock({ $0.contains(hash) }) else { return false }
    guard !namespace.unblacklisted.withLock({ $0.contains(url) }) else { return false }
    return try namespace.holdsEntry(
      ofURL: url, at: Date(), timeToLive: configuration.blacklistTTL)
  }

  func unblacklist(_ url: String, in namespace: NamespaceState) throws {
    let hash = BlacklistRule.hash(ofURL: url)
    guard namespace.blacklistHashes.withLock({ $0.contains(hash) }) else { return }
    try namespace.blacklistStore.removeFromBlacklist(url: url)
    // Another shard's file keeps its entry: this run refuses it no more, as it would not
    // refuse it had it been in this run's own file.
    let (now, timeToLive) = (Date(), configuration.blacklistTTL)
    if namespace.otherBlacklists.contains(where: {
      (try? $0.isBlacklisted(url: url, at: now, timeToLive: timeToLive)) == true
    }) {
      namespace.unblacklisted.withLock { _ = $0.insert(url) }
    }
  }
}
