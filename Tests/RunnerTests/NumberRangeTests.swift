import Core
import HTTP
import Pipeline
import Prefetcher
import Runner
import TestSupport
import XCTest

/// Numbers from job files and reports are range-checked (SPEC section 7, issue 27 item 1): out
/// of range is a ``ConfigurationError`` (exit 2) naming the file, line and field and the range,
/// never a trap later when the number is converted or summed.
final class NumberRangeTests: TemporaryFolderTestCase {
  private func loadError(_ text: String) throws -> ConfigurationError? {
    let path = temporary.appending("job.yaml")
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    do {
      _ = try Job.load(path: path)
      return nil
    } catch {
      return error
    }
  }

  func testJobFieldsOutOfRangeNameTheLineTheFieldAndTheRange() throws {
    let cases: [(String, Int, String, String)] = [
      ("cache:\n  directory: c\n  maxDiskAge: 2000000d\n", 3, "cache.maxDiskAge", "1000000d"),
      ("cache:\n  directory: c\n  maxDiskSize: 1e30GB\n", 3, "cache.maxDiskSize", "2^63-1"),
      (
        "cache:\n  directory: c\n  maxDiskSize: 9223372036854775808\n", 3, "cache.maxDiskSize",
        "2^63-1"
      ),
      (
        "cache:\n  directory: c\nprefetch:\n  concurrency: 4611686018427387904\n", 4,
        "prefetch.concurrency", "from 1 to 10000"
      ),
      (
        "cache:\n  directory: c\nprefetch:\n  perHostConcurrency: 10001\n", 4,
        "prefetch.perHostConcurrency", "from 1 to 10000"
      ),
      ("cache:\n  directory: c\nprefetch:\n  retries: 101\n", 4, "prefetch.retries", "0 to 100"),
      ("cache:\n  directory: c\nprefetch:\n  timeout: 1e308\n", 4, "prefetch.timeout", "36500d"),
      ("cache:\n  directory: c\nprefetch:\n  deadline: 1e308\n", 4, "prefetch.deadline", "36500d"),
      (
        "cache:\n  directory: c\nprefetch:\n  blacklistTTL: 1e308w\n", 4, "prefetch.blacklistTTL",
        "36500d"
      ),
      (
        "cache:\n  directory: c\nprefetch:\n  maxPixels: 99999999999999999999\n", 4,
        "prefetch.maxPixels", "from 1 to 1000000000000"
      ),
      (
        "cache:\n  directory: c\ncontext:\n  downloadTimeout: 1e308\n", 4,
        "context.downloadTimeout", "36500d"
      ),
    ]
    for (text, line, field, range) in cases {
      let error = try loadError(text)
      XCTAssertEqual(error?.line, line, text)
      XCTAssertEqual(error?.field, field, text)
      XCTAssertTrue(
        error?.description.contains(range) == true, "\(text): \(String(describing: error))")
    }
  }

  func testAPracticallyNeverMaxDiskAgeIsAccepted() throws {
    let path = temporary.appending("job.yaml")
    try "cache:\n  directory: c\n  maxDiskAge: 200000d\n".write(
      toFile: path, atomically: true, encoding: .utf8)
    XCTAssertEqual(try Job.load(path: path).cleanup.maxDiskAge, 200_000 * 86_400)
  }

  private func writeReport(_ name: String, _ data: Data) throws -> String {
    let path = temporary.appending(name)
    try data.write(to: URL(fileURLWithPath: path))
    return path
  }

  private func mergeError(_ paths: [String]) -> ConfigurationError? {
    do {
      _ = try ReportMerge.merge(
        paths, into: [temporary.appending("merged.json")], standardOutput: false)
      return nil
    } catch {
      return error as? ConfigurationError
    }
  }

  func testMergeRefusesANegativeCountNamingTheReport() throws {
    let good = try writeReport("shard-0.json", ReportFixture.json(counts: ["total": 3]))
    let bad = try writeReport("shard-1.json", ReportFixture.json(counts: ["failed": -1]))
    let error = mergeError([good, bad])
    XCTAssertEqual(error?.source, bad)
    XCTAssertEqual(error?.field, "prefetch.failed")
    XCTAssertTrue(
      error?.description.contains("-1 is out of range") == true, "\(String(describing: error))")
    XCTAssertThrowsError(try RunReport.load(path: bad))
  }

  func testMergeRefusesASumPastTheLargestCountNamingTheReportThatTookItThere() throws {
    let largest = RunReport.largestCount
    let first = try writeReport("shard-0.json", ReportFixture.json(counts: ["total": largest]))
    let second = try writeReport("shard-1.json", ReportFixture.json(counts: ["total": 1]))
    let error = mergeError([first, second])
    XCTAssertEqual(error?.source, second)
    XCTAssertEqual(error?.field, "total")
    XCTAssertTrue(error?.description.contains("\(largest)") == true, "\(String(describing: error))")

    let freed = try writeReport(
      "pass-0.json", ReportFixture.json(maintenance: ["bytesFreed": largest]))
    let more = try writeReport("pass-1.json", ReportFixture.json(maintenance: ["bytesFreed": 2]))
    XCTAssertEqual(mergeError([freed, more])?.source, more)
  }

  func testAFigurePastSixtyFourBitsIsRefusedNotSummed() throws {
    let huge = try writeReport("shard-0.json", ReportFixture.json(counts: ["total": Int.max]))
    let error = mergeError([huge, huge])
    XCTAssertEqual(error?.source, huge)
    XCTAssertEqual(error?.field, "prefetch.total")
  }

  func testHostLimitFiguresPastTheLargestCountAreRefusedNotSummed() throws {
    func limits(_ figure: String, _ value: Int) -> [String: Any] {
      var limit: [String: Any] = [
        "host": "cdn.example.com", "final": 4, "min": 4, "median": 4, "max": 4,
        "cuts": ["refused": 1],
      ]
      if figure.hasPrefix("cuts.") {
        limit["cuts"] = [String(figure.dropFirst(5)): value]
      } else {
        limit[figure] = value
      }
      return ["hostLimits": [limit]]
    }
    for figure in ["final", "min", "median", "max", "heldUnder", "cuts.refused"] {
      let huge = try writeReport(
        "shard-\(figure).json", ReportFixture.json(counts: limits(figure, RunReport.largestCount)))
      let error = mergeError([huge, huge])
      XCTAssertEqual(error?.source, huge, figure)
      XCTAssertEqual(error?.field, "hostLimits (cdn.example.com).\(figure)", figure)
    }
  }

  func testANegativeHostLimitFigureIsRefusedNamingIt() throws {
    let good = try writeReport("shard-0.json", ReportFixture.json())
    let limit: [String: Any] = [
      "host": "cdn.example.com", "final": 4, "min": 4, "median": 4, "max": 4,
      "cuts": ["queue": 0, "refused": -1],
    ]
    let bad = try writeReport("shard-1.json", ReportFixture.json(counts: ["hostLimits": [limit]]))
    let error = mergeError([good, bad])
    XCTAssertEqual(error?.source, bad)
    XCTAssertEqual(error?.field, "prefetch.hostLimits[0].cuts.refused")
    XCTAssertTrue(
      error?.description.contains("-1 is out of range") == true, "\(String(describing: error))")
  }

  func testMergeRefusesASchemaVersionItDoesNotKnow() throws {
    let good = try writeReport("shard-0.json", ReportFixture.json())
    let later = try writeReport("shard-1.json", ReportFixture.json(schemaVersion: 2))
    let error = mergeError([good, later])
    XCTAssertEqual(error?.source, later)
    XCTAssertEqual(error?.field, "schemaVersion")
    XCTAssertTrue(error?.description.contains("reads 1") == true, "\(String(describing: error))")
  }

  func testReportsInRangeStillMerge() throws {
    let half = RunReport.largestCount / 2
    let paths = try (0..<2).map {
      try writeReport("shard-\($0).json", ReportFixture.json(counts: ["total": half, "failed": 1]))
    }
    let outcome = try ReportMerge.merge(
      paths, into: [temporary.appending("merged.json")], standardOutput: false)
    XCTAssertEqual(outcome.failedURLs, 2)
    XCTAssertEqual(
      try RunReport.load(path: temporary.appending("merged.json")).prefetch?.total, half * 2)
  }
}
