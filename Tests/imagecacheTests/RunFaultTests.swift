import Core
import Foundation
import TestSupport
import XCTest

/// Faults of the machine that a run meets (issue 38): they stop the run, or are seen in its
/// exit code, report and metrics, instead of failing URL after URL or passing unnoticed.
final class RunFaultTests: LoopbackTestCase {
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
    try fileSystems.makeImmutable(state)
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
    try fileSystems.makeImmutable(stuck)
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

  /// Under a small address space (`ulimit -v 250000`), glibc's per-thread arenas could not be
  /// reserved: runs died of SIGSEGV or SIGABRT, or hung holding the cache's lock. Every run now
  /// ends, with exit 0 or 4, never with a signal, within a deadline.
  func testRunsInASmallAddressSpaceEndWithAnExitCodeNeverASignal() throws {
    let urls = try manifest(count: 60)
    for round in 0..<6 {
      let (process, stdout, stderr) = try Command.start(
        "/bin/bash",
        [
          "-c", "ulimit -v 250000; exec \"$0\" \"$@\"", ImageCacheBinary.path, "prefetch", urls,
          "--cache", temporary.appending("cache-\(round)"),
        ])
      if !waitUntil(timeout: 60, "run \(round) to end", every: 0.05, { !process.isRunning }) {
        kill(process.processIdentifier, SIGKILL)
      }
      let result = ImageCacheBinary.finish(process, stdout, stderr)
      XCTAssertEqual(process.terminationReason, .exit, "round \(round): \(result.stderr)")
      XCTAssertTrue([0, 4].contains(result.status), "round \(round): \(result.stderr)")
    }
  }

  /// Whether process `pid` has a handler for SIGTERM (`SigCgt` in its status): the run's
  /// signal handling is in place.
  private func catchesSIGTERM(_ pid: Int32) -> Bool {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
      let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
      let mask = UInt64(line.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16)
    else { return false }
    return mask & (1 << (UInt64(SIGTERM) - 1)) != 0
  }

  /// A run that cannot stop on its own (its report is a FIFO nobody reads, so writing it
  /// blocks) still ends within 2 s of SIGTERM, with 143, and frees the cache's lock.
  func testSIGTERMEndsARunThatCannotStopOnItsOwnWithinTwoSeconds() throws {
    let fifo = temporary.appending("report.fifo")
    XCTAssertEqual(mkfifo(fifo, 0o600), 0)
    let cache = temporary.appending("cache")
    let (process, stdout, stderr) = try ImageCacheBinary.start([
      "prefetch", try manifest(count: 1), "--cache", cache, "--report", fifo,
    ])
    waitUntil(timeout: 20, "the run to handle signals") {
      catchesSIGTERM(process.processIdentifier)
    }
    let signalled = ContinuousClock.now
    kill(process.processIdentifier, SIGTERM)
    let ended = waitUntil(timeout: 10, "the run to end", every: 0.02) { !process.isRunning }
    let elapsed = ContinuousClock.now - signalled
    if !ended { kill(process.processIdentifier, SIGKILL) }
    let result = ImageCacheBinary.finish(process, stdout, stderr)
    XCTAssertEqual(process.terminationReason, .exit, result.stderr)
    XCTAssertEqual(result.status, 128 + SIGTERM, result.stderr)
    XCTAssertLessThan(elapsed, .seconds(3), "2 s, and the time to see it end")
    XCTAssertFalse(LockHolder.isLocked(cache + "/default/.imagecache/lock"))
  }
}
