import Core
import Foundation
import XCTest

@testable import Runner

/// The metrics file's series of adaptive per-host limits (issue 44): one set for each of the
/// 20 hosts cut most often, ties by name, so that a run over thousands of hosts does not make
/// thousands of series for Prometheus to keep.
final class RunMetricsTests: XCTestCase {
  func testTheHostSeriesAreTheTwentyHostsCutMostOftenTiesByName() throws {
    var counts = PrefetchCounts()
    // h00 and h01 were cut 0 times, h02 and h03 once, ... h24 12 times.
    counts.hostLimits = (0..<25).map {
      HostLimit(
        host: String(format: "h%02d", $0), final: 4, min: 1, median: 3, max: 6,
        cuts: ["queue": $0 / 2])
    }
    let metrics = RunMetrics(
      job: "nightly", namespace: "default", shard: nil, status: .completed,
      finishedAt: Date(timeIntervalSince1970: 1_700_000_000), durationSeconds: 1,
      prefetch: counts, passes: [], cache: nil, verify: nil)
    let hostLabel = try NSRegularExpression(pattern: #"host="([^"]+)""#)
    let lines = metrics.exposition(lastSuccess: nil).split(separator: "\n").map(String.init)
      .filter { $0.hasPrefix("imagecache_last_run_host_concurrency{") }
    let hosts = Set(
      lines.compactMap { line -> String? in
        let range = NSRange(line.startIndex..., in: line)
        guard let match = hostLabel.firstMatch(in: line, range: range),
          let host = Range(match.range(at: 1), in: line)
        else { return nil }
        return String(line[host])
      })
    // Cut 3 times or more: h06 to h24 (19 hosts); of h04 and h05 (twice each), h04 by name.
    XCTAssertEqual(hosts, Set(["h04"] + (6..<25).map { String(format: "h%02d", $0) }))
    XCTAssertEqual(lines.count, 20 * 4, "final, min, median and max of each")
  }

  /// Each outcome's series counts its own URLs: a dashboard that plots revalidations (304s)
  /// against disk hits must not see one twice.
  func testEachOutcomeSeriesCountsItsOwnURLs() {
    var counts = PrefetchCounts()
    (counts.memoryHits, counts.diskHits, counts.downloaded, counts.notModified) = (1, 2, 3, 4)
    (counts.failed, counts.blacklisted, counts.skipped) = (5, 6, 7)
    let metrics = RunMetrics(
      job: "nightly", namespace: "default", shard: nil, status: .completed,
      finishedAt: Date(timeIntervalSince1970: 1_700_000_000), durationSeconds: 1,
      prefetch: counts, passes: [], cache: nil, verify: nil)
    let lines = Set(metrics.exposition(lastSuccess: nil).split(separator: "\n").map(String.init))
    for (outcome, value) in [
      ("memory_hit", 1), ("disk_hit", 2), ("downloaded", 3), ("not_modified", 4), ("failed", 5),
      ("blacklisted", 6), ("skipped", 7),
    ] {
      let line =
        #"imagecache_last_run_urls{imagecache_job="nightly",namespace="default",outcome=""#
        + outcome + #""} "# + "\(value)"
      XCTAssertTrue(lines.contains(line) || lines.contains(line + ".0"), line)
    }
  }
}
