import Core
import Foundation
import GRDB
import State
import TestSupport
import XCTest

/// SPEC sections 1 and 8: `kill -9` at any moment of `prefetch`, `maintain` and `migrate`
/// leaves no visible partial file, a sound state database, and a cache the next run cleans up.
final class CrashTests: LoopbackTestCase {
  var location: CacheLocation!

  override var routes: [String: Route] {
    [
      "/drip.jpg": { _ in
        ServerResponse(body: Fixtures.jpeg, dripInterval: .milliseconds(5), dripChunk: 64)
      }
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  /// Starts the binary, kills it with SIGKILL after `delay` (counted from when its run is
  /// marked running in the state, where `whileRunning`), and waits for it.
  private func kill9(
    _ arguments: [String], after delay: TimeInterval, whileRunning: Bool = false
  ) throws {
    let (process, stdout, stderr) = try ImageCacheBinary.start(arguments)
    if whileRunning {
      waitUntil(timeout: 30, "the run to be marked running") {
        guard process.isRunning else { return true }
        let path = location.stateDirectory + "/state.sqlite"
        guard FileManager.default.fileExists(atPath: path) else { return false }
        let runs = (try? StateStore(location: location).recentRuns(limit: 1)) ?? []
        return runs.first?.status == "running"
      }
    }
    usleep(UInt32(delay * 1_000_000))
    kill(process.processIdentifier, SIGKILL)
    _ = ImageCacheBinary.finish(process, stdout, stderr)
  }

  /// The state database passes SQLite's integrity check. A run killed before it made the
  /// database leaves none, which is sound too, except where it `mustExist`.
  private func assertStateIsSound(
    mustExist: Bool = false, file: StaticString = #filePath, line: UInt = #line
  ) throws {
    let path = location.stateDirectory + "/state.sqlite"
    guard FileManager.default.fileExists(atPath: path) else {
      XCTAssertFalse(mustExist, "no state database at \(path)", file: file, line: line)
      return
    }
    let result = try DatabaseQueue(path: path).read { db in
      try String.fetchOne(db, sql: "PRAGMA integrity_check")
    }
    XCTAssertEqual(result, "ok", file: file, line: line)
  }

  func testKillNineDuringPrefetchLeavesOnlyWholeFilesAndTheNextRunCleansUp() throws {
    let manifest = temporary.appending("urls.txt")
    try (0..<60).map { server.url("/drip.jpg") + "?n=\($0)" }.joined(separator: "\n").write(
      toFile: manifest, atomically: true, encoding: .utf8)
    var random = SystemRandomNumberGenerator()
    // The first kill comes while the run is under way (a run killed before it opened the
    // state, or after it ended, leaves nothing to mark abandoned); the others at any moment.
    for kill in 0..<6 {
      try kill9(
        ["prefetch", manifest, "--cache", location.directory, "--concurrency", "8"],
        after: kill == 0 ? 0.02 : Double.random(in: 0.05...0.6, using: &random),
        whileRunning: kill == 0)
      for file in try CacheScanner(root: location.diskCachePath).files() {
        XCTAssertEqual(
          FileManager.default.contents(atPath: location.diskCachePath + "/" + file.relativePath),
          Fixtures.jpeg, "a visible file is whole: \(file.name)")
      }
      try assertStateIsSound()
    }

    // An hour later, the next run finishes the job and removes what the kills left.
    let hourAgo = Date().addingTimeInterval(-2 * 3600)
    for (name, _) in try FileSystem.temporaryFiles(in: location.diskCachePath) {
      try FileSystem.setTimes(
        path: location.diskCachePath + "/" + name, access: hourAgo, modification: hourAgo)
    }
    let next = try ImageCacheBinary.run(["prefetch", manifest, "--cache", location.directory])
    XCTAssertEqual(next.status, 0, next.stderr)
    XCTAssertEqual(try FileSystem.temporaryFiles(in: location.diskCachePath).count, 0)
    XCTAssertEqual(try CacheScanner(root: location.diskCachePath).files().count, 60)
    let runs = try StateStore(location: location).recentRuns(limit: 100)
    XCTAssertFalse(runs.contains { $0.status == "running" }, "killed runs are marked abandoned")
    XCTAssertTrue(runs.contains { $0.status == "abandoned" })
    try assertStateIsSound(mustExist: true)
  }

  func testKillNineDuringMaintainAndMigrateLosesNothingThatShouldStay() throws {
    let legacyRoot = temporary.appending("default/com.hackemist.SDWebImageCache.default")
    let legacy = CacheBuilder(root: legacyRoot)
    let total = 3_000
    for index in 0..<total {
      try legacy.file("f\(index)", size: 100, accessTime: 10_000 + Int64(index))
    }
    var random = SystemRandomNumberGenerator()
    for _ in 0..<3 {
      try kill9(
        ["migrate", "--cache", location.directory],
        after: Double.random(in: 0.02...0.3, using: &random))
      let moved = try CacheScanner(root: location.diskCachePath).files().count
      let left = try CacheScanner(root: legacyRoot).files().count
      XCTAssertEqual(moved + left, total, "every file is in one place or the other")
    }
    let finish = try ImageCacheBinary.run(["migrate", "--cache", location.directory])
    XCTAssertEqual(finish.status, 0, finish.stderr)
    XCTAssertEqual(try CacheScanner(root: location.diskCachePath).files().count, total)

    for _ in 0..<3 {
      try kill9(
        ["maintain", "--cache", location.directory, "--max-age", "-1", "--max-size", "200KB"],
        after: Double.random(in: 0.02...0.3, using: &random))
      let remaining = try CacheScanner(root: location.diskCachePath).files().map(\.name)
      // Trim goes oldest first: whatever remains is the newest files, none of them damaged.
      let indices = remaining.compactMap { Int($0.dropFirst()) }.sorted()
      XCTAssertEqual(indices, Array((total - indices.count)..<total))
    }
    let done = try ImageCacheBinary.run([
      "maintain", "--cache", location.directory, "--max-age", "-1", "--max-size", "200KB",
    ])
    XCTAssertEqual(done.status, 0, done.stderr)
    XCTAssertLessThan(try DiskCache(location: location).usage().allocatedBytes, 100_000)
  }
}
