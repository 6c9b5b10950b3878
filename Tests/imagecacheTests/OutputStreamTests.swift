import Core
import Foundation
import State
import TestSupport
import XCTest

/// Issue 29 item 7: what a command exists to print goes to stdout, so that it can be piped
/// (`blacklist list | grep host`, `stats > before.txt`); progress, warnings and summaries go to
/// stderr, as curl, rsync and git do.
final class OutputStreamTests: TemporaryFolderTestCase {
  var location: CacheLocation!

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
    try FileSystem.createDirectory(path: location.diskCachePath)
  }

  func testBlacklistListPrintsItsEntriesOnStdoutAndItsCountOnStderr() throws {
    let store = try StateStore(location: location)
    for host in ["a.example", "b.example"] {
      try store.recordFailure(
        url: "https://\(host)/p.png", code: 1001, name: "badImageData", reason: "html",
        at: Date())
    }

    let list = try ImageCacheBinary.run(["blacklist", "list", "--cache", location.directory])

    XCTAssertEqual(list.status, 0, list.stderr)
    let lines = list.stdout.split(separator: "\n")
    XCTAssertEqual(
      lines.map { $0.split(separator: "\t").first },
      ["https://a.example/p.png", "https://b.example/p.png"])
    XCTAssertEqual(list.stderr, "2 URLs on the blacklist\n")
  }

  func testStatsPrintsItsFiguresOnStdout() throws {
    try Fixtures.jpeg.write(to: URL(fileURLWithPath: location.diskCachePath + "/a.jpg"))

    let stats = try ImageCacheBinary.run(["stats", "--cache", location.directory])

    XCTAssertEqual(stats.status, 0, stats.stderr)
    XCTAssertTrue(stats.stdout.contains("files:           1\n"), stats.stdout)
    XCTAssertTrue(stats.stdout.contains("cache:           \(location.diskCachePath)"), stats.stdout)
    XCTAssertEqual(stats.stderr, "")
  }

  func testKeyAndJSONPrintOnStdout() throws {
    let key = try ImageCacheBinary.run(["key", "https://a.example/x.jpg"])
    XCTAssertEqual(key.status, 0, key.stderr)
    XCTAssertTrue(key.stdout.contains("https://a.example/x.jpg"), key.stdout)
    XCTAssertEqual(key.stderr, "")

    let stats = try ImageCacheBinary.run(["stats", "--cache", location.directory, "--json"])
    XCTAssertEqual(stats.status, 0, stats.stderr)
    XCTAssertNoThrow(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)))
    XCTAssertEqual(stats.stderr, "")
  }

  func testMaintainDryRunPrintsItsPlanOnStdoutAndItsSummaryOnStderr() throws {
    try CacheBuilder(root: location.diskCachePath).file("old", size: 10, accessTime: 1_000)

    let plan = try ImageCacheBinary.run([
      "maintain", "--cache", location.directory, "--max-age", "1d", "--dry-run",
    ])

    XCTAssertEqual(plan.status, 0, plan.stderr)
    XCTAssertTrue(plan.stdout.hasPrefix("expire: would delete old ("), plan.stdout)
    XCTAssertEqual(plan.stdout.split(separator: "\n").count, 1, plan.stdout)
    XCTAssertFalse(plan.stderr.contains("would delete old"), plan.stderr)
    XCTAssertTrue(plan.stderr.contains("expire (dry run): would remove 1 files"), plan.stderr)
  }
}
