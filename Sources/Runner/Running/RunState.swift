import Core
import Dispatch
import Foundation
import Pipeline
import State
import Synchronization

/// A prefetch's own state store (its default namespace's, under the run's lock), opened on a
/// thread of its own while the first requests go out (issue 46): creating or checking the
/// SQLite file, migrating it and recording the run take longer than a near server's answer.
///
/// The first decisions need the default namespace's blacklist: it is read before the opening
/// starts, from the state files as the earlier runs left them (none in a new cache), the run's
/// own file read-only and its dates as ``StateStore/beginRun(job:at:)`` will leave them. When
/// that file cannot be read so (corrupt, not SQLite's, not a plain file), the namespace waits
/// for the opening instead, which moves it aside or fails as it always did. The blacklist's and
/// the validators' writes, and the store of a download, wait for the opening. An opening that
/// fails ends the prefetch at once and the run with its error, as when it failed before any
/// request (``opened()``).
final class RunState: BlacklistStore, ValidatorStore, Sendable {
  /// The store opened, and the run recorded in it.
  struct Opened: Sendable {
    var store: StateStore
    var runID: Int64
    /// Earlier runs still marked running: they died without finishing.
    var abandoned: Int
  }

  private let location: CacheLocation
  /// The default namespace's blacklist read before the opening, with what could not be read
  /// of the other state files and whether the run's own file was there (and so checked
  /// intact); `nil` when the run's own file could not be read so.
  private let early:
    (
      blacklistHashes: Set<UInt64>, otherBlacklists: [OtherStateFile], warnings: [String],
      checkedOwn: Bool, refusals: [OriginRefusal]
    )?
  private let opening = DispatchGroup()
  private let result = Mutex<Result<Opened, any Error>?>(nil)

  /// The run was stopped (a signal, its time limit) while the opening waited for another
  /// connection's lock on the state: the opening ends at once, with this error, and the run is
  /// interrupted, not failed (SPEC section 5).
  struct OpeningInterrupted: Error, CustomStringConvertible {
    var underlying: StateStoreError
    var description: String { "stopped while waiting for the state's lock: \(underlying)" }
  }

  /// Reads the blacklist, then starts opening the store of `location` (`shard`'s own file)
  /// and recording the run `job` started at `startedAt`. Call it under the run's lock, and wait
  /// for ``opened()`` before releasing it. Once `stop` is set, the opening waits no longer for
  /// another connection's lock on the state: it ends with ``OpeningInterrupted``.
  init(
    location: CacheLocation, shard: Shard?, job: String, startedAt: Date,
    timeToLive: TimeInterval?, stop: StopFlag
  ) {
    self.location = location
    // Before the opening starts: it creates and migrates the file being read.
    early = Self.blacklistBeforeOpening(
      location: location, shard: shard, startedAt: startedAt, timeToLive: timeToLive)
    opening.enter()
    // A large state's check takes long: the one made before is not made again.
    let checkedIntact = early?.checkedOwn ?? false
    OwnThread.start(name: "ic-state") { [self] in
      let opened = Result { () throws -> Opened in
        do {
          let store = try StateStore(
            location: location, shard: shard, checkedIntact: checkedIntact, stop: stop)
          let (runID, abandoned) = try store.beginRun(job: job, at: startedAt)
          return Opened(store: store, runID: runID, abandoned: abandoned)
        } catch let error as StateStoreError where error.isBusy && stop.isStopped {
          throw OpeningInterrupted(underlying: error)
        }
      }
      result.withLock { $0 = opened }
      opening.leave()
    }
  }

  /// The default namespace's blacklist as the opening leaves it, what could not be read of
  /// its other state files, and whether the run's own file was there to check; `nil` when it
  /// cannot be read without opening it for writing.
  private static func blacklistBeforeOpening(
    location: CacheLocation, shard: Shard?, startedAt: Date, timeToLive: TimeInterval?
  ) -> (
    blacklistHashes: Set<UInt64>, otherBlacklists: [OtherStateFile], warnings: [String],
    checkedOwn: Bool, refusals: [OriginRefusal]
  )? {
    let own = (location.stateDirectory as NSString).appendingPathComponent(
      StateStore.fileName(shard: shard))
    var warnings: [String] = []
    do {
      let store = try StateStore.openForReading(path: own)
      guard try store?.isIntact() ?? true else { return nil }
      // The run's own file is looked up through the opened store, which the run writes.
      let blacklist = try StateStore.blacklistHashesOfEveryStateFile(
        location: location, timeToLive: timeToLive, opened: store, runStartingAt: startedAt
      ) { path, error in warnings.append(StateNamespaces.notRead(path, error)) }
      // Only a help: a table that cannot be read leaves the run to find its limits afresh.
      let refusals = (try? store?.refusals(at: startedAt)) ?? []
      return (blacklist.hashes, blacklist.others, warnings, store != nil, refusals)
    } catch {
      return nil
    }
  }

  /// The origins that refused at the knee of their adaptive limit in earlier runs, still
  /// remembered (``OriginRefusal``), as the run's own file was read before the opening; none
  /// when it could not be read so.
  var refusals: [OriginRefusal] { early?.refusals ?? [] }

  /// Waits for the opening: the store and the run, or why it could not be opened.
  func opened() async -> Result<Opened, any Error> {
    await withCheckedContinuation { continuation in
      opening.notify(queue: .global()) { [self] in
        continuation.resume(returning: result.withLock { $0! })
      }
    }
  }

  /// Blocks the caller until the opening has ended, whichever way.
  func waitForOpening() { opening.wait() }

  /// The store, once open (blocking the caller until it is), or the opening's error.
  private var store: StateStore {
    get throws {
      opening.wait()
      return try result.withLock { $0! }.get().store
    }
  }

  /// The default namespace as the run opens it: its blacklist read before the opening when it
  /// could be, else through the opened store.
  func openNamespace(timeToLive: TimeInterval?) throws -> OpenedNamespace {
    if let early {
      return OpenedNamespace(
        blacklist: self, validators: self, blacklistHashes: early.blacklistHashes,
        otherBlacklists: early.otherBlacklists, warnings: early.warnings)
    }
    return try StateNamespaces.opened(location, store: store, timeToLive: timeToLive)
  }

  func recordFailure(url: String, code: Int, name: String, reason: String, at date: Date)
    throws
  {
    try store.recordFailure(url: url, code: code, name: name, reason: reason, at: date)
  }

  /// Waits for the opening, as a write does: the entry is the one the run's store holds.
  func isBlacklisted(url: String, at now: Date, timeToLive: TimeInterval?) throws -> Bool {
    try waitUntilWritable()
    return try store.isBlacklisted(url: url, at: now, timeToLive: timeToLive)
  }

  func removeFromBlacklist(url: String) throws -> Bool {
    try store.removeFromBlacklist(url: url)
  }

  func forEachBlacklisted(
    now: Date, timeToLive: TimeInterval?, _ body: (BlacklistEntry) throws -> Void
  ) throws {
    try store.forEachBlacklisted(now: now, timeToLive: timeToLive, body)
  }

  func validators(forKey cacheKey: String) throws -> CacheValidators? {
    try store.validators(forKey: cacheKey)
  }

  func setValidators(_ batch: [CacheValidators]) throws { try store.setValidators(batch) }

  func removeValidators(forKey cacheKey: String) throws {
    try store.removeValidators(forKey: cacheKey)
  }

  func setStoredURLs(_ batch: [StoredURL]) throws { try store.setStoredURLs(batch) }

  /// A download answered before the opening ends waits for it, and is not stored when it
  /// failed: the run ends with no outcome, as when the state failed before the first request.
  /// One whose opening the run's stop ended is cancelled (`CancellationError`), not failed.
  func waitUntilWritable() throws {
    do {
      _ = try store
    } catch is OpeningInterrupted {
      throw CancellationError()
    }
  }
}

/// A prefetch's items: the first at once, the others once the run's state has opened. The
/// first request goes out beside the opening, and the run takes its connections, file
/// descriptors and memory only once the state holds its own, as when the state opened first
/// (a low `ulimit -n` still stops the run at a download, naming the limit). Read on the item
/// feed's own thread, which alone waits, having handed the first item on.
struct StateGatedItems<Base: Sequence & Sendable>: Sequence, Sendable {
  let base: Base
  let state: RunState

  func makeIterator() -> Iterator { Iterator(base: base.makeIterator(), state: state) }

  struct Iterator: IteratorProtocol {
    var base: Base.Iterator
    let state: RunState
    /// Whether the first item was read, and whether the state was waited for since.
    var first = false
    var waited = false

    mutating func next() -> Base.Element? {
      if first && !waited {
        ProducerContext.current?.willWait()
        state.waitForOpening()
        waited = true
      }
      first = true
      return base.next()
    }
  }
}
