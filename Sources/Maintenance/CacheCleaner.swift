import Core
import Foundation
import HeapModule

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The settings of SD's `removeExpiredData` (SPEC section 4), with SD's defaults.
public struct CleanupConfiguration: Sendable, Equatable {
  /// Files whose date is at or before `now - maxDiskAge` expire. Negative: never; zero:
  /// everything. SD's default is one week.
  public var maxDiskAge: TimeInterval = 7 * 24 * 3600
  /// When the remaining allocated total is strictly above this, trim to strictly below half of
  /// it, oldest first. Zero: no limit (SD's default).
  public var maxDiskSize: UInt64 = 0
  public var expireType: ExpireType = .accessDate

  public init() {}

  /// The limits as a report states them.
  public var limits: CleanupLimits {
    CleanupLimits(maxDiskAge: maxDiskAge, maxDiskSize: maxDiskSize, expireType: expireType)
  }

  /// The defaults, with the given settings changed.
  public init(
    maxDiskAge: TimeInterval? = nil, maxDiskSize: UInt64? = nil, expireType: ExpireType? = nil
  ) {
    if let maxDiskAge { self.maxDiskAge = maxDiskAge }
    if let maxDiskSize { self.maxDiskSize = maxDiskSize }
    if let expireType { self.expireType = expireType }
  }
}

/// What the user asked for cannot be done on this cache.
public enum MaintenanceError: Error, Sendable, Equatable, CustomStringConvertible {
  /// `creationDate` was chosen, but the filesystem reports no birth time.
  case creationDateUnavailable(path: String)
  /// A trim needs the whole cache: a shard sees only its own files.
  case trimOnShard

  public var description: String {
    switch self {
    case .trimOnShard:
      "trim needs the whole cache and cannot run on a shard: run it as one job after the "
        + "shards have finished (without --shard, or with maxDiskSize unset on the shards)"
    case .creationDateUnavailable(let path):
      "expireType creationDate needs file birth times, and this filesystem reports none "
        + "(statx gave no birth time for \(path)); choose accessDate, modificationDate or changeDate"
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
/// Only the files that must go are ordered: the survivors of the expire pass go into a heap
/// (built in linear time) from which the oldest are taken one at a time, instead of sorting
/// every file. Paths are kept in one byte arena so that a million files stay small in memory.
public struct CacheCleaner: Sendable {
  public let diskCachePath: String
  public let configuration: CleanupConfiguration
  /// On a shard, the expire pass leaves every file that is not the shard's (by its name's
  /// MD5, SPEC section 9), and a trim is refused before it starts: it needs the whole cache.
  public let shard: Shard?

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

  /// Runs both passes (or, with `dryRun`, plans them: what would be deleted, assuming every
  /// delete succeeds), handing each action and per-file error to the recorders as it happens;
  /// the passes go on after a per-file error. Once `stop` returns true (a signal), the pass
  /// stops after the file in hand: what was done is recorded, nothing is half done.
  /// - Returns: the cache's size before and after each pass, or `nil` when stopped.
  @discardableResult
  public func run<Expire: MaintenanceRecorder, Trim: MaintenanceRecorder>(
    now: Date = Date(), dryRun: Bool, expire: inout Expire, trim: inout Trim,
    stop: () -> Bool = { false }
  ) throws -> CacheSizes? {
    let cutoff = Self.cutoff(now: now, maxDiskAge: configuration.maxDiskAge)
    let expireType = configuration.expireType
    let trimming = configuration.maxDiskSize > 0

    var survivors = Survivors()
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
      // Another shard's file, or one no shard owns: not this shard's to expire.
      if let shard, shard.owns(fileName: file.name) != true { return true }
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
        expire.recordError(
          "\(FileSystemError("remove", path: diskCachePath + "/" + file.relativePath, errno: errno))"
        )
        remainingBytes += size
        return true
      }
      remainingBytes += size
      if trimming { survivors.append(path: file.relativePath, date: date, size: size) }
      return true
    }
    if stopped { return nil }
    var sizes = CacheSizes(
      before: scannedBytes, afterExpire: remainingBytes, afterTrim: remainingBytes)

    guard trimming, remainingBytes > configuration.maxDiskSize else { return sizes }
    let desired = configuration.maxDiskSize / 2
    var heap = Heap(survivors.entries)
    survivors.entries = []
    while remainingBytes >= desired, let oldest = heap.popMin() {
      if stop() { return nil }
      let relativePath = survivors.path(of: oldest)
      let path = diskCachePath + "/" + relativePath
      if !dryRun && unlink(path) != 0 {
        trim.recordError("\(FileSystemError("remove", path: path, errno: errno))")
        continue
      }
      trim.recordDelete(path: relativePath, bytes: oldest.size, date: Self.date(oldest.date))
      remainingBytes -= oldest.size
    }
    sizes.afterTrim = remainingBytes
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

/// The files that survived expiry, compactly: fixed-size entries plus one byte arena of paths.
struct Survivors {
  struct Entry: Comparable {
    var date: Int64
    var size: UInt64
    /// Where the path starts in the arena; also the walk order, which breaks ties in date.
    var pathStart: Int
    var pathLength: Int32

    static func < (lhs: Entry, rhs: Entry) -> Bool {
      (lhs.date, lhs.pathStart) < (rhs.date, rhs.pathStart)
    }
  }

  var entries: [Entry] = []
  private var arena: [UInt8] = []

  mutating func append(path: String, date: Int64, size: UInt64) {
    let start = arena.count
    arena.append(contentsOf: path.utf8)
    entries.append(
      Entry(date: date, size: size, pathStart: start, pathLength: Int32(arena.count - start)))
  }

  func path(of entry: Entry) -> String {
    String(
      decoding: arena[entry.pathStart..<(entry.pathStart + Int(entry.pathLength))], as: UTF8.self)
  }
}
