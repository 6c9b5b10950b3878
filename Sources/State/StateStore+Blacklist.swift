import Core
import Foundation
import GRDB

extension StateStore {
  /// Records a failure of `url`: a new row, or the count and last failure of an existing one.
  public func recordFailure(url: String, code: Int, name: String, reason: String, at date: Date)
    throws
  {
    // The blacklist is kept by URL with its password masked (SPEC section 11): looked up the
    // same way, so a URL is found whatever password it carries.
    let url = url.maskingURLPasswords
    let reason = reason.maskingURLPasswords
    try write { db in
      if var entry = try BlacklistEntry.fetchOne(db, key: url) {
        entry.code = code
        entry.name = name
        entry.reason = reason
        entry.lastFailedAt = date
        entry.failureCount += 1
        try entry.update(db)
      } else {
        try BlacklistEntry(
          url: url, code: code, name: name, reason: reason, firstFailedAt: date,
          lastFailedAt: date, failureCount: 1
        ).insert(db)
      }
    }
  }

  /// The blacklist entry of `url` if it is still active at `now`.
  public func blacklistEntry(url: String, now: Date = Date(), timeToLive: TimeInterval? = nil)
    throws -> BlacklistEntry?
  {
    let entry = try read { db in try BlacklistEntry.fetchOne(db, key: url.maskingURLPasswords) }
    guard let entry, entry.isActive(at: now, timeToLive: timeToLive) else { return nil }
    return entry
  }

  /// Whether `url` has an entry active at `now`: the exact look-up of a URL whose hash a run
  /// holds (``BlacklistRule/hash(ofURL:)``). One indexed read; without a time-to-live, of no
  /// column (every entry is active), so no date is parsed.
  public func isBlacklisted(url: String, at now: Date, timeToLive: TimeInterval?) throws -> Bool {
    let url = url.maskingURLPasswords
    // One statement, which is atomic alone: no transaction around it (each refused URL of a
    // run reads its entry), and prepared once.
    return try readOutsideTransaction { db in
      guard let timeToLive else {
        return try Bool.fetchOne(
          try db.cachedStatement(sql: "SELECT 1 FROM blacklist WHERE url = ?"), arguments: [url]
        ) ?? false
      }
      guard
        let lastFailedAt = try Date.fetchOne(
          try db.cachedStatement(sql: "SELECT lastFailedAt FROM blacklist WHERE url = ?"),
          arguments: [url])
      else { return false }
      return BlacklistRule.isActive(lastFailedAt: lastFailedAt, at: now, timeToLive: timeToLive)
    }
  }

  /// Calls `body` with the URL of every active entry, reading them one at a time and only the
  /// columns that say so (not the reasons): what a run keeps of the blacklist is a hash of each.
  /// - Parameter runStartingAt: the entries are read as ``beginRun(job:at:)`` at that date
  ///   leaves them (the file is read before its run begins).
  public func forEachBlacklistedURL(
    now: Date = Date(), timeToLive: TimeInterval? = nil, runStartingAt: Date? = nil,
    _ body: (String) throws -> Void
  ) throws {
    try read { db in
      // As in forEachBlacklisted: a file being created this moment has no table yet.
      guard try db.tableExists("blacklist") else { return }
      guard let timeToLive else {
        // Every entry is active.
        let cursor = try String.fetchCursor(db, sql: "SELECT url FROM blacklist")
        while let url = try cursor.next() { try body(url) }
        return
      }
      let cursor = try Row.fetchCursor(db, sql: "SELECT url, lastFailedAt FROM blacklist")
      while let row = try cursor.next() {
        var lastFailedAt: Date = try row.decode(atIndex: 1)
        if let runStartingAt {
          lastFailedAt = Self.date(lastFailedAt, asRunStartingAt: runStartingAt)
        }
        if BlacklistRule.isActive(lastFailedAt: lastFailedAt, at: now, timeToLive: timeToLive) {
          try body(try row.decode(atIndex: 0))
        }
      }
    }
  }

  /// Every active entry, oldest failure first.
  public func blacklist(now: Date = Date(), timeToLive: TimeInterval? = nil) throws
    -> [BlacklistEntry]
  {
    var entries: [BlacklistEntry] = []
    try forEachBlacklisted(now: now, timeToLive: timeToLive) { entries.append($0) }
    return entries
  }

  /// Calls `body` with every active entry, oldest failure first, reading them one at a time
  /// (a report streams the blacklist instead of holding it).
  public func forEachBlacklisted(
    now: Date = Date(), timeToLive: TimeInterval? = nil, _ body: (BlacklistEntry) throws -> Void
  ) throws {
    try read { db in
      // A state file that another run is creating this moment has no table yet, and so no
      // entry: nothing is lost by reading it as empty.
      guard try db.tableExists("blacklist") else { return }
      let cursor = try BlacklistEntry.fetchCursor(
        db, sql: "SELECT * FROM blacklist ORDER BY firstFailedAt, url")
      while let entry = try cursor.next() {
        if entry.isActive(at: now, timeToLive: timeToLive) { try body(entry) }
      }
    }
  }

  /// Takes `url` off the blacklist; returns whether it was there.
  @discardableResult
  public func removeFromBlacklist(url: String) throws -> Bool {
    try write { db in try BlacklistEntry.deleteOne(db, key: url.maskingURLPasswords) }
  }

  /// Empties the blacklist; returns how many entries were removed.
  @discardableResult
  public func clearBlacklist() throws -> Int {
    try write { db in try BlacklistEntry.deleteAll(db) }
  }
}

/// Another state file of a namespace (another shard's, or one a run with another number of
/// shards left), read for the exact look-up of a URL whose hash a run holds. The first
/// ``keptOpen`` of a run stay open; the rest are opened for each look-up, so that a cache of
/// hundreds of state files costs a run no descriptor (and no page cache) for each to its end.
public final class OtherStateFile: Sendable {
  /// The most other state files a run keeps open.
  public static let keptOpen = 32

  public let path: String
  private let leavingNoTrace: Bool
  /// The file, when kept open.
  private let store: StateStore?

  init(path: String, leavingNoTrace: Bool, store: StateStore?) {
    self.path = path
    self.leavingNoTrace = leavingNoTrace
    self.store = store
  }

  /// As ``StateStore/isBlacklisted(url:at:timeToLive:)``; a file gone since holds no entry.
  public func isBlacklisted(url: String, at now: Date, timeToLive: TimeInterval?) throws -> Bool {
    let store =
      try self.store ?? StateStore.openForReading(path: path, leavingNoTrace: leavingNoTrace)
    return try store?.isBlacklisted(url: url, at: now, timeToLive: timeToLive) ?? false
  }
}
