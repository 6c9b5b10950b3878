import Core
import Foundation
import GRDB

/// One URL on the failed-URL blacklist (SPEC section 2). Unlike SD's in-memory set it persists
/// across runs and remembers when and why the URL failed.
public struct BlacklistEntry: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
  public static let databaseTableName = "blacklist"

  public var url: String
  public var code: Int
  public var name: String
  public var reason: String
  public var firstFailedAt: Date
  public var lastFailedAt: Date
  public var failureCount: Int

  public init(
    url: String, code: Int, name: String, reason: String, firstFailedAt: Date,
    lastFailedAt: Date, failureCount: Int
  ) {
    self.url = url
    self.code = code
    self.name = name
    self.reason = reason
    self.firstFailedAt = firstFailedAt
    self.lastFailedAt = lastFailedAt
    self.failureCount = failureCount
  }

  /// Reads the columns one by one: GRDB's `Decodable` path (a decoder per row, and generic
  /// look-ups on its first use) cost more than the query itself, and every run reads the
  /// blacklist when it starts and again for its report.
  public init(row: Row) throws {
    url = try row.decode(forColumn: "url")
    code = try row.decode(forColumn: "code")
    name = try row.decode(forColumn: "name")
    reason = try row.decode(forColumn: "reason")
    firstFailedAt = try row.decode(forColumn: "firstFailedAt")
    lastFailedAt = try row.decode(forColumn: "lastFailedAt")
    failureCount = try row.decode(forColumn: "failureCount")
  }

  /// Whether the entry still counts at `now`, given an optional time-to-live after the last
  /// failure.
  public func isActive(at now: Date, timeToLive: TimeInterval?) -> Bool {
    BlacklistRule.isActive(lastFailedAt: lastFailedAt, at: now, timeToLive: timeToLive)
  }
}

/// The HTTP validators stored for a cache key, used by `refreshCached` to revalidate
/// (SPEC section 3).
public struct CacheValidators: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
  public static let databaseTableName = "validators"

  public var cacheKey: String
  public var etag: String?
  public var lastModified: String?
  public var updatedAt: Date

  public init(cacheKey: String, etag: String?, lastModified: String?, updatedAt: Date) {
    self.cacheKey = cacheKey
    self.etag = etag
    self.lastModified = lastModified
    self.updatedAt = updatedAt
  }
}

// The records write their dates as GRDB's text made by hand (``StateStore/databaseText(_:)``),
// through GRDB's own date encoding strategy: its default formats a `Date` with an ICU
// `DateFormatter`, whose creation alone was a few milliseconds of every run's start. The text
// is GRDB's to the character, so dates read back as any `Date` does.

extension BlacklistEntry {
  public static func databaseDateEncodingStrategy(for column: String)
    -> DatabaseDateEncodingStrategy
  { .custom(StateStore.databaseText) }
}

extension CacheValidators {
  public static func databaseDateEncodingStrategy(for column: String)
    -> DatabaseDateEncodingStrategy
  { .custom(StateStore.databaseText) }
}

extension RunRecord {
  public static func databaseDateEncodingStrategy(for column: String)
    -> DatabaseDateEncodingStrategy
  { .custom(StateStore.databaseText) }
}

/// One run of the tool against a cache.
public struct RunRecord: Codable, Sendable, Equatable, FetchableRecord, MutablePersistableRecord {
  public static let databaseTableName = "runs"

  public var id: Int64?
  public var job: String
  public var startedAt: Date
  public var finishedAt: Date?
  public var status: String
  public var summary: String?

  public init(job: String, startedAt: Date, status: String = "running") {
    self.job = job
    self.startedAt = startedAt
    self.status = status
  }

  public mutating func didInsert(_ inserted: InsertionSuccess) {
    id = inserted.rowID
  }
}
