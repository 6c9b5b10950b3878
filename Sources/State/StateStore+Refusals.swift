import Core
import Foundation
import GRDB

/// The origins that refused at the knee of their adaptive per-host limit (``OriginRefusal``):
/// a run keeps each origin's limit under its own for a week, so that a busy origin is not
/// asked past its knee every night.
extension StateStore {
  /// The refusals still remembered at `now` (``OriginRefusal/isRemembered(at:)``), by origin;
  /// none in a state written before refusals were kept, and none of one transfer alone (an
  /// outage's, which no limit is under, and which earlier builds kept).
  public func refusals(at now: Date) throws -> [OriginRefusal] {
    try read { db in
      guard try db.tableExists("refusals") else { return [] }
      return try Row.fetchAll(db, sql: "SELECT * FROM refusals ORDER BY scheme, host, port")
        .map { row in
          OriginRefusal(
            origin: Origin(
              scheme: try row.decode(forColumn: "scheme"), host: try row.decode(forColumn: "host"),
              port: try row.decode(forColumn: "port")),
            inFlight: try row.decode(forColumn: "inFlight"),
            since: try row.decode(forColumn: "since"))
        }
        .filter { $0.isRemembered(at: now) && $0.inFlight > 1 }
    }
  }

  /// Keeps what a run found (``Downloader/refusals``): each origin's refusal, or, where it is
  /// `nil`, that the origin since served as many cleanly (its row is forgotten); and forgets the
  /// refusals no longer remembered at `now`. One transaction.
  public func remember(_ found: [Origin: OriginRefusal?], at now: Date) throws {
    try write { db in
      for (origin, refusal) in found {
        if let refusal {
          try db.execute(
            sql: """
              INSERT INTO refusals (scheme, host, port, inFlight, since) VALUES (?, ?, ?, ?, ?)
              ON CONFLICT (scheme, host, port) DO UPDATE SET
                inFlight = excluded.inFlight, since = excluded.since
              """,
            arguments: [
              origin.scheme, origin.host, origin.port, refusal.inFlight,
              Self.databaseText(refusal.since),
            ])
        } else {
          try Self.forget(origin, in: db)
        }
      }
      try db.execute(
        sql: "DELETE FROM refusals WHERE since <= ? OR since > ?",
        arguments: [
          Self.databaseText(now.addingTimeInterval(-OriginRefusal.lifetime)),
          Self.databaseText(now),
        ])
    }
  }

  /// Forgets the refusals of `origins`, or every origin's (`nil`), so that the next run asks
  /// those origins for more again; returns those of them still remembered at `now`.
  public func forgetRefusals(of origins: [Origin]? = nil, at now: Date) throws -> Set<Origin> {
    let remembered = Set(try refusals(at: now).map(\.origin))
    return try write { db in
      guard try db.tableExists("refusals") else { return [] }
      guard let origins else {
        try db.execute(sql: "DELETE FROM refusals")
        return remembered
      }
      for origin in origins { try Self.forget(origin, in: db) }
      return remembered.intersection(origins)
    }
  }

  /// Deletes `origin`'s row.
  private static func forget(_ origin: Origin, in db: Database) throws {
    try db.execute(
      sql: "DELETE FROM refusals WHERE scheme = ? AND host = ? AND port = ?",
      arguments: [origin.scheme, origin.host, origin.port])
  }
}
