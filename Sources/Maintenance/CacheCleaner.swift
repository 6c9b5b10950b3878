import Core
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The settings of SD's `removeExpiredData` (SPEC section 4), with SD's defaults.
public struct CleanupConfiguration: Sendable, Equatable {
  /// Files whose date is at or before `now - maxDiskAge` expire. Negative: never; zero:
  /// everything. SD's default is one week.
  public var maxDiskAge: TimeInterval = 7 * 24 * 3600 {
    didSet { maxDiskAgeIsStated = true }
  }
  /// Whether `maxDiskAge` was given (a flag, a job's `cache.maxDiskAge`) rather than SD's
  /// default: the limits line says which (SPEC section 11: no pass deletes by a limit nobody
  /// stated without saying so).
  public private(set) var maxDiskAgeIsStated = false
  /// When the remaining allocated total is strictly above this, trim to strictly below half of
  /// it, oldest first. Zero: no limit (SD's default).
  public var maxDiskSize: UInt64 = 0
  public var expireType: ExpireType = .accessDate
  /// The most the two passes may delete together; over it, nothing is deleted and the run
  /// says so. `nil`: no guard.
  public var maxDelete: DeletionLimit?

  public init() {}

  /// The limits as a report states them.
  public var limits: CleanupLimits {
    CleanupLimits(maxDiskAge: maxDiskAge, maxDiskSize: maxDiskSize, expireType: expireType)
  }

  /// The defaults, with the given settings changed.
  public init(
    maxDiskAge: TimeInterval? = nil, maxDiskSize: UInt64? = nil, expireType: ExpireType? = nil,
    maxDelete: DeletionLimit? = nil
  ) {
    if let maxDiskAge {
      self.maxDiskAge = maxDiskAge
      maxDiskAgeIsStated = true
    }
    if let maxDiskSize { self.maxDiskSize = maxDiskSize }
    if let expireType { self.expireType = expireType }
    self.maxDelete = maxDelete
  }
}

/// How much one maintenance run may delete (`--max-delete`, `cache.maxDelete`): a number of
/// files, or a share of the files the passes look at. A guard against a limit that deletes far
/// more than its author meant (a wrong unit, an access date reset by a copy).
public enum DeletionLimit: Sendable, Equatable, CustomStringConvertible {
  case files(Int)
  /// Percent of the files the passes look at, 0 to 100.
  case percent(Double)

  /// `500` (files) or `10%`; `nil` for anything else, or out of range.
  public init?(parsing text: String) {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    if trimmed.hasSuffix("%") {
      guard let value = Double(trimmed.dropLast()), value.isFinite, (0...100).contains(value)
      else { return nil }
      self = .percent(value)
    } else {
      guard let value = Int(trimmed), value >= 0 else { return nil }
      self = .files(value)
    }
  }

  /// Whether deleting `deletions` of `files` stays within the limit.
  public func allows(deletions: Int, of files: Int) -> Bool {
    switch self {
    case .files(let most): deletions <= most
    case .percent(let share): Double(deletions) <= Double(files) * share / 100
    }
  }

  public var description: String {
    switch self {
    case .files(let most): "\(most) files"
    case .percent(let share):
      (share.rounded() == share ? String(Int(share)) : String(share)) + "% of the files"
    }
  }
}

/// What the user asked for cannot be done on this cache: a usage error (exit code 2).
public enum MaintenanceError: ExitStatusProviding, Sendable, Equatable {
  /// The passes would delete more than ``CleanupConfiguration/maxDelete`` allows.
  case overDeletionLimit(planned: Int, files: Int, limit: DeletionLimit)
  /// `creationDate` was chosen, but the filesystem reports no birth time.
  case creationDateUnavailable(path: String)
  /// A trim needs the whole cache: a shard sees only its own files.
  case trimOnShard
  /// `verify --repair` found more bad files than ``VerifyConfiguration/maxDelete`` allows.
  case overRepairLimit(bad: Int, files: Int, repair: VerifyRepair, limit: DeletionLimit)

  public var description: String {
    switch self {
    case .trimOnShard:
      "trim needs the whole cache and cannot run on a shard: run it as one job after the "
        + "shards have finished (without --shard, or with maxDiskSize unset on the shards)"
    case .overDeletionLimit(let planned, let files, let limit):
      "the limits would delete \(planned) of \(files) files, more than --max-delete "
        + "(cache.maxDelete) allows: \(limit); nothing was deleted (check the limits, or raise "
        + "the guard)"
    case .overRepairLimit(let bad, let files, let repair, let limit):
      "verify found \(bad) bad files of \(files), more than --max-delete allows --repair "
        + "\(repair.rawValue) to take: \(limit); nothing was repaired (the report lists them; "
        + "check them, or raise the guard)"
    case .creationDateUnavailable(let path):
      "expireType creationDate needs file birth times, and this filesystem reports none "
        + "(statx gave no birth time for \(path)); choose accessDate, modificationDate or changeDate"
    }
  }

  public var exitStatus: ExitStatus { .usage }
}

/// Something a pass tells the operator besides its actions and per-file errors: it went on,
/// but not within the bounds it was made for.
public enum MaintenanceWarning: Sendable, Equatable, CustomStringConvertible {
  /// Trim's temporary file for the files it sorts could not be made or written (`TMPDIR`
  /// missing, read-only or full): they were held in memory, which grows with the cache.
  case trimInMemory(FileSystemError)

  public var description: String {
    switch self {
    case .trimInMemory(let error):
      "trim: no temporary file (\(error)): the files it sorts were held in memory, which grows "
        + "with the cache; set TMPDIR to a writable folder with room"
    }
  }
}

/// The allocated bytes of the files a ``CacheCleaner`` walked (a shard's: its own), before
/// its passes, after the expire pass and after the trim pass; in a dry run, as they would be.
public struct CacheSizes: Sendable, Equatable {
  public var before: UInt64
  public var afterExpire: UInt64
  public var afterTrim: UInt64
}

/// Expire and trim in one walk, with SD's exact semantics (SPEC section 4):
///
/// 1. Expire: delete every regular file whose date (by `expireType`) is at or before
///    `now - maxDiskAge`.
/// 2. Trim: if `maxDiskSize > 0` and the allocated total of what remains is strictly greater,
///    delete files oldest first by the same date until the total is strictly below
///    `maxDiskSize / 2`. Only a delete that succeeded is subtracted.
///
/// A symbolic link is an entry of its own, as in SD's walk (`removeExpiredData` enumerates
/// links unresolved and skips only what `NSURLIsDirectoryKey` calls a folder, which a link
/// never is): its own dates and allocated size (`NSURLTotalFileAllocatedSizeKey` of the link,
/// usually 0 bytes for a short one) decide, and its turn removes the link alone, by `unlink`
/// on its own name. Its target, inside the cache or out, is never read, followed or touched,
/// and a linked folder is never walked into.
///
/// Memory stays bounded whatever the number of files (SPEC section 4): the cache is walked once,
/// and the survivors of the expire pass go, compactly (date, size, path), to an unlinked
/// temporary file in `TMPDIR` (memory for a small cache, or when no temporary file can be
/// written). The trim then reads that file back, never the cache: a histogram of dates,
/// weighted by size, finds the next dates to go, and only the files of those dates, at most
/// ``TrimLimits/sortBudget`` at a time, are sorted in memory and deleted oldest first; a date
/// range holding more is split by a finer histogram of its own. The order is exactly a sort of
/// every survivor by date, ties in the walk's order, so a failed delete simply lets the next
/// file go, as it always did.
public struct CacheCleaner: Sendable {
  public let diskCachePath: String
  public let configuration: CleanupConfiguration
  /// On a shard, the expire pass leaves every file that is not the shard's (by its name's
  /// MD5, SPEC section 9), and a trim is refused before it starts: it needs the whole cache.
  public let shard: Shard?
  /// How much of the trim is held in memory at once; smaller in tests, to reach every path.
  var trimLimits = TrimLimits()

  public init(diskCachePath: String, configuration: CleanupConfiguration, shard: Shard? = nil) {
    self.diskCachePath = diskCachePath
    self.configuration = configuration
    self.shard = shard
  }

  /// Runs both passes and returns them whole, in memory.
  public func run(now: Date = Date(), dryRun: Bool) throws -> (
    expire: MaintenancePassReport, trim: MaintenancePassReport
  ) {
    var expire = MaintenancePassReport(pass: .expire, dryRun: dryRun)
    var trim = MaintenancePassReport(pass: .trim, dryRun: dryRun)
    try run(now: now, dryRun: dryRun, expire: &expire, trim: &trim)
    return (expire, trim)
  }

  /// What the passes would delete, and how many files they look at: the plan that
  /// ``CleanupConfiguration/maxDelete`` is checked against before anything is deleted.
  public func plan(now: Date = Date(), stop: () -> Bool = { false }) throws -> (
    deletions: Int, files: Int
  ) {
    var expire = CountingRecorder(summary: PassSummary(pass: .expire, dryRun: true))
    var trim = CountingRecorder(summary: PassSummary(pass: .trim, dryRun: true))
    var files = 0
    try run(
      now: now, dryRun: true, expire: &expire, trim: &trim, stop: stop, filesSeen: &files)
    return (expire.summary.filesRemoved + trim.summary.filesRemoved, files)
  }

  /// Runs both passes (or, with `dryRun`, plans them: what would be deleted, assuming every
  /// delete succeeds), handing each action and per-file error to the recorders as it happens;
  /// the passes go on after a per-file error. Once `stop` returns true (a signal), the pass
  /// stops after the file in hand: what was done is recorded, nothing is half done. A pass that
  /// goes on outside its bounds says so to `warn`, once.
  /// - Returns: the cache's size before and after each pass, or `nil` when stopped.
  @discardableResult
  public func run<Expire: MaintenanceRecorder, Trim: MaintenanceRecorder>(
    now: Date = Date(), dryRun: Bool, expire: inout Expire, trim: inout Trim,
    stop: () -> Bool = { false }, warn: (MaintenanceWarning) -> Void = { _ in }
  ) throws -> CacheSizes? {
    var files = 0
    return try run(
      now: now, dryRun: dryRun, expire: &expire, trim: &trim, stop: stop, warn: warn,
      filesSeen: &files)
  }

  private func run<Expire: MaintenanceRecorder, Trim: MaintenanceRecorder>(
    now: Date, dryRun: Bool, expire: inout Expire, trim: inout Trim, stop: () -> Bool,
    warn: (MaintenanceWarning) -> Void = { _ in }, filesSeen: inout Int
  ) throws -> CacheSizes? {
    let cutoff = Self.cutoff(now: now, maxDiskAge: configuration.maxDiskAge)
    let expireType = configuration.expireType
    let trimming = configuration.maxDiskSize > 0

    let survivors = SurvivorSpill(memoryLimit: trimLimits.spillBuffer)
    var remainingBytes: UInt64 = 0
    var scannedBytes: UInt64 = 0
    var stopped = false
    func reportUnreadable(_ error: FileSystemError) { expire.recordError("\(error)") }
    if shard != nil && trimming { throw MaintenanceError.trimOnShard }
    let scanner = CacheScanner(root: diskCachePath, includesSymbolicLinks: true)
    try scanner.forEachFile(onError: reportUnreadable) { file in
      if stop() {
        stopped = true
        return false
      }
      // Another shard's file: not this shard's to expire (one whose name is no digest is
      // shard 0's, so that the fleet expires what one run would).
      if let shard, !shard.ownsFile(named: file.name) { return true }
      filesSeen += 1
      guard let date = Self.dateNanoseconds(of: file.attributes, expireType) else {
        throw MaintenanceError.creationDateUnavailable(
          path: diskCachePath + "/" + file.relativePath)
      }
      let size = file.attributes.allocatedSize
      scannedBytes += size
      if let cutoff, date <= cutoff {
        if dryRun || unlinkat(file.directoryFD, file.name, 0) == 0 {
          expire.recordDelete(path: file.relativePath, bytes: size, date: Self.date(date))
          return true
        }
        expire.recordNotRemoved(
          FileSystemError("remove", path: diskCachePath + "/" + file.relativePath, errno: errno))
        remainingBytes += size
        return true
      }
      remainingBytes += size
      if trimming { try survivors.append(path: file.relativePath, date: date, size: size) }
      return true
    }
    if let error = survivors.memoryFallback { warn(.trimInMemory(error)) }
    if stopped { return nil }
    var sizes = CacheSizes(
      before: scannedBytes, afterExpire: remainingBytes, afterTrim: remainingBytes)

    guard trimming, remainingBytes > configuration.maxDiskSize else { return sizes }
    var pass = OldestFirst(
      survivors: survivors, limits: trimLimits, diskCachePath: diskCachePath, dryRun: dryRun,
      remainingBytes: remainingBytes, desired: configuration.maxDiskSize / 2)
    guard try pass.run(trim: &trim, stop: stop) else { return nil }
    sizes.afterTrim = pass.remainingBytes
    return sizes
  }

  /// The file's date for `expireType`, in nanoseconds; `nil` when there is no birth time.
  /// The date at or before which files expire, in nanoseconds since 1970; `nil` for a negative
  /// age (never). An age reaching past what 64-bit nanoseconds hold (about 292 years before
  /// 1970, e.g. a "practically never" `200000d`) leaves no file old enough: the earliest date.
  static func cutoff(now: Date, maxDiskAge: TimeInterval) -> Int64? {
    guard maxDiskAge >= 0 else { return nil }
    let nanoseconds = (maxDiskAge * 1e9).rounded()
    guard nanoseconds < 9_223_372_036_854_775_808.0 else { return Int64.min }
    let (cutoff, overflow) = now.nanosecondsSince1970.subtractingReportingOverflow(
      Int64(nanoseconds))
    return overflow ? Int64.min : cutoff
  }

  static func dateNanoseconds(of attributes: FileAttributes, _ expireType: ExpireType) -> Int64? {
    switch expireType {
    case .accessDate: attributes.accessTime
    case .modificationDate: attributes.modificationTime
    case .changeDate: attributes.changeTime
    case .creationDate: attributes.creationTime
    }
  }

  static func date(_ nanoseconds: Int64) -> Date {
    Date(nanosecondsSince1970: nanoseconds)
  }
}

/// Counts a planned pass and keeps nothing.
private struct CountingRecorder: MaintenanceRecorder {
  var summary: PassSummary
  mutating func keep(_ action: MaintenanceAction) {}
  mutating func keep(error: String) {}
}
