import Core
import Foundation
import HTTP
import Synchronization

extension ImageManager {
  /// The state of one namespace: its cache, its stores, and a hash of each blacklisted URL in
  /// memory (so that checking a URL not on the blacklist needs no store read, and memory does
  /// not follow the blacklist's size: 8 bytes an entry, not the entry).
  final class NamespaceState: Sendable {
    let cache: ImageCache
    let blacklistStore: any BlacklistStore
    let validatorStore: any ValidatorStore
    /// ``BlacklistRule/hash(ofURL:)`` of every URL blacklisted when the namespace was opened or
    /// since: a superset of the blacklist, never taken from (another URL may share a hash).
    let blacklistHashes: Mutex<Set<UInt64>>
    let otherBlacklists: [any BlacklistLookup]
    /// URLs this run took off the blacklist (a `retryFailed` success) that another state file
    /// of the namespace (another shard's) still holds: not refused again by this run.
    let unblacklisted = Mutex(Set<String>())
    /// What could not be read of the other state files, for people.
    let warnings: [String]
    /// Validators and stored files' URLs not yet written: one SQLite transaction per download
    /// would serialise the downloads on the database, so they are written in batches.
    let pending = Mutex(PendingWrites())
    static let validatorBatchSize = 256

    /// What the state has yet to learn.
    struct PendingWrites {
      var validators: [CacheValidators] = []
      var storedURLs: [StoredURL] = []
      var count: Int { validators.count + storedURLs.count }
    }

    /// Creates the namespace's cache folder if it is not there: a store finds it made, and one
    /// that is gone later was removed during the run (an error, not re-created in silence).
    init(
      location: CacheLocation, memory: MemoryCache, createsFolder: Bool = true,
      opened: OpenedNamespace
    ) throws {
      if createsFolder { try FileSystem.createDirectory(path: location.diskCachePath) }
      cache = ImageCache(memory: memory, disk: DiskCache(location: location))
      blacklistStore = opened.blacklist
      validatorStore = opened.validators
      warnings = opened.warnings
      blacklistHashes = Mutex(opened.blacklistHashes)
      otherBlacklists = opened.otherBlacklists
    }

    /// Whether a state file of the namespace holds an entry of `url` active at `now`: this
    /// run's store (which it writes), else one of the others that can be read.
    func holdsEntry(ofURL url: String, at now: Date, timeToLive: TimeInterval?) throws -> Bool {
      if try blacklistStore.isBlacklisted(url: url, at: now, timeToLive: timeToLive) {
        return true
      }
      return otherBlacklists.contains {
        (try? $0.isBlacklisted(url: url, at: now, timeToLive: timeToLive)) == true
      }
    }

    /// Queues `validators` and `storedURL`, writing the queue once it is a batch.
    func queue(_ validators: CacheValidators? = nil, storedURL: StoredURL? = nil) throws {
      let batch = pending.withLock { pending -> PendingWrites in
        if let validators { pending.validators.append(validators) }
        if let storedURL { pending.storedURLs.append(storedURL) }
        guard pending.count >= Self.validatorBatchSize else { return PendingWrites() }
        defer { pending = PendingWrites() }
        return pending
      }
      try write(batch)
    }

    func flush() throws {
      try write(
        pending.withLock { pending in
          defer { pending = PendingWrites() }
          return pending
        })
    }

    private func write(_ batch: PendingWrites) throws {
      if !batch.validators.isEmpty { try validatorStore.setValidators(batch.validators) }
      if !batch.storedURLs.isEmpty { try validatorStore.setStoredURLs(batch.storedURLs) }
    }
  }

  /// Writes the validators and stored URLs still queued. Call it when the run ends (interrupted or not).
  public func flush() throws {
    for state in states.withLock({ Array($0.values) }) { try state.flush() }
  }

  /// The state of `namespace` (the default one when `nil`), opened through the provider the
  /// first time a line names it.
  func state(for namespace: String?) throws -> NamespaceState {
    let name = namespace ?? defaultNamespace
    if let existing = states.withLock({ $0[name] }) { return existing }
    let location = CacheLocation(directory: directory, namespace: name)
    // Before its lock and state are opened: nothing is read or written through a link.
    try FileSystem.checkCacheFolders(location)
    let created = try NamespaceState(
      location: location, memory: memory, createsFolder: !readOnly,
      opened: try namespaces.open(location, timeToLive: configuration.blacklistTTL))
    return states.withLock { states in
      if let existing = states[name] { return existing }
      states[name] = created
      return created
    }
  }
}
