import Core
import Foundation
import GRDB
import GRDBSQLite

extension StateStore {
  public func validators(forKey cacheKey: String) throws -> CacheValidators? {
    try read { db in try CacheValidators.fetchOne(db, key: cacheKey) }
  }

  public func setValidators(_ validators: CacheValidators) throws {
    try setValidators([validators])
  }

  /// Stores many keys' validators in one transaction.
  public func setValidators(_ batch: [CacheValidators]) throws {
    try upsert(
      sql: """
        INSERT INTO validators (cacheKey, etag, lastModified, updatedAt) VALUES (?, ?, ?, ?)
        ON CONFLICT (cacheKey) DO UPDATE SET
          etag = excluded.etag, lastModified = excluded.lastModified,
          updatedAt = excluded.updatedAt
        """,
      batch.map {
        [$0.cacheKey, $0.etag, $0.lastModified, Self.databaseText($0.updatedAt)]
      })
  }

  /// Records which URL each file of the batch was downloaded from, in one transaction (issue
  /// 45). The URLs' passwords are masked here, whatever the caller passed.
  public func setStoredURLs(_ batch: [StoredURL]) throws {
    try upsert(
      sql: """
        INSERT INTO stored (fileName, url, storedAt) VALUES (?, ?, ?)
        ON CONFLICT (fileName) DO UPDATE SET url = excluded.url, storedAt = excluded.storedAt
        """,
      batch.map { [$0.fileName, $0.url.maskingURLPasswords, Self.databaseText($0.storedAt)] })
  }

  /// The URL the file `fileName` of the namespace folder was last downloaded from, when this
  /// state knows it; `nil` too for a state written before the state learnt URLs.
  public func storedURL(forFileName fileName: String) throws -> StoredURL? {
    try read { db in
      guard try db.tableExists("stored") else { return nil }
      return try Row.fetchOne(
        db, sql: "SELECT url, storedAt FROM stored WHERE fileName = ?", arguments: [fileName]
      ).map { row in
        StoredURL(
          fileName: fileName, url: try row.decode(forColumn: "url"),
          storedAt: try row.decode(forColumn: "storedAt"))
      }
    }
  }

  /// Runs the insert `sql` once per row of `rows` (its parameters in order, `nil` as NULL), all
  /// in one transaction.
  private func upsert(sql: String, _ rows: [[String?]]) throws {
    guard !rows.isEmpty else { return }
    try write { db in
      // One prepared statement for the batch: the record API would build its SQL per row.
      let statement = try db.cachedStatement(sql: sql)
      // Bound and stepped through SQLite's own calls: GRDB's arguments (an array of values,
      // each converted, then checked against the statement) cost as much as SQLite's upsert
      // itself, once per download.
      let handle = statement.sqliteStatement
      defer {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
      }
      for row in rows {
        sqlite3_reset(handle)
        let code = Self.bind(row, to: handle) { sqlite3_step(handle) }
        guard code == SQLITE_DONE else {
          throw DatabaseError(
            resultCode: ResultCode(rawValue: code),
            message: db.lastErrorMessage, sql: statement.sql)
        }
      }
    }
  }

  /// `SQLITE_TRANSIENT`: SQLite copies the text before the call returns.
  private static var copiedText: sqlite3_destructor_type {
    unsafeBitCast(-1, to: sqlite3_destructor_type.self)
  }

  /// Binds `values` to the parameters of `statement` in order (`nil` as NULL) and returns what
  /// `body` returns while they are bound: the text is SQLite's to read only until then.
  private static func bind(
    _ values: [String?], to statement: OpaquePointer, from index: Int = 0,
    _ body: () -> Int32
  ) -> Int32 {
    guard index < values.count else { return body() }
    let parameter = Int32(index + 1)
    guard var value = values[index] else {
      sqlite3_bind_null(statement, parameter)
      return bind(values, to: statement, from: index + 1, body)
    }
    return value.withUTF8 { text in
      // By length, as GRDB binds text. Not copied: SQLite reads it in place until `body` has
      // stepped.
      if let bytes = UnsafeRawPointer(text.baseAddress) {
        sqlite3_bind_text(
          statement, parameter, bytes.assumingMemoryBound(to: CChar.self), Int32(text.count), nil)
      } else {
        sqlite3_bind_text(statement, parameter, "", 0, Self.copiedText)  // text, not NULL
      }
      return bind(values, to: statement, from: index + 1, body)
    }
  }

  /// `date` as GRDB stores a `Date` ("yyyy-MM-dd HH:mm:ss.SSS", UTC, to the nearest millisecond),
  /// and reads back, made without GRDB's `DateFormatter`: one is formatted per download, and
  /// ICU's formatting was most of what writing validators cost.
  package static func databaseText(_ date: Date) -> String {
    // Half a millisecond rounds up, as Foundation's formatter rounds (floor(x + 0.5)), also
    // before 1970, where rounding away from zero would write a millisecond less.
    let time = UTCTime(
      millisecondsSince1970: Int64((date.timeIntervalSince1970 * 1000 + 0.5).rounded(.down)))
    let fields: [(value: Int, digits: Int, separator: UInt8?)] = [
      (time.year, 4, UInt8(ascii: "-")), (time.month, 2, UInt8(ascii: "-")),
      (time.day, 2, UInt8(ascii: " ")), (time.hour, 2, UInt8(ascii: ":")),
      (time.minute, 2, UInt8(ascii: ":")), (time.second, 2, UInt8(ascii: ".")),
      (time.millisecond, 3, nil),
    ]
    // Written in place, digit by digit: one is made per download.
    return String(unsafeUninitializedCapacity: 23) { text in
      var end = 0
      for field in fields {
        var value = field.value
        for index in stride(from: end + field.digits - 1, through: end, by: -1) {
          text[index] = UInt8(ascii: "0") + UInt8(value % 10)
          value /= 10
        }
        end += field.digits
        if let separator = field.separator {
          text[end] = separator
          end += 1
        }
      }
      return end
    }
  }

  public func removeValidators(forKey cacheKey: String) throws {
    _ = try write { db in try CacheValidators.deleteOne(db, key: cacheKey) }
  }
}
