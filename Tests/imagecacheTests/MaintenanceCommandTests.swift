import Core
import Foundation
import State
import TestSupport
import XCTest

/// End-to-end: the built binary on real folders.
final class MaintenanceCommandTests: TemporaryFolderTestCase {
  var location: CacheLocation!
  var builder: CacheBuilder!

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
    builder = CacheBuilder(root: location.diskCachePath)
  }

  func testMaintainTrimsToASmallLimitAndWritesTheReport() throws {
    let now = Int64(Date().timeIntervalSince1970)
    // Oldest first by the access date, the default, alone: f9 was written, born and changed
    // first.
    try builder.datedFiles(
      (0..<10).reversed().map {
        .init("f\($0)", accessTime: now - 100 + Int64($0), modificationTime: now - Int64($0))
      }, changeOrder: (0..<10).reversed().map { "f\($0)" })
    let reportPath = temporary.appending("out/report.json")
    let result = try ImageCacheBinary.run([
      "maintain", "--cache", location.directory, "--max-age", "-1", "--max-size", "20KB",
      "--report", reportPath,
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let report = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: reportPath)))
    XCTAssertEqual(report.schemaVersion, 1)
    XCTAssertEqual(report.status, .completed)
    XCTAssertEqual(report.cache.namespace, "default")
    XCTAssertEqual(report.maintenance.map(\.pass), [.expire, .trim])
    let trim = report.maintenance[1]
    // 10 files of (typically) 4 KiB allocated: above 20 kB; trim to below 10 kB.
    let remaining = try builder.remainingFiles()
    XCTAssertEqual(trim.filesRemoved, 10 - remaining.count)
    XCTAssertEqual(
      remaining, (10 - remaining.count..<10).map { "f\($0)" }.sorted(), "oldest went first")
    let usage = try DiskCache(location: location).usage()
    XCTAssertLessThan(usage.allocatedBytes, 10_000)
    XCTAssertTrue(result.stderr.contains("trim: removed"), result.stderr)
  }

  func testSIGINTDuringATrimOfALargeCacheExits130WithAnInterruptedReport() throws {
    let count = 20_000
    for index in 0..<count {
      try builder.file("d\(index % 100)/f\(index)", size: 10, accessTime: 10_000 + Int64(index))
    }
    let reportPath = temporary.appending("report.json")
    let result = try ImageCacheBinary.interrupt(
      [
        "maintain", "--cache", location.directory, "--max-age", "-1", "--max-size", "1", "-v",
        "--report", reportPath,
      ], when: "trim: delete")

    XCTAssertEqual(result.status, 130, result.stderr)
    let report = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: reportPath)))
    XCTAssertEqual(report.status, .interrupted)
    let remaining = try builder.remainingFiles().count
    XCTAssertGreaterThan(remaining, 0, "stopped mid-trim")
    XCTAssertEqual(report.maintenance.last?.filesRemoved, count - remaining)
  }

  /// Issue 41 item 18: SIGINT stops a migration after the file in hand, as it stops a trim:
  /// exit 130, the report `interrupted` with what was moved, the rest left in SD's folder for
  /// the next run.
  func testSIGINTDuringAMigrationStopsItWithAnInterruptedReport() throws {
    let count = 20_000
    let legacy = CacheBuilder(
      root: temporary.appending("default/com.hackemist.SDWebImageCache.default"))
    for index in 0..<count {
      try legacy.file(
        CacheFileName.md5Hex("https://example.com/\(index).jpg") + ".jpg", size: 10,
        accessTime: 10_000 + Int64(index))
    }
    let reportPath = temporary.appending("report.json")
    let result = try ImageCacheBinary.interrupt(
      ["migrate", "--cache", location.directory, "-v", "--report", reportPath],
      when: "migrate: move")

    XCTAssertEqual(result.status, 130, String(result.stderr.suffix(2000)))
    let report = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: reportPath)))
    XCTAssertEqual(report.status, .interrupted)
    let left = try legacy.remainingFiles().count
    XCTAssertGreaterThan(left, 0, "stopped mid-migration")
    XCTAssertEqual(try builder.remainingFiles().count, count - left, "nothing lost")
    XCTAssertEqual(report.maintenance.first?.filesMoved, count - left)
  }

  func testDryRunPrintsThePlanAndJSONOnStdout() throws {
    try builder.file("old", accessTime: 1_000)
    let result = try ImageCacheBinary.run([
      "maintain", "--cache", location.directory, "--max-age", "1d", "--dry-run", "--json",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertTrue(
      result.stderr.contains("expire (dry run): would remove 1 files"), result.stderr)
    XCTAssertFalse(
      result.stderr.contains("would delete old"), "with --json the plan is the report only")
    let report = try RunReport.decode(Data(result.stdout.utf8))
    XCTAssertEqual(report.maintenance[0].actions.map(\.path), ["old"])
    XCTAssertTrue(report.maintenance[0].dryRun)
    XCTAssertEqual(try builder.remainingFiles(), ["old"])
  }

  /// Exit 3 names the holder's pid and start, as the lock file gives them (docs/operations.md),
  /// so that whoever reads the cron mail knows which run to look at.
  func testSecondRunWhileTheLockIsHeldExitsThreeNamingTheHolder() async throws {
    let result = try await RunLock.withLock(location: location, wait: false) {
      try ImageCacheBinary.run(["maintain", "--cache", location.directory])
    }
    XCTAssertEqual(result.status, 3)
    XCTAssertTrue(
      result.stderr.contains("another imagecache run (pid \(getpid()), started at "),
      result.stderr)
    XCTAssertTrue(result.stderr.contains("holds the cache lock"), result.stderr)
  }

  /// A dry run reads what a run is changing: it takes the lock shared, so it refuses (exit 3)
  /// while a run holds it, as a run does, for maintenance and prefetch alike.
  func testADryRunWhileARunHoldsTheLockExitsThree() async throws {
    let manifest = temporary.appending("urls.txt")
    try "http://127.0.0.1:9/a.jpg\n".write(toFile: manifest, atomically: true, encoding: .utf8)
    let results = try await RunLock.withLock(location: location, wait: false) {
      [
        try ImageCacheBinary.run([
          "maintain", "--cache", location.directory, "--max-age", "1d", "--dry-run",
        ]),
        try ImageCacheBinary.run([
          "prefetch", manifest, "--cache", location.directory, "--dry-run",
        ]),
      ]
    }
    for result in results {
      XCTAssertEqual(result.status, 3, result.stderr)
      XCTAssertTrue(result.stderr.contains("holds the cache lock"), result.stderr)
    }
  }

  func testWaitWaitsForTheLock() async throws {
    let (process, stdout, stderr) = try await RunLock.withLock(location: location, wait: false) {
      let started = try ImageCacheBinary.start([
        "maintain", "--cache", location.directory, "--wait",
      ])
      let stderr = PipeReader(started.2)
      await waitUntil(timeout: 10, "the run to say it waits") {
        stderr.text.contains("waiting for")
      }
      XCTAssertTrue(started.0.isRunning, "still waiting for the lock: \(stderr.text)")
      return (started.0, started.1, stderr)
    }
    let result = ImageCacheBinary.finish(process, stdout, stderr)
    XCTAssertEqual(result.status, 0, result.stderr)
  }

  func testBadValuesAreUsageErrorsNamingTheOption() throws {
    let size = try ImageCacheBinary.run([
      "maintain", "--cache", location.directory, "--max-size", "lots",
    ])
    XCTAssertEqual(size.status, 2)
    XCTAssertTrue(size.stderr.contains("--max-size"), size.stderr)
    let type = try ImageCacheBinary.run([
      "maintain", "--cache", location.directory, "--expire-type", "birth",
    ])
    XCTAssertEqual(type.status, 2)
    XCTAssertTrue(type.stderr.contains("--expire-type"), type.stderr)
    let namespace = try ImageCacheBinary.run([
      "stats", "--cache", location.directory, "--namespace", "../x",
    ])
    XCTAssertEqual(namespace.status, 2)
  }

  func testMigrateMergesTheSD4FolderAndRenamesLegacyNames() throws {
    let legacy = CacheBuilder(
      root: temporary.appending("default/com.hackemist.SDWebImageCache.default"))
    let key = "https://example.com/img/photo.jpg?size=large"
    try legacy.file(CacheFileName.md5Hex(key), size: 10, accessTime: 1_000)
    let manifest = temporary.appending("urls.txt")
    try "# a comment\n\n\(key)\n".write(toFile: manifest, atomically: true, encoding: .utf8)

    let result = try ImageCacheBinary.run([
      "migrate", "--cache", location.directory, "--manifest", manifest, "--json",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(try builder.remainingFiles(), ["4d71d9e1d36571b22d5dd89b751927a9.jpg"])
    let report = try RunReport.decode(Data(result.stdout.utf8))
    XCTAssertEqual(report.maintenance.map(\.filesMoved), [1, 1])

    let again = try ImageCacheBinary.run([
      "migrate", "--cache", location.directory, "--manifest", manifest, "--json",
    ])
    XCTAssertEqual(again.status, 0, again.stderr)
    XCTAssertEqual(try RunReport.decode(Data(again.stdout.utf8)).maintenance.map(\.filesMoved), [0])
  }

  func testBlacklistListRemoveAndClear() throws {
    let store = try StateStore(location: location)
    try store.recordFailure(
      url: "https://x/a.png", code: 1001, name: "badImageData", reason: "html", at: Date())
    try store.recordFailure(
      url: "https://x/b.png", code: 1000, name: "invalidURL", reason: "bad", at: Date())

    let list = try ImageCacheBinary.run([
      "blacklist", "list", "--cache", location.directory, "--json",
    ])
    XCTAssertEqual(list.status, 0, list.stderr)
    XCTAssertTrue(list.stdout.contains("https://x/a.png") && list.stdout.contains("badImageData"))

    let remove = try ImageCacheBinary.run([
      "blacklist", "remove", "https://x/a.png", "--cache", location.directory,
    ])
    XCTAssertEqual(remove.status, 0, remove.stderr)
    XCTAssertEqual(try store.blacklist().map(\.url), ["https://x/b.png"])
    let missing = try ImageCacheBinary.run([
      "blacklist", "remove", "https://x/a.png", "--cache", location.directory,
    ])
    XCTAssertEqual(missing.status, 1)

    let clear = try ImageCacheBinary.run(["blacklist", "clear", "--cache", location.directory])
    XCTAssertEqual(clear.status, 0, clear.stderr)
    XCTAssertEqual(try store.blacklist(), [])
  }

  func testStatsCountsFilesAndLegacyNames() throws {
    try builder.file("8c11d92f07c76baf29e49afd2301deb2", size: 10, accessTime: 1_000)
    try builder.file("4d71d9e1d36571b22d5dd89b751927a9.jpg?size=large", size: 20, accessTime: 2_000)
    try builder.file("e53566be7e08af71a1135ac4a1830724.png", size: 30, accessTime: 3_000)
    let result = try ImageCacheBinary.run(["stats", "--cache", location.directory, "--json"])
    XCTAssertEqual(result.status, 0, result.stderr)
    let stats = try XCTUnwrap(
      JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    XCTAssertEqual(stats["files"] as? Int, 3)
    XCTAssertEqual(stats["logicalBytes"] as? Int, 60)
    XCTAssertEqual(stats["legacyNames"] as? Int, 2)
    XCTAssertEqual(stats["oldestAccess"] as? String, "1970-01-01T00:16:40Z")
  }

  func testEverySubcommandHasHelp() throws {
    for command in [["maintain"], ["migrate"], ["stats"], ["blacklist"], ["blacklist", "list"]] {
      let result = try ImageCacheBinary.run(command + ["--help"])
      XCTAssertEqual(result.status, 0, "\(command)")
      XCTAssertTrue(
        result.stdout.contains("USAGE: imagecache \(command.joined(separator: " "))"), result.stdout
      )
    }
  }

  /// The morning's question after a trim: what limits ran, and how big the cache was before
  /// and after. The report says it per pass, and the HTML page shows it.
  func testTheReportAndPageStateTheLimitsAndTheCacheSizeBeforeAndAfterEachPass() throws {
    let now = Int64(Date().timeIntervalSince1970)
    for i in 0..<3 { try builder.file("old\(i)", size: 4096, accessTime: now - 30 * 86_400) }
    for i in 0..<10 { try builder.file("f\(i)", size: 4096, accessTime: now - 100 + Int64(i)) }
    let before = try DiskCache(location: location).usage().allocatedBytes
    let reportPath = temporary.appending("report.json")
    let result = try ImageCacheBinary.run([
      "maintain", "--cache", location.directory, "--max-age", "1d", "--max-size", "20KB",
      "--expire-type", "modificationDate", "--report", reportPath,
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let after = try DiskCache(location: location).usage().allocatedBytes
    let data = try XCTUnwrap(FileManager.default.contents(atPath: reportPath))
    XCTAssertEqual(
      SchemaValidator.validate(
        try JSONSerialization.jsonObject(with: data), against: try SchemaValidator.reportSchema()),
      [])
    let report = try RunReport.decode(data)
    XCTAssertEqual(report.maintenance.map(\.pass), [.expire, .trim])
    let (expire, trim) = (report.maintenance[0], report.maintenance[1])
    let limits = CleanupLimits(
      maxDiskAge: 86_400, maxDiskSize: 20_000, expireType: .modificationDate)
    XCTAssertEqual(expire.limits, limits)
    XCTAssertEqual(trim.limits, limits)
    XCTAssertEqual(expire.cacheBytesBefore, before)
    XCTAssertEqual(expire.cacheBytesAfter, before - expire.bytesFreed)
    XCTAssertEqual(trim.cacheBytesBefore, expire.cacheBytesAfter)
    XCTAssertEqual(trim.cacheBytesAfter, after)
    XCTAssertGreaterThan(trim.filesRemoved, 0)

    let pagePath = temporary.appending("report.html")
    let rendered = try ImageCacheBinary.run(["report", "html", reportPath, "--output", pagePath])
    XCTAssertEqual(rendered.status, 0, rendered.stderr)
    let page = try String(contentsOfFile: pagePath, encoding: .utf8)
    for shown in [
      "files whose modificationDate is more than 1d old",
      "when over 20.0 KB, oldest modificationDate first to below 10.0 KB",
      "<th class=\"n\">cache before</th>", ">\(formatBytes(before))<", ">\(formatBytes(after))<",
    ] {
      XCTAssertTrue(page.contains(shown), "\(shown) on the page")
    }
  }
}

/// Issue 29, item 2 (SPEC section 11): no pass deletes by a limit nobody stated, and a guard
/// stops limits that would delete far more than meant.
final class DeletionLimitTests: TemporaryFolderTestCase {
  var location: CacheLocation!
  var builder: CacheBuilder!
  /// A month old by access date: every one of them is past SD's 7 days.
  let monthOld = Int64(Date().timeIntervalSince1970) - 30 * 86_400

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
    builder = CacheBuilder(root: location.diskCachePath)
    for i in 0..<10 { try builder.file("f\(i)", size: 100, accessTime: monthOld + Int64(i)) }
  }

  private func maintain(_ arguments: [String]) throws -> CommandResult {
    try ImageCacheBinary.run(["maintain", "--cache", location.directory] + arguments)
  }

  func testAMaxSizeAloneOnlyTrimsAndExpiresNothing() throws {
    let result = try maintain(["--max-size", "2GB"])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(try builder.remainingFiles().count, 10, "month-old files were expired")
    XCTAssertTrue(result.stderr.contains("expire: not run"), result.stderr)
  }

  func testMaintainWithNoLimitDeletesNothingAndSaysWhatToGive() throws {
    let result = try maintain([])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(try builder.remainingFiles().count, 10)
    XCTAssertTrue(result.stderr.contains("nothing to do"), result.stderr)
  }

  func testAJobThatListsNoMaintenanceKeepsMonthOldFilesAndSaysNoPassIsListed() throws {
    let job = temporary.appending("job.yaml")
    try "cache:\n  directory: \(location.directory)\n".write(
      toFile: job, atomically: true, encoding: .utf8)
    let result = try ImageCacheBinary.run(["run", job, "--json"])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(try builder.remainingFiles().count, 10, "month-old files were expired")
    XCTAssertEqual(try RunReport.decode(Data(result.stdout.utf8)).maintenance.map(\.pass), [])
    XCTAssertTrue(result.stderr.contains("no maintenance passes listed"), result.stderr)
  }

  func testAJobThatListsExpireWithoutAnAgeUsesSDsSevenDaysAndSaysWhereTheyCameFrom() throws {
    let job = temporary.appending("job.yaml")
    try "cache:\n  directory: \(location.directory)\nmaintenance: [expire]\n".write(
      toFile: job, atomically: true, encoding: .utf8)
    let result = try ImageCacheBinary.run(["run", job])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(try builder.remainingFiles(), [])
    XCTAssertTrue(result.stderr.contains("more than 7d old (SD's default"), result.stderr)
  }

  func testLimitsThatWouldDeleteMoreThanMaxDeleteDeleteNothing() throws {
    let refused = try maintain([
      "--max-age", "7d", "--max-delete", "50%", "--report",
      temporary.appending("r.json"),
    ])
    XCTAssertEqual(refused.status, 2, refused.stderr)
    XCTAssertTrue(refused.stderr.contains("would delete 10 of 10 files"), refused.stderr)
    XCTAssertEqual(try builder.remainingFiles().count, 10)
    let report = try RunReport.decode(
      XCTUnwrap(FileManager.default.contents(atPath: temporary.appending("r.json"))))
    XCTAssertEqual(report.status, .failed)
    let count = try maintain(["--max-age", "7d", "--max-delete", "9"])
    XCTAssertEqual(count.status, 2, count.stderr)
    let allowed = try maintain(["--max-age", "7d", "--max-delete", "10"])
    XCTAssertEqual(allowed.status, 0, allowed.stderr)
    XCTAssertEqual(try builder.remainingFiles(), [])
  }

  func testABadMaxDeleteIsAUsageError() throws {
    for value in ["ten", "101%", "-1", "5%%"] {
      XCTAssertEqual(try maintain(["--max-age", "7d", "--max-delete", value]).status, 2, value)
    }
  }
}
