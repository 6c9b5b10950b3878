/// The thread that produces a run's items (Prefetcher's `ItemFeed`), as the reads deep in the
/// items' iterator see it: whether the producer was cancelled (the run ended), and how to say
/// that a read is about to wait on its source (a document fetch, a pipe with no data yet), so
/// that the consumer goes on with the items it has instead of waiting for more. The
/// thread-bound counterpart of `Task.isCancelled` for code that runs off the concurrency pool.
public final class ProducerContext: Sendable {
  /// The context of the producing thread this code runs on, if any (bound with `withValue` on
  /// that thread; a task-local bound outside a task lives in the thread's storage).
  @TaskLocal package static var current: ProducerContext?

  /// Set when the producer is to end: its reads end as soon as they can.
  package let cancellation: StopFlag
  private let waiting: @Sendable () -> Void

  public init(cancellation: StopFlag, willWait: @escaping @Sendable () -> Void) {
    self.cancellation = cancellation
    waiting = willWait
  }

  /// Says that the producer is about to wait on its source.
  package func willWait() { waiting() }

  /// Whether the producing thread this code runs on was cancelled.
  package static var isCancelled: Bool { current?.cancellation.isStopped ?? false }
}
