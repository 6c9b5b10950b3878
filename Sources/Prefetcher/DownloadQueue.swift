import Dispatch
import HTTP
import Synchronization

/// Where the transfer thread leaves finished downloads for the prefetcher, which takes them in
/// batches: one wake-up of the prefetcher's task for however many downloads ended meanwhile,
/// instead of a task and a continuation per URL. A wait may also end at a deadline (the earliest
/// retry's), on one timer kept for the queue's life: no task sleeps per retry. The item feed
/// wakes the same wait: the loop has one wait for all three.
final class DownloadQueue: Sendable {
  enum Event: Sendable {
    /// The download of slot `id` ended.
    case answered(Int, Result<DownloadResponse, DownloadFailure>)
    /// The item feed has items for the loop (or has ended, or waits on its source).
    case itemsArrived
  }

  private struct State {
    var events: [Event] = []
    var waiter: CheckedContinuation<[Event], Never>?
    /// The waiter also wakes at the timer when it has a deadline.
    var waiterHasDeadline = false
    var cancelled = false
    /// Made the first time a wait has a deadline.
    var timer: DispatchSourceTimer?
  }

  private let state = Mutex(State())

  deinit {
    state.withLock { $0.timer?.cancel() }
  }

  /// Whether the waiting task was cancelled (a signal): the run cancels what is in flight.
  var isCancelled: Bool { state.withLock { $0.cancelled } }

  /// Queues `event`, waking the prefetcher if it waits. Quick: the transfer thread calls it.
  func push(_ event: Event) {
    let woken = state.withLock { state -> (CheckedContinuation<[Event], Never>, [Event])? in
      state.events.append(event)
      return Self.takeWaiter(&state)
    }
    if let (waiter, events) = woken { waiter.resume(returning: events) }
  }

  /// Every event queued so far, waiting for one if there is none, or until `deadline` (uptime
  /// nanoseconds) when there is one: then possibly empty. Returns at once (possibly empty) once
  /// the task is cancelled.
  func next(until deadline: UInt64? = nil) async -> [Event] {
    await withTaskCancellationHandler {
      await withCheckedContinuation { (waiter: CheckedContinuation<[Event], Never>) in
        let ready = state.withLock { state -> [Event]? in
          let due = deadline.map { $0 <= DispatchTime.now().uptimeNanoseconds } ?? false
          guard state.events.isEmpty && !state.cancelled && !due else {
            defer { state.events.removeAll(keepingCapacity: true) }
            return state.events
          }
          state.waiter = waiter
          state.waiterHasDeadline = deadline != nil
          if let deadline { arm(&state, at: deadline) }
          return nil
        }
        if let ready { waiter.resume(returning: ready) }
      }
    } onCancel: {
      let waiter = state.withLock { state -> CheckedContinuation<[Event], Never>? in
        state.cancelled = true
        defer { state.waiter = nil }
        return state.waiter
      }
      waiter?.resume(returning: [])
    }
  }

  /// Sets the timer to wake the waiter at `deadline`. A timer set for an earlier wait that
  /// fires meanwhile wakes this one early, at worst: the scheduler finds nothing due and waits
  /// again.
  private func arm(_ state: inout State, at deadline: UInt64) {
    if state.timer == nil {
      let timer = DispatchSource.makeTimerSource(queue: .global())
      timer.setEventHandler { [weak self] in self?.timerFired() }
      timer.activate()
      state.timer = timer
    }
    state.timer?.schedule(
      deadline: DispatchTime(uptimeNanoseconds: deadline), leeway: .milliseconds(1))
  }

  private func timerFired() {
    let woken = state.withLock { state -> (CheckedContinuation<[Event], Never>, [Event])? in
      guard state.waiterHasDeadline else { return nil }
      return Self.takeWaiter(&state)
    }
    if let (waiter, events) = woken { waiter.resume(returning: events) }
  }

  /// The waiter, if one waits, with the events queued: both taken.
  private static func takeWaiter(_ state: inout State) -> (
    CheckedContinuation<[Event], Never>, [Event]
  )? {
    guard let waiter = state.waiter else { return nil }
    state.waiter = nil
    state.waiterHasDeadline = false
    defer { state.events.removeAll(keepingCapacity: true) }
    return (waiter, state.events)
  }
}
