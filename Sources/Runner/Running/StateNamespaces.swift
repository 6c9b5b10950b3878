import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import State
import Synchronization

// The state store keeps what the pipeline's stores promise.
extension StateStore: BlacklistStore, ValidatorStore {}
extension OtherStateFile: BlacklistLookup {}

/// A run's namespaces in the state store (SPEC sections 6 and 9): the default namespace's lock
/// and store are the run's own, taken before it starts; another namespace's lock is taken and
/// its store opened the first time a line names it, and the lock is held until ``close()``:
/// another namespace is another cache, and its lock keeps two runs from writing it at once.
final class StateNamespaces: NamespaceProvider {
  private let defaultLocation: CacheLocation
  private let openDefault: @Sendable (_ timeToLive: TimeInterval?) throws -> OpenedNamespace
  private let shard: Shard?
  private let others = Mutex<[String: (lock: RunLock, store: StateStore?)]>([:])

  /// - Parameter store: the default namespace's store, opened by the run under its lock.
  convenience init(location: CacheLocation, store: StateStore, shard: Shard?) {
    self.init(location: location, shard: shard) { timeToLive in
      try Self.opened(location, store: store, timeToLive: timeToLive)
    }
  }

  /// - Parameter state: the default namespace's store, opening under the run's lock.
  convenience init(location: CacheLocation, state: RunState, shard: Shard?) {
    self.init(location: location, shard: shard) { try state.openNamespace(timeToLive: $0) }
  }

  private init(
    location: CacheLocation, shard: Shard?,
    openDefault: @escaping @Sendable (TimeInterval?) throws -> OpenedNamespace
  ) {
    defaultLocation = location
    self.openDefault = openDefault
    self.shard = shard
  }

  func open(_ location: CacheLocation, timeToLive: TimeInterval?) throws -> OpenedNamespace {
    guard location != defaultLocation else { return try openDefault(timeToLive) }
    let store = try otherStore(location)
    return try Self.opened(location, store: store, warnings: store.warnings, timeToLive: timeToLive)
  }

  /// The namespace at `location` through its opened `store`. The default store's own warnings
  /// (a corrupt file moved aside) are the run's to say, not the namespace's.
  static func opened(
    _ location: CacheLocation, store: StateStore, warnings: [String] = [],
    timeToLive: TimeInterval?
  ) throws -> OpenedNamespace {
    var warnings = warnings
    let blacklist = try StateStore.blacklistHashesOfEveryStateFile(
      location: location, timeToLive: timeToLive, opened: store
    ) { path, error in warnings.append(Self.notRead(path, error)) }
    return OpenedNamespace(
      blacklist: store, validators: store, blacklistHashes: blacklist.hashes,
      otherBlacklists: blacklist.others, warnings: warnings)
  }

  /// The blacklists of a namespace's other state files (other shards', or the unsharded one)
  /// count too, so that a run with another number of shards loses nothing (SPEC section 9); a
  /// file that cannot be read is its own shard's to repair: the run goes on without its
  /// entries, and says so.
  static func notRead(_ path: String, _ error: any Error) -> String {
    "the blacklist of \(path) was not read (\(error)): its URLs are not refused by this run"
  }

  /// Another namespace's store, under its lock, each opened once.
  private func otherStore(_ location: CacheLocation) throws -> StateStore {
    try others.withLock { others in
      if let store = others[location.namespace]?.store { return store }
      let lock: RunLock
      if let held = others[location.namespace]?.lock {
        lock = held
      } else {
        do {
          lock = try RunLock.acquire(location: location, shard: shard)
        } catch RunLock.Failure.held {
          throw ImageCacheError.namespaceLocked(location.namespace)
        }
        others[location.namespace] = (lock, nil)
      }
      let store = try StateStore(location: location, shard: shard)
      others[location.namespace] = (lock, store)
      return store
    }
  }

  func close() {
    let locks = others.withLock { others in
      defer { others.removeAll() }
      return others.values.map(\.lock)
    }
    for lock in locks { lock.release() }
  }

  deinit { close() }
}

/// A dry run's namespaces: each namespace's blacklist read from every one of its state files,
/// leaving no trace (no lock taken, no file created, no access recorded), as a run would read
/// it. What a run would do with a file it cannot read, the plan does: another shard's is a
/// warning; this shard's own, when corrupt, would be moved aside and started afresh (a warning,
/// and none of its entries), and otherwise fails the namespace's lines. Nothing is written: the
/// plan records no failure.
final class PlanningNamespaces: NamespaceProvider {
  private let shard: Shard?

  init(shard: Shard?) { self.shard = shard }

  func open(_ location: CacheLocation, timeToLive: TimeInterval?) throws -> OpenedNamespace {
    let own = location.stateDirectory + "/" + StateStore.fileName(shard: shard)
    var warnings: [String] = []
    let blacklist = try StateStore.blacklistHashesOfEveryStateFile(
      location: location, leavingNoTrace: true, timeToLive: timeToLive
    ) { path, error in
      guard path == own else { return warnings.append(StateNamespaces.notRead(path, error)) }
      guard (error as? StateStoreError)?.isCorrupt == true else { throw error }
      warnings.append("\(error): a run would move it aside and start a fresh one")
    }
    // Every state file is read as another's: the plan writes none.
    let unwritten = MemoryStateStore()
    return OpenedNamespace(
      blacklist: unwritten, validators: unwritten, blacklistHashes: blacklist.hashes,
      otherBlacklists: blacklist.others, warnings: warnings)
  }

  func close() {}
}
