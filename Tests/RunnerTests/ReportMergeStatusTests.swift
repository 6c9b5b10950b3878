import Core
import Foundation
import Runner
import TestSupport
import XCTest

/// SPEC section 9: a merged report has the worst status of its reports (failed, then
/// interrupted, then incomplete, then completed), whatever their order: one shard that failed
/// makes the whole run failed.
final class ReportMergeStatusTests: TemporaryFolderTestCase {
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

  /// Shards fetch different URLs: every count of the merged report is the sum of the shards',
  /// bytes included, never the largest shard's.
  func testEveryCountOfTheMergedReportIsTheSumOfTheShards() throws {
    let paths = try [1, 1000].map { scale in
      let path = temporary.appending("counts-\(scale).json")
      let counts = Dictionary(
        uniqueKeysWithValues: ReportFixture.countNames.enumerated().map { index, name in
          (name, (index + 1) * scale)
        })
      XCTAssertTrue(
        FileManager.default.createFile(
          atPath: path, contents: try ReportFixture.json(counts: counts)))
      return path
    }
    let output = temporary.appending("merged-counts.json")
    _ = try ReportMerge.merge(paths, into: [output], standardOutput: false)
    let merged = try XCTUnwrap(try RunReport.load(path: output).prefetch)
    let expected = ReportFixture.countNames.enumerated().map { index, name in
      "\(name) \((index + 1) * 1001)"
    }
    let written =
      [
        merged.total, merged.memoryHits, merged.diskHits, merged.downloaded, merged.notModified,
        merged.failed, merged.blacklisted, merged.skipped, merged.derived,
      ].map(Int64.init) + [Int64(merged.bytesDownloaded)]
    XCTAssertEqual(
      zip(ReportFixture.countNames, written).map { "\($0) \($1)" }, expected)
  }

  /// A fleet run one shard of which was interrupted: the merged report lists the URLs of every
  /// shard (the interrupted one's as it counted them, a finished one's as it did them), so
  /// that its page says how many were not tried.
  func testAMergeOfAnInterruptedShardSaysHowManyURLsTheShardsList() throws {
    let paths = try [("completed", 100, nil), ("interrupted", 40, 120)].enumerated().map {
      index, shard in
      var json =
        try JSONSerialization.jsonObject(
          with: ReportFixture.json(status: shard.0, counts: ["downloaded": shard.1]))
        as! [String: Any]
      var prefetch = json["prefetch"] as! [String: Any]
      prefetch["total"] = shard.1
      json["prefetch"] = prefetch
      if let listed = shard.2 { json["urlsListed"] = listed }
      let path = temporary.appending("shard-\(index).json")
      try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
      return path
    }
    let output = temporary.appending("merged.json")
    _ = try ReportMerge.merge(paths, into: [output], standardOutput: false, partial: true)
    let merged = try RunReport.load(path: output)
    XCTAssertEqual(merged.urlsListed, 220)
    XCTAssertEqual(merged.prefetch?.total, 140)
    XCTAssertTrue(
      ReportPage.render([("merged.json", merged)]).contains("80 of 220 URLs not tried"))
  }

  /// `shard-K.json` for each `(durationSeconds, allowURLFailures)`, then their merge.
  private func mergedShards(_ shards: [(Double, Bool)]) throws -> (ReportMerge.Outcome, RunReport) {
    let paths = try shards.enumerated().map { index, shard in
      var json =
        try JSONSerialization.jsonObject(with: ReportFixture.json(status: "completed"))
        as! [String: Any]
      var prefetch = json["prefetch"] as! [String: Any]
      prefetch["durationSeconds"] = shard.0
      json["prefetch"] = prefetch
      json["allowURLFailures"] = shard.1
      let path = temporary.appending("shard-\(index).json")
      try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
      return path
    }
    let output = temporary.appending("merged.json")
    let outcome = try ReportMerge.merge(paths, into: [output], standardOutput: false)
    return (outcome, try RunReport.load(path: output))
  }

  /// Shards run side by side: the merged prefetch took as long as the longest shard, not the
  /// sum of their times.
  /// The fleet's limit at a host is its shards' together; it was held under what earlier runs
  /// remembered only where every shard's limit was.
  func testMergedHostLimitsAddUpAndAreHeldUnderOnlyWhereEveryShardWas() throws {
    func shard(_ name: String, _ heldUnder: Int?, cuts: Int) throws -> String {
      var limit: [String: Any] = [
        "host": "cdn.example", "final": 5, "min": 4, "median": 5, "max": 5,
        "cuts": ["refused": cuts],
      ]
      limit["heldUnder"] = heldUnder
      let path = temporary.appending("\(name).json")
      XCTAssertTrue(
        FileManager.default.createFile(
          atPath: path, contents: try ReportFixture.json(counts: ["hostLimits": [limit]])))
      return path
    }
    func mergedLimit(_ paths: [String]) throws -> HostLimit? {
      let output = temporary.appending("merged-limits.json")
      _ = try ReportMerge.merge(paths, into: [output], standardOutput: false)
      return try RunReport.load(path: output).prefetch?.hostLimits.first
    }
    let held = try shard("held", 6, cuts: 0)
    let heldToo = try shard("held-too", 7, cuts: 1)
    let free = try shard("free", nil, cuts: 2)
    let both = try XCTUnwrap(try mergedLimit([held, heldToo]))
    XCTAssertEqual([both.final, both.min, both.median, both.max], [10, 8, 10, 10])
    XCTAssertEqual(both.heldUnder, 13)
    XCTAssertEqual(both.cuts, ["refused": 1])
    for order in [[held, free], [free, held], [held, heldToo, free]] {
      let one = try XCTUnwrap(try mergedLimit(order))
      XCTAssertNil(one.heldUnder, "\(order)")
      XCTAssertEqual(one.cuts["refused"], order.count == 3 ? 3 : 2, "\(order)")
    }
  }

  func testTheMergedDurationIsTheLongestShardsNotTheSum() throws {
    let (_, merged) = try mergedShards([(30, false), (50, false), (20, false)])
    XCTAssertEqual(merged.prefetch?.durationSeconds, 50)
  }

  /// A merge allows failed URLs only when every shard's run did: one shard that did not is
  /// enough for the fleet's failures to count (exit 1).
  func testAMergeAllowsURLFailuresOnlyWhenEveryShardDid() throws {
    XCTAssertTrue(try mergedShards([(1, true), (1, true)]).0.urlFailuresAllowed)
    for shards in [[(1.0, true), (1, false)], [(1, false), (1, true)], [(1, false), (1, false)]] {
      let (outcome, merged) = try mergedShards(shards)
      XCTAssertFalse(outcome.urlFailuresAllowed, "\(shards)")
      XCTAssertNotEqual(merged.allowURLFailures, true, "\(shards): the merged file")
    }
  }

  /// A report of `ReportFixture.json(counts:maintenance:)`, changed by `edit`, as
  /// `name.json`.
  private func shardReport(
    _ name: String, counts: [String: Any] = [:], maintenance: [String: Any]? = nil,
    _ edit: (inout [String: Any], inout [String: Any]) -> Void = { _, _ in }
  ) throws -> String {
    var json =
      try JSONSerialization.jsonObject(
        with: ReportFixture.json(counts: counts, maintenance: maintenance)) as! [String: Any]
    var prefetch = json["prefetch"] as! [String: Any]
    edit(&json, &prefetch)
    json["prefetch"] = prefetch
    let path = temporary.appending("\(name).json")
    try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
    return path
  }

  /// Every shard reads every input, and lists what the blacklist refused: the merged report
  /// lists a blacklisted URL and a failed input once each, and counts that input once, in the
  /// report and for the exit code.
  func testWhatSeveralShardsListIsInTheMergedReportOnce() throws {
    let paths = try (0..<3).map { index in
      try shardReport(
        "lists-\(index)",
        counts: ["inputsFailed": 1, "inputFailures": ["night.txt: cannot be read"]]
      ) { _, prefetch in
        prefetch["blacklistedURLs"] = ["https://cdn.example/gone.jpg"]
      }
    }
    let output = temporary.appending("merged-lists.json")
    let outcome = try ReportMerge.merge(paths, into: [output], standardOutput: false)
    let merged = try XCTUnwrap(try RunReport.load(path: output).prefetch)
    XCTAssertEqual(merged.blacklistedURLs, ["https://cdn.example/gone.jpg"])
    XCTAssertEqual(merged.inputFailures, ["night.txt: cannot be read"])
    XCTAssertEqual(merged.inputsFailed, 1)
    XCTAssertEqual(outcome.failedInputs, 1)
  }

  /// The run starts at its earliest shard's start and ends at its latest shard's end.
  func testTheMergedRunSpansItsShards() throws {
    let paths = try [("00:10", "00:40"), ("00:00", "00:20"), ("00:05", "00:50")].enumerated()
      .map { index, times in
        try shardReport("span-\(index)") { json, _ in
          json["startedAt"] = "2026-01-01T\(times.0):00.000Z"
          json["finishedAt"] = "2026-01-01T\(times.1):00.000Z"
        }
      }
    let output = temporary.appending("merged-span.json")
    _ = try ReportMerge.merge(paths, into: [output], standardOutput: false)
    let merged = try RunReport.load(path: output)
    let start = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
    XCTAssertEqual(merged.startedAt, start)
    XCTAssertEqual(merged.finishedAt, start.addingTimeInterval(50 * 60))
  }

  /// Shards wait side by side: a host's pauses are every shard's, its wait the longest one's.
  func testAHostsPausesAddUpAndItsWaitIsTheLongestShardsOne() throws {
    let paths = try [(2, 3.0), (1, 5.0)].enumerated().map { index, backoff in
      try shardReport(
        "backoff-\(index)",
        counts: [
          "hostBackoffs": [["host": "cdn.example", "pauses": backoff.0, "seconds": backoff.1]]
        ])
    }
    let output = temporary.appending("merged-backoffs.json")
    _ = try ReportMerge.merge(paths, into: [output], standardOutput: false)
    XCTAssertEqual(
      try RunReport.load(path: output).prefetch?.hostBackoffs,
      [HostBackoff(host: "cdn.example", pauses: 3, seconds: 5)])
  }

  /// The whole run's blacklist refused every URL when every shard's refused all of its own
  /// (exit 1, as in one run); one shard that fetched anything makes it a run that worked.
  func testTheMergeRefusedEverythingOnlyWhenEveryShardDid() throws {
    let refused = try (0..<2).map {
      try shardReport("refused-\($0)", counts: ["total": 2, "blacklisted": 2])
    }
    let worked = try shardReport("worked", counts: ["total": 2, "blacklisted": 1, "diskHits": 1])
    func outcome(_ paths: [String]) throws -> ReportMerge.Outcome {
      try ReportMerge.merge(
        paths, into: [temporary.appending("merged-refused.json")], standardOutput: false)
    }
    XCTAssertTrue(try outcome(refused).refusedEverything)
    XCTAssertFalse(try outcome(refused + [worked]).refusedEverything)
  }

  /// A dry run removes nothing, so it fails to remove nothing: what its passes could not
  /// have removed does not make the merge exit 1; what a real pass could not remove does.
  func testOnlyARealPassLeavesFilesNotRemoved() throws {
    func outcome(dryRun: Bool) throws -> ReportMerge.Outcome {
      let paths = try (0..<2).map {
        try shardReport(
          "pass-\(dryRun)-\($0)", maintenance: ["dryRun": dryRun, "filesNotRemoved": 2])
      }
      return try ReportMerge.merge(
        paths, into: [temporary.appending("merged-pass-\(dryRun).json")], standardOutput: false)
    }
    XCTAssertEqual(try outcome(dryRun: false).filesNotRemoved, 4)
    XCTAssertEqual(try outcome(dryRun: true).filesNotRemoved, 0)
  }

  /// Each shard's `cacheBytesBefore`/`After` are of its own files: the merged pass has their
  /// sum, the whole cache's, when the reports are one whole run's shards that all have them,
  /// and none (not a wrong number) when a shard lacks one, when the merge is partial, or when
  /// unsharded runs each measured the whole cache. The limits every shard ran with are kept.
  func testAMergedPassSumsTheShardsCacheSizesOnlyWhenTheyAreTheWholeCache() throws {
    let limits: [String: Any] = [
      "maxDiskAge": 604_800, "maxDiskSize": 0, "expireType": "accessDate",
    ]
    func merged(
      _ name: String, shards: [Int?], count: Int = 2, after: [Int?] = [10, 20],
      partial: Bool = false
    ) throws -> MaintenancePassReport {
      let paths = try zip(shards, after).enumerated().map { index, shard in
        var pass: [String: Any] = ["cacheBytesBefore": [100, 1000][index], "limits": limits]
        if let after = shard.1 { pass["cacheBytesAfter"] = after }
        return try shardReport("\(name)-\(index)", maintenance: pass) { json, _ in
          if let index = shard.0 {
            json["shard"] = ["index": index, "count": count]
            json["runID"] = "night-1"
          }
        }
      }
      let output = temporary.appending("merged-\(name).json")
      _ = try ReportMerge.merge(paths, into: [output], standardOutput: false, partial: partial)
      return try XCTUnwrap(try RunReport.load(path: output).maintenance.first)
    }
    let whole = try merged("whole", shards: [0, 1])
    XCTAssertEqual(whole.cacheBytesBefore, 1100)
    XCTAssertEqual(whole.cacheBytesAfter, 30)
    XCTAssertEqual(whole.limits?.maxDiskAge, 604_800)
    let lacking = try merged("lacking", shards: [0, 1], after: [10, nil])
    XCTAssertEqual(lacking.cacheBytesBefore, 1100)
    XCTAssertNil(lacking.cacheBytesAfter, "a shard without the figure: no sum")
    let partial = try merged("partial", shards: [0, 1], count: 3, partial: true)
    XCTAssertNil(partial.cacheBytesBefore, "shard 2 of 3 is missing")
    XCTAssertNil(partial.cacheBytesAfter)
    let unsharded = try merged("unsharded", shards: [nil, nil])
    XCTAssertNil(unsharded.cacheBytesBefore, "each measured the whole cache")
    XCTAssertNil(unsharded.cacheBytesAfter)
  }

  /// The merge names the shards that ran more than once, and only those.
  func testTheMergeNamesOnlyTheShardsThatRanAgain() throws {
    let once = try shardReport("once")
    let twice = try shardReport("twice") { json, _ in
      json["previousAttempts"] = [
        [
          "status": "interrupted", "startedAt": "2026-01-01T00:00:00.000Z",
          "finishedAt": "2026-01-01T00:00:30.000Z", "downloaded": 3, "bytesDownloaded": 300,
        ]
      ]
    }
    let outcome = try ReportMerge.merge(
      [once, twice], into: [temporary.appending("merged-rerun.json")], standardOutput: false)
    XCTAssertEqual(outcome.rerun.count, 1, "\(outcome.rerun)")
    XCTAssertTrue(
      outcome.rerun.first?.hasSuffix("twice.json: 2 attempts") == true, "\(outcome.rerun)")
  }
}
