import Core
import Foundation
import GRDB
import TestSupport
import XCTest

@testable import State

final class StateStoreTests: TemporaryFolderTestCase {
  var location: CacheLocation!

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.path, namespace: "default")
  }

  func testStateLivesInTheHiddenFolderInWALMode() throws {
    let store = try StateStore(location: location)
    XCTAssertEqual(store.path, temporary.appending("default/.imagecache/state.sqlite"))
    XCTAssertTrue(store.warnings.isEmpty)
    var header = [UInt8](repeating: 0, count: 20)
    let handle = try XCTUnwrap(FileHandle(forReadingAtPath: store.path))
    header = [UInt8](handle.readData(ofLength: 20))
    // Bytes 18 and 19 of the SQLite header are 2 in WAL mode.
    XCTAssertEqual(header[18], 2)
    XCTAssertEqual(header[19], 2)
  }

  func testBlacklistRecordsFirstAndLastFailureAndCountAcrossReopens() throws {
    let first = Date(timeIntervalSince1970: 1_700_000_000)
    let later = first.addingTimeInterval(3600)
    do {
      let store = try StateStore(location: location)
      try store.recordFailure(
        url: "https://x/a.png", code: 1001, name: "badImageData", reason: "html", at: first)
    }
    let store = try StateStore(location: location)
    try store.recordFailure(
      url: "https://x/a.png", code: 1000, name: "invalidURL", reason: "again", at: later)
    let entry = try XCTUnwrap(try store.blacklistEntry(url: "https://x/a.png", now: later))
    XCTAssertEqual(entry.firstFailedAt, first)
    XCTAssertEqual(entry.lastFailedAt, later)
    XCTAssertEqual(entry.failureCount, 2)
    XCTAssertEqual(entry.code, 1000)
    XCTAssertEqual(entry.reason, "again")
    XCTAssertNil(try store.blacklistEntry(url: "https://x/other.png"))
  }

  func testBlacklistEntriesExpireAfterTheirTimeToLive() throws {
    let store = try StateStore(location: location)
    let failed = Date(timeIntervalSince1970: 1_700_000_000)
    try store.recordFailure(url: "u", code: 1001, name: "badImageData", reason: "r", at: failed)
    XCTAssertNotNil(
      try store.blacklistEntry(url: "u", now: failed.addingTimeInterval(59), timeToLive: 60))
    XCTAssertNil(
      try store.blacklistEntry(url: "u", now: failed.addingTimeInterval(60), timeToLive: 60))
    XCTAssertNotNil(try store.blacklistEntry(url: "u", now: failed.addingTimeInterval(1e9)))
  }

  func testBlacklistListRemoveAndClear() throws {
    let store = try StateStore(location: location)
    let date = Date(timeIntervalSince1970: 1_700_000_000)
    for (i, url) in ["b", "a", "c"].enumerated() {
      try store.recordFailure(
        url: url, code: 1001, name: "badImageData", reason: "r",
        at: date.addingTimeInterval(Double(i)))
    }
    XCTAssertEqual(try store.blacklist().map(\.url), ["b", "a", "c"])
    XCTAssertTrue(try store.removeFromBlacklist(url: "a"))
    XCTAssertFalse(try store.removeFromBlacklist(url: "a"))
    XCTAssertEqual(try store.blacklist().map(\.url), ["b", "c"])
    XCTAssertEqual(try store.clearBlacklist(), 2)
    XCTAssertEqual(try store.blacklist(), [])
  }

  /// `blacklist list` shows the entries in the order they first failed: a URL that fails
  /// again keeps its place instead of moving to the end.
  func testTheBlacklistIsListedByFirstFailureNotByLastFailure() throws {
    let store = try StateStore(location: location)
    let date = Date(timeIntervalSince1970: 1_700_000_000)
    for (offset, url) in [(0.0, "a"), (1, "b"), (2, "a")] {
      try store.recordFailure(
        url: url, code: 1001, name: "badImageData", reason: "r", at: date.addingTimeInterval(offset)
      )
    }
    XCTAssertEqual(try store.blacklist(now: date).map(\.url), ["a", "b"])
  }

  /// The blacklist of several state files (a fleet's shards, each with its own) has one entry a
  /// URL: the one that failed last, whichever file is read first.
  func testTheBlacklistOfEveryStateFileKeepsEachURLsLatestFailure() throws {
    let date = Date(timeIntervalSince1970: 1_700_000_000)
    for (index, offset) in [(0, 0.0), (1, 60), (2, 30)] {
      let shard = try XCTUnwrap(Shard(index: index, count: 3))
      try StateStore(location: location, shard: shard).recordFailure(
        url: "https://x/a.png", code: 1001, name: "badImageData", reason: "shard \(index)",
        at: date.addingTimeInterval(offset))
    }
    let merged = try StateStore.blacklistOfEveryStateFile(location: location)
    XCTAssertEqual(merged.count, 1)
    XCTAssertEqual(merged.first?.reason, "shard 1")
    XCTAssertEqual(merged.first?.lastFailedAt, date.addingTimeInterval(60))
  }

  /// `blacklist list` lists every state file's entries in the order of their URLs, whichever
  /// shard's file holds each: the same listing every time, that two nights' lists can be
  /// compared line by line.
  func testTheBlacklistOfEveryStateFileIsInTheOrderOfItsURLs() throws {
    let date = Date(timeIntervalSince1970: 1_700_000_000)
    for (index, url) in ["https://x/b.png", "https://x/c.png", "https://x/a.png"].enumerated() {
      let shard = try XCTUnwrap(Shard(index: index, count: 3))
      try StateStore(location: location, shard: shard).recordFailure(
        url: url, code: 1001, name: "badImageData", reason: "r", at: date)
    }
    XCTAssertEqual(
      try StateStore.blacklistOfEveryStateFile(location: location).map(\.url),
      ["https://x/a.png", "https://x/b.png", "https://x/c.png"])
  }

  /// A blacklist with a time-to-live lists only the entries still active, as a URL's own
  /// look-up finds only those: an expired entry is neither refused nor listed.
  func testTheBlacklistWithATimeToLiveListsOnlyTheEntriesStillActive() throws {
    let store = try StateStore(location: location)
    let date = Date(timeIntervalSince1970: 1_700_000_000)
    try store.recordFailure(url: "old", code: 1001, name: "badImageData", reason: "r", at: date)
    try store.recordFailure(
      url: "new", code: 1001, name: "badImageData", reason: "r", at: date.addingTimeInterval(30))
    let now = date.addingTimeInterval(60)
    XCTAssertEqual(try store.blacklist(now: now, timeToLive: 60).map(\.url), ["new"])
    XCTAssertEqual(try store.blacklist(now: now).map(\.url), ["old", "new"])
    XCTAssertEqual(
      try StateStore.blacklistOfEveryStateFile(location: location, timeToLive: 1e9).map(\.url),
      ["new", "old"])
  }

  /// The blacklist keeps a URL with its password masked (SPEC section 11), and finds it
  /// whatever password a later request carries: a rotated password does not make a
  /// blacklisted URL new.
  func testABlacklistedURLIsKeptWithoutItsPasswordAndFoundWhateverPasswordItCarries() throws {
    let store = try StateStore(location: location)
    let date = Date(timeIntervalSince1970: 1_700_000_000)
    try store.recordFailure(
      url: "https://user:secret@x/a.png", code: 1001, name: "badImageData",
      reason: "https://user:secret@x/a.png is no image", at: date)
    XCTAssertEqual(try store.blacklist().map(\.url), ["https://user:***@x/a.png"])
    let entry = try store.blacklistEntry(url: "https://user:rotated@x/a.png", now: date)
    XCTAssertEqual(entry?.url, "https://user:***@x/a.png")
    XCTAssertFalse(entry?.reason.contains("secret") ?? true, entry?.reason ?? "")
    let text = try String(contentsOfFile: store.path + "-wal", encoding: .isoLatin1)
    XCTAssertFalse(text.contains("secret"), "no password reaches the disk")
  }

  /// Validators' dates are written as text made by hand, not by GRDB's formatter: it must be
  /// GRDB's text to the character, or reading them back as dates would fail.
  func testValidatorDatesAreStoredAsGRDBStoresADate() throws {
    let dates =
      [
        Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_763_870_400.999_9),
        Date(timeIntervalSince1970: 951_782_400.5), Date(timeIntervalSince1970: -0.25),
        Date(timeIntervalSince1970: 4_102_444_799.001), Date(),
        // Half a millisecond before 1970: the formatter rounds it up, not away from zero.
        Date(timeIntervalSince1970: -912_861_126.3265),
      ] + (0..<2000).map { _ in Date(timeIntervalSince1970: .random(in: -1e9...4e9)) }
    for date in dates {
      XCTAssertEqual(
        StateStore.databaseText(date), String.fromDatabaseValue(date.databaseValue), "\(date)")
    }
    let store = try StateStore(location: location)
    let stored = Date(timeIntervalSince1970: 1_763_870_400.25)
    try store.setValidators(
      CacheValidators(cacheKey: "k", etag: "\"e\"", lastModified: nil, updatedAt: stored))
    XCTAssertEqual(try store.validators(forKey: "k")?.updatedAt, stored)
    // The blacklist and the runs write their dates the same way, and read them back.
    try store.recordFailure(url: "u", code: 1000, name: "n", reason: "r", at: stored)
    XCTAssertEqual(try store.blacklistEntry(url: "u", now: stored)?.firstFailedAt, stored)
    let run = try store.beginRun(job: "j", at: stored)
    try store.finishRun(id: run.id, at: stored + 1.5, status: "completed", summary: nil)
    let recorded = try XCTUnwrap(try store.recentRuns().first)
    XCTAssertEqual(recorded.startedAt, stored)
    XCTAssertEqual(recorded.finishedAt, stored + 1.5)
  }

  func testTheLockNamesItsStartAsISO8601DoesInUTC() {
    let dates =
      [
        Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -0.5),
        Date(timeIntervalSince1970: 1_763_870_399.999), Date(timeIntervalSince1970: 951_782_400),
        Date(),
      ] + (0..<2000).map { _ in Date(timeIntervalSince1970: .random(in: -1e9...4e9)) }
    for date in dates {
      XCTAssertEqual(
        UTCTime(date).iso8601(), date.formatted(.iso8601), "\(date.timeIntervalSince1970)")
    }
  }

  func testValidatorsAreStoredReplacedAndRemoved() throws {
    let store = try StateStore(location: location)
    let date = Date(timeIntervalSince1970: 1_700_000_000)
    try store.setValidators(
      CacheValidators(cacheKey: "k", etag: "\"v1\"", lastModified: nil, updatedAt: date))
    try store.setValidators(
      CacheValidators(
        cacheKey: "k", etag: "\"v2\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT",
        updatedAt: date))
    XCTAssertEqual(try store.validators(forKey: "k")?.etag, "\"v2\"")
    XCTAssertEqual(try store.validators(forKey: "k")?.lastModified, "Wed, 21 Oct 2015 07:28:00 GMT")
    try store.removeValidators(forKey: "k")
    XCTAssertNil(try store.validators(forKey: "k"))
  }

  func testABatchOfValidatorsKeepsEveryValueAsGiven() throws {
    let store = try StateStore(location: location)
    let date = Date(timeIntervalSince1970: 1_700_000_000.5)
    let batch = [
      CacheValidators(cacheKey: "a", etag: "\"1\"", lastModified: nil, updatedAt: date),
      // An empty value is text, not NULL.
      CacheValidators(cacheKey: "b", etag: "", lastModified: "Wed, 1 Jan", updatedAt: date),
      CacheValidators(cacheKey: "é/ü?q=1", etag: nil, lastModified: "Wed", updatedAt: date),
      // The same key later in the batch replaces the earlier one.
      CacheValidators(cacheKey: "a", etag: "\"2\"", lastModified: "Thu", updatedAt: date + 1),
    ]
    try store.setValidators(batch)
    for expected in batch.dropFirst() {
      let stored = try XCTUnwrap(try store.validators(forKey: expected.cacheKey))
      XCTAssertEqual(stored.etag, expected.etag, expected.cacheKey)
      XCTAssertEqual(stored.lastModified, expected.lastModified, expected.cacheKey)
      XCTAssertEqual(stored.updatedAt, expected.updatedAt, expected.cacheKey)
    }
    // The statement is left reset and unbound: GRDB's own calls on the database still work.
    try store.setValidators(Array(batch.prefix(1)))
    XCTAssertEqual(try store.validators(forKey: "a")?.etag, "\"1\"")
    try store.removeValidators(forKey: "a")
    XCTAssertNil(try store.validators(forKey: "a"))
  }

  /// Issue 45: which URL each stored file came from, by file name, its password masked; the
  /// newest store of a name wins.
  func testStoredURLsAreKeptByFileNameWithTheirPasswordsMasked() throws {
    let store = try StateStore(location: location)
    let date = Date(timeIntervalSince1970: 1_700_000_000)
    try store.setStoredURLs([
      StoredURL(fileName: "a.jpg", url: "https://x/a.jpg", storedAt: date),
      StoredURL(fileName: "b.jpg", url: "https://user:secret@x/b.jpg", storedAt: date),
    ])
    try store.setStoredURLs([
      StoredURL(fileName: "a.jpg", url: "https://x/a2.jpg", storedAt: date.addingTimeInterval(1))
    ])
    XCTAssertEqual(
      try store.storedURL(forFileName: "a.jpg"),
      StoredURL(fileName: "a.jpg", url: "https://x/a2.jpg", storedAt: date.addingTimeInterval(1)))
    XCTAssertEqual(try store.storedURL(forFileName: "b.jpg")?.url, "https://user:***@x/b.jpg")
    XCTAssertNil(try store.storedURL(forFileName: "c.jpg"))
    let text = try String(contentsOfFile: store.path + "-wal", encoding: .isoLatin1)
    XCTAssertFalse(text.contains("secret"), "no password reaches the disk")
  }

  /// A state file written before the state kept URLs gets the table when a run opens it, and
  /// read as it is (a read-only open migrates nothing), knows no URL.
  func testAStateFromBeforeStoredURLsIsMigratedAndReadsAsKnowingNone() throws {
    let directory = location.stateDirectory
    try FileSystem.createDirectory(path: directory)
    let path = directory + "/" + StateStore.fileName
    try DatabaseQueue(path: path).write { db in
      try db.execute(
        sql: """
          CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
          INSERT INTO grdb_migrations VALUES ('v1');
          CREATE TABLE blacklist (url TEXT PRIMARY KEY, code INTEGER NOT NULL,
            name TEXT NOT NULL, reason TEXT NOT NULL, firstFailedAt DATETIME NOT NULL,
            lastFailedAt DATETIME NOT NULL, failureCount INTEGER NOT NULL);
          CREATE TABLE validators (cacheKey TEXT PRIMARY KEY, etag TEXT, lastModified TEXT,
            updatedAt DATETIME NOT NULL);
          CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT NOT NULL,
            startedAt DATETIME NOT NULL, finishedAt DATETIME, status TEXT NOT NULL,
            summary TEXT);
          """)
    }
    XCTAssertNil(try XCTUnwrap(StateStore.openForReading(path: path)).storedURL(forFileName: "a"))
    let store = try StateStore(location: location)
    try store.setStoredURLs([StoredURL(fileName: "a", url: "https://x/a", storedAt: Date())])
    XCTAssertEqual(try store.storedURL(forFileName: "a")?.url, "https://x/a")
  }

  /// What a run with `--per-host-concurrency auto` leaves for the next (issue 44): each
  /// origin's refusal of a probe, kept a week from when it came; forgotten when the origin
  /// served as many since, or a week on; none read from a state written before.
  func testRefusalsAreKeptByOriginForAWeekAndForgottenWhenServed() throws {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let busy = Origin(URL(string: "http://127.0.0.1:8080/a.png")!)
    let ipv6 = Origin(URL(string: "https://[::1]/a.png")!)
    let store = try StateStore(location: location)
    XCTAssertEqual(try store.refusals(at: now), [])
    let refusal = OriginRefusal(origin: busy, inFlight: 17, since: now)
    try store.remember(
      [busy: refusal, ipv6: OriginRefusal(origin: ipv6, inFlight: 9, since: now)], at: now)
    let reopened = try XCTUnwrap(StateStore.openForReading(location: location))
    XCTAssertEqual(try reopened.refusals(at: now).map(\.inFlight), [17, 9])
    XCTAssertEqual(try reopened.refusals(at: now).first, refusal, "origin and date as written")
    XCTAssertEqual(try reopened.refusals(at: now).last?.origin, ipv6)
    // A week, to the second; and a date ahead of the clock is not taken for a week more.
    let week = OriginRefusal.lifetime
    XCTAssertEqual(try store.refusals(at: now.addingTimeInterval(week - 1)).count, 2)
    XCTAssertEqual(try store.refusals(at: now.addingTimeInterval(week)), [])
    XCTAssertEqual(try store.refusals(at: now.addingTimeInterval(-1)), [])
    // A later refusal replaces the earlier; `nil` forgets one; what is past its week is
    // deleted as the next run writes.
    let later = now.addingTimeInterval(week / 2)
    try store.remember([busy: OriginRefusal(origin: busy, inFlight: 12, since: later)], at: later)
    XCTAssertEqual(try store.refusals(at: later).map(\.inFlight), [12, 9])
    let forgotten: [Origin: OriginRefusal?] = [ipv6: nil]
    try store.remember(forgotten, at: later)
    XCTAssertEqual(try store.refusals(at: later).map(\.origin), [busy])
    try store.remember([:], at: later.addingTimeInterval(week))
    XCTAssertEqual(
      try store.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM refusals") }, 0)
  }

  func testARefusalOfOneTransferAloneIsNotReadAsAKnee() throws {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let origin = Origin(URL(string: "http://127.0.0.1:8080/a.png")!)
    let store = try StateStore(location: location)
    try store.remember([origin: OriginRefusal(origin: origin, inFlight: 1, since: now)], at: now)
    XCTAssertEqual(try store.refusals(at: now), [], "no limit is under 1")
    try store.remember([origin: OriginRefusal(origin: origin, inFlight: 2, since: now)], at: now)
    XCTAssertEqual(try store.refusals(at: now).map(\.inFlight), [2])
  }

  func testAStateFromBeforeRefusalsReadsAsRememberingNone() throws {
    let directory = location.stateDirectory
    try FileSystem.createDirectory(path: directory)
    let path = directory + "/" + StateStore.fileName
    try DatabaseQueue(path: path).write { db in
      try db.execute(sql: "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
    }
    XCTAssertEqual(try XCTUnwrap(StateStore.openForReading(path: path)).refusals(at: Date()), [])
  }

  func testRunsAreRecorded() throws {
    let store = try StateStore(location: location)
    let start = Date(timeIntervalSince1970: 1_700_000_000)
    let (id, abandoned) = try store.beginRun(job: "nightly", at: start)
    XCTAssertEqual(abandoned, 0)
    try store.finishRun(id: id, at: start.addingTimeInterval(5), status: "completed", summary: "{}")
    let run = try XCTUnwrap(try store.recentRuns().first)
    XCTAssertEqual(run.id, id)
    XCTAssertEqual(run.job, "nightly")
    XCTAssertEqual(run.status, "completed")
    XCTAssertEqual(run.finishedAt, start.addingTimeInterval(5))
  }

  func testARunThatDiedRunningIsMarkedAbandonedAtTheNextStart() throws {
    let store = try StateStore(location: location)
    let start = Date(timeIntervalSince1970: 1_700_000_000)
    let (killed, _) = try store.beginRun(job: "nightly", at: start)
    let (next, abandoned) = try store.beginRun(job: "nightly", at: start.addingTimeInterval(86_400))
    XCTAssertEqual(abandoned, 1)
    let runs = try store.recentRuns()
    XCTAssertEqual(runs.first { $0.id == killed }?.status, "abandoned")
    XCTAssertEqual(runs.first { $0.id == next }?.status, "running")
  }

  func testAReadOnlyStateFileCanStillBeRead() throws {
    let store = try StateStore(location: location)
    try store.recordFailure(url: "u", code: 1001, name: "badImageData", reason: "r", at: Date())
    let path = location.stateDirectory + "/state.sqlite"
    chmod(path, 0o444)
    chmod(location.stateDirectory, 0o555)
    defer {
      chmod(location.stateDirectory, 0o755)
      chmod(path, 0o644)
    }
    let reader = try XCTUnwrap(try StateStore.openForReading(location: location))
    XCTAssertEqual(try reader.blacklist().map(\.url), ["u"])
    XCTAssertNil(
      try StateStore.openForReading(
        location: CacheLocation(directory: location.directory, namespace: "none")),
      "no state yet: nothing to read, nothing created")
  }

  func testCorruptStateFileIsMovedAsideAndRecreated() throws {
    try FileSystem.createDirectory(path: location.stateDirectory)
    let path = location.stateDirectory + "/state.sqlite"
    let garbage = Data(repeating: 0x5A, count: 8192)
    XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: garbage))

    let now = Date(timeIntervalSince1970: 1_700_000_000)
    let store = try StateStore(location: location, now: now)
    XCTAssertEqual(store.warnings.count, 1)
    XCTAssertTrue(store.warnings[0].contains("corrupt"), store.warnings[0])
    XCTAssertEqual(
      FileManager.default.contents(atPath: path + ".corrupt-1700000000"), garbage,
      "the corrupt file is kept, not deleted")
    try store.recordFailure(url: "u", code: 1001, name: "badImageData", reason: "r", at: now)
    XCTAssertEqual(try store.blacklist(now: now).count, 1)
  }

  /// A state file that SQLite cannot use says why with SQLite's own code, as a number, and the
  /// run's failure keeps it; the words stay SQLite's.
  func testAStateFileThatIsNoDatabaseCarriesSQLitesCode() throws {
    try FileSystem.createDirectory(path: location.stateDirectory)
    let path = location.stateDirectory + "/state.sqlite"
    XCTAssertTrue(
      FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x5A, count: 8192)))

    XCTAssertThrowsError(try StateStore.openForReading(location: location)?.blacklist()) {
      let error = $0 as? StateStoreError
      XCTAssertEqual(error?.cause, .sqlite(ResultCode.SQLITE_NOTADB.rawValue), "\($0)")
      XCTAssertTrue(error?.message.contains("not a database") ?? false, "\($0)")
      XCTAssertEqual(ImageCacheError.stateFailed($0).cause, error?.cause)
    }
  }

  /// A URL that failed while the wall clock ran ten years ahead: once a run has started, it
  /// ages from that start and leaves the blacklist when its time-to-live has passed, instead
  /// of staying on it for ten years.
  func testABlacklistEntryDatedInTheFutureExpiresAfterItsTimeToLive() throws {
    let store = try StateStore(location: location)
    let now = Date(timeIntervalSince1970: 1_763_870_400)
    let tenYearsAhead = now.addingTimeInterval(10 * 365 * 86_400)
    try store.recordFailure(
      url: "https://x/a.png", code: 1001, name: "badImageData", reason: "html", at: tenYearsAhead)
    _ = try store.beginRun(job: "nightly", at: now)
    let entry = try XCTUnwrap(try store.blacklistEntry(url: "https://x/a.png", now: now))
    XCTAssertEqual(entry.firstFailedAt, now)
    XCTAssertEqual(entry.lastFailedAt, now)
    XCTAssertNotNil(
      try store.blacklistEntry(url: "https://x/a.png", now: now + 3599, timeToLive: 3600))
    XCTAssertNil(
      try store.blacklistEntry(url: "https://x/a.png", now: now + 3601, timeToLive: 3600))
  }

  /// A run reads its blacklist before its state is open and its start recorded (issue 46):
  /// what it reads is what that start leaves, an entry dated ahead of it included. Under a
  /// time-to-live shorter than the time since the start, every entry the start leaves has
  /// expired, and one dated ten years ahead, read as it is, would still be active.
  func testTheBlacklistReadBeforeARunBeginsIsTheOneItsBeginningLeaves() throws {
    let start = Date(timeIntervalSince1970: 1_763_870_400.123_4)
    let written = try StateStore(location: location)
    for (url, date) in [
      ("https://x/past.png", start - 60), ("https://x/ahead.png", start + 10 * 365 * 86_400),
      ("https://x/just-ahead.png", start + 0.001),
    ] {
      try written.recordFailure(url: url, code: 1001, name: "badImageData", reason: "r", at: date)
    }
    let timeToLive: TimeInterval = 30 * 86_400
    XCTAssertLessThan(start + timeToLive, Date())
    let readBefore = try StateStore.blacklistHashesOfEveryStateFile(
      location: location, timeToLive: timeToLive,
      opened: try XCTUnwrap(try StateStore.openForReading(location: location)),
      runStartingAt: start)
    _ = try written.beginRun(job: "nightly", at: start)
    let leftByTheStart = try StateStore.blacklistHashesOfEveryStateFile(
      location: location, timeToLive: timeToLive, opened: written)
    XCTAssertEqual(readBefore.hashes, leftByTheStart.hashes)
    XCTAssertEqual(readBefore.hashes, [])
    XCTAssertEqual(
      try written.blacklist().filter { $0.lastFailedAt > start || $0.firstFailedAt > start }, [])
  }
}
