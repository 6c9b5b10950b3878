import Core
import Foundation
import XCTest

/// The in-memory pass report: what a caller that wants a whole pass back gets.
final class MaintenancePassReportTests: XCTestCase {
  /// A migration of a few files of each kind: moves, collisions kept aside, deletes, errors.
  private func recorded(files: Int) -> MaintenancePassReport {
    var report = MaintenancePassReport(pass: .migrate, dryRun: false)
    for i in 0..<files {
      switch i % 4 {
      case 0: report.recordMove(from: "f\(i)", to: "g\(i)", bytes: 10)
      case 1:
        report.recordKeptAside(path: "f\(i)", aside: ".imagecache/collisions/f\(i)", bytes: 20)
      case 2: report.recordDelete(path: "f\(i)", bytes: 30, date: nil)
      default: report.recordError("f\(i): cannot move")
      }
    }
    return report
  }

  /// Each record costs the same however many came before: a pass of a few hundred thousand
  /// files is recorded in well under a second, where counting the collisions again at every
  /// record took minutes.
  func testRecordingIsLinearInTheFiles() {
    let start = ContinuousClock.now
    let report = recorded(files: 200_000)
    let took = ContinuousClock.now - start
    XCTAssertEqual(report.summary.filesKeptAside, 50_000)
    XCTAssertLessThan(took, .seconds(10), "recording 200,000 files took \(took)")
  }

  func testTheSummaryCountsWhatWasRecorded() {
    let summary = recorded(files: 10).summary
    XCTAssertEqual(summary.filesMoved, 3)
    XCTAssertEqual(summary.filesKeptAside, 3)
    XCTAssertEqual(summary.filesRemoved, 2)
    XCTAssertEqual(summary.bytesFreed, 60)
    XCTAssertEqual(summary.errorCount, 2)
  }

  /// A report read back is the one written: its collisions counted from its actions, and the
  /// count, which is not a field of the report, never written.
  func testADecodedReportIsTheRecordedOne() throws {
    let report = recorded(files: 10)
    let encoded = try JSONEncoder().encode(report)
    let fields = try XCTUnwrap(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
    XCTAssertEqual(
      Set(fields.keys),
      [
        "pass", "dryRun", "filesRemoved", "filesMoved", "bytesFreed", "filesNotRemoved", "errors",
        "actions",
      ])
    let decoded = try JSONDecoder().decode(MaintenancePassReport.self, from: encoded)
    XCTAssertEqual(decoded, report)
    XCTAssertEqual(decoded.summary, report.summary)
  }
}
