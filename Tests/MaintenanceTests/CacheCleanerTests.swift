import Core
import Maintenance
import TestSupport
import XCTest

final class CacheCleanerTests: TemporaryFolderTestCase {
  var builder: CacheBuilder!
  let now: Int64 = 1_700_000_000
  var nowDate: Date { Date(timeIntervalSince1970: TimeInterval(now)) }

  override func setUpWithError() throws {
    try super.setUpWithError()
    // Modified as long after now as read before it: a pass that reads the modification time
    // where it should read the access time sees another cache.
    builder = CacheBuilder(
      root: temporary.appending("default"), unstatedModificationTime: .mirrored(around: now))
  }

  /// Runs both passes; `expireType` nil: the configuration's default.
  private func clean(
    maxAge: TimeInterval, maxSize: UInt64 = 0, expireType: ExpireType? = .accessDate,
    dryRun: Bool = false, at date: Date? = nil
  ) throws -> (expire: MaintenancePassReport, trim: MaintenancePassReport) {
    try CacheCleaner(
      diskCachePath: builder.root,
      configuration: CleanupConfiguration(
        maxDiskAge: maxAge, maxDiskSize: maxSize, expireType: expireType)
    ).run(now: date ?? nowDate, dryRun: dryRun)
  }

  /// Each of SD's four dates as `statx` gives it, and how a run may name it: the access date is
  /// also the default.
  private static let dates: [(stated: [ExpireType?], date: @Sendable (FileAttributes) -> Int64?)] =
    [
      ([.accessDate, nil], { $0.accessTime }), ([.modificationDate], { $0.modificationTime }),
      ([.creationDate], { $0.creationTime }), ([.changeDate], { $0.changeTime }),
    ]

  /// Four files of one size, each the oldest by one of the four dates, and ordered differently
  /// by each: by access `read`, `written`, `born`, `changed`; by modification `written`,
  /// `changed`, `read`, `born`; by birth `born`, `written`, `changed`, `read`; by change
  /// `changed`, `born`, `read`, `written`. Access and modification times are up to an hour
  /// before the real time, birth and change times are the real time (a few clock ticks apart).
  /// Skips, or fails in CI, where the temporary folder's file system reports no birth times.
  private func fourDatesThatDisagree() throws -> [String: FileAttributes] {
    let real = Int64(Date().timeIntervalSince1970)
    let made = try builder.datedFiles(
      [
        .init("born", accessTime: real - 2000, modificationTime: real - 1000),
        .init("written", accessTime: real - 3000, modificationTime: real - 4000),
        .init("changed", accessTime: real - 1000, modificationTime: real - 3000),
        .init("read", accessTime: real - 4000, modificationTime: real - 2000),
      ], changeOrder: ["changed", "born", "read", "written"])
    if made.values.contains(where: { $0.creationTime == nil }) {
      try requireOrSkip("the file system of \(temporary.path) reports no birth times")
    }
    return made
  }

  /// SD expires by the date its `expireType` names, and by the access date when none is given
  /// (this tool's default, docs/jobs.md): on four files each the oldest by one date, a cutoff
  /// just past the oldest date of the type expires exactly the file oldest by it.
  func testEachExpireTypeExpiresByItsOwnDate() throws {
    let files = try fourDatesThatDisagree()
    let oldest: [ExpireType: String] = [
      .accessDate: "read", .modificationDate: "written", .creationDate: "born",
      .changeDate: "changed",
    ]
    for (types, date) in Self.dates {
      let sorted = files.values.map { date($0)! }.sorted()
      // Halfway between the oldest and the next: a Date holds nanoseconds only roughly.
      let cutoff = Date(nanosecondsSince1970: sorted[0] + (sorted[1] - sorted[0]) / 2)
      for stated in types {
        let (expire, trim) = try clean(maxAge: 0, expireType: stated, dryRun: true, at: cutoff)
        XCTAssertEqual(
          expire.actions.map(\.path), [oldest[types[0]!]!], "\(String(describing: stated))")
        XCTAssertEqual(trim.actions.count, 0)
      }
    }
    XCTAssertEqual(try builder.remainingFiles(), ["born", "changed", "read", "written"])
  }

  /// A file system without birth times (ramfs): `expireType` creationDate is refused, naming the
  /// first file and saying why, and nothing is deleted, not even by the other dates' measure.
  func testCreationDateWhereTheFileSystemHasNoBirthTimesIsAnErrorAndDeletesNothing() throws {
    let ramfs = try fileSystems.mountRamfs(at: temporary.appending("ramfs"))
    builder = CacheBuilder(root: ramfs + "/default")
    let path = try builder.file("a", accessTime: 0, modificationTime: 0)
    XCTAssertNil(try FileSystem.attributes(atPath: path)?.creationTime, "ramfs has birth times")
    XCTAssertThrowsError(try clean(maxAge: 500, expireType: .creationDate, at: Date())) { error in
      XCTAssertEqual(error as? MaintenanceError, .creationDateUnavailable(path: path))
      XCTAssertTrue("\(error)".contains("birth time"), "\(error)")
    }
    XCTAssertEqual(try builder.remainingFiles(), ["a"], "nothing deleted")
  }

  func testExpiresFilesAtOrBeforeTheCutoff() throws {
    try builder.file("before", accessTime: now - 101)
    try builder.file("at", accessTime: now - 100)
    try builder.file("after", accessTime: now - 99)
    try builder.file("sub/deep", accessTime: now - 5000)
    let (expire, trim) = try clean(maxAge: 100)
    XCTAssertEqual(try builder.remainingFiles(), ["after"])
    XCTAssertEqual(expire.filesRemoved, 3)
    XCTAssertEqual(Set(expire.actions.map(\.path)), ["before", "at", "sub/deep"])
    XCTAssertEqual(trim.filesRemoved, 0)
  }

  func testNanosecondBoundary() throws {
    let path = try builder.file("edge", accessTime: now - 100)
    try FileSystem.setTimes(
      path: path, accessTime: (now - 100) * 1_000_000_000 + 1, modificationTime: 0)
    _ = try clean(maxAge: 100)
    XCTAssertEqual(try builder.remainingFiles(), ["edge"], "one nanosecond after the cutoff stays")
  }

  /// SD's `creationDate` is the birth time, which nothing after the file's creation changes;
  /// the change time (ctime) moves with every metadata change, e.g. the access time a hit sets.
  /// A file born two seconds ago and touched just now is past an age of one second by its birth.
  func testCreationDateIsTheBirthTimeNotTheChangeTimeAHitMoves() throws {
    let path = try builder.file("a", accessTime: 0, modificationTime: 0)
    let born = try XCTUnwrap(FileSystem.attributes(atPath: path))
    guard let birth = born.creationTime else {
      try requireOrSkip("the file system of \(temporary.path) reports no birth times")
    }
    // Past two seconds by a margin: the kernel stamps files from a clock that may lag the
    // wall clock by a tick.
    XCTAssertTrue(
      waitUntil("two seconds past the birth time") {
        Int64(Date().timeIntervalSince1970 * 1e9) > birth + 2_100_000_000
      })
    // A hit: the access time set now, which sets the change time now too.
    try FileSystem.setTimes(path: path, accessTime: 0, modificationTime: 0)
    let touched = try XCTUnwrap(FileSystem.attributes(atPath: path))
    XCTAssertGreaterThan(touched.changeTime, birth + 2_000_000_000)
    _ = try clean(maxAge: 1, expireType: .creationDate, at: Date())
    XCTAssertEqual(try builder.remainingFiles(), [], "born over a second ago")
  }

  /// SD sorts the files to trim by the date its `expireType` names (`cacheContentDateKey`),
  /// the access date when none is given: on four files of one size ordered differently by each
  /// date, a limit just under their total trims three, oldest first by that date.
  func testTrimGoesOldestFirstByTheExpireTypesDate() throws {
    let files = try fourDatesThatDisagree()
    let each = try XCTUnwrap(files["read"]?.allocatedSize)
    XCTAssertTrue(files.values.allSatisfy { $0.allocatedSize == each && each > 0 })
    let order: [ExpireType: [String]] = [
      .accessDate: ["read", "written", "born"], .modificationDate: ["written", "changed", "read"],
      .creationDate: ["born", "written", "changed"], .changeDate: ["changed", "born", "read"],
    ]
    for (types, _) in Self.dates {
      for stated in types {
        // 4 files over a limit of 4 less a byte: below half of it (2 less one) is one file.
        let (expire, trim) = try clean(
          maxAge: -1, maxSize: 4 * each - 1, expireType: stated, dryRun: true, at: Date())
        XCTAssertEqual(expire.actions.count, 0)
        XCTAssertEqual(
          trim.actions.map(\.path), order[types[0]!]!, "\(String(describing: stated))")
      }
    }
    let (_, trim) = try clean(maxAge: -1, maxSize: 4 * each - 1, expireType: .changeDate)
    XCTAssertEqual(trim.actions.map(\.path), order[.changeDate]!, "carried out as planned")
    XCTAssertEqual(try builder.remainingFiles(), ["written"])
  }

  func testNegativeAgeNeverExpiresAndZeroExpiresEverything() throws {
    try builder.file("a", accessTime: now - 10_000_000)
    try builder.file("b", accessTime: now)
    _ = try clean(maxAge: -1)
    XCTAssertEqual(try builder.remainingFiles(), ["a", "b"])
    _ = try clean(maxAge: 0)
    XCTAssertEqual(try builder.remainingFiles(), [])
  }

  func testTrimOnlyWhenStrictlyAboveTheLimitAndThenOldestFirstToBelowHalf() throws {
    for i in 0..<10 { try builder.file("f\(i)", size: 4096, accessTime: now - 1000 + Int64(i)) }
    let sizes = try CacheScanner(root: builder.root).files().map(\.attributes.allocatedSize)
    let total = sizes.reduce(0, +)
    let each = sizes[0]
    XCTAssertTrue(sizes.allSatisfy { $0 == each })

    var (_, trim) = try clean(maxAge: -1, maxSize: total)
    XCTAssertEqual(trim.filesRemoved, 0, "equal to the limit is not above it")

    (_, trim) = try clean(maxAge: -1, maxSize: total - 1)
    // Delete oldest until strictly below (total - 1) / 2.
    let desired = (total - 1) / 2
    var remaining = total
    var expectedRemoved = 0
    while remaining >= desired {
      remaining -= each
      expectedRemoved += 1
    }
    XCTAssertEqual(trim.filesRemoved, expectedRemoved)
    XCTAssertEqual(trim.bytesFreed, UInt64(expectedRemoved) * each)
    XCTAssertEqual(
      try builder.remainingFiles(), (expectedRemoved..<10).map { "f\($0)" }.sorted())
    XCTAssertEqual(trim.actions.map(\.path), (0..<expectedRemoved).map { "f\($0)" })
  }

  /// SD's `removeExpiredData` subtracts each deleted file and stops only once the total is
  /// strictly below half the limit (`if (currentCacheSize < desiredCacheSize) break;`): a
  /// total that lands exactly on half is not below it, and one more file goes. Five files of
  /// one size over a limit of four: four go, not three.
  func testATrimThatLandsExactlyOnHalfTheLimitDeletesOneMore() throws {
    for i in 0..<5 { try builder.file("f\(i)", size: 4096, accessTime: now - 1000 + Int64(i)) }
    let sizes = try CacheScanner(root: builder.root).files().map(\.attributes.allocatedSize)
    let each = try XCTUnwrap(sizes.first)
    XCTAssertTrue(each > 0 && sizes.allSatisfy { $0 == each }, "\(sizes)")

    let (_, trim) = try clean(maxAge: -1, maxSize: 4 * each)
    XCTAssertEqual(trim.filesRemoved, 4, "5 x \(each) -> 2 x \(each) is half, not below it")
    XCTAssertEqual(trim.bytesFreed, 4 * each)
    XCTAssertEqual(try builder.remainingFiles(), ["f4"])
  }

  func testTrimCountsWhatExpiryLeft() throws {
    try builder.file("expired", size: 100_000, accessTime: now - 10_000)
    try builder.file("young", size: 4096, accessTime: now)
    let (expire, trim) = try clean(maxAge: 100, maxSize: 50_000)
    XCTAssertEqual(expire.filesRemoved, 1)
    XCTAssertEqual(trim.filesRemoved, 0)
    XCTAssertEqual(try builder.remainingFiles(), ["young"])
  }

  /// Whether `path` itself exists, a dangling link included.
  private func exists(_ path: String) throws -> Bool {
    try FileSystem.attributes(atPath: path) != nil
  }

  func testAnExpiredSymbolicLinkIsRemovedByItsOwnDateAndItsTargetNeverTouched() throws {
    let outside = try TemporaryDirectory(prefix: "imagecache-outside")
    defer { outside.remove() }
    let outsideBuilder = CacheBuilder(root: outside.path)
    let precious = try outsideBuilder.file("precious.jpg", accessTime: now)
    let oldTarget = try outsideBuilder.file("old-target.jpg", accessTime: 0)
    let deep = try outsideBuilder.file("dir/also-precious.jpg", accessTime: 0)
    let fresh = try builder.file("fresh.jpg", accessTime: now)
    let insideOld = try builder.file("sub/old.jpg", accessTime: now - 10_000)
    // Only the links' own dates count: old links to fresh targets go, a fresh link to an old
    // target stays, and a link to a folder is a link, never walked into.
    try builder.link("to-outside", to: precious, accessTime: now - 1000)
    try builder.link("to-inside", to: fresh, accessTime: now - 1000)
    try builder.link("to-inside-old", to: insideOld, accessTime: now)
    try builder.link("fresh-link", to: oldTarget, accessTime: now)
    try builder.link("to-folder", to: outside.path + "/dir", accessTime: now - 1000)
    try builder.link("sub/dangling", to: outside.path + "/missing", accessTime: now - 1000)

    let (expire, _) = try clean(maxAge: 100)

    XCTAssertEqual(
      Set(expire.actions.map(\.path)),
      ["to-outside", "to-inside", "to-folder", "sub/dangling", "sub/old.jpg"])
    for gone in ["to-outside", "to-inside", "to-folder", "sub/dangling", "sub/old.jpg"] {
      XCTAssertFalse(try exists(builder.root + "/" + gone), gone)
    }
    for kept in ["fresh-link", "to-inside-old", "fresh.jpg"] {
      XCTAssertTrue(try exists(builder.root + "/" + kept), kept)
    }
    for target in [precious, oldTarget, deep] {
      let attributes = try XCTUnwrap(try FileSystem.attributes(atPath: target), target)
      XCTAssertTrue(attributes.isRegularFile, target)
    }
    XCTAssertTrue(try FileSystem.attributes(atPath: outside.path + "/dir")?.isDirectory == true)
  }

  func testTrimCountsASymbolicLinkAtItsOwnAllocatedSizeAndRemovesOnlyTheLink() throws {
    let outside = try TemporaryDirectory(prefix: "imagecache-outside")
    defer { outside.remove() }
    let big = try CacheBuilder(root: outside.path).file("big.jpg", size: 200_000, accessTime: 0)
    let link = try builder.link("link", to: big, accessTime: now - 400)
    try builder.file("f0", size: 4096, accessTime: now - 300)
    try builder.file("f1", size: 4096, accessTime: now - 200)
    let linkSize = try XCTUnwrap(try FileSystem.attributes(atPath: link)).allocatedSize
    let filesSize = try CacheScanner(root: builder.root).files().map(\.attributes.allocatedSize)
      .reduce(0, +)

    var (_, trim) = try clean(maxAge: -1, maxSize: filesSize + linkSize)
    XCTAssertEqual(trim.filesRemoved, 0, "the link counts its own blocks, not its target's")
    XCTAssertTrue(try exists(link))

    (_, trim) = try clean(maxAge: -1, maxSize: filesSize + linkSize - 1)
    XCTAssertEqual(trim.actions.first?.path, "link", "the oldest entry goes first")
    XCTAssertEqual(trim.actions.first?.bytes, linkSize)
    XCTAssertFalse(try exists(link))
    XCTAssertEqual(try FileSystem.attributes(atPath: big)?.size, 200_000)
  }

  func testHiddenEntriesAndToolStateAreUntouched() throws {
    try builder.file(".hidden", accessTime: 0)
    try builder.file(".imagecache/state.sqlite", size: 50_000, accessTime: 0)
    try builder.file(".dotdir/inside", accessTime: 0)
    try builder.file("visible", accessTime: 0)
    let (expire, _) = try clean(maxAge: 0, maxSize: 1)
    XCTAssertEqual(expire.filesRemoved, 1)
    for hidden in [".hidden", ".imagecache/state.sqlite", ".dotdir/inside"] {
      XCTAssertTrue(FileManager.default.fileExists(atPath: builder.root + "/" + hidden), hidden)
    }
  }

  func testDryRunDeletesNothingAndPlansExactlyWhatARunDoes() throws {
    for i in 0..<20 {
      try builder.file("f\(i)", size: 4096 * (i % 3 + 1), accessTime: now - Int64(i * 37))
    }
    let before = try builder.remainingFiles()
    let plan = try clean(maxAge: 400, maxSize: 40_000, dryRun: true)
    XCTAssertEqual(try builder.remainingFiles(), before)
    XCTAssertTrue(plan.expire.dryRun && plan.trim.dryRun)
    let done = try clean(maxAge: 400, maxSize: 40_000)
    XCTAssertEqual(Set(plan.expire.actions.map(\.path)), Set(done.expire.actions.map(\.path)))
    XCTAssertEqual(plan.trim.actions.map(\.path), done.trim.actions.map(\.path))
    XCTAssertEqual(plan.trim.bytesFreed, done.trim.bytesFreed)
  }

  func testMissingCacheIsEmpty() throws {
    let report = try clean(maxAge: 0, maxSize: 1)
    XCTAssertEqual(report.expire.filesRemoved + report.trim.filesRemoved, 0)
  }

  /// On a shard (SPEC section 9) the expire pass deletes only the shard's own files, by the MD5
  /// their names start with (shard 0 also those whose names start with none): another shard's
  /// stay, and the shards together expire every cache file once, as one run would. A trim, which needs the whole cache, is refused
  /// before anything is deleted.
  func testOnAShardExpireTakesOnlyItsOwnFilesAndATrimIsRefused() throws {
    let names = (0..<12).map { CacheFileName.md5Hex("https://example.com/\($0).png") + ".png" }
    for name in names { try builder.file(name, accessTime: now - 10_000) }
    try builder.file("notes.txt", accessTime: now - 10_000)
    var expired: [String] = []
    for index in 0..<3 {
      let shard = try XCTUnwrap(Shard(index: index, count: 3))
      // A name of no digest is shard 0's, so that the shards expire what one run would.
      let own = (names + ["notes.txt"]).filter { shard.ownsFile(named: $0) }
      XCTAssertFalse(own.isEmpty)
      let trimming = CacheCleaner(
        diskCachePath: builder.root,
        configuration: CleanupConfiguration(maxDiskAge: 100, maxDiskSize: 1), shard: shard)
      XCTAssertThrowsError(try trimming.run(now: nowDate, dryRun: false)) {
        XCTAssertEqual($0 as? MaintenanceError, .trimOnShard)
      }
      XCTAssertEqual(
        try builder.remainingFiles().count, 13 - expired.count, "a refused trim deletes nothing")
      let (expire, trim) = try CacheCleaner(
        diskCachePath: builder.root, configuration: CleanupConfiguration(maxDiskAge: 100),
        shard: shard
      ).run(now: nowDate, dryRun: false)
      XCTAssertEqual(expire.actions.map(\.path).sorted(), own.sorted(), "shard \(index)")
      XCTAssertEqual(trim.actions, [])
      expired += own
    }
    XCTAssertEqual(expired.sorted(), (names + ["notes.txt"]).sorted())
    XCTAssertEqual(try builder.remainingFiles(), [])
  }

  /// What `--max-delete` is checked against (the plan: every file the passes look at, and what
  /// they would delete) and what the report states of the cache (its allocated bytes before,
  /// after the expire pass and after the trim) are counts of the real files.
  func testThePlanCountsEveryFileAndTheSizesAreTheCachesBeforeAndAfterEachPass() throws {
    // Read 1000 to 500 s ago, one every 100 s.
    for i in 0..<6 {
      try builder.file("f\(i)", size: 4096, accessTime: now - 1000 + Int64(i) * 100)
    }
    let sizes = try CacheScanner(root: builder.root).files().map(\.attributes.allocatedSize)
    let each = try XCTUnwrap(sizes.first)
    XCTAssertTrue(each > 0 && sizes.allSatisfy { $0 == each }, "\(sizes)")
    // Expire f0, f1 and f2; the other three are over the limit: trim f3 and f4 to get below
    // half of it.
    let cleaner = CacheCleaner(
      diskCachePath: builder.root,
      configuration: CleanupConfiguration(
        maxDiskAge: 750, maxDiskSize: 3 * each - 1, expireType: .accessDate))

    let plan = try cleaner.plan(now: nowDate)
    XCTAssertEqual(plan.files, 6)
    XCTAssertEqual(plan.deletions, 5)
    XCTAssertTrue(DeletionLimit.files(5).allows(deletions: plan.deletions, of: plan.files))
    XCTAssertFalse(DeletionLimit.files(4).allows(deletions: plan.deletions, of: plan.files))
    XCTAssertFalse(DeletionLimit.percent(80).allows(deletions: plan.deletions, of: plan.files))
    XCTAssertTrue(DeletionLimit.percent(90).allows(deletions: plan.deletions, of: plan.files))
    // A limit is the most allowed: exactly at it is within it.
    XCTAssertTrue(DeletionLimit.percent(50).allows(deletions: 3, of: 6))
    XCTAssertFalse(DeletionLimit.percent(50).allows(deletions: 4, of: 6))
    XCTAssertEqual(try builder.remainingFiles().count, 6, "a plan deletes nothing")

    for dryRun in [true, false] {
      var expire = MaintenancePassReport(pass: .expire, dryRun: dryRun)
      var trim = MaintenancePassReport(pass: .trim, dryRun: dryRun)
      let done = try cleaner.run(now: nowDate, dryRun: dryRun, expire: &expire, trim: &trim)
      XCTAssertEqual(done?.before, 6 * each, "\(dryRun)")
      XCTAssertEqual(done?.afterExpire, 3 * each, "\(dryRun)")
      XCTAssertEqual(done?.afterTrim, each, "\(dryRun)")
      XCTAssertEqual(expire.actions.map(\.path).sorted(), ["f0", "f1", "f2"])
      XCTAssertEqual(trim.actions.map(\.path), ["f3", "f4"])
    }
    XCTAssertEqual(try builder.remainingFiles(), ["f5"])
  }

  /// `--max-delete` and `cache.maxDelete`: a number of files (0 included: delete nothing) or a
  /// percentage from 0 to 100 of the files looked at; the refusal states it back as given.
  func testAMaxDeleteIsAFileCountOrAPercentAndIsStatedBackAsGiven() {
    XCTAssertEqual(DeletionLimit(parsing: "0"), .files(0))
    XCTAssertEqual(DeletionLimit(parsing: " 500 "), .files(500))
    XCTAssertEqual(DeletionLimit(parsing: "0%"), .percent(0))
    XCTAssertEqual(DeletionLimit(parsing: "100%"), .percent(100))
    XCTAssertEqual(DeletionLimit(parsing: "12.5%"), .percent(12.5))
    for bad in ["-1", "-1%", "100.5%", "101%", "1000%", "ten", "5%%", "inf%", "nan%", ""] {
      XCTAssertNil(DeletionLimit(parsing: bad), bad)
    }
    XCTAssertTrue(DeletionLimit.files(0).allows(deletions: 0, of: 10))
    XCTAssertFalse(DeletionLimit.files(0).allows(deletions: 1, of: 10))
    XCTAssertEqual(DeletionLimit.files(500).description, "500 files")
    XCTAssertEqual(DeletionLimit.percent(10).description, "10% of the files")
    XCTAssertEqual(DeletionLimit.percent(12.5).description, "12.5% of the files")
  }

  /// Compares the pass with a deliberately simple implementation (sort everything) on random
  /// caches: random sizes, distinct random dates, random limits.
  func testMatchesASimpleImplementationOnRandomCaches() throws {
    var generator = SeededRandom(seed: 0x5EED)
    for round in 0..<40 {
      try? FileManager.default.removeItem(atPath: builder.root)
      let count = Int.random(in: 0...30, using: &generator)
      var dates = Set<Int64>()
      while dates.count < count {
        dates.insert(now - Int64.random(in: 0...10_000, using: &generator))
      }
      for (i, date) in dates.enumerated() {
        let directory = ["", "a/", "a/b/"].randomElement(using: &generator)!
        try builder.file(
          "\(directory)f\(i)", size: Int.random(in: 0...20_000, using: &generator), accessTime: date
        )
      }
      let files = try CacheScanner(root: builder.root).files()
      let maxAge = TimeInterval(Int.random(in: -1...12_000, using: &generator))
      let total = files.map(\.attributes.allocatedSize).reduce(0, +)
      let maxSize = [0, UInt64.random(in: 0...max(total, 1), using: &generator)].randomElement(
        using: &generator)!

      let expected = simpleCleanup(files: files, maxAge: maxAge, maxSize: maxSize)
      let (expire, trim) = try clean(maxAge: maxAge, maxSize: maxSize)
      XCTAssertEqual(Set(expire.actions.map(\.path)), expected.expired, "round \(round)")
      XCTAssertEqual(trim.actions.map(\.path), expected.trimmed, "round \(round)")
      let survivors = Set(files.map(\.relativePath)).subtracting(expected.expired).subtracting(
        expected.trimmed)
      XCTAssertEqual(Set(try builder.remainingFiles()), survivors, "round \(round)")
    }
  }

  private func simpleCleanup(files: [ScannedFile], maxAge: TimeInterval, maxSize: UInt64)
    -> (expired: Set<String>, trimmed: [String])
  {
    var expired = Set<String>()
    var kept: [ScannedFile] = []
    for file in files {
      if maxAge >= 0 && file.attributes.accessDate <= nowDate.addingTimeInterval(-maxAge) {
        expired.insert(file.relativePath)
      } else {
        kept.append(file)
      }
    }
    var total = kept.map(\.attributes.allocatedSize).reduce(0, +)
    var trimmed: [String] = []
    if maxSize > 0 && total > maxSize {
      for file in kept.sorted(by: { $0.attributes.accessTime < $1.attributes.accessTime }) {
        trimmed.append(file.relativePath)
        total -= file.attributes.allocatedSize
        if total < maxSize / 2 { break }
      }
    }
    return (expired, trimmed)
  }
}
