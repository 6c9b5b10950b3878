import Core
import Foundation
import TestSupport
import XCTest

@testable import Maintenance

/// The trim in bounded memory (survivors in a temporary file, sorted a few at a time) deletes
/// exactly what sorting every survivor would, in the same order, with the limits made tiny so
/// that small caches go through every path: the temporary file, records cut by its chunks,
/// many rounds, finer histograms, and single dates holding more files than may be sorted.
final class BoundedTrimTests: TemporaryFolderTestCase {
  var builder: CacheBuilder!
  let now: Int64 = 1_700_000_000
  var nowDate: Date { Date(timeIntervalSince1970: TimeInterval(now)) }

  override func setUpWithError() throws {
    try super.setUpWithError()
    builder = CacheBuilder(root: temporary.appending("default"))
  }

  func testTrimDeletesExactlyWhatSortingEverySurvivorWouldWithTiesAndFailedDeletes() throws {
    var generator = SeededRandom(seed: 0xB0_0DED)
    var failedDeletes = (expire: 0, trim: 0)
    for round in 0..<30 {
      fileSystems.makeAllMutable()
      try? FileManager.default.removeItem(atPath: builder.root)
      // Few distinct seconds: many ties, which only the walk's order breaks. The modification
      // times are drawn apart from the access times, which the passes read.
      let spread = Int64.random(in: 0...60, using: &generator)
      for i in 0..<Int.random(in: 0...250, using: &generator) {
        let folder = ["", "", "a/", "a/b/", "c/"].randomElement(using: &generator)!
        let date = now - Int64.random(in: 0...spread, using: &generator)
        let modified = now - Int64.random(in: 0...100, using: &generator)
        if i > 0 && Int.random(in: 0..<20, using: &generator) == 0 {
          try builder.link(
            "\(folder)l\(i)", to: builder.root + "/f0", accessTime: date,
            modificationTime: modified)
        } else {
          let size = [0, 1, 4096, 9000, 30_000].randomElement(using: &generator)!
          try builder.file(
            "\(folder)f\(i)"
              + String(repeating: "x", count: Int.random(in: 0...40, using: &generator)),
            size: size, accessTime: date, modificationTime: modified)
        }
      }
      let files = try CacheScanner(root: builder.root, includesSymbolicLinks: true).files()
      // Deletes that fail: an immutable file cannot be removed, even by root.
      var immutable: [String] = []
      for file in files.filter({ $0.attributes.isRegularFile }).shuffled(using: &generator)
        .prefix(Int.random(in: 0...4, using: &generator))
      {
        try fileSystems.makeImmutable(builder.root + "/" + file.relativePath)
        immutable.append(file.relativePath)
      }
      let maxAge = TimeInterval(
        [-1, Int.random(in: 0...70, using: &generator)].randomElement(
          using: &generator)!)
      let total = files.map(\.attributes.allocatedSize).reduce(0, +)
      let maxSize = UInt64.random(in: 1...max(total, 1), using: &generator)
      var cleaner = CacheCleaner(
        diskCachePath: builder.root,
        configuration: CleanupConfiguration(maxDiskAge: maxAge, maxDiskSize: maxSize))
      cleaner.trimLimits = TrimLimits(
        sortBudget: Int.random(in: 1...6, using: &generator),
        buckets: Int.random(in: 2...16, using: &generator),
        spillBuffer: [1, 30, 200, 1 << 20].randomElement(using: &generator)!)
      let failing = Set(immutable)
      let message = "round \(round), limits \(cleaner.trimLimits)"

      let planned = reference(files, maxAge: maxAge, maxSize: maxSize, failing: [])
      let plan = try cleaner.run(now: nowDate, dryRun: true)
      XCTAssertEqual(plan.trim.actions.map(\.path), planned.trimmed, message)
      XCTAssertEqual(
        try cleaner.plan(now: nowDate).deletions, planned.expired.count + planned.trimmed.count,
        message)

      let expected = reference(files, maxAge: maxAge, maxSize: maxSize, failing: failing)
      let done = try cleaner.run(now: nowDate, dryRun: false)
      XCTAssertEqual(Set(done.expire.actions.map(\.path)), expected.expired, message)
      XCTAssertEqual(done.expire.errors.count, expected.expireErrors, message)
      XCTAssertEqual(done.trim.actions.map(\.path), expected.trimmed, message)
      XCTAssertEqual(done.trim.errors.count, expected.trimErrors, message)
      failedDeletes.expire += done.expire.errors.count
      failedDeletes.trim += done.trim.errors.count
      let remaining = try CacheScanner(root: builder.root, includesSymbolicLinks: true).files()
      XCTAssertEqual(
        Set(remaining.map(\.relativePath)),
        Set(files.map(\.relativePath)).subtracting(expected.expired).subtracting(expected.trimmed),
        message)
    }
    // The rounds met failed deletes in both passes: the case is not only the one without.
    XCTAssertGreaterThan(failedDeletes.expire, 0)
    XCTAssertGreaterThan(failedDeletes.trim, 0)
  }

  /// The survivors go to a temporary file in `TMPDIR`; where none can be made, or the disk
  /// fills while it is written (a full disk is when a trim matters most), they stay in memory
  /// and the trim is the same, and says once why its memory was not bounded.
  func testTrimIsTheSameWhenTheTemporaryFileCannotBeMadeOrTheDiskFills() throws {
    var generator = SeededRandom(seed: 0xF011)
    for i in 0..<400 {
      // Long names: 400 records of some 220 bytes overflow the 64 KiB disk below.
      let name = "f\(i)-" + String(repeating: "n", count: 200)
      try builder.file(
        name, size: 4096, accessTime: now - Int64.random(in: 0...100, using: &generator),
        modificationTime: now - Int64.random(in: 0...100, using: &generator))
    }
    let files = try CacheScanner(root: builder.root, includesSymbolicLinks: true).files()
    let total = files.map(\.attributes.allocatedSize).reduce(0, +)
    let expected = reference(files, maxAge: -1, maxSize: total / 3, failing: [])
    var cleaner = CacheCleaner(
      diskCachePath: builder.root,
      configuration: CleanupConfiguration(maxDiskAge: -1, maxDiskSize: total / 3))
    cleaner.trimLimits = TrimLimits(sortBudget: 7, buckets: 4, spillBuffer: 1000)

    let small = try fileSystems.mountTmpfs(at: temporary.appending("small"), size: "64k")
    // The records (a 20-byte header and the path each) are more than the disk holds: the
    // disk fills while they are written.
    var disk = statvfs()
    XCTAssertEqual(statvfs(small, &disk), 0)
    XCTAssertGreaterThan(
      files.map { 20 + $0.relativePath.utf8.count }.reduce(0, +),
      Int(disk.f_blocks) * Int(disk.f_frsize))
    let saved = ProcessInfo.processInfo.environment["TMPDIR"]
    defer {
      if let saved { setenv("TMPDIR", saved, 1) } else { unsetenv("TMPDIR") }
    }
    for (folder, cause) in [(temporary.appending("missing"), ENOENT), (small, ENOSPC)] {
      setenv("TMPDIR", folder, 1)
      let (trimmed, warnings) = try plan(cleaner)
      XCTAssertEqual(trimmed, expected.trimmed, folder)
      XCTAssertEqual(warnings.count, 1, "\(warnings)")
      guard case .trimInMemory(let error)? = warnings.first else { continue }
      XCTAssertEqual(error.errno, cause, "\(error)")
      XCTAssertTrue(
        warnings[0].description.contains("held in memory"), warnings[0].description)
    }
    setenv("TMPDIR", temporary.path, 1)
    XCTAssertEqual(try plan(cleaner).warnings, [], "a temporary file that works is no news")
    XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: small), [], "nothing left")
  }

  /// A stop (a signal) ends the trim after the file in hand, whichever way it goes through the
  /// survivors: a sort of a few dates at a time, or, for one date holding more files than may
  /// be sorted, the walk's order. What was deleted is recorded, the rest stays, and the run
  /// says it stopped (no sizes: the report is `interrupted`, not a finished trim). A stop
  /// during the walk stops before the trim.
  func testAStopEndsTheTrimAfterTheFileInHandOnEveryPath() throws {
    for (label, oneDate) in [("sorted", false), ("walk order", true)] {
      try? FileManager.default.removeItem(atPath: builder.root)
      for i in 0..<12 {
        try builder.file(
          "f\(i)", size: 4096, accessTime: now - 500 + (oneDate ? 0 : Int64(i)))
      }
      var cleaner = CacheCleaner(
        diskCachePath: builder.root,
        configuration: CleanupConfiguration(maxDiskAge: -1, maxDiskSize: 4096))
      cleaner.trimLimits = TrimLimits(sortBudget: 4, buckets: 2, spillBuffer: 1 << 20)
      for stopAfter in [3, 0] {
        var expire = MaintenancePassReport(pass: .expire, dryRun: true)
        var trim = MaintenancePassReport(pass: .trim, dryRun: true)
        var asked = 0
        // Asked once a file by the walk (12), then once a delete.
        let sizes = try cleaner.run(
          now: nowDate, dryRun: true, expire: &expire, trim: &trim,
          stop: {
            asked += 1
            return asked > 12 + stopAfter
          })
        XCTAssertNil(sizes, "\(label), stopped after \(stopAfter)")
        XCTAssertEqual(trim.actions.count, stopAfter, "\(label)")
      }
      var expire = MaintenancePassReport(pass: .expire, dryRun: false)
      var trim = MaintenancePassReport(pass: .trim, dryRun: false)
      var asked = 0
      let sizes = try cleaner.run(
        now: nowDate, dryRun: false, expire: &expire, trim: &trim,
        stop: {
          asked += 1
          return asked > 15
        })
      XCTAssertNil(sizes, label)
      XCTAssertEqual(trim.actions.count, 3, label)
      XCTAssertEqual(try builder.remainingFiles().count, 9, label)
      // Stopped during the walk: no trim at all.
      asked = 0
      trim = MaintenancePassReport(pass: .trim, dryRun: true)
      XCTAssertNil(
        try cleaner.run(
          now: nowDate, dryRun: true, expire: &expire, trim: &trim,
          stop: {
            asked += 1
            return asked > 5
          }), label)
      XCTAssertEqual(trim.actions.count, 0, label)
    }
    // Without a trim, a stop during the walk is a stop all the same.
    var asked = 0
    var expire = MaintenancePassReport(pass: .expire, dryRun: true)
    var trim = MaintenancePassReport(pass: .trim, dryRun: true)
    XCTAssertNil(
      try CacheCleaner(
        diskCachePath: builder.root, configuration: CleanupConfiguration(maxDiskAge: 0)
      ).run(
        now: nowDate, dryRun: true, expire: &expire, trim: &trim,
        stop: {
          asked += 1
          return asked > 5
        }))
    XCTAssertEqual(expire.actions.count, 5)
  }

  /// The trim `cleaner` plans, and what it warned of.
  private func plan(_ cleaner: CacheCleaner) throws -> (
    trimmed: [String], warnings: [MaintenanceWarning]
  ) {
    var expire = MaintenancePassReport(pass: .expire, dryRun: true)
    var trim = MaintenancePassReport(pass: .trim, dryRun: true)
    var warnings: [MaintenanceWarning] = []
    try cleaner.run(
      now: nowDate, dryRun: true, expire: &expire, trim: &trim, warn: { warnings.append($0) })
    return (trim.actions.map(\.path), warnings)
  }

  /// SPEC section 4 as plainly as it can be written: every survivor sorted by date, ties in the
  /// walk's order, deleted oldest first until the total is strictly below half the limit;
  /// a delete in `failing` subtracts nothing.
  private func reference(
    _ files: [ScannedFile], maxAge: TimeInterval, maxSize: UInt64, failing: Set<String>
  ) -> (expired: Set<String>, expireErrors: Int, trimmed: [String], trimErrors: Int) {
    let cutoff = now * 1_000_000_000 - Int64(maxAge) * 1_000_000_000
    var expired = Set<String>()
    var expireErrors = 0
    var survivors: [(walk: Int, file: ScannedFile)] = []
    var total: UInt64 = 0
    for (walk, file) in files.enumerated() {
      if maxAge >= 0 && file.attributes.accessTime <= cutoff {
        if !failing.contains(file.relativePath) {
          expired.insert(file.relativePath)
          continue
        }
        expireErrors += 1
      } else {
        survivors.append((walk, file))
      }
      total += file.attributes.allocatedSize
    }
    var trimmed: [String] = []
    var errors = 0
    guard total > maxSize else { return (expired, expireErrors, [], 0) }
    for (_, file) in survivors.sorted(by: {
      ($0.file.attributes.accessTime, $0.walk) < ($1.file.attributes.accessTime, $1.walk)
    }) {
      if total < maxSize / 2 { break }
      if failing.contains(file.relativePath) {
        errors += 1
        continue
      }
      trimmed.append(file.relativePath)
      total -= file.attributes.allocatedSize
    }
    return (expired, expireErrors, trimmed, errors)
  }
}
