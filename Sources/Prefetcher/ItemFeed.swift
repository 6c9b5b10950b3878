import Core
import DequeModule
import Dispatch
import Foundation
import Synchronization

/// Reads a run's items on a thread of its own into a bounded buffer, so that the prefetch loop
/// never calls the items' iterator, which may block: a large manifest read from disk, a pipe
/// with no data yet, a sitemap fetched over the network. The loop takes what is buffered
/// without waiting and, when it wants more than there is, is woken (`wake`, an event in the
/// loop's one wait) once as many have come, the input has ended, or the source is about to
/// wait (``ProducerContext/willWait()``): then it goes on with what it has. Memory stays
/// bounded: the reader waits while the buffer is full.
final class ItemFeed: Sendable {
  typealias Item = Result<PrefetchItem, ConfigurationError>

  /// What is left once the loop has taken what it could.
  enum Status {
    /// More is buffered.
    case more
    /// Nothing more will come.
    case ended
    /// Nothing is buffered: the loop is woken when there is. `sourceWaits` when the reader
    /// waits on its source (the loop then starts what it has rather than wait for a full
    /// window).
    case waiting(sourceWaits: Bool)
  }

  private struct State {
    /// The batches read, whole: an item crosses from the reader to the loop without a copy
    /// of its own (each copy of an item retains and releases every string and reference in
    /// it, on two processors).
    var buffer: Deque<[Item]> = []
    /// The items in `buffer`.
    var count = 0
    var ended = false
    var sourceWaits = false
    /// How many items the loop waits for; 0 when it does not wait.
    var wanted = 0
    var readerWaitsForRoom = false
    var exited = false
    var exitWaiter: CheckedContinuation<Void, Never>?
  }

  private let state = Mutex(State())
  private let room = DispatchSemaphore(value: 0)
  private let capacity: Int
  private let wake: @Sendable () -> Void
  /// Set by ``close()``: the reader ends, and so does a read in progress that looks.
  private let cancellation = StopFlag()
  private let batch = Batch()

  /// Starts reading `items` at once. `stop` (the run's) ends the reading too.
  init<Items: Sequence & Sendable>(
    _ items: Items, capacity: Int, stop: StopFlag, wake: @escaping @Sendable () -> Void
  ) where Items.Element == Item {
    self.capacity = max(1, capacity)
    self.wake = wake
    let context = ProducerContext(cancellation: cancellation) { [self] in sourceWillWait() }
    OwnThread.start(name: "ic-items") { [self] in
      ProducerContext.$current.withValue(context) { read(items, stop: stop) }
      readerExited()
    }
  }

  /// The reader is about to wait on its source: the loop, if it waits for items, goes on
  /// with what it has.
  private func sourceWillWait() {
    publishAndWake(setting: \.sourceWaits)
  }

  /// Publishes what was read, sets `flag` (the source waits, or has ended), and wakes the
  /// loop if it waits for items: it goes on with what there is.
  private func publishAndWake(setting flag: WritableKeyPath<State, Bool>) {
    _ = publish()
    let woken = state.withLock { state in
      state[keyPath: flag] = true
      defer { state.wanted = 0 }
      return state.wanted > 0
    }
    if woken { wake() }
  }

  /// Moves whole batches of buffered items into `taken`, without waiting, until it holds
  /// `limit` items or more (a batch is never split: `limit` may be passed by less than a
  /// batch).
  func take(upTo limit: Int, into taken: inout [[Item]]) -> Status {
    let (status, wakesReader) = state.withLock { state -> (Status, Bool) in
      var moved = 0
      while moved < limit, let first = state.buffer.popFirst() {
        moved += first.count
        state.count -= first.count
        taken.append(first)
      }
      // The reader goes on once half the buffer is free: one wake-up for many items.
      let wakesReader = state.readerWaitsForRoom && state.count <= capacity / 2
      if wakesReader { state.readerWaitsForRoom = false }
      if !state.buffer.isEmpty { return (.more, wakesReader) }
      if state.ended { return (.ended, wakesReader) }
      // Woken for half a buffer, not for what the window lacks: each wake-up of the loop's
      // task costs a thread's wake-up (tens of microseconds), once per many items. The loop
      // waits the longer only while the reader is busy reading, which is quick: a reader about
      // to wait on its source wakes it at once.
      state.wanted = max(1, capacity / 2)
      return (.waiting(sourceWaits: state.sourceWaits), wakesReader)
    }
    if wakesReader { room.signal() }
    return status
  }

  /// Ends the reading and drops the buffer; returns once the reader's thread has ended (a
  /// read in progress ends within its stop check, at most a few tenths of a second).
  func close() async {
    cancellation.stop()
    let wakesReader = state.withLock { state in
      state.buffer.removeAll()
      state.count = 0
      defer { state.readerWaitsForRoom = false }
      return state.readerWaitsForRoom
    }
    if wakesReader { room.signal() }
    await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
      let exited = state.withLock { state in
        if !state.exited { state.exitWaiter = waiter }
        return state.exited
      }
      if exited { waiter.resume() }
    }
  }

  /// The reader's loop, on its own thread.
  private func read<Items: Sequence>(_ items: Items, stop: StopFlag) where Items.Element == Item {
    var iterator = items.makeIterator()
    while !cancellation.isStopped && !stop.isStopped, let item = iterator.next() {
      batch.items.append(item)
      if batch.items.count >= Self.batchSize && !publish() { break }
    }
    publishAndWake(setting: \.ended)
  }

  /// Items cross to the loop in batches: one lock for many, and no contention with the loop
  /// item by item.
  private static let batchSize = 64

  /// Moves the reader's batch into the buffer, waiting for room first; `false` once the feed
  /// is closed.
  private func publish() -> Bool {
    guard !batch.items.isEmpty else { return !cancellation.isStopped }
    while true {
      let (published, woken) = state.withLock { state -> (Bool, Bool) in
        guard state.count < capacity || cancellation.isStopped else {
          state.readerWaitsForRoom = true
          return (false, false)
        }
        state.count += batch.items.count
        state.buffer.append(batch.items)
        state.sourceWaits = false
        guard state.wanted > 0 && state.count >= state.wanted else { return (true, false) }
        state.wanted = 0
        return (true, true)
      }
      if woken { wake() }
      if published {
        // The buffer has the batch's storage now; the next batch gets its own, grown as items
        // come (not reserved whole: a batch published early, one item long, would hold a full
        // batch's storage in the buffer, and the buffer's bound counts items).
        batch.items = []
        return !cancellation.isStopped
      }
      room.wait()
      if cancellation.isStopped { return false }
    }
  }

  /// The items read and not yet published: the reader thread's alone.
  private final class Batch: @unchecked Sendable {
    var items: [Item] = []
  }

  private func readerExited() {
    let waiter = state.withLock { state in
      state.exited = true
      defer { state.exitWaiter = nil }
      return state.exitWaiter
    }
    waiter?.resume()
  }
}
