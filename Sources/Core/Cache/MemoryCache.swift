import Foundation
import Synchronization

/// What the memory tier holds for a key.
package enum MemoryEntry: Sendable, Equatable {
  /// The bytes themselves (an image stored in memory only).
  case data(Data)
  /// An image the disk tier holds too: the entry stands for it, at the cost of its bytes,
  /// without keeping a second copy of them. A prefetch run stores thousands of images it never
  /// reads back; holding each one's bytes would make every download land in fresh memory.
  case onDisk
}

/// The memory tier: least-recently-used, bounded by total cost (bytes) and by count, safe to
/// use from any number of tasks at once. A limit of 0 means no limit, as in SD's
/// `SDMemoryCache`.
///
/// An entry costs its image's bytes plus what holding it takes: its key's bytes and
/// ``entryOverhead``. An ``MemoryEntry/onDisk`` entry of a tiny image or a long URL holds
/// little but its key, and a million of them would otherwise fit under any cost limit (SPEC
/// section 5: memory stays bounded whatever the manifest size).
public final class MemoryCache: Sendable {
  package let totalCostLimit: Int
  package let countLimit: Int
  private let state: Mutex<LRUList>

  /// About what one entry takes beyond its key's and its data's bytes: the list's node, the
  /// index's slot and the key's allocation (measured at about 280 bytes an entry for short
  /// keys).
  package static let entryOverhead = 256

  public init(totalCostLimit: Int = 0, countLimit: Int = 0) {
    self.totalCostLimit = totalCostLimit
    self.countLimit = countLimit
    state = Mutex(LRUList())
  }

  /// The entry for `key`, which becomes the most recently used one.
  package func entry(forKey key: String) -> MemoryEntry? {
    state.withLock { $0.get(key) }
  }

  /// The bytes held for `key` (not those of an ``MemoryEntry/onDisk`` entry), which becomes the
  /// most recently used entry.
  package func data(forKey key: String) -> Data? {
    guard case .data(let data) = entry(forKey: key) else { return nil }
    return data
  }

  /// Whether `key` is held, without touching its recency.
  package func containsData(forKey key: String) -> Bool {
    state.withLock { $0.contains(key) }
  }

  /// Stores `data` with a cost of its byte count (and its key's), evicting least recently used
  /// entries until both limits hold. An entry larger than the cost limit is not kept at all.
  package func setData(_ data: Data, forKey key: String) {
    set(.data(data), cost: data.count, forKey: key)
  }

  /// Records that `key`'s image, of `cost` bytes, is in the disk tier: a hit from here on, on
  /// the same terms (cost, recency, limits) as bytes held.
  package func setOnDisk(forKey key: String, cost: Int) {
    set(.onDisk, cost: cost, forKey: key)
  }

  private func set(_ entry: MemoryEntry, cost bytes: Int, forKey key: String) {
    let cost = bytes + key.utf8.count + Self.entryOverhead
    state.withLock { list in
      list.remove(key)
      if totalCostLimit > 0 && cost > totalCostLimit { return }
      list.insertFront(key, entry: entry, cost: cost)
      while (totalCostLimit > 0 && list.totalCost > totalCostLimit)
        || (countLimit > 0 && list.count > countLimit)
      {
        list.removeLeastRecentlyUsed()
      }
    }
  }

  package func removeData(forKey key: String) {
    state.withLock { _ = $0.remove(key) }
  }

  package func removeAllData() {
    state.withLock { $0 = LRUList() }
  }

  package var count: Int { state.withLock { $0.count } }
  package var totalCost: Int { state.withLock { $0.totalCost } }
}

/// A doubly linked list over array slots plus an index, so that every operation is O(1) and no
/// reference types live inside the lock.
struct LRUList {
  private struct Node {
    var key: String
    var entry: MemoryEntry
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

  mutating func get(_ key: String) -> MemoryEntry? {
    guard let slot = index[key] else { return nil }
    unlink(slot)
    linkFront(slot)
    return nodes[slot]!.entry
  }

  mutating func insertFront(_ key: String, entry: MemoryEntry, cost: Int) {
    let node = Node(key: key, entry: entry, cost: cost)
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
