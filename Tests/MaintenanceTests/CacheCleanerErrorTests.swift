import Core
import Maintenance
import TestSupport
import XCTest

/// Per-file errors: an immutable file (chattr +i) cannot be deleted, even by root.
final class CacheCleanerErrorTests: TemporaryFolderTestCase {
  var builder: CacheBuilder!
  let now: Int64 = 1_700_000_000

  override func setUpWithError() throws {
    try super.setUpWithError()
    builder = CacheBuilder(
      root: temporary.appending("default"), unstatedModificationTime: .mirrored(around: now))
  }

  func testAFailedDeleteIsReportedAndThePassGoesOn() throws {
    // Read long ago, written just now: old by the access date the pass reads, only by it.
    try fileSystems.makeImmutable(
      try builder.file("stuck", size: 4096, accessTime: now - 10_000, modificationTime: now))
    try builder.file("old", size: 4096, accessTime: now - 10_000, modificationTime: now)
    let (expire, _) = try CacheCleaner(
      diskCachePath: builder.root, configuration: CleanupConfiguration(maxDiskAge: 100)
    ).run(now: Date(timeIntervalSince1970: TimeInterval(now)), dryRun: false)
    XCTAssertEqual(expire.filesRemoved, 1)
    XCTAssertEqual(expire.actions.map(\.path), ["old"])
    XCTAssertEqual(expire.errors.count, 1)
    XCTAssertTrue(expire.errors.first?.contains("stuck") == true, "\(expire.errors)")
    XCTAssertEqual(try builder.remainingFiles(), ["stuck"])
  }

  func testOnlySuccessfulDeletesCountTowardsTheTrimTarget() throws {
    // Oldest first: the immutable file would bring the total under the target on its own.
    try fileSystems.makeImmutable(try builder.file("a-oldest", size: 40_000, accessTime: now - 300))
    for i in 0..<4 { try builder.file("f\(i)", size: 4096, accessTime: now - 200 + Int64(i)) }
    let sizes = try CacheScanner(root: builder.root).files().map(\.attributes.allocatedSize)
    let total = sizes.reduce(0, +)
    let (_, trim) = try CacheCleaner(
      diskCachePath: builder.root,
      configuration: CleanupConfiguration(maxDiskAge: -1, maxDiskSize: total - 1)
    ).run(now: Date(timeIntervalSince1970: TimeInterval(now)), dryRun: false)
    XCTAssertEqual(trim.errors.count, 1)
    XCTAssertEqual(
      trim.filesRemoved, 4, "the failed delete subtracted nothing, so every other file went")
    XCTAssertEqual(try builder.remainingFiles(), ["a-oldest"])
  }

  /// A file the expire pass could not delete is still in the cache: the trim counts it (and
  /// deletes the others oldest first to make up for it), and the sizes the report states
  /// include it.
  func testAFileExpireCouldNotDeleteStillCountsTowardsTheTrim() throws {
    let stuck = try builder.file("stuck", size: 40_000, accessTime: now - 10_000)
    try fileSystems.makeImmutable(stuck)
    try builder.file("young", size: 4096, accessTime: now)
    let sizes = try CacheScanner(root: builder.root).files().reduce(into: [String: UInt64]()) {
      $0[$1.relativePath] = $1.attributes.allocatedSize
    }
    let total = sizes.values.reduce(0, +)
    var expire = MaintenancePassReport(pass: .expire, dryRun: false)
    var trim = MaintenancePassReport(pass: .trim, dryRun: false)
    // Over the limit only with the stuck file.
    let limit = try XCTUnwrap(sizes["stuck"]) - 1
    XCTAssertLessThan(try XCTUnwrap(sizes["young"]), limit)
    let done = try CacheCleaner(
      diskCachePath: builder.root,
      configuration: CleanupConfiguration(maxDiskAge: 100, maxDiskSize: limit)
    ).run(
      now: Date(timeIntervalSince1970: TimeInterval(now)), dryRun: false, expire: &expire,
      trim: &trim)
    XCTAssertEqual(expire.filesNotRemoved, 1)
    XCTAssertEqual(done?.afterExpire, total, "the stuck file is still there")
    XCTAssertEqual(trim.errors, [], "the expire pass has reported it")
    XCTAssertEqual(trim.actions.map(\.path), ["young"])
    XCTAssertEqual(try builder.remainingFiles(), ["stuck"])
  }
}
