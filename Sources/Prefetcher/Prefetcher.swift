import Core
import Foundation
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
  /// The host the per-host limit counts against (parsed once: the scheduler asks often).
  let host: String
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
    host = parsedURL?.host ?? ""
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
  /// are counted as skipped; a whole input that failed is counted in `inputsFailed`. Stops starting new items once `stop` is set; the loads in flight
  /// finish (or are cancelled with the task).
  public func run<Items: Sequence, Recorder: PrefetchRecorder>(
    _ items: Items, stop: StopFlag = StopFlag(), progress: (any PrefetchProgress)? = nil,
    recorder: inout Recorder
  ) async -> PrefetchCounts where Items.Element == Result<PrefetchItem, ConfigurationError> {
    let started = Date()
    var report = PrefetchCounts()
    var iterator = items.makeIterator()
    var exhausted = false
    // The items read ahead.
    var window = StartQueue<PrefetchItem>()
    let windowSize = max(configuration.concurrency * 4, 64)
    // Items handed to the downloader and not over yet, in all and per host. The downloader keeps
    // the limits (`concurrency`, and per host `perHostConcurrency` or, over HTTP/2,
    // `perHostStreams`) on what is under way; as many again wait in it, so that a download that
    // ends is followed at once, on the transfer thread, by the next one, without waiting for
    // this task to hear of it.
    let queuedLimit = configuration.concurrency * 2
    let queuedPerHostLimit = configuration.mostPerHost * 2
    var perHost: [String: Int] = [:]
    var running = 0
    // Downloads in flight (or waiting to retry), by slot number.
    var slots: [Int: Slot] = [:]
    var nextSlot = 0
    // The slot downloading each coalescing key: a duplicate waits for it instead.
    var owners: [String: Int] = [:]
    let queue = DownloadQueue()
    var cancelledInFlight = false
    let downloader = manager.downloader
    // A download waiting in the downloader starts only if the run has not stopped since.
    let startsIf: @Sendable () -> Bool = { [stop, manager, queue] in
      !(stop.isStopped || manager.runEndingFailure != nil || queue.isCancelled)
    }

    func record(_ finished: Finished) {
      self.record(finished, into: &report, recorder: &recorder)
      progress?.update(report, elapsed: Date().timeIntervalSince(started))
    }

    // Gives back the place `item` took in the limits.
    func release(_ item: PrefetchItem) {
      running -= 1
      perHost[item.host, default: 1] -= 1
    }

    // Takes slot `id` out of the table, the coalescing keys and the limits.
    func remove(_ id: Int) -> Slot? {
      guard let slot = slots.removeValue(forKey: id) else { return nil }
      if let key = slot.pending?.coalescingKey, owners[key] == id { owners[key] = nil }
      if !slot.downloadOver { release(slot.item) }
      return slot
    }

    // Ends slot `id` with `result`, and the duplicates that waited for it.
    func end(_ id: Int, _ result: LoadResult) {
      guard let slot = remove(id) else { return }
      record(Finished(item: slot.item, result: result, attempts: slot.attempts))
      // A duplicate finds the downloaded image in place; a failure is shared.
      var shared = result
      if case .downloaded = result.outcome { shared = LoadResult(outcome: .diskHit) }
      for duplicate in slot.duplicates {
        record(Finished(item: duplicate, result: shared, attempts: 1))
      }
    }

    // Loads `item` up to the network: a hit or a refusal ends at once, without a task; a
    // download is started on the transfer thread and ends in `queue`.
    func begin(_ item: PrefetchItem, slot id: Int?, attempts: Int) {
      let prepared = manager.prepare(
        item.url, options: item.options, context: item.context, parsed: item.parsedURL)
      switch prepared {
      case .finished(let result):
        if let id {
          slots[id]?.attempts = attempts
          end(id, result)
        } else {
          release(item)
          record(Finished(item: item, result: result, attempts: attempts))
        }
      case .download(let pending):
        if id == nil, let owner = owners[pending.coalescingKey] {
          // The same image is on its way: this one waits for it, without a slot of its own.
          slots[owner]?.duplicates.append(item)
          release(item)
          return
        }
        let slot = id ?? nextSlot
        if id == nil {
          nextSlot += 1
          slots[slot] = Slot(item: item)
          owners[pending.coalescingKey] = slot
        }
        slots[slot]?.pending = pending
        slots[slot]?.attempts = attempts
        slots[slot]?.handle = downloader.start(pending.request, startsIf: startsIf) { answer in
          queue.push(.answered(slot, answer))
        }
      }
    }

    // Ends slot `id`, whose attempt ended unsent (the run stopped while it waited in the
    // downloader, or it was cancelled there): as if it had not been started, unless an earlier
    // attempt failed, which is then its result.
    func drop(_ id: Int) {
      guard let slot = slots[id] else { return }
      if let last = slot.last {
        slot.attempts -= 1
        return end(id, last)
      }
      _ = remove(id)
    }

    func handle(_ event: DownloadQueue.Event) {
      switch event {
      case .answered(let id, let answer):
        guard let slot = slots[id], let pending = slot.pending else { return }
        if case .failure(let failure) = answer, failure.notStarted { return drop(id) }
        let result = manager.finish(pending, answer)
        slots[id]?.handle = nil
        guard case .failed(let error, _) = result.outcome, error.isTransient,
          !slot.downloadOver, slot.attempts <= configuration.retries, !stop.isStopped,
          !queue.isCancelled
        else { return end(id, result) }
        let backoff = min(
          configuration.maxRetryDelay,
          configuration.retryBaseDelay * pow(2, Double(slot.attempts - 1))
            * Double.random(in: 0.5...1.5))
        let asked = result.retryAfter ?? 0
        // A server that asks for a longer wait than the cap is not asked again sooner than it
        // said; and no attempt starts after the URL's deadline (SPEC section 5).
        if asked > configuration.maxRetryDelay {
          var result = result
          result.note =
            "not retried: the server asked to wait \(Self.seconds(asked)) (Retry-After), over "
            + "the \(Self.seconds(configuration.maxRetryDelay)) limit on a wait"
          return end(id, result)
        }
        let wait = max(backoff, asked)
        if Date().addingTimeInterval(wait) > slot.started.addingTimeInterval(configuration.deadline)
        {
          var result = result
          result.note =
            "not retried: waiting \(Self.seconds(wait)) would pass the URL's "
            + "\(Self.seconds(configuration.deadline)) deadline"
          return end(id, result)
        }
        slots[id]?.last = result
        slots[id]?.backoff = Task {
          // Cancelled (a signal): back at once, and the last failure is the result.
          try? await Task.sleep(nanoseconds: UInt64(wait * 1e9))
          queue.push(.retry(id))
        }
      case .retry(let id):
        guard let slot = slots[id] else { return }
        slots[id]?.backoff = nil
        if queue.isCancelled, let last = slot.last { return end(id, last) }
        begin(slot.item, slot: id, attempts: slot.attempts + 1)
      }
    }

    // A signal, or a disk that can take no more (SPEC section 2, step 7): start nothing new.
    func isStopping() -> Bool { !startsIf() }

    // Starts items of the window while the limits allow.
    func startWaiting() {
      while running < queuedLimit,
        let item = window.takeFirst(where: { perHost[$0.host, default: 0] < queuedPerHostLimit })
      {
        perHost[item.host, default: 0] += 1
        running += 1
        begin(item, slot: nil, attempts: 1)
      }
    }

    while true {
      let stopping = isStopping()
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
            window.append(item, priority: item.priority)
          }
        case .failure(let error) where error.wholeInput:
          // Every shard lost the input's URLs: each says so (a merge counts it once).
          report.inputsFailed += 1
          recorder.recordInputFailure(error.description)
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
      if stopping { _ = window.removeAll() }
      startWaiting()
      // Hits end inline: read more before waiting, while there is room.
      if !stopping && !exhausted && window.isEmpty && running < queuedLimit {
        continue
      }
      guard running > 0 else { break }
      let events = await queue.next()
      if queue.isCancelled && !cancelledInFlight {
        // A signal: what is in flight is cancelled (stores are atomic: nothing partial is
        // left), and backoffs end at once.
        cancelledInFlight = true
        for slot in slots.values {
          if let handle = slot.handle { downloader.cancel(handle) }
          slot.backoff?.cancel()
        }
      }
      // A download that succeeded is over: its place in the limits goes to the next item before
      // the image is checked and stored, as SD's downloader ends its operation before the
      // manager stores the image. (A failure keeps its place: it may be retried.)
      for case .answered(let id, .success) in events {
        guard let slot = slots[id], !slot.downloadOver else { continue }
        slot.downloadOver = true
        release(slot.item)
      }
      if !isStopping() { startWaiting() }
      for event in events {
        handle(event)
        // The slot is taken again at once, not after the whole batch: the transfer thread
        // keeps its connections busy while the rest of the batch is validated and stored.
        if !isStopping() { startWaiting() }
      }
    }
    report.durationSeconds = Date().timeIntervalSince(started)
    report.hostBackoffs = downloader.hostBackoffs
    progress?.finish(report, elapsed: report.durationSeconds)
    return report
  }

  /// `seconds` for people: "2 s", "0.5 s", "315360000 s".
  static func seconds(_ seconds: TimeInterval) -> String {
    guard seconds.isFinite else { return "\(seconds) s" }
    return
      (seconds.rounded() == seconds && abs(seconds) < 1e15
      ? String(Int64(seconds)) : String(format: "%.1f", seconds)) + " s"
  }

  /// A download the run waits for: its item, the load to finish, its attempts, and the
  /// duplicates of the same key that wait for it. A class, owned by the run's table of slots
  /// alone: reading a field through the table then costs one reference, where a struct was
  /// copied whole (every string and reference in it retained, then released) at each read.
  private final class Slot {
    var item: PrefetchItem
    /// When the first attempt began: every attempt and wait falls within the deadline.
    let started = Date()
    var pending: ImageManager.PendingDownload?
    var attempts = 1
    var handle: Downloader.Handle?
    /// The failure of the last attempt, while waiting to retry.
    var last: LoadResult?
    var backoff: Task<Void, Never>?
    var duplicates: [PrefetchItem] = []
    /// The download succeeded and gave back its place in the limits; the image is yet to be
    /// checked and stored.
    var downloadOver = false

    init(item: PrefetchItem) { self.item = item }
  }

  /// Whether `item` is `shard`'s: by its cache key; a URL that does not parse (which fails
  /// at once) is shard 0's, so that one shard reports it.
  public static func belongs(_ item: PrefetchItem, to shard: Shard) -> Bool {
    guard let key = item.cacheKey else { return shard.index == 0 }
    return shard.owns(cacheKey: key)
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
          message: error.message + (finished.result.note.map { "; " + $0 } ?? ""),
          attempts: finished.attempts, blacklisted: blacklisted,
          source: finished.item.source))
    }
  }
}
