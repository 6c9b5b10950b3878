import Foundation

/// Which file date maintenance compares, SD's `SDImageCacheConfigExpireType` (SPEC section 4).
public enum ExpireType: String, Sendable, Codable, CaseIterable {
  case accessDate
  case modificationDate
  case creationDate
  /// The inode change time (ctime), SD's NSURLAttributeModificationDateKey.
  case changeDate
}

/// One thing a maintenance pass did, or would do under `--dry-run`.
public struct MaintenanceAction: Sendable, Codable, Equatable {
  public enum Kind: String, Sendable, Codable {
    case delete
    case move
    /// A name collision: the older file was kept aside instead of overwriting the newer one.
    case keptAside
  }

  public var kind: Kind
  /// The file, relative to the disk cache path when it is inside it.
  public var path: String
  /// Where it goes, for moves.
  public var destination: String?
  public var bytes: UInt64
  public var date: Date?

  public init(kind: Kind, path: String, destination: String? = nil, bytes: UInt64, date: Date? = nil) {
    self.kind = kind
    self.path = path
    self.destination = destination
    self.bytes = bytes
    self.date = date
  }
}

/// One maintenance pass in a report (SPEC section 6).
public struct MaintenancePassReport: Sendable, Codable, Equatable {
  public enum Pass: String, Sendable, Codable {
    case migrate
    case expire
    case trim
  }

  public var pass: Pass
  public var dryRun: Bool
  public var filesRemoved = 0
  public var filesMoved = 0
  /// Allocated bytes of the removed files.
  public var bytesFreed: UInt64 = 0
  /// Per-file errors; the pass went on after each.
  public var errors: [String] = []
  /// Every action taken (or, in a dry run, planned), in order.
  public var actions: [MaintenanceAction] = []

  public init(pass: Pass, dryRun: Bool) {
    self.pass = pass
    self.dryRun = dryRun
  }

  mutating func record(_ action: MaintenanceAction) {
    actions.append(action)
    switch action.kind {
    case .delete:
      filesRemoved += 1
      bytesFreed += action.bytes
    case .move:
      filesMoved += 1
    case .keptAside:
      break
    }
  }

  /// Records a delete (or, in a dry run, a planned one).
  public mutating func recordDelete(path: String, bytes: UInt64, date: Date?) {
    record(MaintenanceAction(kind: .delete, path: path, bytes: bytes, date: date))
  }

  /// Records a move (or a planned one).
  public mutating func recordMove(from path: String, to destination: String, bytes: UInt64) {
    record(MaintenanceAction(kind: .move, path: path, destination: destination, bytes: bytes))
  }

  /// Records a collision whose loser was kept at `aside`.
  public mutating func recordKeptAside(path: String, aside: String, bytes: UInt64) {
    record(MaintenanceAction(kind: .keptAside, path: path, destination: aside, bytes: bytes))
  }
}
