import Core
import Foundation
import TestSupport
import XCTest

/// docs/fleets.md's GNU parallel recipe and rerun, as written there (issue 40, item 5), run with
/// GNU parallel against a loopback server: four workers fetch every URL once, the night's 404s
/// do not hold back the merge, and the merged report is of the whole night; a worker killed
/// with SIGKILL fails the night, and the rerun from the job log runs that worker alone. A
/// machine without `parallel` skips, unless `IMAGECACHE_REQUIRE_ENGINES=1` (`.ci/run`, which
/// installs it).
final class ParallelRecipeTests: FleetRecipeTestCase {
  override var engine: (program: String, package: String) { ("/usr/bin/parallel", "parallel") }

  private var cache: String { temporary.appending("c") }

  /// Starts the page's GNU parallel lines after `heading`, with the recipe's cache in the
  /// temporary folder and the variables in `variables` set (a rerun's `run_id`).
  private func start(after heading: String, variables: [String: String] = [:]) throws
    -> BackgroundCommand
  {
    try start("GNU parallel", after: heading, replacing: ["/srv/c": cache], variables: variables)
  }

  private func report(_ name: String) throws -> RunReport {
    try RunReport.load(path: temporary.appending(name))
  }

  func testTheGNUParallelRecipeFetchesEachURLOnceAndItsMergePassesANightWith404s() throws {
    let urls = try writeManifest(broken: false)
    let result = try start(after: "## Recipes").finish()
    XCTAssertEqual(result.status, 0, "the merge passes a night with 404s: \(result.stderr)")
    let merged = try report("run.json")
    FleetNight.checkOrdinaryNight(merged, server: server, urls: urls)
    let runIDs = try (1...FleetNight.shards).map { try report("r\($0).json").runID }
    XCTAssertEqual(Set(runIDs).count, 1, "one run ID for the four workers: \(runIDs)")
    XCTAssertEqual(merged.runID, runIDs.first)
  }

  func testAWorkerKilledWithSIGKILLFailsTheNightAndTheJobLogRerunsItAlone() throws {
    let urls = try writeManifest(broken: true)
    let broken = try start(after: "## Recipes")
    try FleetNight.signalVictimMidway(server: server, urls: urls, cache: cache)
    let result = broken.finish()
    XCTAssertEqual(result.status, 1, "parallel fails the night, one job failed: \(result.stderr)")
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: temporary.appending("run.json")), "no merge")
    // The job log's columns: Seq Host Starttime JobRuntime Send Receive Exitval Signal Command.
    let log = try String(contentsOfFile: temporary.appending("fleet.log"), encoding: .utf8)
    let rows: [[Substring]] = log.split(separator: "\n").dropFirst().map {
      $0.split(separator: "\t")
    }
    let failed = rows.filter { row in row.count > 7 && (row[6] != "0" || row[7] != "0") }
      .map { row in String(row[0]) }
    XCTAssertEqual(failed, ["\(FleetNight.victim + 1)"], "the job log names the job: \(log)")
    // The night's merge, run anyway, refuses to merge without the killed worker's report.
    let merge = try XCTUnwrap(
      try FleetDocs.commands("GNU parallel", after: "## Recipes").split(separator: "\n").last)
    let refused = try start(String(merge)).finish()
    XCTAssertEqual(refused.status, 2, refused.stderr)
    XCTAssertTrue(
      refused.stderr.contains("r\(FleetNight.victim + 1).json: cannot read"), refused.stderr)

    let survivors = try FleetNight.survivors.map { try report("r\($0 + 1).json") }

    fleet.release()
    let runID = try XCTUnwrap(try report("r1.json").runID)
    let before = server.allRequests.count
    let rerun = try start(after: "### Rerunning one shard", variables: ["run_id": runID]).finish()
    XCTAssertEqual(rerun.status, 0, rerun.stderr)
    FleetNight.checkRerun(
      requests: Array(server.allRequests[before...]),
      report: try report("r\(FleetNight.victim + 1).json"), merged: try report("run.json"),
      server: server, urls: urls)
    XCTAssertEqual(
      try FleetNight.survivors.map { try report("r\($0 + 1).json") }, survivors,
      "the jobs that completed are not run again")
  }
}
