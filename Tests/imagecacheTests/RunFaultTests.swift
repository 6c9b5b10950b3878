import Core
import Foundation
import TestSupport
import XCTest

/// Faults of the machine that a run meets (issue 38): they stop the run, or are seen in its
/// exit code, report and metrics, instead of failing URL after URL or passing unnoticed.
final class RunFaultTests: LoopbackTestCase {
  /// Files and folders made immutable by a test, made mutable again after it.
  private var immutable: [String] = []

  override func tearDown() {
    for path in immutable { Command.status("/usr/bin/chattr", ["-i", path]) }
    immutable = []
    super.tearDown()
  }

  /// Makes `path` immutable (`chattr +i`: not even root can change it), or skips the test on
  /// a file system without the attribute.
  private func makeImmutable(_ path: String) throws {
    guard Command.status("/usr/bin/chattr", ["+i", path]) == 0 else {
      throw XCTSkip("chattr +i is not supported here")
    }
    immutable.append(path)
  }

  private func report(_ path: String) throws -> RunReport {
    try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: path), path))
  }

  private func manifest(count: Int) throws -> String {
    let path = temporary.appending("urls.txt")
    let urls = (0..<count).map { server.url("/a.jpg") + "?n=\($0)" }
    try urls.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  func testRunningOutOfFileDescriptorsStopsTheRunNamingTheLimit() throws {
    let reportFile = temporary.appending("report.json")
    let result = try Command.run(
      "/bin/bash",
      [
        "-c", "ulimit -n 30; exec \"$0\" \"$@\"", ImageCacheBinary.path, "prefetch",
        try manifest(count: 60), "--cache", temporary.appending("cache"), "--report", reportFile,
        "--concurrency", "32", "--per-host-concurrency", "32",
      ])
    XCTAssertEqual(result.status, 4, result.stderr)
    XCTAssertTrue(result.stderr.contains("Too many open files"), result.stderr)
    XCTAssertTrue(result.stderr.contains("is 30: raise it with 'ulimit -n'"), result.stderr)
    let report = try report(reportFile)
    XCTAssertEqual(report.status, .failed)
    XCTAssertTrue(report.error?.contains("ulimit -n") == true, report.error ?? "no error")
    XCTAssertEqual(report.prefetch?.blacklistedURLs, [], "the machine's fault, not the URLs'")
  }

  /// The cache's lock cannot be made (its folder is immutable, as on a read-only cache): the
  /// run fails (exit 4) and its report and metrics say so, so that the run-failed alert fires.
  func testARunThatCannotStartStillWritesItsReportAndMetrics() throws {
    let state = temporary.appending("cache/default/.imagecache")
    try FileSystem.createDirectory(path: state)
    try makeImmutable(state)
    let reportFile = temporary.appending("out/report.json")
    let metricsFile = temporary.appending("out/imagecache.prom")
    let result = try ImageCacheBinary.run([
      "prefetch", try manifest(count: 1), "--cache", temporary.appending("cache"), "--report",
      reportFile, "--metrics", metricsFile,
    ])
    XCTAssertEqual(result.status, 4, result.stderr)
    XCTAssertTrue(result.stderr.contains("cannot open the cache lock"), result.stderr)
    let report = try report(reportFile)
    XCTAssertEqual(report.status, .failed)
    XCTAssertTrue(
      report.error?.contains("cannot open the cache lock") == true, report.error ?? "no error")
    let metrics = try String(contentsOfFile: metricsFile, encoding: .utf8)
    XCTAssertTrue(
      metrics.contains(
        "imagecache_last_run_status{imagecache_job=\"prefetch\",namespace=\"default\",status=\"failed\"} 1"
      ),
      metrics)
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
  }

  /// A file that maintenance cannot delete (immutable) leaves the cache over its limit: the
  /// pass counts it with the reason, the run exits 1, and the metrics export it.
  func testMaintenanceThatCannotRemoveAFileCountsItAndExits1() throws {
    let cache = temporary.appending("cache")
    let monthAgo = Int64(Date().timeIntervalSince1970) - 30 * 86_400
    let builder = CacheBuilder(root: cache + "/default")
    let stuck = try builder.file("stuck.jpg", accessTime: monthAgo)
    try builder.file("gone.jpg", accessTime: monthAgo)
    try makeImmutable(stuck)
    let reportFile = temporary.appending("report.json")
    let metricsFile = temporary.appending("imagecache.prom")
    let result = try ImageCacheBinary.run([
      "maintain", "--cache", cache, "--max-age", "7d", "--report", reportFile, "--metrics",
      metricsFile,
    ])
    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertTrue(result.stderr.contains("could not remove 1 files"), result.stderr)
    let report = try report(reportFile)
    XCTAssertEqual(report.status, .completed)
    let expire = try XCTUnwrap(report.maintenance.first { $0.pass == .expire })
    XCTAssertEqual(expire.filesRemoved, 1)
    XCTAssertEqual(expire.filesNotRemoved, 1)
    XCTAssertTrue(
      expire.errors.contains { $0.contains(stuck) && $0.contains("Operation not permitted") },
      "\(expire.errors)")
    let metrics = try String(contentsOfFile: metricsFile, encoding: .utf8)
    XCTAssertTrue(
      metrics.contains(
        "imagecache_last_run_not_removed_files{imagecache_job=\"maintain\","
          + "namespace=\"default\",pass=\"expire\"} 1"), metrics)
  }
}
