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
/// transfers are both kept in one. Public and inlinable, so that each user specializes it for
/// its own element: unspecialized, the prefetcher's window cost 13-15% more per cache hit
/// (`Benchmarks/prefetch.sh`'s warm case), and `@inlinable package` was still called
/// unspecialized across the module boundary (9% on a 1,000,000-line manifest).
@frozen
public struct StartQueue<Element> {
  /// Those that go ahead of every priority (``appendAhead(_:)``), then one queue a priority.
  @usableFromInline var queues = [Deque<Element>](
    repeating: [], count: DownloadPriority.allCases.count + 1)
  @usableFromInline var stored = 0

  @inlinable public var count: Int { stored }

  @inlinable public init() {}

  @inlinable public var isEmpty: Bool { stored == 0 }

  @inlinable public mutating func append(_ element: Element, priority: DownloadPriority) {
    queues[priority.rawValue + 1].append(element)
    stored += 1
  }

  /// Queues `element` ahead of every priority, behind those queued so before it: one that was
  /// under way (a redirect's next hop) goes on before every one that was not, whatever their
  /// priorities, and in the order they came (put first, each such one passed those before it,
  /// which waited until their deadline while others kept coming).
  @inlinable public mutating func appendAhead(_ element: Element) {
    queues[0].append(element)
    stored += 1
  }

  /// Removes and returns the first element of the best priority that `canStart` (usually the
  /// head of a queue), or `nil` when none can.
  @inlinable public mutating func takeFirst(where canStart: (Element) -> Bool) -> Element? {
    for priority in queues.indices {
      if let index = queues[priority].firstIndex(where: canStart) {
        stored -= 1
        return queues[priority].remove(at: index)
      }
    }
    return nil
  }

  /// Removes and returns the elements that `removes` says to (asked once of each), best
  /// priority first, keeping the others in order.
  @inlinable public mutating func remove(where removes: (Element) -> Bool) -> [Element] {
    var removed: [Element] = []
    for priority in queues.indices {
      var kept = Deque<Element>()
      for element in queues[priority] {
        if removes(element) { removed.append(element) } else { kept.append(element) }
      }
      queues[priority] = kept
    }
    stored -= removed.count
    return removed
  }

  /// Removes and returns every element, best priority first.
  @inlinable public mutating func removeAll() -> [Element] {
    let all = queues.flatMap { $0 }
    queues = [Deque<Element>](repeating: [], count: queues.count)
    stored = 0
    return all
  }
}
