import Synchronization

/// The run's one graceful-shutdown signal (as swift-service-lifecycle's), set by a signal or the
/// run's time limit and passed down: passes and the prefetcher check it between files and URLs,
/// finish what they hold, and stop starting new work (SPEC sections 5 and 10). What waits wakes
/// on it: a task with ``wait()``, any other code with ``onStop(_:)``; nothing polls it.
public final class StopFlag: Sendable {
  private let stopped = Atomic<Bool>(false)
  private let observers = Mutex<(next: Int, handlers: [Int: @Sendable () -> Void])>((0, [:]))

  public init() {}

  /// Sets the flag and calls, once, what waits on it.
  package func stop() {
    guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
    let handlers = observers.withLock { observers in
      defer { observers.handlers.removeAll() }
      return observers.handlers.sorted { $0.key < $1.key }.map(\.value)
    }
    for handler in handlers { handler() }
  }

  package var isStopped: Bool { stopped.load(ordering: .relaxed) }

  /// What ``onStop(_:)`` registered, to take back once it no longer matters.
  package struct Observation: Sendable {
    fileprivate let flag: StopFlag?
    fileprivate let id: Int

    /// Forgets the handler; it will not be called (it may be running already).
    package func cancel() {
      _ = flag?.observers.withLock { $0.handlers.removeValue(forKey: id) }
    }
  }

  /// Calls `handler` once when the flag is set, on the thread that sets it (at once, on this
  /// one, if it is set already). Keep it short: it runs in the signal's delivery.
  @discardableResult
  package func onStop(_ handler: @escaping @Sendable () -> Void) -> Observation {
    let id = observers.withLock { observers -> Int? in
      // Checked under the lock: a stop between the check and the insertion would miss it.
      guard !isStopped else { return nil }
      defer { observers.next += 1 }
      observers.handlers[observers.next] = handler
      return observers.next
    }
    guard let id else {
      handler()
      return Observation(flag: nil, id: 0)
    }
    return Observation(flag: self, id: id)
  }

  /// Returns once the flag is set, or when the waiting task is cancelled.
  package func wait() async {
    let waiter = Mutex<CheckedContinuation<Void, Never>?>(nil)
    let resume: @Sendable () -> Void = { waiter.withLock { $0.take() }?.resume() }
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        waiter.withLock { $0 = continuation }
        let observation = onStop(resume)
        // Cancelled before the continuation was stored: the handler below found none.
        if Task.isCancelled {
          observation.cancel()
          resume()
        }
      }
    } onCancel: {
      resume()
    }
  }
}
