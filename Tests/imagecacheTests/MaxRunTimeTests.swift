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
}
