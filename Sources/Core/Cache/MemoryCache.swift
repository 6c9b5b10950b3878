import Foundation
import Synchronization

/// The memory tier: least-recently-used, bounded by total cost (bytes) and by count, safe to
/// use from any number of tasks at once. A limit of 0 means no limit, as in SD's
/// `SDMemoryCache`.
public final class MemoryCache: Sendable {
  public let totalCostLimit: Int
  public let countLimit: Int
  private let state: Mutex<LRUList>

  public init(totalCostLimit: Int = 0, countLimit: Int = 0) {
    self.totalCostLimit = totalCostLimit
    self.countLimit = countLimit
    state = Mutex(LRUList())
  }

  /// The data for `key`, which becomes the most recently used entry.
  public func data(forKey key: String) -> Data? {
    state.withLock { $0.get(key) }
  }

  /// Whether `key` is held, without touching its recency.
  public func containsData(forKey key: String) -> Bool {
    state.withLock { $0.contains(key) }
  }

  /// Stores `data` with a cost of its byte count, evicting least recently used entries until
  /// both limits hold. An entry larger than the cost limit is not kept at all.
  public func setData(_ data: Data, forKey key: String) {
    let cost = data.count
    state.withLock { list in
      list.remove(key)
      if totalCostLimit > 0 && cost > totalCostLimit { return }
      list.insertFront(key, data: data, cost: cost)
      while (totalCostLimit > 0 && list.totalCost > totalCostLimit)
        || (countLimit > 0 && list.count > countLimit)
      {
        list.removeLeastRecentlyUsed()
      }
    }
  }

  public func removeData(forKey key: String) {
    state.withLock { _ = $0.remove(key) }
  }

  public func removeAllData() {
    state.withLock { $0 = LRUList() }
  }

  public var count: Int { state.withLock { $0.count } }
  public var totalCost: Int { state.withLock { $0.totalCost } }
}

/// A doubly linked list over array slots plus an index, so that every operation is O(1) and no
/// reference types live inside the lock.
struct LRUList {
  private struct Node {
    var key: String
    var data: Data
    var cost: Int
    var previous: Int?
    var next: Int?
  }

  private var nodes: [Node?] = []
  private var freeSlots: [Int] = []
  private var index: [String: Int] = [:]
  private var head: Int?
  private var tail: Int?
  private(set) var totalCost = 0

  var count: Int { index.count }

  func contains(_ key: String) -> Bool { index[key] != nil }

  mutating func get(_ key: String) -> Data? {
    guard let slot = index[key] else { return nil }
    unlink(slot)
    linkFront(slot)
    return nodes[slot]!.data
  }

  mutating func insertFront(_ key: String, data: Data, cost: Int) {
    let node = Node(key: key, data: data, cost: cost)
    let slot: Int
    if let free = freeSlots.popLast() {
      slot = free
      nodes[slot] = node
    } else {
      slot = nodes.count
      nodes.append(node)
    }
    index[key] = slot
    totalCost += cost
    linkFront(slot)
  }

  @discardableResult
  mutating func remove(_ key: String) -> Bool {
    guard let slot = index.removeValue(forKey: key) else { return false }
    unlink(slot)
    totalCost -= nodes[slot]!.cost
    nodes[slot] = nil
    freeSlots.append(slot)
    return true
  }

  mutating func removeLeastRecentlyUsed() {
    guard let tail else { return }
    remove(nodes[tail]!.key)
  }

  private mutating func linkFront(_ slot: Int) {
    nodes[slot]!.previous = nil
    nodes[slot]!.next = head
    if let head { nodes[head]!.previous = slot }
    head = slot
    if tail == nil { tail = slot }
  }

  private mutating func unlink(_ slot: Int) {
    let previous = nodes[slot]!.previous
    let next = nodes[slot]!.next
    if let previous { nodes[previous]!.next = next } else { head = next }
    if let next { nodes[next]!.previous = previous } else { tail = previous }
    nodes[slot]!.previous = nil
    nodes[slot]!.next = nil
  }
}
