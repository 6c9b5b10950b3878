import Core
import Foundation
import HTTP
import Pipeline
import Synchronization

/// One URL to prefetch, with its options and context resolved.
public struct PrefetchItem: Sendable {
  public var url: String
  public var options: ImageOptions
  public var context: ImageContext
  /// `file:line`, for reports.
  public var source: String?
  /// `url` parsed, once: the manager's checks and the cache's file name reuse it.
  let parsedURL: URL?
  /// The origin (scheme, host and port, as libcurl and NSURLSession key their connections)
  /// the per-host limit counts against, parsed once: the scheduler asks often.
  let origin: Origin?
  let priority: DownloadPriority

  /// The cache key the manager stores this URL under, or `nil` for a URL that does not parse.
  public var cacheKey: String? {
    URL(string: url.trimmingWhitespace(keepingLineBreaks: true)).map {
      context.cacheKeyFilter.cacheKey(for: $0)
    }
  }

  public init(
    url: String, options: ImageOptions = ImageOptions(), context: ImageContext = ImageContext(),
    source: String? = nil
  ) {
    self.url = url
    self.options = options
    self.context = context
    self.source = source
    parsedURL = URL(string: url)
    origin = parsedURL.map(Origin.init)
    priority = DownloadPriority(options)
  }
}

/// Receives progress as the prefetcher goes.
public protocol PrefetchProgress: Sendable {
  func update(_ counts: PrefetchCounts, elapsed: TimeInterval)
  func finish(_ counts: PrefetchCounts, elapsed: TimeInterval)
}

/// SD's prefetcher, bounded: at most `concurrency` loads at once and `perHostConcurrency` per
/// host, reading items as it needs them (so memory stays bounded whatever the manifest size),
/// starting `highPriority` items before others and `lowPriority` ones after, among the items
/// read ahead, as SD's operation queue orders only the operations it holds. Transient failures
/// are retried with exponential backoff and jitter, honouring `Retry-After`.
public struct Prefetcher: Sendable {
  /// SD's pipeline: what each item needs, and what becomes of its download.
  public let manager: ImageManager
  /// Where the downloads go: the only per-host limits.
  public let downloader: Downloader
  /// Attempts after the first for a transient failure.
  public let retries: Int
  /// Take only this shard's items; `nil`: every item.
  public let shard: Shard?
  /// Told each item's outcome as it is recorded, hits included (a report counts those only):
  /// for the package's tests that compare a run with its plan line by line.
  package var observesOutcome: (@Sendable (PrefetchItem, LoadOutcome) -> Void)?

  /// - Parameters:
  ///   - manager: made with the prefetch's ``PrefetchConfiguration/pipeline`` settings.
  ///   - downloader: made with its ``PrefetchConfiguration/http`` settings.
  public init(
    manager: ImageManager, downloader: Downloader,
    retries: Int = PrefetchConfiguration().retries, shard: Shard? = nil
  ) {
    self.manager = manager
    self.downloader = downloader
    self.retries = retries
    self.shard = shard
  }

  /// A prefetcher of `configuration`'s retries and shard.
  public init(manager: ImageManager, downloader: Downloader, configuration: PrefetchConfiguration) {
    self.init(
      manager: manager, downloader: downloader, retries: configuration.retries,
      shard: configuration.shard)
  }

  /// A prefetcher of `configuration` into `location`, with a manager of its own, on
  /// `downloader` (made with `configuration.http`).
  public init(
    location: CacheLocation, configuration: PrefetchConfiguration,
    namespaces: any NamespaceProvider, downloader: Downloader
  ) throws {
    self.init(
      manager: try ImageManager(
        location: location, configuration: configuration.pipeline, namespaces: namespaces),
      downloader: downloader, configuration: configuration)
  }

  /// Whether ``run(_:stop:progress:recorder:)`` plans instead of fetching: its manager is a
  /// planning one (``ImageManager/readOnly``). The same loop reads the items, keeps this
  /// shard's, counts the bad lines and decides each load (``ImageManager/decide(_:options:context:parsed:)``):
  /// a dry run's plan is a run's decisions, not a copy of them.
  public var plans: Bool { manager.readOnly }

  /// What each item would do, in manifest order, with the plan's counts: `--dry-run`'s
  /// prefetch. The manager must be a planning one.
  public func plan<Items: Sequence & Sendable>(_ items: Items, stop: StopFlag = StopFlag()) async
    -> PrefetchPlan
  where Items.Element == Result<PrefetchItem, ConfigurationError> {
    var plan = PrefetchPlan()
    plan.counts = await self.plan(items, stop: stop, recorder: &plan)
    return plan
  }

  /// ``plan(_:stop:)``, handing each planned URL, bad line and failed input to `recorder` as
  /// it comes, and returning the counts.
  public func plan<Items: Sequence & Sendable, Recorder: PrefetchRecorder>(
    _ items: Items, stop: StopFlag = StopFlag(), recorder: inout Recorder
  ) async -> PrefetchPlanCounts where Items.Element == Result<PrefetchItem, ConfigurationError> {
    precondition(plans, "a plan is made by a planning manager")
    var tally = PlanTally(base: recorder)
    let counts = await run(items, stop: stop, recorder: &tally)
    recorder = tally.base
    tally.counts.total = counts.total
    tally.counts.skipped = counts.skipped
    tally.counts.inputsFailed = counts.inputsFailed
    return tally.counts
  }

  /// Prefetches every item and returns the whole report, in memory.
  public func run<Items: Sequence & Sendable>(
    _ items: Items, stop: StopFlag = StopFlag(), progress: (any PrefetchProgress)? = nil
  ) async -> PrefetchReport where Items.Element == Result<PrefetchItem, ConfigurationError> {
    var report = PrefetchReport()
    report.counts = await run(items, stop: stop, progress: progress, recorder: &report)
    return report
  }

  /// Prefetches every item, handing each download, failure and bad manifest line to
  /// `recorder` as it happens, and returns the counts. Errors in the input (bad manifest lines)
  /// are counted as skipped; a whole input that failed is counted in `inputsFailed`. Stops
  /// starting new items once `stop` is set; the loads in flight finish (or are cancelled with
  /// the task).
  ///
  /// The items are read on a thread of their own (``ItemFeed``), never by this task: a
  /// sitemap fetched or a pipe waited on holds up no download. The window is filled whole
  /// before items start (priorities order what it holds), unless the input waits on its
  /// source: then what has come starts. The reading thread has ended when this returns.
  ///
  /// With a planning manager (``plans``), each item is decided as it is read and recorded as
  /// planned (``PrefetchRecorder/recordPlanned(_:)``): nothing is requested, stored or
  /// touched.
  public func run<Items: Sequence & Sendable, Recorder: PrefetchRecorder>(
    _ items: Items, stop: StopFlag = StopFlag(), progress: (any PrefetchProgress)? = nil,
    recorder: inout Recorder
  ) async -> PrefetchCounts where Items.Element == Result<PrefetchItem, ConfigurationError> {
    let clock = RunClock()
    var report = PrefetchCounts()
    var exhausted = false
    let scheduler = PrefetchScheduler(
      manager: manager, downloader: downloader, stop: stop, retries: retries)
    // Read ahead: a window's worth, and never under 1,024 items. Four windows (4,096 items at
    // the default concurrency of 256) held 3 MiB more at the peak of a run of hits, and read
    // no faster.
    let feed = ItemFeed(
      items, capacity: max(scheduler.windowSize, 1024), stop: stop, wake: scheduler.itemsArrived)
    var taken: [[ItemFeed.Item]] = []

    func recordFinished() {
      for finished in scheduler.takeFinished() {
        record(finished, into: &report, recorder: &recorder)
        progress?.update(report, elapsed: clock.elapsed)
      }
    }

    while true {
      let stopping = scheduler.isStopping
      // Whether the feed has nothing buffered now, and whether the window waits to be filled.
      var feedWaits = false
      var filling = false
      while !exhausted && !stopping && scheduler.wantsItems {
        taken.removeAll(keepingCapacity: true)
        let status = feed.take(upTo: scheduler.room, into: &taken)
        for batch in taken {
          for next in batch {
            accept(next, scheduler: scheduler, into: &report, recorder: &recorder)
          }
        }
        switch status {
        case .more: continue
        case .ended: exhausted = true
        case .waiting(let sourceWaits):
          feedWaits = true
          filling = !sourceWaits && scheduler.wantsItems
        }
        break
      }
      if stopping { scheduler.dropWindow() }
      scheduler.holdsWindow = filling
      if !filling { scheduler.startWaiting() }
      recordFinished()
      // Hits end inline: read more before waiting, while there is room.
      if !stopping && !exhausted && !feedWaits && scheduler.startsMoreAtOnce { continue }
      guard !scheduler.isIdle || (feedWaits && !stopping) else { break }
      await scheduler.waitAndHandle()
      recordFinished()
    }
    await feed.close()
    report.durationSeconds = clock.elapsed
    report.hostBackoffs = downloader.hostBackoffs
    report.hostLimits = downloader.hostLimits
    progress?.finish(report, elapsed: report.durationSeconds)
    return report
  }

  /// Takes one item read: into the window, or counted (another shard's, a bad line, a whole
  /// input that failed).
  private func accept<Recorder: PrefetchRecorder>(
    _ next: ItemFeed.Item, scheduler: PrefetchScheduler, into report: inout PrefetchCounts,
    recorder: inout Recorder
  ) {
    switch next {
    case .success(let item):
      if let shard, !Self.belongs(item, to: shard) {
        report.otherShards += 1
      } else {
        scheduler.enqueue(item)
      }
    case .failure(let error) where error.wholeInput:
      // Every shard lost the input's URLs: each says so (a merge counts it once).
      report.inputsFailed += 1
      if error.notAManifest { report.inputsNotManifests += 1 }
      recorder.recordInputFailure(error.description)
    case .failure(let error):
      // Every shard reads every line: shard 0 alone reports a bad one.
      if let shard, shard.index != 0 {
        report.otherShards += 1
        return
      }
      report.total += 1
      report.skipped += 1
      recorder.recordLineError(error.description)
    }
  }

  /// Loads one URL once (no retries), through the prefetch's own path: a one-item run.
  /// Separate calls are not coalesced with each other; many URLs go through
  /// ``run(_:stop:progress:)``.
  public func load(_ rawURL: String, options: ImageOptions, context: ImageContext) async
    -> LoadResult
  {
    await load(PrefetchItem(url: rawURL, options: options, context: context), retries: 0)
  }

  /// Loads one item as ``run(_:stop:progress:recorder:)`` loads each, with `retries` attempts
  /// after the first for a transient failure.
  func load(_ item: PrefetchItem, retries: Int) async -> LoadResult {
    let scheduler = PrefetchScheduler(
      manager: manager, downloader: downloader, stop: StopFlag(), retries: retries)
    scheduler.enqueue(item)
    scheduler.startWaiting()
    while !scheduler.isIdle { await scheduler.waitAndHandle() }
    // Nothing ended when the download never started: the task was cancelled, or an earlier
    // load's store failure ended the run.
    return scheduler.takeFinished().first?.result
      ?? LoadResult(outcome: .failed(manager.runEndingFailure ?? .cancelled, blacklisted: false))
  }

  /// `seconds` for people: "2 s", "0.5 s", "315360000 s".
  static func seconds(_ seconds: TimeInterval) -> String {
    guard seconds.isFinite else { return "\(seconds) s" }
    return
      (seconds.rounded() == seconds && abs(seconds) < 1e15
      ? String(Int64(seconds)) : String(format: "%.1f", seconds)) + " s"
  }

  /// Whether `item` is `shard`'s: by its cache key; a URL that does not parse (which fails
  /// at once) is shard 0's, so that one shard reports it.
  public static func belongs(_ item: PrefetchItem, to shard: Shard) -> Bool {
    guard let key = item.cacheKey else { return shard.index == 0 }
    return shard.owns(cacheKey: key)
  }

  private func record<Recorder: PrefetchRecorder>(
    _ finished: PrefetchScheduler.Finished, into report: inout PrefetchCounts,
    recorder: inout Recorder
  ) {
    report.total += 1
    if let planned = finished.planned {
      return recorder.recordPlanned(
        PlannedURL(
          url: finished.item.url, action: planned.action, reason: planned.reason,
          source: finished.item.source))
    }
    observesOutcome?(finished.item, finished.result.outcome)
    if let variant = finished.result.variant {
      if variant.skipped == nil { report.derived += 1 }
      recorder.recordVariant(variant)
    }
    switch finished.result.outcome {
    case .memoryHit: report.memoryHits += 1
    case .diskHit: report.diskHits += 1
    case .downloaded(let bytes, let info):
      report.downloaded += 1
      report.bytesDownloaded += UInt64(bytes)
      recorder.recordDownload(DownloadReport(url: finished.item.url, bytes: bytes, info: info))
    case .notModified: report.notModified += 1
    case .cacheMiss: report.skipped += 1
    case .blacklisted: report.blacklisted += 1
    case .failed(.cancelled, _): report.skipped += 1
    case .failed(let error, let blacklisted):
      report.failed += 1
      recorder.recordFailure(
        FailureReport(
          url: finished.item.url, code: error.code, name: error.name, httpStatus: error.httpStatus,
          message: error.message + (finished.result.note.map { "; " + $0 } ?? ""),
          attempts: finished.attempts, blacklisted: blacklisted,
          source: finished.item.source))
    }
  }
}

/// Counts a plan's actions on their way to another recorder.
private struct PlanTally<Base: PrefetchRecorder>: PrefetchRecorder {
  var base: Base
  var counts = PrefetchPlanCounts()

  mutating func recordPlanned(_ planned: PlannedURL) {
    counts.count(planned.action)
    base.recordPlanned(planned)
  }

  mutating func recordDownload(_ download: DownloadReport) { base.recordDownload(download) }
  mutating func recordVariant(_ variant: VariantReport) { base.recordVariant(variant) }
  mutating func recordFailure(_ failure: FailureReport) { base.recordFailure(failure) }
  mutating func recordLineError(_ message: String) { base.recordLineError(message) }
  mutating func recordInputFailure(_ message: String) { base.recordInputFailure(message) }
}
