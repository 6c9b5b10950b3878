import Foundation
import Synchronization

/// Where the transfer thread leaves finished downloads for the prefetcher, which takes them in
/// batches: one wake-up of the prefetcher's task for however many downloads ended meanwhile,
/// instead of a task and a continuation per URL. Retries whose backoff is over come back the
/// same way.
final class DownloadQueue: Sendable {
  enum Event: Sendable {
    /// The download of slot `id` ended.
    case answered(Int, Result<DownloadResponse, DownloadFailure>)
    /// Slot `id` waited out its backoff and may try again.
    case retry(Int)
  }

  private struct State {
    var events: [Event] = []
    var waiter: CheckedContinuation<[Event], Never>?
    var cancelled = false
  }

  private let state = Mutex(State())

  /// Whether the waiting task was cancelled (a signal): the run cancels what is in flight.
  var isCancelled: Bool { state.withLock { $0.cancelled } }

  /// Queues `event`, waking the prefetcher if it waits. Quick: the transfer thread calls it.
  func push(_ event: Event) {
    let woken = state.withLock { state -> (CheckedContinuation<[Event], Never>, [Event])? in
      state.events.append(event)
      guard let waiter = state.waiter else { return nil }
      state.waiter = nil
      defer { state.events.removeAll(keepingCapacity: true) }
      return (waiter, state.events)
    }
    if let (waiter, events) = woken { waiter.resume(returning: events) }
  }

  /// Every event queued so far, waiting for one if there is none. Returns at once (possibly
  /// empty) once the task is cancelled.
  func next() async -> [Event] {
    await withTaskCancellationHandler {
      await withCheckedContinuation { (waiter: CheckedContinuation<[Event], Never>) in
        let ready = state.withLock { state -> [Event]? in
          guard state.events.isEmpty && !state.cancelled else {
            defer { state.events.removeAll(keepingCapacity: true) }
            return state.events
          }
          state.waiter = waiter
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
}
