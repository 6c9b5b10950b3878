import Core
import Foundation
import GRDB

/// The tool's state (SPEC section 8): `<disk cache path>/.imagecache/state.sqlite` in WAL mode,
/// holding the blacklist, each key's validators, the URL of each stored file, the origins that
/// refused at the knee of their adaptive limit and a row per run. Deleting it loses history,
/// never cache data; a corrupt file is moved aside and a fresh one created.
///
/// Every failure is a ``StateStoreError`` naming the file.
public final class StateStore: Sendable {
  public static let fileName = "state.sqlite"

  /// The database file.
  public let path: String
  /// What opening had to say to the user, such as a corrupt file moved aside.
  public let warnings: [String]
  private let database: any DatabaseWriter

  /// Opens the state of the cache at `location` for reading only (`stats`, `blacklist list`:
  /// SPEC section 8), so that a read-only state file or folder still works; `nil` when the
  /// cache has no state yet. Nothing is created, migrated or moved aside.
  public static func openForReading(location: CacheLocation) throws -> StateStore? {
    try openForReading(path: (location.stateDirectory as NSString).appendingPathComponent(fileName))
  }

  private init(path: String, database: any DatabaseWriter) {
    self.path = path
    self.database = database
    warnings = []
  }

  /// Opens (creating and migrating as needed) the state of the cache at `location`: a shard's
  /// own file for a shard (SQLite is not shared between machines; SPEC section 9).
  /// - Parameter checkedIntact: the caller found the file intact (``isIntact()``) under the
  ///   run's lock, where nothing wrote it since: it is not checked again.
  /// - Parameter stop: the run's stop: once it is set, a wait for another connection's lock
  ///   ends at once (`SQLITE_BUSY`, ``isBusy``) instead of after the busy timeout, so that the
  ///   run stops within its grace period and writes its report (SPEC section 5).
  public convenience init(
    location: CacheLocation, shard: Shard? = nil, now: Date = Date(), checkedIntact: Bool = false,
    stop: StopFlag? = nil
  ) throws {
    try self.init(
      directory: location.stateDirectory, fileName: Self.fileName(shard: shard), now: now,
      checkedIntact: checkedIntact, stop: stop)
  }

  /// Refuses a state file, its folder or SQLite's files beside it that are not what SQLite
  /// makes (a symbolic link, a FIFO...): SQLite follows links, and GRDB does not let us pass
  /// `SQLITE_OPEN_NOFOLLOW` (SPEC section 11).
  private static func checkOwnFiles(path: String) throws(FileSystemError) {
    try FileSystem.checkOwnEntry((path as NSString).deletingLastPathComponent, isFolder: true)
    for suffix in ["", "-wal", "-shm", "-journal"] {
      try FileSystem.checkOwnEntry(path + suffix)
    }
  }

  /// `state.sqlite`, or `state.shard-K-of-N.sqlite` for a shard.
  public static func fileName(shard: Shard?) -> String {
    shard.map { "state.\($0.fileSuffix).sqlite" } ?? fileName
  }

  /// Every state file of the cache at `location`: the unsharded one and each shard's, as runs
  /// with any number of shards left them.
  /// A cache with no state folder has none; a folder that cannot be read is an error, naming
  /// it: taken for empty, it would hide every blacklist in it.
  public static func stateFiles(location: CacheLocation) throws(FileSystemError) -> [String] {
    let directory = location.stateDirectory
    let names: [String]
    do {
      names = try FileManager.default.contentsOfDirectory(atPath: directory)
    } catch CocoaError.fileReadNoSuchFile {
      return []
    } catch {
      throw FileSystemError("read directory", path: directory, underlying: error)
    }
    return names.filter {
      $0 == fileName || ($0.hasPrefix("state.shard-") && $0.hasSuffix(".sqlite"))
    }
    .sorted().map { (directory as NSString).appendingPathComponent($0) }
  }

  /// The blacklist of every state file of the cache at `location` (a sharded cache keeps one
  /// per shard), each URL once with its latest failure, sorted by URL. A file that cannot be
  /// read goes to `unreadable`, which rethrows by default.
  /// `leavingNoTrace` as in ``openForReading(path:leavingNoTrace:)``.
  /// - Parameters:
  ///   - timeToLive: as in ``blacklist(now:timeToLive:)``: only the entries still active.
  public static func blacklistOfEveryStateFile(
    location: CacheLocation, leavingNoTrace: Bool = false, timeToLive: TimeInterval? = nil,
    unreadable: (_ path: String, _ error: any Error) throws -> Void = { throw $1 }
  ) throws -> [BlacklistEntry] {
    var byURL: [String: BlacklistEntry] = [:]
    func add(_ entries: [BlacklistEntry]) {
      for entry in entries {
        if let known = byURL[entry.url], known.lastFailedAt >= entry.lastFailedAt { continue }
        byURL[entry.url] = entry
      }
    }
    for path in try stateFiles(location: location) {
      do {
        add(
          try openForReading(path: path, leavingNoTrace: leavingNoTrace)?.blacklist(
            timeToLive: timeToLive) ?? [])
      } catch {
        try unreadable(path, error)
      }
    }
    return byURL.values.sorted { $0.url < $1.url }
  }

  /// What a run keeps of the blacklist of every state file of the cache at `location`: a hash
  /// of each active entry's URL (``BlacklistRule/hash(ofURL:)``), not the entries, whose
  /// number has no bound; and the files other than `opened` that hold an active entry, for the
  /// exact look-up of a URL whose hash is there (``OtherStateFile``: the first
  /// ``OtherStateFile/keptOpen`` kept open, the rest opened for each look-up). The entries are
  /// read one at a time. Otherwise as
  /// ``blacklistOfEveryStateFile(location:leavingNoTrace:timeToLive:unreadable:)``, and:
  /// - Parameters:
  ///   - opened: one of these files already open (a run's own store): read through it, and
  ///     its failure thrown, not handed to `unreadable`.
  ///   - runStartingAt: `opened` is read before its run began at this date: its entries are
  ///     read as ``beginRun(job:at:)`` leaves them.
  public static func blacklistHashesOfEveryStateFile(
    location: CacheLocation, leavingNoTrace: Bool = false, timeToLive: TimeInterval? = nil,
    opened: StateStore? = nil, runStartingAt: Date? = nil,
    unreadable: (_ path: String, _ error: any Error) throws -> Void = { throw $1 }
  ) throws -> (hashes: Set<UInt64>, others: [OtherStateFile]) {
    var hashes = Set<UInt64>()
    let now = Date()
    /// How many active entries `store` holds.
    func add(_ store: StateStore, runStartingAt: Date? = nil) throws -> Int {
      var count = 0
      try store.forEachBlacklistedURL(
        now: now, timeToLive: timeToLive, runStartingAt: runStartingAt
      ) {
        hashes.insert(BlacklistRule.hash(ofURL: $0))
        count += 1
      }
      return count
    }
    if let opened { _ = try add(opened, runStartingAt: runStartingAt) }
    var others: [OtherStateFile] = []
    var keptOpen = 0
    for path in try stateFiles(location: location) where path != opened?.path {
      do {
        guard let store = try openForReading(path: path, leavingNoTrace: leavingNoTrace) else {
          continue
        }
        // A file with no active entry has nothing to look up: closed now. Each shard count a
        // fleet ran with leaves its files, and a descriptor held for each to the run's end
        // ran out of them (`ulimit -n`) in a run of a cache with hundreds.
        guard try add(store) > 0 else { continue }
        let kept = keptOpen < OtherStateFile.keptOpen
        if kept { keptOpen += 1 }
        others.append(
          OtherStateFile(path: path, leavingNoTrace: leavingNoTrace, store: kept ? store : nil))
      } catch {
        try unreadable(path, error)
      }
    }
    return (hashes, others)
  }

  /// Whether the file passes the check a run's opening makes (``init(location:shard:now:)``),
  /// which moves a file that fails it aside.
  public func isIntact() throws -> Bool {
    try read { db in try Self.quickCheck(db) } == "ok"
  }

  /// SQLite's `quick_check`: `ok`, or what is wrong.
  private static func quickCheck(_ db: Database) throws -> String? {
    try String.fetchOne(db, sql: "PRAGMA quick_check")
  }

  /// Opens one state file for reading only, or `nil` when it does not exist.
  ///
  /// A read-only open of a WAL database still creates its `-wal` and `-shm` files beside it,
  /// which it cannot where the folder is read-only (a read-only mount, a cache of another
  /// user): SQLite then says `unable to open database file`. So a state that no connection has
  /// open (no `-wal` file) is opened immutable, which creates nothing, when the folder cannot
  /// be written and no run holds the state's lock (a run writing it through another mount
  /// would hold it). Where SQLite takes no URI file names, or a `-wal` file is there, the
  /// plain read-only open is used.
  ///
  /// - Parameter leavingNoTrace: a dry run must leave the state as it found it: opened
  ///   immutable whenever it can be, not only in a read-only folder. Only under the run lock,
  ///   where no run writes it meanwhile.
  public static func openForReading(path: String, leavingNoTrace: Bool = false) throws
    -> StateStore?
  {
    try checkOwnFiles(path: path)
    guard FileManager.default.fileExists(atPath: path) else { return nil }
    var configuration = Configuration()
    configuration.readonly = true
    configuration.busyMode = .timeout(10)
    let immutable = leavingNoTrace || (!isFolderWritable(of: path) && !isWriterHolding(path))
    if immutable, !FileManager.default.fileExists(atPath: path + "-wal"),
      let encoded = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed),
      // Where SQLite refuses the URI, the plain open below is tried, and its error thrown.
      let queue = try? DatabaseQueue(
        path: "file:\(encoded)?immutable=1", configuration: configuration)
    {
      return StateStore(path: path, database: queue)
    }
    do {
      return StateStore(
        path: path, database: try DatabaseQueue(path: path, configuration: configuration))
    } catch let error as DatabaseError {
      throw StateStoreError(path: path, operation: "open for reading", underlying: error)
    }
  }

  /// Whether the folder of `path` can be written (`access(2)` says `EROFS` on a read-only
  /// mount, even to root).
  private static func isFolderWritable(of path: String) -> Bool {
    access((path as NSString).deletingLastPathComponent, W_OK) == 0
  }

  /// Whether a run holds the lock of the state file at `path` (`lock` for `state.sqlite`,
  /// `lock.shard-K-of-N` for a shard's): it may be writing the file through a writable mount of
  /// the same folder, so the file is not immutable. A lock that cannot be opened is no run's.
  private static func isWriterHolding(_ path: String) -> Bool {
    let name = (path as NSString).lastPathComponent
    let suffix = name.dropFirst("state".count).dropLast(".sqlite".count)
    let lock = ((path as NSString).deletingLastPathComponent as NSString)
      .appendingPathComponent("lock" + suffix)
    guard let fd = try? FileSystem.openOwnFile(lock, flags: O_RDONLY) else { return false }
    defer { close(fd) }
    var taken: Int32
    repeat { taken = flock(fd, LOCK_SH | LOCK_NB) } while taken != 0 && errno == EINTR
    return taken != 0 && errno == EWOULDBLOCK
  }

  /// Opens (creating and migrating as needed) the state file in `directory`.
  public init(
    directory: String, fileName: String = StateStore.fileName, now: Date = Date(),
    checkedIntact: Bool = false, stop: StopFlag? = nil
  ) throws {
    try FileSystem.createDirectory(path: directory)
    let path = (directory as NSString).appendingPathComponent(fileName)
    self.path = path
    try Self.checkOwnFiles(path: path)
    var warnings: [String] = []
    do {
      do {
        database = try Self.openAndMigrate(
          path: path, checksIntegrity: !checkedIntact, stop: stop)
      } catch let error as DatabaseError where Self.isCorruption(error) {
        let aside = try Self.moveAside(path: path, now: now)
        warnings.append(
          "state file \(path) was corrupt (\(error.message ?? "\(error.resultCode)")); "
            + "moved it to \(aside) and started a fresh one")
        database = try Self.openAndMigrate(path: path, stop: stop)
      }
    } catch let error as DatabaseError {
      throw StateStoreError(path: path, operation: "open", underlying: error)
    }
    self.warnings = warnings
  }

  // MARK: Runs

  /// Records the start of a run and returns its id. A run still marked `running` died without
  /// finishing (kill -9, power loss: the caller holds the cache's lock, so none is alive) and
  /// is marked `abandoned` (SPEC section 8); `abandoned` says how many there were.
  ///
  /// A blacklist entry dated after `date` was written while the wall clock ran ahead (or has
  /// been set back since): it is dated `date`, so that it ages from now and expires after its
  /// time-to-live instead of staying active until the clock catches up, years later.
  public func beginRun(job: String, at date: Date) throws -> (id: Int64, abandoned: Int) {
    // Plain SQL, as for validators: the record API's first use in a process (its generic
    // look-ups and schema reads) cost more than the rest of a run's bookkeeping, at every start.
    try write { db in
      try db.execute(sql: "UPDATE runs SET status = 'abandoned' WHERE status = 'running'")
      let abandoned = db.changesCount
      let now = Self.databaseText(date)
      for column in ["firstFailedAt", "lastFailedAt"] {
        try db.execute(
          sql: "UPDATE blacklist SET \(column) = ? WHERE \(column) > ?", arguments: [now, now])
      }
      try db.execute(
        sql: "INSERT INTO runs (job, startedAt, status) VALUES (?, ?, 'running')",
        arguments: [job, Self.databaseText(date)])
      return (db.lastInsertedRowID, abandoned)
    }
  }

  /// A date of an entry as ``beginRun(job:at:)`` at `start` leaves it: a date after `start`
  /// becomes `start`, compared and written as the database text they are stored as.
  static func date(_ date: Date, asRunStartingAt start: Date) -> Date {
    let now = databaseText(start)
    guard databaseText(date) > now else { return date }
    return Date.fromDatabaseValue(now.databaseValue) ?? start
  }

  /// Records the end of run `id` with its status and a short summary.
  public func finishRun(id: Int64, at date: Date, status: String, summary: String?) throws {
    try write { db in
      try db.execute(
        sql: "UPDATE runs SET finishedAt = ?, status = ?, summary = ? WHERE id = ?",
        arguments: [Self.databaseText(date), status, summary?.maskingURLPasswords, id])
    }
  }

  /// The most recent runs, newest first.
  public func recentRuns(limit: Int = 20) throws -> [RunRecord] {
    try read { db in
      try RunRecord.order(Column("id").desc).limit(limit).fetchAll(db)
    }
  }

  // MARK: Access

  /// Every database error becomes a ``StateStoreError`` naming the state file; an error thrown
  /// by a caller's closure passes through unchanged.
  func read<T>(_ body: (Database) throws -> T) throws -> T {
    do {
      return try database.read(body)
    } catch let error as DatabaseError {
      throw StateStoreError(path: path, operation: "read", underlying: error)
    }
  }

  /// As ``read(_:)``, without the transaction: for one statement, which SQLite runs atomically.
  func readOutsideTransaction<T>(_ body: (Database) throws -> T) throws -> T {
    do {
      return try database.unsafeRead(body)
    } catch let error as DatabaseError {
      throw StateStoreError(path: path, operation: "read", underlying: error)
    }
  }

  func write<T>(_ body: (Database) throws -> T) throws -> T {
    do {
      return try database.write(body)
    } catch let error as DatabaseError {
      throw StateStoreError(path: path, operation: "write", underlying: error)
    }
  }

  // MARK: Opening

  /// How long a connection waits for another's lock before failing with `SQLITE_BUSY`; and,
  /// once the run is stopping, well within its grace period (2 s) for its report.
  static let busyTimeout: TimeInterval = 10
  static let busyTimeoutStopping: TimeInterval = 0.5

  private static func openAndMigrate(
    path: String, checksIntegrity: Bool = true, stop: StopFlag? = nil
  ) throws -> DatabasePool {
    var configuration = Configuration()
    configuration.busyMode = stop.map { .callback(busyWait(until: $0)) } ?? .timeout(busyTimeout)
    // WAL with synchronous=NORMAL: commits do not wait for fsync (a power cut may lose the last
    // few, never consistency), so a validator per download costs microseconds, not milliseconds.
    configuration.prepareDatabase { db in
      try db.execute(sql: "PRAGMA synchronous = NORMAL")
    }
    let pool = try DatabasePool(path: path, configuration: configuration)
    if checksIntegrity {
      try pool.read { db in
        let result = try quickCheck(db)
        guard result == "ok" else {
          throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: result ?? "quick_check failed")
        }
      }
    }
    try migrator.migrate(pool)
    return pool
  }

  private static var migrator: DatabaseMigrator {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in
      try db.create(table: BlacklistEntry.databaseTableName) { table in
        table.primaryKey("url", .text)
        table.column("code", .integer).notNull()
        table.column("name", .text).notNull()
        table.column("reason", .text).notNull()
        table.column("firstFailedAt", .datetime).notNull()
        table.column("lastFailedAt", .datetime).notNull()
        table.column("failureCount", .integer).notNull()
      }
      try db.create(table: CacheValidators.databaseTableName) { table in
        table.primaryKey("cacheKey", .text)
        table.column("etag", .text)
        table.column("lastModified", .text)
        table.column("updatedAt", .datetime).notNull()
      }
      try db.create(table: RunRecord.databaseTableName) { table in
        table.autoIncrementedPrimaryKey("id")
        table.column("job", .text).notNull()
        table.column("startedAt", .datetime).notNull()
        table.column("finishedAt", .datetime)
        table.column("status", .text).notNull()
        table.column("summary", .text)
      }
    }
    // Issue 45: which URL each stored file came from, for `verify` to name and refetch.
    migrator.registerMigration("v2") { db in
      try db.create(table: "stored") { table in
        table.primaryKey("fileName", .text)
        table.column("url", .text).notNull()
        table.column("storedAt", .datetime).notNull()
      }
    }
    // Issue 44: the origins that refused at the knee of their adaptive limit, and when.
    migrator.registerMigration("v3") { db in
      try db.create(table: "refusals") { table in
        table.column("scheme", .text).notNull()
        table.column("host", .text).notNull()
        table.column("port", .integer).notNull()
        table.column("inFlight", .integer).notNull()
        table.column("since", .datetime).notNull()
        table.primaryKey(["scheme", "host", "port"])
      }
    }
    return migrator
  }

  /// SQLite's busy timeout, shortened once `stop` is set: the lock is tried again every 10 ms,
  /// for ``busyTimeout`` at most, and once the run is stopping for ``busyTimeoutStopping`` at
  /// most (a wait that began before the signal ends at once; a brief lock of another
  /// connection's, met by the last writes of a run that stops, is still waited out).
  private static func busyWait(until stop: StopFlag) -> Database.BusyCallback {
    let interval: useconds_t = 10_000
    let tries = Int(busyTimeout * 1_000_000) / Int(interval)
    let triesStopping = Int(busyTimeoutStopping * 1_000_000) / Int(interval)
    return { numberOfTries in
      guard numberOfTries < (stop.isStopped ? min(tries, triesStopping) : tries) else {
        return false
      }
      usleep(interval)
      return true
    }
  }

  static func isCorruption(_ error: DatabaseError) -> Bool {
    [.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(error.resultCode)
  }

  /// Renames the database and its WAL and shared-memory files to `<name>.corrupt-<time>`.
  private static func moveAside(path: String, now: Date) throws -> String {
    let stamp = Int(now.timeIntervalSince1970)
    let aside = "\(path).corrupt-\(stamp)"
    for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
      guard rename(path + suffix, aside + suffix) == 0 else {
        throw FileSystemError("move aside", path: path + suffix, errno: errno)
      }
    }
    return aside
  }
}

/// The state database could not be opened, read or written (exit code 4).
public struct StateStoreError: Error, Sendable, CustomStringConvertible {
  /// The database file.
  public var path: String
  /// `open`, `read` or `write`.
  public var operation: String
  public var message: String
  /// The file is no database, or a damaged one: a run moves it aside and starts a fresh one
  /// (``StateStore/init(location:shard:now:)``) instead of failing.
  public var isCorrupt = false
  /// SQLite's extended result code (its low byte the primary one, `SQLITE_FULL`...), or the
  /// file system's `errno`.
  public var cause: FailureCause?

  public init(path: String, operation: String, underlying: any Error) {
    self.path = path
    self.operation = operation
    if let error = underlying as? DatabaseError {
      isCorrupt = StateStore.isCorruption(error)
      cause = .sqlite(error.extendedResultCode.rawValue)
      message = error.message ?? "\(error.resultCode)"
      // SQLite's words ("attempt to write a readonly database", "unable to open database
      // file") name neither the file nor why: the usual cause is a cache of another user.
      if [.SQLITE_READONLY, .SQLITE_CANTOPEN].contains(error.resultCode.primaryResultCode),
        let explanation = Self.notWritable(path)
      {
        message = explanation + " (SQLite: \(message))"
      }
    } else {
      cause = FailureCause(of: underlying)
      message = "\(underlying)"
    }
  }

  /// Why this user cannot write the state file at `path`, when it cannot (its folder, the
  /// file or SQLite's files beside it); `nil` when all are writable (the cause is elsewhere).
  static func notWritable(_ path: String) -> String? {
    StateAccess.readOnlyForThisUser(
      [(path as NSString).deletingLastPathComponent, path, path + "-wal", path + "-shm"])
  }

  /// Another connection held the file's lock past the wait (SQLite's `SQLITE_BUSY`).
  public var isBusy: Bool {
    if case .sqlite(let code) = cause {
      code & 0xFF == ResultCode.SQLITE_BUSY.rawValue
    } else {
      false
    }
  }

  public var description: String { "state file \(path): cannot \(operation): \(message)" }
}

extension StateStoreError: CauseProviding, ExitStatusProviding {
  public var exitStatus: ExitStatus { .fatalIO }
}
