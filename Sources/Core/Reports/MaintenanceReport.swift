import Foundation

/// Which file date maintenance compares, SD's `SDImageCacheConfigExpireType` (SPEC section 4).
public enum ExpireType: String, Sendable, Codable, CaseIterable {
  case accessDate
  case modificationDate
  case creationDate
  /// The inode change time (ctime), SD's NSURLAttributeModificationDateKey.
  case changeDate
}

/// The limits the expire and trim passes ran with, as a report states them (SD's
/// `maxDiskAge`, `maxDiskSize` and `expireType`; SPEC section 4): what a person reading the
/// report needs to tell a pass that deleted by age from one that trimmed by size.
public struct CleanupLimits: Sendable, Codable, Equatable {
  /// Seconds; negative: the expire pass was off (not listed, or a negative age).
  package var maxDiskAge: Double
  /// Bytes; zero: the trim pass was off (not listed, or no size).
  package var maxDiskSize: UInt64
  package var expireType: ExpireType

  public init(maxDiskAge: Double, maxDiskSize: UInt64, expireType: ExpireType) {
    self.maxDiskAge = maxDiskAge
    self.maxDiskSize = maxDiskSize
    self.expireType = expireType
  }
}

/// One thing a maintenance pass did, or would do under `--dry-run`.
public struct MaintenanceAction: Sendable, Codable, Equatable {
  public enum Kind: String, Sendable, Codable, CaseIterable {
    case delete
    case move
    /// A name collision: the older file was kept aside instead of overwriting the newer one.
    case keptAside
    /// Downloaded again from ``url`` and stored in place (`verify --repair refetch`).
    case refetch
  }

  package var kind: Kind
  /// The file, relative to the disk cache path when it is inside it.
  package var path: String
  /// Where it goes, for moves.
  package var destination: String?
  package var bytes: UInt64
  package var date: Date?
  /// Where a refetch downloads the file from (its password masked).
  package var url: String?
  /// Why a repair did other than it was asked: a file quarantined instead of refetched.
  package var reason: String?

  public init(
    kind: Kind, path: String, destination: String? = nil, bytes: UInt64, date: Date? = nil,
    url: String? = nil, reason: String? = nil
  ) {
    self.kind = kind
    self.path = path
    self.destination = destination
    self.bytes = bytes
    self.date = date
    self.url = url
    self.reason = reason
  }
}

/// What a maintenance pass did, counted: the figures a report and the console give.
public struct PassSummary: Sendable, Equatable {
  package var pass: MaintenancePassReport.Pass
  package var dryRun: Bool
  package var filesRemoved = 0
  package var filesMoved = 0
  /// Name collisions whose loser was kept aside.
  package var filesKeptAside = 0
  /// Allocated bytes of the removed files.
  package var bytesFreed: UInt64 = 0
  /// Files the pass meant to remove and could not (`EPERM`, an immutable file...): each is
  /// among the errors with its reason, and the run's exit code is 1.
  package var filesNotRemoved = 0
  /// Bad files downloaded again and stored in place (`verify --repair refetch`).
  package var filesRefetched = 0
  /// Bad files whose refetch failed: each was quarantined instead and is among the errors.
  package var filesNotRefetched = 0
  package var errorCount = 0
  /// The limits an expire or trim pass ran with.
  package var limits: CleanupLimits?
  /// The allocated bytes of the cache's files (a shard's: its own) before and after an expire
  /// or trim pass (in a dry run: as they would be after); unknown when the pass was stopped.
  package var cacheBytesBefore: UInt64?
  package var cacheBytesAfter: UInt64?

  public init(pass: MaintenancePassReport.Pass, dryRun: Bool) {
    self.pass = pass
    self.dryRun = dryRun
  }

  mutating func count(_ action: MaintenanceAction) {
    switch action.kind {
    case .delete:
      filesRemoved += 1
      bytesFreed += action.bytes
    case .move:
      filesMoved += 1
    case .keptAside:
      filesKeptAside += 1
    case .refetch:
      filesRefetched += 1
    }
  }
}

/// Receives a maintenance pass's actions and per-file errors as they happen, so that a report
/// can be streamed instead of held (SPEC section 6). ``MaintenancePassReport`` keeps them in
/// memory; the runner's report writer writes them out.
public protocol MaintenanceRecorder {
  var summary: PassSummary { get set }
  /// Keeps or writes one action (already counted).
  mutating func keep(_ action: MaintenanceAction)
  /// Keeps or writes one per-file error (already counted).
  mutating func keep(error: String)
}

extension MaintenanceRecorder {
  public mutating func record(_ action: MaintenanceAction) {
    summary.count(action)
    keep(action)
  }

  /// Records a per-file error; the pass goes on.
  public mutating func recordError(_ message: String) {
    summary.errorCount += 1
    keep(error: message)
  }

  /// Records a file the pass meant to remove and could not; the pass goes on.
  package mutating func recordNotRemoved(_ error: FileSystemError) {
    summary.filesNotRemoved += 1
    recordError("\(error)")
  }

  /// Records a delete (or, in a dry run, a planned one).
  public mutating func recordDelete(path: String, bytes: UInt64, date: Date?) {
    record(MaintenanceAction(kind: .delete, path: path, bytes: bytes, date: date))
  }

  /// Records a move (or a planned one); `reason` says why a repair moved a file it was asked
  /// to refetch.
  public mutating func recordMove(
    from path: String, to destination: String, bytes: UInt64, reason: String? = nil
  ) {
    record(
      MaintenanceAction(
        kind: .move, path: path, destination: destination, bytes: bytes, reason: reason))
  }

  /// Records a file downloaded again from `url` and stored in place (or a planned refetch).
  public mutating func recordRefetch(path: String, url: String, bytes: UInt64) {
    record(MaintenanceAction(kind: .refetch, path: path, bytes: bytes, url: url))
  }

  /// Records a refetch that failed; the file is quarantined instead, recorded on its own.
  public mutating func recordNotRefetched(path: String, url: String, reason: String) {
    summary.filesNotRefetched += 1
    recordError("\(path): refetch of \(url.maskingURLPasswords) failed: \(reason)")
  }

  /// Records a collision whose loser was kept at `aside`.
  public mutating func recordKeptAside(path: String, aside: String, bytes: UInt64) {
    record(MaintenanceAction(kind: .keptAside, path: path, destination: aside, bytes: bytes))
  }
}

/// One maintenance pass in a report (SPEC section 6), held in memory: what a decoded report
/// holds, and a recorder for callers that want the whole pass back.
public struct MaintenancePassReport: Sendable, Codable, Equatable, MaintenanceRecorder {
  public enum Pass: String, Sendable, Codable, CaseIterable {
    case migrate
    case expire
    case trim
    /// `verify --repair`: bad files quarantined (moved), deleted or refetched.
    case repair
  }

  package var pass: Pass
  package var dryRun: Bool
  package var filesRemoved = 0
  package var filesMoved = 0
  /// Allocated bytes of the removed files.
  package var bytesFreed: UInt64 = 0
  /// Files the pass meant to remove and could not, each with its reason in `errors` (absent
  /// from the reports of versions before it).
  package var filesNotRemoved: Int?
  /// A repair pass's files downloaded again and stored in place, and those whose download
  /// failed (quarantined instead); absent from other passes and from earlier reports.
  package var filesRefetched: Int?
  package var filesNotRefetched: Int?
  /// Per-file errors; the pass went on after each.
  package var errors: [String] = []
  /// Every action taken (or, in a dry run, planned), in order.
  package private(set) var actions: [MaintenanceAction] = []
  /// The name collisions among ``actions``, counted as they are kept: ``summary`` is read at
  /// every record, and counting them there made recording a pass quadratic in its files.
  private var filesKeptAside = 0
  /// The limits an expire or trim pass ran with (absent from migrate passes and from the
  /// reports of versions before them).
  package var limits: CleanupLimits?
  /// The allocated bytes of the cache's files (a shard's: its own) before and after an expire
  /// or trim pass (in a dry run: as they would be after).
  package var cacheBytesBefore: UInt64?
  package var cacheBytesAfter: UInt64?

  package init(pass: Pass, dryRun: Bool) {
    self.pass = pass
    self.dryRun = dryRun
  }

  private enum CodingKeys: String, CodingKey {
    case pass, dryRun, filesRemoved, filesMoved, bytesFreed, filesNotRemoved, errors, actions
    case limits, cacheBytesBefore, cacheBytesAfter, filesRefetched, filesNotRefetched
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    pass = try container.decode(Pass.self, forKey: .pass)
    dryRun = try container.decode(Bool.self, forKey: .dryRun)
    filesRemoved = try container.decode(Int.self, forKey: .filesRemoved)
    filesMoved = try container.decode(Int.self, forKey: .filesMoved)
    bytesFreed = try container.decode(UInt64.self, forKey: .bytesFreed)
    filesNotRemoved = try container.decodeIfPresent(Int.self, forKey: .filesNotRemoved)
    filesRefetched = try container.decodeIfPresent(Int.self, forKey: .filesRefetched)
    filesNotRefetched = try container.decodeIfPresent(Int.self, forKey: .filesNotRefetched)
    errors = try container.decode([String].self, forKey: .errors)
    actions = try container.decode([MaintenanceAction].self, forKey: .actions)
    limits = try container.decodeIfPresent(CleanupLimits.self, forKey: .limits)
    cacheBytesBefore = try container.decodeIfPresent(UInt64.self, forKey: .cacheBytesBefore)
    cacheBytesAfter = try container.decodeIfPresent(UInt64.self, forKey: .cacheBytesAfter)
    filesKeptAside = actions.lazy.filter { $0.kind == .keptAside }.count
  }

  public var summary: PassSummary {
    get {
      var summary = PassSummary(pass: pass, dryRun: dryRun)
      summary.filesRemoved = filesRemoved
      summary.filesMoved = filesMoved
      summary.filesKeptAside = filesKeptAside
      summary.bytesFreed = bytesFreed
      summary.filesNotRemoved = filesNotRemoved ?? 0
      summary.filesRefetched = filesRefetched ?? 0
      summary.filesNotRefetched = filesNotRefetched ?? 0
      summary.errorCount = errors.count
      summary.limits = limits
      summary.cacheBytesBefore = cacheBytesBefore
      summary.cacheBytesAfter = cacheBytesAfter
      return summary
    }
    set {
      filesRemoved = newValue.filesRemoved
      filesMoved = newValue.filesMoved
      bytesFreed = newValue.bytesFreed
      filesNotRemoved = newValue.filesNotRemoved
      if pass == .repair {
        filesRefetched = newValue.filesRefetched
        filesNotRefetched = newValue.filesNotRefetched
      }
      limits = newValue.limits
      cacheBytesBefore = newValue.cacheBytesBefore
      cacheBytesAfter = newValue.cacheBytesAfter
    }
  }

  public mutating func keep(_ action: MaintenanceAction) {
    actions.append(action)
    if action.kind == .keptAside { filesKeptAside += 1 }
  }
  public mutating func keep(error: String) { errors.append(error) }
}
