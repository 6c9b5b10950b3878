import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import State
import Synchronization

// The state store keeps what the pipeline's stores promise.
extension StateStore: BlacklistStore, ValidatorStore {}

/// A run's namespaces in the state store (SPEC sections 6 and 9): the default namespace's lock
/// and store are the run's own, taken before it starts; another namespace's lock is taken and
/// its store opened the first time a line names it, and the lock is held until ``close()``:
/// another namespace is another cache, and its lock keeps two runs from writing it at once.
final class StateNamespaces: NamespaceProvider {
  private let defaultLocation: CacheLocation
  private let defaultStore: StateStore
  private let shard: Shard?
  private let others = Mutex<[String: (lock: RunLock, store: StateStore?)]>([:])

  /// - Parameter store: the default namespace's store, opened by the run under its lock.
  init(location: CacheLocation, store: StateStore, shard: Shard?) {
    defaultLocation = location
    defaultStore = store
    self.shard = shard
  }

  func open(_ location: CacheLocation, timeToLive: TimeInterval?) throws -> OpenedNamespace {
    let store = location == defaultLocation ? defaultStore : try otherStore(location)
    var warnings: [String] = []
    // The blacklists of its other state files (other shards', or the unsharded one) count
    // too, so that a run with another number of shards loses nothing (SPEC section 9).
    let entries = try StateStore.blacklistOfEveryStateFile(
      location: location, timeToLive: timeToLive, opened: store
    ) { path, error in
      // A file that cannot be read is its own shard's to repair: this run goes on without
      // its entries, and says so.
      warnings.append(
        "the blacklist of \(path) was not read (\(error)): its URLs are not refused by this run")
    }
    return OpenedNamespace(
      blacklist: store, validators: store, blacklistEntries: entries, warnings: warnings)
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
