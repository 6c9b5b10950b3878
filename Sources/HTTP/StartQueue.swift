import Core
import DequeModule

/// SD's three download priorities: among what waits to start, `highPriority` goes first and
/// `lowPriority` last.
public enum DownloadPriority: Int, Sendable, CaseIterable {
  case high, normal, low

  package init(_ options: ImageOptions) {
    self =
      options.contains(.highPriority) ? .high : options.contains(.lowPriority) ? .low : .normal
  }
}

/// What waits to start, as SD's operation queue orders it: one first-in first-out queue per
/// priority, the best priority first; one that cannot start yet (its host is full) lets the
/// next go first. The prefetcher's items read ahead and the transfer thread's waiting
/// transfers are both kept in one. Inlinable, so that each user specializes it for its own
/// element (unspecialized, the prefetcher's window cost 15% more per cache hit: measured with
/// `Benchmarks/prefetch.sh`'s warm case).
@frozen
package struct StartQueue<Element> {
  @usableFromInline var queues = [Deque<Element>](
    repeating: [], count: DownloadPriority.allCases.count)
  @usableFromInline package internal(set) var count = 0

  @inlinable package init() {}

  @inlinable package var isEmpty: Bool { count == 0 }

  @inlinable package mutating func append(_ element: Element, priority: DownloadPriority) {
    queues[priority.rawValue].append(element)
    count += 1
  }

  /// Removes and returns the first element of the best priority that `canStart` (usually the
  /// head of a queue), or `nil` when none can.
  @inlinable package mutating func takeFirst(where canStart: (Element) -> Bool) -> Element? {
    for priority in queues.indices {
      if let index = queues[priority].firstIndex(where: canStart) {
        count -= 1
        return queues[priority].remove(at: index)
      }
    }
    return nil
  }

  /// Removes and returns every element, best priority first.
  @inlinable package mutating func removeAll() -> [Element] {
    let all = queues.flatMap { $0 }
    queues = [Deque<Element>](repeating: [], count: queues.count)
    count = 0
    return all
  }
}
