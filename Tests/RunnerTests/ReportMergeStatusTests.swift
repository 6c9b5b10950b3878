import Core
import Foundation
import Runner
import TestSupport
import XCTest

/// SPEC section 9: a merged report has the worst status of its reports (failed, then
/// interrupted, then incomplete, then completed), whatever their order: one shard that failed
/// makes the whole run failed.
final class ReportMergeStatusTests: XCTestCase {
  var temporary: TemporaryDirectory!

  override func setUpWithError() throws { temporary = try TemporaryDirectory() }
  override func tearDown() { temporary.remove() }

  private func merged(_ statuses: [String]) throws -> (RunReport.Status, RunReport.Status) {
    let paths = try statuses.enumerated().map { index, status in
      let path = temporary.appending("report-\(index).json")
      XCTAssertTrue(
        FileManager.default.createFile(
          atPath: path, contents: try ReportFixture.json(status: status)))
      return path
    }
    let output = temporary.appending("merged-\(statuses.joined(separator: "-")).json")
    let outcome = try ReportMerge.merge(paths, into: [output], standardOutput: false)
    return (outcome.status, try RunReport.load(path: output).status)
  }

  func testTheMergedStatusIsTheWorstInAnyOrder() throws {
    let cases: [([String], RunReport.Status)] = [
      (["completed", "completed"], .completed),
      (["completed", "failed"], .failed),
      (["failed", "completed"], .failed),
      (["completed", "interrupted"], .interrupted),
      (["interrupted", "completed"], .interrupted),
      (["interrupted", "failed"], .failed),
      (["failed", "interrupted"], .failed),
      (["completed", "failed", "completed"], .failed),
    ]
    for (statuses, worst) in cases {
      let (outcome, written) = try merged(statuses)
      XCTAssertEqual(outcome, worst, "\(statuses)")
      XCTAssertEqual(written, worst, "\(statuses): the merged file")
    }
  }
}
