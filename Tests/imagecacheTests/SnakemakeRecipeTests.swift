import Core
import Foundation
import TestSupport
import XCTest

/// docs/fleets.md's Snakemake recipe (issue 40, item 5): its Snakefile and commands, taken from
/// the page, run by Snakemake 7 (Debian's `snakemake`) with the real binary against a loopback
/// server. The merge rule needs the four shards' marks of success, so it is the gate: it runs
/// after an ordinary night, and not after a night that lost a shard, which the night's command,
/// run again, reruns alone. A machine without `snakemake` skips, unless
/// `IMAGECACHE_REQUIRE_ENGINES=1` (`.ci/run`, which installs it).
final class SnakemakeRecipeTests: FleetRecipeTestCase {
  override var engine: (program: String, package: String) { ("/usr/bin/snakemake", "snakemake") }

  private var cache: String { temporary.appending("cache") }

  /// The page's Snakefile, a job `nightly.yaml` on the night's manifest, in the temporary
  /// folder; the night's URLs. The job's long timeout and deadline let a held image wait for
  /// the kill however loaded the machine.
  private func prepare(broken: Bool) throws -> [String] {
    try FleetDocs.block(startingWith: "# Snakefile").write(
      toFile: temporary.appending("Snakefile"), atomically: true, encoding: .utf8)
    return try FleetNight.writeJob(
      in: temporary.path, server: server, broken: broken, cache: cache)
  }

  /// Starts the page's Snakemake lines after `heading`, the variables in `variables` set (a
  /// rerun's `night`).
  private func start(after heading: String, variables: [String: String] = [:]) throws
    -> BackgroundCommand
  {
    try start("Snakemake", after: heading, variables: variables)
  }

  /// The night the recipe ran: the one folder in `reports`, named by its date.
  private func nightFolder() throws -> String {
    let nights = try FileManager.default.contentsOfDirectory(atPath: temporary.appending("reports"))
    XCTAssertEqual(nights.count, 1, "\(nights)")
    return try XCTUnwrap(nights.first)
  }

  private func report(_ name: String, of night: String) throws -> RunReport {
    try RunReport.load(path: temporary.appending("reports/\(night)/\(name).json"))
  }

  /// The reports of the shards the broken night did not stop.
  private func survivors(of night: String) throws -> [RunReport] {
    try FleetNight.survivors.map { try report("shard-\($0)", of: night) }
  }

  func testTheSnakefileFetchesEachURLOnceAndItsMergeRuleRunsAfterANightWith404s() throws {
    let urls = try prepare(broken: false)
    let result = try start(after: "## Recipes").finish()
    XCTAssertEqual(
      result.status, 0, "the merge rule runs after a night with 404s: \(result.stderr)")
    let night = try nightFolder()
    let merged = try report("run", of: night)
    XCTAssertEqual(merged.runID, night, "the night is the run ID")
    FleetNight.checkOrdinaryNight(merged, server: server, urls: urls)
  }

  func testAShardKilledWithSIGKILLHoldsBackTheMergeAndTheNightsCommandRerunsItAlone() throws {
    let urls = try prepare(broken: true)
    let broken = try start(after: "## Recipes")
    try FleetNight.signalVictimMidway(server: server, urls: urls, cache: cache)
    let result = broken.finish()
    let night = try nightFolder()
    XCTAssertNotEqual(result.status, 0, "a night that lost a shard fails")
    XCTAssertTrue(
      result.stderr.contains("Error in rule shard")
        && result.stderr.contains("reports/\(night)/shard-\(FleetNight.victim).done"),
      "Snakemake names the killed shard's job by its output: \(result.stderr)")
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: temporary.appending("reports/\(night)/run.json")),
      "the merge rule does not run")
    let others = try survivors(of: night)
    XCTAssertEqual(Set(others.map(\.status)), [.completed], "the other shards ran to their end")

    fleet.release()
    let before = server.allRequests.count
    let rerun = try start(after: "### Rerunning one shard", variables: ["night": night]).finish()
    XCTAssertEqual(rerun.status, 0, rerun.stderr)
    FleetNight.checkRerun(
      requests: Array(server.allRequests[before...]),
      report: try report("shard-\(FleetNight.victim)", of: night),
      merged: try report("run", of: night), server: server, urls: urls)
    XCTAssertEqual(try survivors(of: night), others, "the shards that completed are not run again")
  }

  /// A shard stopped with SIGTERM writes an `interrupted` report and exits 130. Its report is
  /// not the rule's output (its mark is), so Snakemake deletes it neither then nor before the
  /// rerun, and the rerun counts both attempts, as docs/fleets.md says a rerun does.
  func testAShardStoppedWithSIGTERMKeepsItsReportAndItsRerunCountsBothAttempts() throws {
    let urls = try prepare(broken: true)
    let broken = try start(after: "## Recipes")
    try FleetNight.signalVictimMidway(SIGTERM, server: server, urls: urls, cache: cache)
    let result = broken.finish()
    let night = try nightFolder()
    XCTAssertNotEqual(result.status, 0, "a night that lost a shard fails")
    let stopped = try report("shard-\(FleetNight.victim)", of: night)
    XCTAssertEqual(stopped.status, .interrupted, "the stopped shard's report is kept")

    fleet.release()
    let rerun = try start(after: "### Rerunning one shard", variables: ["night": night]).finish()
    XCTAssertEqual(rerun.status, 0, rerun.stderr)
    let shard = try report("shard-\(FleetNight.victim)", of: night)
    XCTAssertEqual(shard.status, .completed)
    XCTAssertEqual(shard.previousAttempts?.map(\.status), [.interrupted])
    let merged = try report("run", of: night)
    FleetNight.checkMerged(merged, urls: urls)
    XCTAssertEqual(merged.night?.attempts, FleetNight.shards + 1, "both attempts of the shard")
  }
}
