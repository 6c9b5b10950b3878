import Core
import Foundation
import Synchronization

/// A blacklist a run reads the entry of one URL from: the URLs whose hash it holds
/// (``BlacklistRule/hash(ofURL:)``), to know whether they are on it.
public protocol BlacklistLookup: Sendable {
  /// Whether `url` has an entry active at `now`, given the time-to-live after its last failure.
  func isBlacklisted(url: String, at now: Date, timeToLive: TimeInterval?) throws -> Bool
}

/// SD's failed-URL blacklist of one namespace, kept across runs (the runner's is the state
/// store's SQLite file). URLs arrive with their passwords masked already.
public protocol BlacklistStore: BlacklistLookup {
  func recordFailure(url: String, code: Int, name: String, reason: String, at date: Date)
    throws
  /// Takes `url` off the blacklist; returns whether it was there.
  @discardableResult func removeFromBlacklist(url: String) throws -> Bool
  /// Calls `body` with every entry active at `now`, oldest failure first.
  func forEachBlacklisted(
    now: Date, timeToLive: TimeInterval?, _ body: (BlacklistEntry) throws -> Void) throws
}

/// The HTTP validators a `refreshCached` load revalidates with (SPEC section 3).
public protocol ValidatorStore: Sendable {
  func validators(forKey cacheKey: String) throws -> CacheValidators?
  /// Stores many keys' validators at once (one transaction for a database).
  func setValidators(_ batch: [CacheValidators]) throws
  func removeValidators(forKey cacheKey: String) throws
  /// Records which URL each file of the batch was downloaded from (issue 45), at once.
  func setStoredURLs(_ batch: [StoredURL]) throws
  /// Returns once the store can be written, or throws why it cannot: a download is stored in
  /// the cache only where the state will know of it. A store that opens beside the first
  /// requests (the runner's) blocks until it is open. `CancellationError`: the run was
  /// stopped before the store opened; the download is not stored, and is no failure.
  func waitUntilWritable() throws
}

extension ValidatorStore {
  /// Open from the start.
  public func waitUntilWritable() throws {}
}

/// One namespace as a run opened it: where its state goes, and the blacklist it starts with.
///
/// The blacklist has no bound (entries never expire without a time-to-live), so a run holds a
/// 64-bit hash of each entry's URL, not the entries (SPEC section 5): a URL whose hash is not
/// there is not blacklisted; one whose hash is there is looked up in `blacklist` and
/// `otherBlacklists`.
public struct OpenedNamespace: Sendable {
  public var blacklist: any BlacklistStore
  public var validators: any ValidatorStore
  /// ``BlacklistRule/hash(ofURL:)`` of the entries active when it was opened, of every state
  /// file of the namespace: a sharded cache keeps one per shard, and a run with another number
  /// of shards loses none of them (SPEC section 9).
  public var blacklistHashes: Set<UInt64>
  /// The namespace's state files other than `blacklist`'s (other shards'), read for the exact
  /// look-up; one that cannot be read then holds no entry.
  public var otherBlacklists: [any BlacklistLookup]
  /// What could not be read (another shard's state file), for the run to say: the loads go on
  /// without it.
  public var warnings: [String]

  public init(
    blacklist: any BlacklistStore, validators: any ValidatorStore,
    blacklistHashes: Set<UInt64>, otherBlacklists: [any BlacklistLookup] = [],
    warnings: [String] = []
  ) {
    self.blacklist = blacklist
    self.validators = validators
    self.blacklistHashes = blacklistHashes
    self.otherBlacklists = otherBlacklists
    self.warnings = warnings
  }
}

/// Opens the namespaces a run's lines name, each once. The runner's takes each namespace's run
/// lock and opens its state files; the manager itself takes no lock and opens no database.
public protocol NamespaceProvider: Sendable {
  /// Opens the namespace at `location`. Throws ``ImageCacheError/namespaceLocked(_:)`` when
  /// another run holds it: its lines fail, the others go on.
  func open(_ location: CacheLocation, timeToLive: TimeInterval?) throws -> OpenedNamespace
  /// Releases what ``open(_:timeToLive:)`` took (locks). Called once the run is over.
  func close()
}

/// Namespaces whose state lives in memory for the length of the process: for a library caller
/// that keeps no state between runs, and for tests of the pipeline. Opening a namespace twice
/// gives the same stores.
public final class MemoryNamespaces: NamespaceProvider {
  private let stores = Mutex<[String: MemoryStateStore]>([:])

  public init() {}

  /// The store of the namespace at `location`, created empty the first time.
  public func store(_ location: CacheLocation) -> MemoryStateStore {
    stores.withLock { stores in
      let key = location.directory + "\u{0}" + location.namespace
      if let known = stores[key] { return known }
      let created = MemoryStateStore()
      stores[key] = created
      return created
    }
  }

  public func open(_ location: CacheLocation, timeToLive: TimeInterval?) throws
    -> OpenedNamespace
  {
    let store = store(location)
    var hashes = Set<UInt64>()
    try store.forEachBlacklisted(now: Date(), timeToLive: timeToLive) {
      hashes.insert(BlacklistRule.hash(ofURL: $0.url))
    }
    return OpenedNamespace(blacklist: store, validators: store, blacklistHashes: hashes)
  }

  public func close() {}
}

/// A blacklist and validators in memory, with the state store's rules (masked passwords, one
/// entry per URL counting its failures).
public final class MemoryStateStore: BlacklistStore, ValidatorStore {
  private let blacklist = Mutex<[String: BlacklistEntry]>([:])
  private let validatorsByKey = Mutex<[String: CacheValidators]>([:])
  private let urlsByFileName = Mutex<[String: StoredURL]>([:])

  public init() {}

  public func recordFailure(url: String, code: Int, name: String, reason: String, at date: Date) {
    let url = url.maskingURLPasswords
    let reason = reason.maskingURLPasswords
    blacklist.withLock { entries in
      var entry =
        entries[url]
        ?? BlacklistEntry(
          url: url, code: code, name: name, reason: reason, firstFailedAt: date,
          lastFailedAt: date, failureCount: 0)
      entry.code = code
      entry.name = name
      entry.reason = reason
      entry.lastFailedAt = date
      entry.failureCount += 1
      entries[url] = entry
    }
  }

  @discardableResult public func removeFromBlacklist(url: String) -> Bool {
    blacklist.withLock { $0.removeValue(forKey: url.maskingURLPasswords) != nil }
  }

  public func forEachBlacklisted(
    now: Date, timeToLive: TimeInterval?, _ body: (BlacklistEntry) throws -> Void
  ) rethrows {
    let entries = blacklist.withLock { Array($0.values) }.sorted {
      ($0.firstFailedAt, $0.url) < ($1.firstFailedAt, $1.url)
    }
    for entry in entries where entry.isActive(at: now, timeToLive: timeToLive) {
      try body(entry)
    }
  }

  /// The entry of `url`, active or not.
  public func blacklistEntry(url: String) -> BlacklistEntry? {
    blacklist.withLock { $0[url.maskingURLPasswords] }
  }

  public func isBlacklisted(url: String, at now: Date, timeToLive: TimeInterval?) -> Bool {
    blacklistEntry(url: url)?.isActive(at: now, timeToLive: timeToLive) ?? false
  }

  public func validators(forKey cacheKey: String) -> CacheValidators? {
    validatorsByKey.withLock { $0[cacheKey] }
  }

  public func setValidators(_ batch: [CacheValidators]) {
    validatorsByKey.withLock { stored in
      for validators in batch { stored[validators.cacheKey] = validators }
    }
  }

  public func removeValidators(forKey cacheKey: String) {
    validatorsByKey.withLock { _ = $0.removeValue(forKey: cacheKey) }
  }

  public func setStoredURLs(_ batch: [StoredURL]) {
    urlsByFileName.withLock { stored in
      for var entry in batch {
        entry.url = entry.url.maskingURLPasswords
        stored[entry.fileName] = entry
      }
    }
  }

  /// The URL the file `fileName` was last downloaded from.
  public func storedURL(forFileName fileName: String) -> StoredURL? {
    urlsByFileName.withLock { $0[fileName] }
  }
}
