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
final class ParallelRecipeTests: LoopbackTestCase {
  let fleet = FleetNight()

  override var routes: [String: Route] { fleet.routes }

  override func setUpWithError() throws {
    try FleetDocs.require("/usr/bin/parallel", package: "parallel")
    try super.setUpWithError()
  }

  private var cache: String { temporary.appending("c") }

  /// Writes the night's manifest, `urls.txt`; its URLs.
  private func prepare(broken: Bool) throws -> [String] {
    let urls = FleetNight.urls(on: server, broken: broken)
    try urls.joined(separator: "\n").write(
      toFile: temporary.appending("urls.txt"), atomically: true, encoding: .utf8)
    return urls
  }

  /// Starts the page's GNU parallel lines after `heading` in the temporary folder, with the
  /// recipe's cache there and the variables in `variables` set (a rerun's `run_id`).
  private func start(after heading: String, variables: [String: String] = [:]) throws
    -> BackgroundCommand
  {
    let script = try FleetDocs.commands("GNU parallel", after: heading)
    XCTAssertTrue(script.contains("parallel -j4 --joblog fleet.log"), script)
    XCTAssertTrue(script.contains("report merge"), script)
    let binaries = URL(fileURLWithPath: ImageCacheBinary.path).deletingLastPathComponent().path
    return try BackgroundCommand(
      "/bin/bash",
      ["-euo", "pipefail", "-c", script.replacingOccurrences(of: "/srv/c", with: cache)],
      environment: ["PATH": "\(binaries):/usr/bin:/bin", "HOME": temporary.path]
        .merging(variables) { $1 },
      directory: temporary.path)
  }

  private func report(_ name: String) throws -> RunReport {
    try RunReport.load(path: temporary.appending(name))
  }

  func testTheGNUParallelRecipeFetchesEachURLOnceAndItsMergePassesANightWith404s() throws {
    let urls = try prepare(broken: false)
    let result = try start(after: "## Recipes").finish()
    XCTAssertEqual(result.status, 0, "the merge passes a night with 404s: \(result.stderr)")
    let merged = try report("run.json")
    FleetNight.checkOrdinaryNight(merged, server: server, urls: urls)
    let runIDs = try (1...FleetNight.shards).map { try report("r\($0).json").runID }
    XCTAssertEqual(Set(runIDs).count, 1, "one run ID for the four workers: \(runIDs)")
    XCTAssertEqual(merged.runID, runIDs.first)
  }

  func testAWorkerKilledWithSIGKILLFailsTheNightAndTheJobLogRerunsItAlone() throws {
    let urls = try prepare(broken: true)
    let broken = try start(after: "## Recipes")
    try FleetNight.killVictimMidway(server: server, urls: urls, cache: cache)
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

    fleet.release()
    let runID = try XCTUnwrap(try report("r1.json").runID)
    let before = server.allRequests.count
    let rerun = try start(after: "### Rerunning one shard", variables: ["run_id": runID]).finish()
    XCTAssertEqual(rerun.status, 0, rerun.stderr)
    FleetNight.checkRerun(
      requests: Array(server.allRequests[before...]),
      report: try report("r\(FleetNight.victim + 1).json"), merged: try report("run.json"),
      server: server, urls: urls)
  }
}
