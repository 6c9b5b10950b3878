import Core
import Foundation
import HTTP
import Pipeline

/// The prefetch loop's state: the items read ahead (the window), the loads handed to the
/// downloader (their slots, in all and per host), the table of loads in flight by ``LoadKey``
/// (the pipeline's only coalescer) and the retries waiting out their back-off, as deadlines.
///
/// It never blocks: hits and refusals end inline, downloads start on the transfer thread and
/// come back through a ``DownloadQueue``, and ``waitAndHandle()`` is the loop's one wait, for the
/// next finished download, the earliest retry or items from the ``ItemFeed``, whichever comes
/// first. Owned by one task (the
/// prefetcher's, or one ``ImageManager/load(_:options:context:)``), never shared.
final class PrefetchScheduler {
  /// A load that ended, for the caller to record: its item, its result, its attempts.
  struct Finished {
    var item: PrefetchItem
    var result: LoadResult
    var attempts: Int
    /// What a planning prefetch would do with the item, in place of a result.
    var planned: LoadDecision.Planned?
  }

  private let manager: ImageManager
  private let downloader: Downloader
  private let configuration: DownloaderConfiguration
  /// Attempts after the first for a transient failure.
  private let retries: Int
  private let stop: StopFlag
  private let queue = DownloadQueue()
  /// A download waiting in the downloader starts only if the run has not stopped since.
  private let startsIf: @Sendable () -> Bool

  /// Each item is decided and planned as it comes, in manifest order, and none is carried out:
  /// the manager is a planning one.
  private let planning: Bool
  /// The items read ahead.
  private var window = StartQueue<PrefetchItem>()
  let windowSize: Int
  // Items handed to the downloader and not over yet, in all and per host. The downloader keeps
  // the limits (`concurrency`, and per host `perHostConcurrency` or, over HTTP/2,
  // `perHostStreams`) on what is under way; as many again wait in it, so that a download that
  // ends is followed at once, on the transfer thread, by the next one, without waiting for
  // this task to hear of it.
  private let queuedLimit: Int
  private let queuedPerHostLimit: Int
  private var perHost: [Origin?: Int] = [:]
  private var running = 0
  /// Downloads in flight (or waiting to retry), by slot number.
  private var slots: [Int: Slot] = [:]
  private var nextSlot = 0
  /// The slot downloading each load key: a duplicate waits for it instead.
  private var owners: [LoadKey: Int] = [:]
  /// The slots waiting out a back-off, by when they may try again (uptime nanoseconds),
  /// earliest first.
  private var retryDeadlines: [(deadline: UInt64, slot: Int)] = []
  private var cancelledInFlight = false
  /// The loads that ended since the caller last took them.
  private var finished: [Finished] = []

  init(manager: ImageManager, downloader: Downloader, stop: StopFlag, retries: Int) {
    planning = manager.readOnly
    self.manager = manager
    self.stop = stop
    self.retries = retries
    self.downloader = downloader
    configuration = downloader.configuration
    windowSize = max(configuration.concurrency * 4, 64)
    queuedLimit = configuration.concurrency * 2
    queuedPerHostLimit = downloader.mostPerHost * 2
    startsIf = { [stop, manager, queue] in
      !(stop.isStopped || manager.runEndingFailure != nil || queue.isCancelled)
    }
  }

  /// A signal, or a disk that can take no more (SPEC section 2, step 7): start nothing new.
  var isStopping: Bool { !startsIf() }

  /// Whether the window takes more items.
  var wantsItems: Bool { window.count < windowSize }

  /// How many more items the window takes.
  var room: Int { max(0, windowSize - window.count) }

  /// While set, ``waitAndHandle()`` starts nothing from the window: the loop is filling it,
  /// so that priorities order a whole window, as when it was read in one go.
  var holdsWindow = false

  /// Wakes ``waitAndHandle()``: items arrived. Called on the item feed's thread.
  var itemsArrived: @Sendable () -> Void { { [queue] in queue.push(.itemsArrived) } }

  /// Whether the window is empty and there is room to start more: hits end inline, so the
  /// caller reads more before waiting.
  var startsMoreAtOnce: Bool { window.isEmpty && running < queuedLimit }

  /// Whether no load is in flight nor waiting to retry.
  var isIdle: Bool { running == 0 }

  func enqueue(_ item: PrefetchItem) {
    guard planning else { return window.append(item, priority: item.priority) }
    let decision = manager.decide(
      item.url, options: item.options, context: item.context, parsed: item.parsedURL)
    finished.append(
      Finished(
        item: item, result: LoadResult(outcome: .cacheMiss), attempts: 0,
        planned: decision.planned))
  }

  /// Forgets the items read ahead: the run stops.
  func dropWindow() {
    _ = window.removeAll()
  }

  /// The loads that ended since the last call, in the order they ended.
  func takeFinished() -> [Finished] {
    defer { finished.removeAll(keepingCapacity: true) }
    return finished
  }

  /// Starts items of the window while the limits allow.
  func startWaiting() {
    while running < queuedLimit,
      let item = window.takeFirst(where: { perHost[$0.origin, default: 0] < queuedPerHostLimit })
    {
      perHost[item.origin, default: 0] += 1
      running += 1
      begin(item, slot: nil, attempts: 1)
    }
  }

  /// Waits for downloads to end or the earliest retry to be due, and handles what happened,
  /// starting the next items as places free up.
  func waitAndHandle() async {
    let events = await queue.next(until: retryDeadlines.first?.deadline)
    if queue.isCancelled && !cancelledInFlight {
      // A signal: what is in flight is cancelled (stores are atomic: nothing partial is left),
      // and back-offs end at once, the last failure their result.
      cancelledInFlight = true
      for slot in slots.values {
        if let handle = slot.handle { downloader.cancel(handle) }
      }
      let waiting = retryDeadlines
      retryDeadlines.removeAll()
      for (_, id) in waiting {
        if let last = slots[id]?.last { end(id, last) }
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
    startIfRunning()
    for case .answered(let id, let answer) in events {
      handle(id, answer)
      // The slot is taken again at once, not after the whole batch: the transfer thread
      // keeps its connections busy while the rest of the batch is validated and stored.
      startIfRunning()
    }
    let now = DispatchTime.now().uptimeNanoseconds
    while let first = retryDeadlines.first, first.deadline <= now {
      retryDeadlines.removeFirst()
      retry(first.slot)
      startIfRunning()
    }
  }

  private func startIfRunning() {
    if !isStopping && !holdsWindow { startWaiting() }
  }

  /// Gives back the place `item` took in the limits.
  private func release(_ item: PrefetchItem) {
    running -= 1
    // An origin with nothing under way is forgotten: a manifest of as many hosts as URLs
    // would otherwise keep an entry for each.
    if perHost[item.origin, default: 1] <= 1 {
      perHost[item.origin] = nil
    } else {
      perHost[item.origin, default: 1] -= 1
    }
  }

  /// Takes slot `id` out of the table, the load keys and the limits.
  private func remove(_ id: Int) -> Slot? {
    guard let slot = slots.removeValue(forKey: id) else { return nil }
    if let key = slot.pending?.loadKey, owners[key] == id { owners[key] = nil }
    if !slot.downloadOver { release(slot.item) }
    return slot
  }

  /// Ends slot `id` with `result`, and the duplicates that waited for it.
  private func end(_ id: Int, _ result: LoadResult) {
    guard let slot = remove(id) else { return }
    finished.append(
      Finished(item: slot.item, result: result, attempts: slot.attempts, planned: nil))
    // A duplicate finds the downloaded image in place; a failure is shared.
    var shared = result
    if case .downloaded = result.outcome { shared = LoadResult(outcome: .diskHit) }
    for duplicate in slot.duplicates {
      finished.append(Finished(item: duplicate, result: shared, attempts: 1, planned: nil))
    }
  }

  /// Loads `item` up to the network: a hit or a refusal ends at once, without a task; a
  /// download is started on the transfer thread and ends in `queue`.
  private func begin(_ item: PrefetchItem, slot id: Int?, attempts: Int) {
    let prepared = manager.prepare(
      item.url, options: item.options, context: item.context, parsed: item.parsedURL)
    switch prepared {
    case .finished(let result):
      if let id {
        slots[id]?.attempts = attempts
        end(id, result)
      } else {
        release(item)
        finished.append(Finished(item: item, result: result, attempts: attempts, planned: nil))
      }
    case .download(let pending):
      if id == nil, let owner = owners[pending.loadKey] {
        // The same image is on its way: this one waits for it, without a slot of its own.
        slots[owner]?.duplicates.append(item)
        release(item)
        return
      }
      let slot = id ?? nextSlot
      if id == nil {
        nextSlot += 1
        slots[slot] = Slot(item: item)
        owners[pending.loadKey] = slot
      }
      slots[slot]?.pending = pending
      slots[slot]?.attempts = attempts
      slots[slot]?.handle = downloader.start(pending.request, startsIf: startsIf) {
        [queue] answer in
        queue.push(.answered(slot, answer))
      }
    }
  }

  /// Ends slot `id`, whose attempt ended unsent (the run stopped while it waited in the
  /// downloader, or it was cancelled there): as if it had not been started, unless an earlier
  /// attempt failed, which is then its result.
  private func drop(_ id: Int) {
    guard let slot = slots[id] else { return }
    if let last = slot.last {
      slot.attempts -= 1
      return end(id, last)
    }
    _ = remove(id)
  }

  /// Finishes slot `id`'s attempt with its answer: stored, failed, or queued to retry.
  private func handle(_ id: Int, _ answer: Result<DownloadResponse, DownloadFailure>) {
    guard let slot = slots[id], let pending = slot.pending else { return }
    if case .failure(let failure) = answer, failure.notStarted { return drop(id) }
    let result = manager.finish(pending, answer)
    slot.handle = nil
    // A refusal of the run's own probe of the origin's limit is no failure of the URL's: it
    // is asked again, once, whatever `retries` says (the cut answers it, not the
    // `Retry-After`, as for the host), so that the adaptive default fails no URL of its own.
    var probed = false
    if case .failure(let failure) = answer, failure.refusedProbe, !slot.spared {
      probed = true
      slot.spared = true
    }
    guard case .failed(let error, _) = result.outcome, error.isTransient, !slot.downloadOver,
      slot.attempts - (slot.spared ? 1 : 0) <= retries, !stop.isStopped, !queue.isCancelled
    else { return end(id, result) }
    let backoff = min(
      configuration.maxRetryDelay,
      configuration.retryBaseDelay * pow(2, Double(slot.attempts - 1))
        * Double.random(in: 0.5...1.5))
    let asked = probed ? 0 : result.retryAfter ?? 0
    // A server that asks for a longer wait than the cap is not asked again sooner than it
    // said; and no attempt starts after the URL's deadline (SPEC section 5).
    if asked > configuration.maxRetryDelay {
      var result = result
      result.note =
        "not retried: the server asked to wait \(Prefetcher.seconds(asked)) (Retry-After), over "
        + "the \(Prefetcher.seconds(configuration.maxRetryDelay)) limit on a wait"
      return end(id, result)
    }
    let wait = max(backoff, asked)
    if Date().addingTimeInterval(wait) > slot.started.addingTimeInterval(configuration.deadline) {
      var result = result
      result.note =
        "not retried: waiting \(Prefetcher.seconds(wait)) would pass the URL's "
        + "\(Prefetcher.seconds(configuration.deadline)) deadline"
      return end(id, result)
    }
    slot.last = result
    // Bounded so that a configured wait of centuries does not overflow the clock.
    let deadline =
      DispatchTime.now().uptimeNanoseconds + UInt64(min(max(wait, 0), 1e9) * 1e9)
    let index = retryDeadlines.firstIndex { $0.deadline > deadline } ?? retryDeadlines.endIndex
    retryDeadlines.insert((deadline, id), at: index)
  }

  /// Slot `id` waited out its back-off: it tries again.
  private func retry(_ id: Int) {
    guard let slot = slots[id] else { return }
    begin(slot.item, slot: id, attempts: slot.attempts + 1)
  }

  /// A download the run waits for: its item, the load to finish, its attempts, and the
  /// duplicates of the same key that wait for it. A class, owned by the table of slots alone:
  /// reading a field through the table then costs one reference, where a struct was copied
  /// whole (every string and reference in it retained, then released) at each read.
  private final class Slot {
    var item: PrefetchItem
    /// When the first attempt began: every attempt and wait falls within the deadline.
    let started = Date()
    var pending: ImageManager.PendingDownload?
    var attempts = 1
    var handle: Downloader.Handle?
    /// The failure of the last attempt, while waiting to retry.
    var last: LoadResult?
    var duplicates: [PrefetchItem] = []
    /// One attempt was a refusal of a probe of the origin's adaptive limit: not counted
    /// against the retries.
    var spared = false
    /// The download succeeded and gave back its place in the limits; the image is yet to be
    /// checked and stored.
    var downloadOver = false

    init(item: PrefetchItem) { self.item = item }
  }
}
