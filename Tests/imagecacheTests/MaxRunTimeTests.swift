import Core
import Foundation
import NIOCore
import TestSupport
import XCTest

/// Issue 38: `--max-run-time` / `prefetch.maxRunTime` stops a run that would overrun its
/// window as a signal would, with its report written and marked interrupted.
final class MaxRunTimeTests: LoopbackTestCase {
  override var routes: [String: Route] {
    [
      "/slow.jpg": { _ in
        ServerResponse(
          headers: [("Content-Type", "image/jpeg")], body: Fixtures.jpeg, headDelay: .seconds(30))
      }
    ]
  }

  func testTheRunStopsAtItsTimeLimitWithItsReportMarkedInterrupted() throws {
    let urls = (0..<20).map { server.url("/slow.jpg?\($0)") }
    let report = temporary.appending("report.json")
    let started = ContinuousClock.now
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(urls), "--cache", temporary.appending("cache"),
      "--timeout", "60s", "--max-run-time", "1s", "--report", report,
    ])
    // The answers take 30 s: the run ended at its limit, not when they came.
    XCTAssertLessThan(ContinuousClock.now - started, .seconds(20))
    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertTrue(result.stderr.contains("time limit"), result.stderr)
    let decoded = try RunReport.decode(try Data(contentsOf: URL(fileURLWithPath: report)))
    XCTAssertEqual(decoded.status, .interrupted)
    XCTAssertEqual(try XCTUnwrap(decoded.prefetch).downloaded, 0)
  }

  /// The report, which is all an operator reads besides the exit code, says why the run is
  /// `interrupted` and which of the job's passes it never got to: a night stopped by its limit
  /// every time never trims.
  func testTheReportSaysTheTimeLimitStoppedTheRunAndWhichPassesDidNotRun() throws {
    let urls = (0..<4).map { server.url("/slow.jpg?\($0)") }
    let report = temporary.appending("report.json")
    let job = temporary.appending("nightly.yaml")
    try """
    name: nightly
    cache:
      directory: cache
      maxDiskSize: 1MB
    manifests: [\(try temporary.manifest(urls))]
    maintenance: [migrate, expire, trim]
    prefetch:
      timeout: 60s
      maxRunTime: 1s
    report: \(report)
    """.write(toFile: job, atomically: true, encoding: .utf8)
    let result = try ImageCacheBinary.run(["run", job])
    XCTAssertEqual(result.status, 1, result.stderr)
    let decoded = try RunReport.decode(try Data(contentsOf: URL(fileURLWithPath: report)))
    XCTAssertEqual(decoded.status, .interrupted)
    // The migrate pass runs before the prefetch: it is no pass the run did not get to.
    XCTAssertEqual(decoded.maintenance.map(\.pass), [.migrate])
    XCTAssertTrue(
      decoded.warnings.contains { $0.contains("time limit (1 s, maxRunTime) was reached") },
      "\(decoded.warnings)")
    XCTAssertTrue(
      decoded.warnings.contains { $0.hasPrefix("not run: expire, trim (") }, "\(decoded.warnings)")
  }
}
