import Core
import Foundation
import GRDB
import State
import TestSupport
import XCTest

/// A run's memory does not follow the blacklist's size (SPEC section 5): entries never expire
/// without a time-to-live, and an origin serving bad data for a million URLs would otherwise
/// make every later run hold a million entries. The run keeps a hash of each, and still
/// refuses exactly the URLs on the blacklist.
final class BlacklistMemoryTests: LoopbackTestCase {
  /// A cache whose blacklist holds the server's `/a.jpg` and `others` URLs of another origin
  /// (unsupported `ftp://`, as SD blacklists them), each with its reason.
  private func cache(_ name: String, others: Int) throws -> CacheLocation {
    let location = CacheLocation(directory: temporary.appending(name))
    let store = try StateStore(location: location)
    try store.recordFailure(
      url: server.url("/a.jpg"), code: 1001, name: "badImageData",
      reason: "the data is not an image SDWebImage decodes (text/html)", at: Date())
    // One transaction: 200,000 runs would take minutes.
    try DatabaseQueue(path: store.path).write { db in
      try db.execute(
        sql: """
          WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
          INSERT INTO blacklist
            (url, code, name, reason, firstFailedAt, lastFailedAt, failureCount)
          SELECT 'ftp://files.example.invalid/images/photo-' || i || '.jpg', 1000, 'invalidURL',
            'unsupported URL scheme ftp', firstFailedAt, lastFailedAt, 1
          FROM n, blacklist WHERE blacklist.url = ?
          """, arguments: [others, server.url("/a.jpg")])
    }
    return location
  }

  /// Prefetches `/a.jpg` (blacklisted) and `/b.png` (not) into `location`; the peak memory.
  private func prefetch(into location: CacheLocation) throws -> Int {
    let manifest = temporary.appending("urls.txt")
    try [server.url("/a.jpg"), server.url("/b.png")].joined(separator: "\n")
      .write(toFile: manifest, atomically: true, encoding: .utf8)
    let reportPath = temporary.appending("report.json")
    try? FileManager.default.removeItem(atPath: reportPath)
    let (status, peakKiB) = try PeakMemory.run(
      ImageCacheBinary.path,
      ["prefetch", manifest, "--cache", location.directory, "--report", reportPath])
    XCTAssertEqual(status, 0, "one URL downloaded, one refused")
    let report = try XCTUnwrap(
      FileManager.default.contents(atPath: reportPath).flatMap { try? RunReport.decode($0) })
    XCTAssertEqual(report.prefetch?.blacklisted, 1)
    XCTAssertEqual(report.prefetch?.downloaded, 1)
    return peakKiB
  }

  func testARunsPeakMemoryDoesNotFollowTheBlacklistsSizeAndItRefusesExactlyItsURLs() throws {
    let small = try prefetch(into: try cache("small", others: 0))
    let large = try cache("large", others: 200_000)
    let peak = try prefetch(into: large)
    XCTAssertEqual(server.requestCount("/a.jpg"), 0, "refused without a request")
    XCTAssertEqual(server.requestCount("/b.png"), 2, "downloaded into each cache")
    // Held whole, the 200,000 entries took 134 MB more than one; as hashes, 12 MB more.
    XCTAssertLessThan(peak, small + 40 * 1024, "200,000 entries: \(peak) KiB, one: \(small) KiB")
    // Nothing was lost: every entry is still there.
    let count = try DatabaseQueue(path: large.stateDirectory + "/state.sqlite").read {
      try Int.fetchOne($0, sql: "SELECT count(*) FROM blacklist")
    }
    XCTAssertEqual(count, 200_001)
  }

  /// Each shard count a fleet ran with leaves its state files, and a run reads them all: kept
  /// open to the run's end, 300 of them took as many descriptors, and under `ulimit -n 128` the
  /// run ran out (exit 4, the entries of the files it could not open not read). A URL
  /// blacklisted only in the last of them is still refused.
  func testHundredsOfOtherStateFilesCostNoDescriptorEachAndStillRefuse() throws {
    func stateFile(_ name: String, url: String) throws -> String {
      let location = CacheLocation(directory: temporary.appending(name))
      // Closed at the end of the scope: its WAL is then in the file copied.
      try StateStore(location: location).recordFailure(
        url: url, code: 1001, name: "badImageData", reason: "not an image", at: Date())
      return location.stateDirectory + "/" + StateStore.fileName
    }
    let other = try stateFile("other", url: "ftp://files.example.invalid/a.jpg")
    let refusing = try stateFile("refusing", url: server.url("/a.jpg"))
    let location = CacheLocation(directory: temporary.appending("cache"))
    try FileSystem.createDirectory(path: location.stateDirectory)
    let names = (0..<300).map { "state.shard-\($0)-of-300.sqlite" }.sorted()
    for name in names {
      try FileManager.default.copyItem(
        atPath: name == names.last ? refusing : other,
        toPath: location.stateDirectory + "/" + name)
    }
    let manifest = temporary.appending("urls.txt")
    try [server.url("/a.jpg"), server.url("/b.png")].joined(separator: "\n")
      .write(toFile: manifest, atomically: true, encoding: .utf8)
    let reportPath = temporary.appending("report.json")
    let result = try Command.run(
      "/bin/bash",
      [
        "-c", "ulimit -n 128; exec \"$0\" \"$@\"", ImageCacheBinary.path, "prefetch", manifest,
        "--cache", location.directory, "--report", reportPath, "--concurrency", "2",
      ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertFalse(result.stderr.contains("Too many open files"), result.stderr)
    let report = try XCTUnwrap(
      FileManager.default.contents(atPath: reportPath).flatMap { try? RunReport.decode($0) })
    XCTAssertEqual(report.prefetch?.blacklisted, 1)
    XCTAssertEqual(report.prefetch?.downloaded, 1)
    XCTAssertEqual(server.requestCount("/a.jpg"), 0, "refused by the last file's entry")
  }
}
