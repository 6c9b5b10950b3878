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
