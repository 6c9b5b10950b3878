import Core
import Foundation
import HTTP
import Maintenance
import Pipeline
import Prefetcher
import State

extension JobRunner {
  /// The URLs `job`'s manifests list, or `nil` when that cannot be known without fetching
  /// (sitemaps, manifests by URL). A shard's total is its own share: the entries whose key
  /// hashes to it (and the bad lines, for shard 0, which alone reports them), as its `total`
  /// counts them. It reads every manifest: off the run's path, or once the run is over.
  static func urlsListed(by job: Job) -> Int? {
    guard let shard = job.shard else {
      return ManifestItems.lineCount(of: job.manifests).map { $0 + job.urls.count }
    }
    let items = job.manifestItems
    return ManifestItems.lineCount(of: job.manifests) { line in
      switch items.item(from: line) {
      case .success(let item): Prefetcher.belongs(item, to: shard)
      case .failure: shard.index == 0
      }
    }
  }

  /// Prefetches the job's manifests; returns the counts and the store failure that ended the
  /// prefetch early, if one did.
  func prefetch(
    into writer: ReportWriter, startedAt: Date, signals: SignalScope, warnings: RunWarnings
  ) async throws -> (
    counts: PrefetchCounts, runEndingFailure: ImageCacheError?, refusal: BlacklistRefusal?
  ) {
    // libcurl's set-up, begun with the run, goes on beside the blacklist's read. Awaited
    // before this returns or throws.
    async let libraryPrepared: Void = Downloader.prepareLibrary()
    // The state opens beside the first downloads, and is open before this returns or throws:
    // the lock is held until then.
    let state = RunState(
      location: job.location, shard: job.shard, job: job.name, startedAt: startedAt,
      timeToLive: job.prefetch.pipeline.blacklistTTL, stop: signals.stop)
    do {
      await libraryPrepared
      return try await prefetch(
        into: writer, state: state, signals: signals, warnings: warnings)
    } catch {
      _ = await state.opened()
      throw error
    }
  }

  /// ``prefetch(into:startedAt:signals:warnings:)`` with the run's `state` opening.
  private func prefetch(
    into writer: ReportWriter, state: RunState, signals: SignalScope, warnings: RunWarnings
  ) async throws -> (
    counts: PrefetchCounts, runEndingFailure: ImageCacheError?, refusal: BlacklistRefusal?
  ) {
    var items = job.manifestItems
    items.stop = signals.stop
    let progress = console.progress(total: { [job] in Self.urlsListed(by: job) })
    var recorder = EchoingPrefetchSink(sink: writer.prefetchRecorder, console: console)
    recorder.verbose = settings.verbose

    var http = job.prefetch.http
    if http.adapts { http.rememberedRefusals = state.refusals }
    let (counts, failure, stateWarnings, oldestFailure) = try await Downloader.withDownloader(
      configuration: http
    ) { downloader in
      let manager = try ImageManager(
        location: job.location, configuration: job.prefetch.pipeline,
        namespaces: StateNamespaces(location: job.location, state: state, shard: job.shard))
      defer { manager.close() }
      // Sitemaps and manifests named by URL come through the same transfer thread.
      var items = items
      items.downloader = downloader
      // Once the prefetch is over, nothing more is downloaded: the transfer thread closes its
      // connections and frees libcurl on its own processor while this one writes the state.
      // Told on the prefetch's own thread, before the task group winds down; the scope's end
      // waits for it.
      let counts = await Self.prefetch(
        StateGatedItems(base: items, state: state),
        with: Prefetcher(
          manager: manager, downloader: downloader, configuration: job.prefetch), signals: signals,
        progress: progress, recorder: recorder, state: state, warnings: warnings,
        whenOver: { downloader.beginShutdown() })
      // A state that could not be opened fails the run with its error, as when it failed
      // before the first request: the loads it cut short are no outcome. One whose opening a
      // signal ended (it waited for another connection's lock) leaves the run interrupted,
      // with nothing to write to the state: no download was stored without it.
      let opened: RunState.Opened
      do {
        opened = try await state.opened().get()
      } catch is RunState.OpeningInterrupted {
        let interrupted: (PrefetchCounts, ImageCacheError?, [String], Date?) = (
          counts, nil, [], nil
        )
        return interrupted
      }
      // A state that cannot be written now ends the run as failed, keeping every URL's
      // outcome for the report, instead of throwing them away with the error.
      var failure = manager.runEndingFailure
      // Oldest first: the first entry says how old the blacklist is.
      var oldestFailure: Date?
      do {
        try manager.flush()
        try manager.forEachBlacklisted { entry in
          oldestFailure = oldestFailure ?? entry.firstFailedAt
          writer.recordBlacklisted(entry.url)
        }
      } catch {
        failure = failure ?? .stateFailed(error)
      }
      let status: RunReport.Status =
        failure != nil ? .failed : signals.interrupted ? .interrupted : .completed
      do {
        if http.adapts { try opened.store.remember(downloader.refusals, at: Date()) }
        try opened.store.finishRun(
          id: opened.runID, at: Date(), status: status.rawValue,
          summary:
            "total \(counts.total), downloaded \(counts.downloaded), failed \(counts.failed)")
      } catch {
        failure = failure ?? .stateFailed(error)
      }
      return (counts, failure, manager.warnings, oldestFailure)
    }
    for warning in stateWarnings { warnings.add(.stateFile(warning)) }
    for warning in items.warnings { warnings.add(.ignoredOption(warning)) }
    for backoff in counts.hostBackoffs { warnings.add(.hostBackoff(backoff)) }
    if settings.verbose {
      for limit in counts.hostLimits { console.report(.hostLimitSettled(limit)) }
    }
    let refusal = BlacklistRefusal(
      counts: counts, oldestFailure: oldestFailure, location: job.location)
    // The summary line says it on the console; the report keeps it among its warnings.
    if let refusal { warnings.keep(.blacklistRefused(refusal)) }
    // A night's work not done, though nothing failed: said, and the page is amber. (A shard
    // may own none of a short list's URLs; a stopped run says so itself.)
    if counts.listedNothing && job.shard == nil && failure == nil && !signals.interrupted {
      warnings.add(.nothingListed(skipped: counts.skipped))
    }
    return (counts, failure, refusal)
  }

  /// What ends, or not, the prefetch's task group.
  private enum GroupEvent: Sendable {
    case prefetched(PrefetchCounts)
    case signalled
    case stateOpened(succeeded: Bool)
  }

  /// Prefetches until done, until a signal or until the state fails to open, each of which
  /// cancels the loads in flight (stores are atomic: nothing partial is left) and stops new
  /// ones. `whenOver` is called on the prefetch's task the moment it ends. The state's
  /// warnings are said once it is open.
  private static func prefetch(
    _ items: StateGatedItems<ManifestItems>, with prefetcher: Prefetcher, signals: SignalScope,
    progress: (any PrefetchProgress)?, recorder: EchoingPrefetchSink, state: RunState,
    warnings: RunWarnings, whenOver: @escaping @Sendable () -> Void
  ) async -> PrefetchCounts {
    await withTaskGroup(of: GroupEvent.self) { group in
      group.addTask {
        var recorder = recorder
        let counts = await prefetcher.run(
          items, stop: signals.stop, progress: progress, recorder: &recorder)
        whenOver()
        return .prefetched(counts)
      }
      group.addTask {
        await signals.waitForSignal()
        return .signalled
      }
      group.addTask {
        guard case .success(let opened) = await state.opened() else {
          return .stateOpened(succeeded: false)
        }
        for warning in opened.store.warnings { warnings.add(.stateFile(warning)) }
        if opened.abandoned > 0 { warnings.add(.abandonedRuns(count: opened.abandoned)) }
        return .stateOpened(succeeded: true)
      }
      var counts: PrefetchCounts?
      while let event = await group.next() {
        switch event {
        // The prefetch ended: stop waiting for a signal (the state's opening is waited for).
        case .prefetched(let finished):
          counts = finished
          group.cancelAll()
        // A signal came, or the run cannot go on without its state: cancel the prefetch.
        case .signalled, .stateOpened(succeeded: false): group.cancelAll()
        case .stateOpened(succeeded: true): break
        }
      }
      return counts ?? PrefetchCounts()
    }
  }

  /// A dry run's prefetch: what each URL of this shard would do, decided without a request,
  /// without setting an access time and without opening the state for writing. One line a URL
  /// (`download https://...`) goes to the console's output unless the report goes to stdout,
  /// which lists the same plan; bad lines are said as a run says them.
  func planPrefetch(into writer: ReportWriter, stop: StopFlag, warnings: RunWarnings)
    async throws -> PrefetchPlanCounts
  {
    // One downloader for the plan's sitemaps and manifest URLs (no image is requested),
    // stopped before the plan is returned.
    try await Downloader.withDownloader(configuration: job.prefetch.http) { documents in
      try await plan(into: writer, stop: stop, warnings: warnings, documents: documents)
    }
  }

  private func plan(
    into writer: ReportWriter, stop: StopFlag, warnings: RunWarnings, documents: Downloader
  ) async throws -> PrefetchPlanCounts {
    let manager = try ImageManager(
      location: job.location, configuration: job.prefetch.pipeline,
      namespaces: PlanningNamespaces(shard: job.shard), readOnly: true)
    defer { manager.close() }
    var items = job.manifestItems
    items.stop = stop
    items.downloader = documents
    var recorder = EchoingPrefetchSink(sink: writer.prefetchRecorder, console: console)
    recorder.echoesPlan = !settings.printsReport
    // The run's own loop and decisions: the plan cannot disagree with the run.
    let counts = await Prefetcher(
      manager: manager, downloader: documents, configuration: job.prefetch
    ).plan(items, stop: stop, recorder: &recorder)
    for warning in manager.warnings { warnings.add(.stateFile(warning)) }
    for warning in items.warnings { warnings.add(.ignoredOption(warning)) }
    return counts
  }
}

/// Says bad manifest lines and the first failures on the console as it streams them into the
/// report (the rest are in the report only: a console is not a log of a million URLs).
struct EchoingPrefetchSink: PrefetchRecorder, Sendable {
  var sink: PrefetchSink
  let console: any RunConsole
  var failuresSaid = 0
  /// The failures said on the console, and `verify`'s bad files, unless `--verbose`.
  static let failuresToSay = 20
  /// Say every failure, not only the first ``failuresToSay``.
  var verbose = false
  /// The failure names whose message was said in full: once each is enough, and the console
  /// shows failures by name only.
  var saidNames: Set<String> = []
  /// The failures whose message is said in full, the first time: their cause is usually the
  /// run's set-up, the same for many URLs, and the message says it (how to trust a certificate
  /// issuer; which proxy, or which host, could not be found or reached).
  static let saidInFull: Set<String> = [
    NetworkFailure.serverCertificateUntrusted.rawValue, NetworkFailure.cannotConnectToHost.rawValue,
    NetworkFailure.cannotFindHost.rawValue,
  ]

  init(sink: PrefetchSink, console: any RunConsole) {
    self.sink = sink
    self.console = console
  }

  mutating func recordDownload(_ download: DownloadReport) { sink.recordDownload(download) }

  mutating func recordVariant(_ variant: VariantReport) {
    if verbose, let skipped = variant.skipped {
      console.report(.variantSkipped(url: variant.url, reason: skipped))
    }
    sink.recordVariant(variant)
  }

  mutating func recordFailure(_ failure: FailureReport) {
    if verbose || failuresSaid < Self.failuresToSay {
      console.report(.urlFailed(failure))
    } else if failuresSaid == Self.failuresToSay {
      console.report(.furtherFailuresInReportOnly)
    }
    if Self.saidInFull.contains(failure.name), saidNames.insert(failure.name).inserted {
      console.report(.failureCause(message: failure.message))
    }
    failuresSaid += 1
    sink.recordFailure(failure)
  }

  mutating func recordLineError(_ message: String) {
    console.report(.lineSkipped(message: message))
    sink.recordLineError(message)
  }

  mutating func recordInputFailure(_ message: String) {
    console.report(.inputFailed(message: message))
    sink.recordInputFailure(message)
  }

  /// Says each URL of a plan on the console's output (unless the report goes there).
  var echoesPlan = false

  mutating func recordPlanned(_ planned: PlannedURL) {
    sink.recordPlanned(planned)
    if echoesPlan { console.output(.planned(planned)) }
  }
}
