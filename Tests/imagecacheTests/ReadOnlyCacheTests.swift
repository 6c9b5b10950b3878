import Core
import Foundation
import State
import TestSupport
import XCTest

/// End-to-end: the read-only commands on a cache on a read-only mount whose last writer exited
/// cleanly (no `-wal` or `-shm` beside the state), and `stats` when a state file cannot be read
/// (issue 38, SPEC section 8).
final class ReadOnlyCacheTests: TemporaryFolderTestCase {
  private var location: CacheLocation!

  /// A cache with three blacklisted URLs, its state closed and its lock released as a finished
  /// run leaves them.
  private func makeCache(in directory: String) throws {
    location = CacheLocation(directory: directory + "/cache")
    try CacheBuilder(root: location.diskCachePath).file("a", accessTime: 1_000_000_000)
    try RunLock.acquire(location: location).release()
    do {
      let store = try StateStore(location: location)
      for name in ["a", "b", "c"] {
        try store.recordFailure(
          url: "http://127.0.0.1/\(name).jpg", code: 1001, name: "badImageData", reason: "html",
          at: Date())
      }
    }
    let state = location.stateDirectory + "/" + StateStore.fileName
    XCTAssertFalse(FileManager.default.fileExists(atPath: state + "-wal"), "closed cleanly")
    XCTAssertFalse(FileManager.default.fileExists(atPath: state + "-shm"), "closed cleanly")
  }

  /// A tmpfs in the temporary folder holding a cache, then remounted read-only.
  private func makeReadOnlyCache() throws {
    let path = try fileSystems.mountTmpfs(at: temporary.appending("mount"), size: "8m")
    try makeCache(in: path)
    try fileSystems.remountReadOnly(path)
    XCTAssertEqual(access(location.stateDirectory, W_OK), -1, "read-only now")
  }

  func testBlacklistListWorksOnAReadOnlyMount() throws {
    try makeReadOnlyCache()
    let result = try ImageCacheBinary.run(["blacklist", "list", "--cache", location.directory])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(result.stdout.split(separator: "\n").count, 3, result.stdout)
    XCTAssertTrue(result.stderr.contains("3 URLs on the blacklist"), result.stderr)
  }

  func testStatsCountsTheBlacklistOnAReadOnlyMount() throws {
    try makeReadOnlyCache()
    let result = try ImageCacheBinary.run(["stats", "--cache", location.directory])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertTrue(result.stdout.contains("blacklisted:     3 URLs"), result.stdout)
  }

  func testStatsSaysWhenItCouldNotReadTheBlacklistAndExitsFour() throws {
    try makeCache(in: temporary.path)
    let state = location.stateDirectory + "/" + StateStore.fileName
    try Data("not a database, but not empty either".utf8).write(to: URL(fileURLWithPath: state))
    let result = try ImageCacheBinary.run(["stats", "--cache", location.directory])
    XCTAssertEqual(result.status, 4, result.stdout + result.stderr)
    XCTAssertTrue(
      result.stdout.contains("blacklisted:     unknown: could not read \(state)"), result.stdout)
    XCTAssertFalse(result.stdout.contains("0 URLs"), result.stdout)
    XCTAssertTrue(result.stderr.contains(state), result.stderr)
  }
}
