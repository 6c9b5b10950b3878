import Synchronization

/// Set when a signal asks the run to stop: passes and the prefetcher check it between files
/// and URLs, finish what they hold, and stop starting new work (SPEC sections 5 and 10).
public final class StopFlag: Sendable {
  private let stopped = Atomic<Bool>(false)
  public init() {}
  public func stop() { stopped.store(true, ordering: .relaxed) }
  public var isStopped: Bool { stopped.load(ordering: .relaxed) }
}
