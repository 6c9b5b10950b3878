import Core
import DequeModule
import Foundation
import Synchronization

/// One URL to prefetch, with its options and context resolved.
public struct PrefetchItem: Sendable {
  public var url: String
  public var options: ImageOptions
  public var context: ImageContext
  /// `file:line`, for reports.
  public var source: String?
  /// The host the per-host limit counts against (parsed once: the scheduler asks often).
  let host: String
  /// 0 for `highPriority`, 2 for `lowPriority`, 1 otherwise.
  let priority: Int

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
    host = URL(string: url)?.host ?? ""
    priority = options.contains(.highPriority) ? 0 : options.contains(.lowPriority) ? 2 : 1
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
  public let manager: ImageManager
  /// The manager's configuration: one value for the whole pipeline.
  public var configuration: PrefetchConfiguration { manager.configuration }

  public init(manager: ImageManager) {
    self.manager = manager
  }

  private struct Finished: Sendable {
    var item: PrefetchItem
    var result: LoadResult
    var attempts: Int
  }

  /// Prefetches every item and returns the whole report, in memory.
  public func run<Items: Sequence>(
    _ items: Items, stop: StopFlag = StopFlag(), progress: (any PrefetchProgress)? = nil
  ) async -> PrefetchReport where Items.Element == Result<PrefetchItem, ConfigurationError> {
    var report = PrefetchReport()
    report.counts = await run(items, stop: stop, progress: progress, recorder: &report)
    return report
  }

  /// Prefetches every item, handing each download, failure and bad manifest line to
  /// `recorder` as it happens, and returns the counts. Errors in the input (bad manifest lines)
  /// are counted as skipped. Stops starting new items once `stop` is set; the loads in flight
  /// finish (or are cancelled with the task).
  public func run<Items: Sequence, Recorder: PrefetchRecorder>(
    _ items: Items, stop: StopFlag = StopFlag(), progress: (any PrefetchProgress)? = nil,
    recorder: inout Recorder
  ) async -> PrefetchCounts where Items.Element == Result<PrefetchItem, ConfigurationError> {
    let started = Date()
    var report = PrefetchCounts()
    var iterator = items.makeIterator()
    var exhausted = false
    var window = Window()
    let windowSize = max(configuration.concurrency * 4, 64)
    var perHost: [String: Int] = [:]
    var running = 0

    await withTaskGroup(of: Finished.self) { group in
      while true {
        // A signal, or a disk that can take no more (SPEC section 2, step 7): start nothing new.
        let stopping = stop.isStopped || manager.runEndingFailure != nil
        while !exhausted && !stopping && window.count < windowSize {
          guard let next = iterator.next() else {
            exhausted = true
            break
          }
          switch next {
          case .success(let item):
            if let shard = configuration.shard, !Self.belongs(item, to: shard) {
              report.otherShards += 1
            } else {
              window.add(item)
            }
          case .failure(let error):
            // Every shard reads every line: shard 0 alone reports a bad one.
            if let shard = configuration.shard, shard.index != 0 {
              report.otherShards += 1
              continue
            }
            report.total += 1
            report.skipped += 1
            recorder.recordLineError(error.description)
          }
        }
        if stopping { window.removeAll() }
        if running < configuration.concurrency,
          let item = window.takeNext(where: {
            perHost[$0, default: 0] < configuration.perHostConcurrency
          })
        {
          perHost[item.host, default: 0] += 1
          running += 1
          group.addTask { await self.load(item, stop: stop) }
          continue
        }
        guard running > 0, let finished = await group.next() else { break }
        running -= 1
        perHost[finished.item.host, default: 1] -= 1
        record(finished, into: &report, recorder: &recorder)
        progress?.update(report, elapsed: Date().timeIntervalSince(started))
      }
    }
    report.durationSeconds = Date().timeIntervalSince(started)
    progress?.finish(report, elapsed: report.durationSeconds)
    return report
  }

  /// Whether `item` is `shard`'s: by its cache key; a URL that does not parse (which fails
  /// at once) is shard 0's, so that one shard reports it.
  static func belongs(_ item: PrefetchItem, to shard: Shard) -> Bool {
    guard let key = item.cacheKey else { return shard.index == 0 }
    return shard.owns(cacheKey: key)
  }

  /// The items read ahead, one queue per priority.
  struct Window {
    private var queues: [Deque<PrefetchItem>] = [[], [], []]

    var count: Int { queues.reduce(0) { $0 + $1.count } }

    mutating func add(_ item: PrefetchItem) { queues[item.priority].append(item) }

    mutating func removeAll() { queues = [[], [], []] }

    /// The first item of the best priority whose host has room (usually the head of a queue).
    mutating func takeNext(where hostHasRoom: (String) -> Bool) -> PrefetchItem? {
      for priority in queues.indices {
        if let index = queues[priority].firstIndex(where: { hostHasRoom($0.host) }) {
          return queues[priority].remove(at: index)
        }
      }
      return nil
    }
  }

  private func load(_ item: PrefetchItem, stop: StopFlag) async -> Finished {
    var attempts = 0
    while true {
      attempts += 1
      let result = await manager.load(item.url, options: item.options, context: item.context)
      guard case .failed(let error, _) = result.outcome, error.isTransient,
        attempts <= configuration.retries, !stop.isStopped
      else { return Finished(item: item, result: result, attempts: attempts) }
      let backoff =
        configuration.retryBaseDelay * pow(2, Double(attempts - 1)) * Double.random(in: 0.5...1.5)
      let wait = min(configuration.maxRetryDelay, max(backoff, result.retryAfter ?? 0))
      do {
        try await Task.sleep(nanoseconds: UInt64(wait * 1e9))
      } catch {
        // Cancelled while waiting to retry: the last attempt's failure is the result.
        return Finished(item: item, result: result, attempts: attempts)
      }
    }
  }

  private func record<Recorder: PrefetchRecorder>(
    _ finished: Finished, into report: inout PrefetchCounts, recorder: inout Recorder
  ) {
    report.total += 1
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
          message: error.message, attempts: finished.attempts, blacklisted: blacklisted,
          source: finished.item.source))
    }
  }
}
