import Core
import Foundation
import HTTP
import Maintenance
import Pipeline
import State

extension JobRunner {
  /// `imagecache verify` (issue 45): the audit, streamed into the report's `verify` section and
  /// said on the console as it goes (the first bad files, as a prefetch's first failures, and
  /// with `--verbose` every bad and noted file), then the
  /// repair, a `repair` pass of its own, when one is asked for. `--max-delete` is checked
  /// against the bad files before anything is repaired: over it, nothing is, and the run
  /// fails (exit 2), its report listing them all the same; a dry run says so and goes on.
  /// Each bad file's URL, when the state knows it, is in the report, and is what
  /// `--repair refetch` downloads again.
  func verify(
    _ configuration: VerifyConfiguration, into writer: ReportWriter, stop: StopFlag,
    warnings: RunWarnings
  ) async throws {
    try writer.beginVerify(
      level: configuration.level, repair: configuration.repair, dryRun: settings.dryRun)
    var configuration = configuration
    configuration.staleTemporaryAge = Self.staleTemporaryAge
    let verifier = CacheVerifier(
      diskCachePath: job.location.diskCachePath, configuration: configuration, shard: job.shard)
    let console = console
    let verbose = settings.verbose
    var badSaid = 0
    let storedURLs = StoredURLs(
      location: job.location, leavingNoTrace: settings.dryRun,
      unreadable: { path, error in
        warnings.add(
          .stateFile(
            "the stored URLs of \(path) were not read (\(error)): its files' URLs are unknown "
              + "to verify"))
      })
    let findings = try verifier.run(
      record: { file in
        var file = file
        if file.outcome == .bad {
          do {
            file.url = try storedURLs.url(forFileName: file.name)
          } catch {
            writer.recordVerifyError("\(file.name): its URL was not read: \(error)")
          }
        }
        writer.recordVerified(file)
        if verbose {
          console.report(.verifiedFile(file))
        } else if file.outcome == .bad {
          if badSaid < EchoingPrefetchSink.failuresToSay {
            console.report(.verifiedFile(file))
          } else if badSaid == EchoingPrefetchSink.failuresToSay {
            console.report(.furtherBadFilesInReportOnly)
          }
          badSaid += 1
        }
      },
      recordError: { message in
        writer.recordVerifyError(message)
        console.report(.verifyError(message))
      },
      stop: { stop.isStopped })
    writer.verifyCounts = findings.counts
    console.report(
      .verifyFinished(job: job.name, counts: findings.counts, level: configuration.level))
    guard configuration.repair != .none, findings.counts.bad > 0, !findings.stopped else { return }
    if let limit = configuration.maxDelete,
      !limit.allows(deletions: findings.counts.bad, of: findings.counts.files)
    {
      let refusal = MaintenanceError.overRepairLimit(
        bad: findings.counts.bad, files: findings.counts.files, repair: configuration.repair,
        limit: limit)
      guard settings.dryRun else { throw refusal }
      console.report(.warning(.overDeletionLimit(refusal)))
    }
    let pass = try beginPass(.repair, in: writer, listsActions: true)
    var recorder = pass
    guard configuration.repair == .refetch, !settings.dryRun else {
      let source = RefetchSource(
        url: { try storedURLs.url(forFileName: $0) }, fetch: nil, concurrency: 1)
      try await verifier.repair(
        findings, dryRun: settings.dryRun, into: &recorder, refetch: source,
        stop: { stop.isStopped })
      endPass(pass, in: writer)
      return
    }
    try await Downloader.withDownloader(configuration: job.prefetch.http) { downloader in
      let store = try StateStore(location: job.location, shard: job.shard)
      for warning in store.warnings { warnings.add(.stateFile(warning)) }
      var pipeline = job.prefetch.pipeline
      // What replaces a bad file passes the audit's own level, whatever the job validates at.
      pipeline.validation = configuration.level == .full ? .full : .structure
      let manager = try ImageManager(
        location: job.location, configuration: pipeline,
        namespaces: StateNamespaces(location: job.location, store: store, shard: job.shard))
      defer { manager.close() }
      let refetcher = Refetcher(
        manager: manager, downloader: downloader, options: job.options, context: job.context)
      let source = RefetchSource(
        url: { try storedURLs.url(forFileName: $0) }, fetch: refetcher.refetch,
        concurrency: job.prefetch.http.concurrency, stop: stop)
      try await verifier.repair(
        findings, dryRun: false, into: &recorder, refetch: source, stop: { stop.isStopped })
      try manager.flush()
      if let failure = manager.runEndingFailure { throw RunEndingError(failure: failure) }
    }
    endPass(pass, in: writer)
  }
}

/// `verify --repair refetch`'s download of one bad file (issue 45): the prefetch's own pipeline
/// with the job's options and context, from the loader only (the cache holds the bad file) and
/// past the blacklist (the URL was good once). Validated, then stored atomically in place of
/// the bad file: a kill leaves the bad file or the new one, never a part. The URL is refetched
/// only if its cache key under the job's context names that very file.
struct Refetcher: Sendable {
  let manager: ImageManager
  let downloader: Downloader
  let options: ImageOptions
  let context: ImageContext

  @Sendable func refetch(_ url: String, as fileName: String) async -> Result<
    UInt64, RefetchFailure
  > {
    var options = options
    options.set.subtract([.fromCacheOnly, .refreshCached])
    options.set.formUnion([.fromLoaderOnly, .retryFailed])
    // The variant a context makes is not what the file was: the original is fetched.
    var context = context
    context.variant = VariantRequest()
    let pending: ImageManager.PendingDownload
    switch manager.prepare(url, options: options, context: context) {
    case .finished(let result): return .failure(Self.failure(result.outcome))
    case .download(let download): pending = download
    }
    guard pending.fileName == fileName else {
      return .failure(
        RefetchFailure(
          "under this job's options its cache key names \(pending.fileName), not this file"))
    }
    let answer: Result<DownloadResponse, DownloadFailure>
    do {
      answer = .success(try await downloader.download(pending.request))
    } catch {
      answer = .failure(error)
    }
    let result = manager.finish(pending, answer)
    guard case .downloaded = result.outcome else { return .failure(Self.failure(result.outcome)) }
    let path = pending.namespacePath + "/" + fileName
    do throws(FileSystemError) {
      guard let stored = try FileSystem.attributes(atPath: path) else {
        return .failure(RefetchFailure("stored, then gone"))
      }
      return .success(stored.allocatedSize)
    } catch {
      return .failure(RefetchFailure("\(error)"))
    }
  }

  private static func failure(_ outcome: LoadOutcome) -> RefetchFailure {
    switch outcome {
    case .failed(let error, _): RefetchFailure(error.message.maskingURLPasswords)
    case .blacklisted: RefetchFailure("blacklisted")
    default: RefetchFailure("not downloaded (\(outcome))")
    }
  }
}

/// The URLs the state files of a namespace know for its files (issue 45): a sharded cache keeps
/// one state file per shard, and a file's newest record wins. A state file that cannot be read
/// is said and left out: its files' URLs are unknown.
final class StoredURLs: Sendable {
  private let stores: [StateStore]

  init(
    location: CacheLocation, leavingNoTrace: Bool,
    unreadable: (_ path: String, _ error: any Error) -> Void
  ) {
    var stores: [StateStore] = []
    do {
      for path in try StateStore.stateFiles(location: location) {
        do {
          if let store = try StateStore.openForReading(
            path: path, leavingNoTrace: leavingNoTrace)
          {
            stores.append(store)
          }
        } catch {
          unreadable(path, error)
        }
      }
    } catch {
      unreadable(location.stateDirectory, error)
    }
    self.stores = stores
  }

  func url(forFileName fileName: String) throws -> String? {
    var newest: StoredURL?
    for store in stores {
      guard let stored = try store.storedURL(forFileName: fileName) else { continue }
      if newest.map({ stored.storedAt > $0.storedAt }) ?? true { newest = stored }
    }
    return newest?.url
  }
}
