import Core
import Foundation
import HTTP
import Synchronization

extension ImageManager {
  /// The state of one namespace: its cache, its stores, and the blacklist in memory (so that
  /// checking a URL needs no store read).
  final class NamespaceState: Sendable {
    let cache: ImageCache
    let blacklistStore: any BlacklistStore
    let validatorStore: any ValidatorStore
    let blacklist: Mutex<[String: Date]>
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
      blacklist = Mutex(
        Dictionary(
          opened.blacklistEntries.map { ($0.url, $0.lastFailedAt) }, uniquingKeysWith: max))
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
