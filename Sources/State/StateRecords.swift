import Core
import Foundation
import GRDB

// `BlacklistEntry` and `CacheValidators` are Core's plain values (the pipeline holds them with
// no database); their rows are defined here.

extension BlacklistEntry: FetchableRecord, PersistableRecord {
  public static let databaseTableName = "blacklist"

  /// Reads the columns one by one: GRDB's `Decodable` path (a decoder per row, and generic
  /// look-ups on its first use) cost more than the query itself, and every run reads the
  /// blacklist when it starts and again for its report.
  public init(row: Row) throws {
    self.init(
      url: try row.decode(forColumn: "url"), code: try row.decode(forColumn: "code"),
      name: try row.decode(forColumn: "name"), reason: try row.decode(forColumn: "reason"),
      firstFailedAt: try row.decode(forColumn: "firstFailedAt"),
      lastFailedAt: try row.decode(forColumn: "lastFailedAt"),
      failureCount: try row.decode(forColumn: "failureCount"))
  }
}

extension CacheValidators: FetchableRecord, PersistableRecord {
  public static let databaseTableName = "validators"
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
