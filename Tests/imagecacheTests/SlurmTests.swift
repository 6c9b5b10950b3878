import Core
import Foundation
import TestSupport
import XCTest

/// A night on a real Slurm (issue 28 item 7, issue 40 item 5): a one-node cluster on 127.0.0.1
/// started by `scripts/slurm-local` in a temporary folder runs docs/fleets.md's recipe, as
/// written there, against a loopback image server: a 4-task array of `imagecache run`, then a
/// merge job that waits for it with `afterany`; and, after a task killed with SIGKILL, the
/// page's rerun of that task alone.
///
/// Needs root and Debian's `slurm-wlm` and `munge`; without them the tests skip, saying so,
/// unless `IMAGECACHE_REQUIRE_ENGINES=1` (set by `.ci/run`, which installs them), where they fail.
final class SlurmTests: TemporaryFolderTestCase {
  static let shards = FleetNight.shards
  static let tools = ["munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel"]

  let fleet = FleetNight()
  var server: LoopbackServer!
  /// The cluster's own folder, apart from the test's: munged wants every folder above its
  /// socket open to all (0755), which a test's temporary folder (0700) is not.
  var localCluster: LocalCluster?
  var cluster: String { localCluster!.path }
  /// Where the jobs are submitted from and run: the recipe's folder.
  var work: String { temporary.appending("cluster-work") }

  override func setUpWithError() throws {
    try super.setUpWithError()
    try FleetDocs.requireCluster(
      "Slurm cluster", tools: Self.tools, packages: "slurm-wlm munge")
    server = try LoopbackServer(routes: fleet.routes)
    localCluster = try LocalCluster(script: "slurm-local", prefix: "imagecache-slurm")
  }

  override func tearDown() {
    // Every daemon the cluster started is stopped by its pid file, even after a failure.
    localCluster?.stop()
    server?.shutdown()
    super.tearDown()
  }

  /// The night's manifest and the recipe's job, `nightly.yaml`, in the work folder (no reports
  /// folder: the recipe needs none made; imagecache makes a report's folders); the URLs.
  private func prepare(broken: Bool) throws -> [String] {
    try FleetNight.writeJob(in: work, server: server, broken: broken)
  }

  /// The page's Slurm lines after `heading`, run in the work folder with `variables` set (a
  /// rerun's `jid`): the id of the array they submit (in `arrayVariable`) and of their merge.
  private func submitRecipe(
    after heading: String, arrayVariable: String, variables: [String: String] = [:]
  ) throws -> (array: String, merge: String) {
    let lines = try FleetDocs.commands("Slurm", after: heading)
    XCTAssertTrue(lines.contains("--dependency=afterany:$\(arrayVariable)"), lines)
    let binaries = URL(fileURLWithPath: ImageCacheBinary.path).deletingLastPathComponent().path
    let result = try Command.run(
      "/bin/bash", ["-euo", "pipefail", "-c", lines + "echo \"array $\(arrayVariable)\"\n"],
      environment: [
        "PATH": "\(binaries):/usr/bin:/bin:/usr/sbin:/sbin", "HOME": temporary.path,
        "SLURM_CONF": cluster + "/slurm.conf",
      ].merging(variables) { $1 }, directory: work)
    let words = result.stdout.split(whereSeparator: \.isWhitespace).map(String.init)
    guard result.status == 0,
      let merge = words.firstIndex(of: "job").map({ words[$0 + 1] }),
      let array = words.firstIndex(of: "array").map({ words[$0 + 1] })
    else { throw FleetError("the recipe: \(result.status) \(result.stdout) \(result.stderr)") }
    return (array.split(separator: ";").first.map(String.init) ?? array, merge)
  }

  private func report(_ name: String) throws -> RunReport {
    try RunReport.load(path: work + "/reports/\(name).json")
  }

  func testTheRecipeFetchesEveryURLOnceAndItsMergePassesANightWith404s() throws {
    let urls = try prepare(broken: false)
    let (array, merge) = try submitRecipe(after: "## Recipes", arrayVariable: "jid")
    let merged = try waitForOrdinaryNight(array, merge: merge)
    XCTAssertEqual(merged.state, "COMPLETED", "the merge passes the night: \(logs(work))")
    XCTAssertEqual(merged.exitCode, "0:0", logs(work))
    try FleetNight.checkArrayNight(
      in: work + "/reports", runID: array, engine: "Slurm", server: server, urls: urls)

    // A merge that lacks a shard would undercount the night: it is refused, naming the shard.
    let partial = try ImageCacheBinary.run(
      ["report", "merge"] + [0, 1, 3].map { work + "/reports/shard-\($0).json" }
        + ["--report", temporary.appending("partial.json")])
    XCTAssertNotEqual(partial.status, 0, partial.stdout)
    XCTAssertTrue(partial.stderr.contains("missing shard 2 of \(Self.shards)"), partial.stderr)
  }

  func testATaskKilledWithSIGKILLFailsTheMergeNamingItsShardAndItsRerunAloneCompletesTheNight()
    throws
  {
    let urls = try prepare(broken: true)
    let (array, merge) = try submitRecipe(after: "## Recipes", arrayVariable: "jid")
    try FleetNight.signalVictimMidway(server: server, urls: urls, cache: work + "/cache")
    XCTAssertEqual(
      try waitForJob(array, tasks: Self.shards).map(\.state),
      ["COMPLETED", "COMPLETED", "COMPLETED", "FAILED"], logs(work))
    let failed = try waitForJob(merge, tasks: 1)[0]
    XCTAssertEqual(failed.state, "FAILED", "afterany ran the merge, which failed: \(logs(work))")
    let mergeLog = try String(contentsOfFile: work + "/slurm-\(merge).out", encoding: .utf8)
    XCTAssertTrue(
      mergeLog.contains("missing shard \(FleetNight.victim) of \(Self.shards)"), mergeLog)

    let survivors = try FleetNight.survivors.map { try report("shard-\($0)") }

    fleet.release()
    let before = server.allRequests.count
    let (rerun, remerge) = try submitRecipe(
      after: "### Rerunning one shard", arrayVariable: "rid", variables: ["jid": array])
    XCTAssertEqual(try waitForJob(rerun, tasks: 1).map(\.state), ["COMPLETED"], logs(work))
    let merged = try waitForJob(remerge, tasks: 1)[0]
    XCTAssertEqual(merged.state, "COMPLETED", "the merge after the rerun: \(logs(work))")
    FleetNight.checkRerun(
      requests: Array(server.allRequests[before...]),
      report: try report("shard-\(FleetNight.victim)"), merged: try report("run"),
      server: server, urls: urls)
    XCTAssertEqual(
      try FleetNight.survivors.map { try report("shard-\($0)") }, survivors,
      "the tasks that completed are not run again")
  }

  /// What works without the recipe's `--shards` and `--allow-url-failures`: K computed by the
  /// worker's script, exit 1 (URLs failed) let through so that `afterok` holds.
  func testAnArrayGivenExplicitShardsFetchesEveryURLOnceAndItsMergeRunsAfterANightWith404s()
    throws
  {
    let urls = try prepare(broken: false)
    try """
    #!/bin/bash
    "$IMAGECACHE" prefetch "$WORK/urls.txt" --cache "$WORK/cache" --retries 0 \\
      --shard "$SLURM_ARRAY_TASK_ID/\(Self.shards)" \\
      --report "$WORK/reports/shard-$SLURM_ARRAY_TASK_ID.json"
    status=$?; [ $status -eq 1 ] && exit 0; exit $status

    """.write(toFile: work + "/worker.sh", atomically: true, encoding: .utf8)
    try """
    #!/bin/bash
    exec "$IMAGECACHE" report merge "$WORK"/reports/shard-*.json --report "$WORK/run.json"

    """.write(toFile: work + "/merge.sh", atomically: true, encoding: .utf8)

    let array = try submit(
      ["--array=0-\(Self.shards - 1)", "--output=\(work)/worker-%a.log", work + "/worker.sh"])
    let merge = try submit(
      [
        "--dependency=afterok:\(array)", "--kill-on-invalid-dep=yes",
        "--output=\(work)/merge.log", work + "/merge.sh",
      ])

    let merged = try waitForOrdinaryNight(array, merge: merge)
    // Shards that did not allow failed URLs make the merge exit 1 for the 404s.
    XCTAssertEqual(merged.state, "FAILED", "afterok let the merge run: \(logs(work))")
    XCTAssertEqual(merged.exitCode, "1:0", "merged: \(logs(work))")

    for url in urls {
      XCTAssertEqual(
        server.requestCount(url.replacing(server.baseURL, with: "")), 1, "fetched once by the array"
      )
    }
    let shards = try (0..<Self.shards).map { try XCTUnwrap(try report("shard-\($0)").prefetch) }
    XCTAssertEqual(shards.map(\.total).reduce(0, +), urls.count, "each URL in one shard")
    let run = try XCTUnwrap(try RunReport.load(path: work + "/run.json").prefetch)
    XCTAssertEqual(run.total, urls.count)
    XCTAssertEqual(run.downloaded, FleetNight.images)
    XCTAssertEqual(run.failed, FleetNight.missing)
    XCTAssertEqual(Set(run.failures.map(\.url)).count, FleetNight.missing)
    XCTAssertEqual(
      try DiskCache(location: CacheLocation(directory: work + "/cache")).usage().fileCount,
      FleetNight.images)
  }

  private var slurmEnvironment: [String: String] {
    ProcessInfo.processInfo.environment.merging([
      "SLURM_CONF": cluster + "/slurm.conf",
      "PATH": (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin",
    ]) { $1 }
  }

  /// `sbatch --parsable ARGUMENTS` from the work folder, with WORK and IMAGECACHE exported to
  /// the job; its id.
  private func submit(_ arguments: [String]) throws -> String {
    let environment = slurmEnvironment.merging([
      "WORK": work, "IMAGECACHE": ImageCacheBinary.path,
    ]) { $1 }
    let result = try Command.run(
      try FleetDocs.tool("sbatch"), ["--parsable", "--chdir=\(work)"] + arguments,
      environment: environment)
    guard result.status == 0,
      let id = result.stdout.split(separator: ";").first?.trimmingCharacters(
        in: .whitespacesAndNewlines),
      !id.isEmpty
    else { throw FleetError("sbatch \(arguments): \(result.status) \(result.stderr)") }
    return id
  }

  /// Waits for the array of an ordinary night, whose every task exits 0 with 404s, then for
  /// its merge job, whose record is returned.
  private func waitForOrdinaryNight(_ array: String, merge: String) throws -> JobRecord {
    let workers = try waitForJob(array, tasks: Self.shards)
    guard workers.allSatisfy({ $0.state == "COMPLETED" }) else {
      throw FleetError(
        "every task exits 0 on a night with 404s, not \(workers.map(\.state)):\n\(logs(work))")
    }
    return try waitForJob(merge, tasks: 1)[0]
  }

  struct JobRecord {
    var state: String
    var exitCode: String
  }

  /// Polls `scontrol show job ID` until its `tasks` records have all ended (at most 60 s).
  private func waitForJob(_ id: String, tasks: Int) throws -> [JobRecord] {
    let ended: Set = [
      "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
      "BOOT_FAIL", "DEADLINE",
    ]
    var last = ""
    var records: [JobRecord] = []
    let done = try waitUntil(timeout: 60, "job \(id) to end:\n\(last)", every: 0.2) {
      let shown = try Command.run(
        try FleetDocs.tool("scontrol"), ["show", "job", id], environment: slurmEnvironment)
      last = shown.stdout + shown.stderr
      records = shown.stdout.components(separatedBy: "\n\n").compactMap { text in
        field("JobState", in: text).map {
          JobRecord(state: $0, exitCode: field("ExitCode", in: text) ?? "")
        }
      }
      return records.count == tasks && records.allSatisfy({ ended.contains($0.state) })
    }
    guard done else {
      throw FleetError("job \(id) did not end within 60 s:\n\(last)\n\(logs(cluster))")
    }
    // scontrol lists an array's tasks in no fixed order; the states are compared as a set.
    return records.sorted { $0.state < $1.state }
  }

  private func field(_ name: String, in record: String) -> String? {
    guard let range = record.range(of: #"\b\#(name)=(\S+)"#, options: .regularExpression)
    else { return nil }
    return String(record[range].dropFirst(name.count + 1))
  }

  /// The tail of every log in `folder` (the jobs' output, `slurm-*.out` from the recipe, or the
  /// daemons'), for a failure.
  private func logs(_ folder: String) -> String {
    let files = (try? FileManager.default.subpathsOfDirectory(atPath: folder)) ?? []
    return files.filter { $0.hasSuffix(".log") || $0.hasSuffix(".out") }.sorted().map { name in
      let text = (try? String(contentsOfFile: folder + "/" + name, encoding: .utf8)) ?? ""
      return "--- \(name)\n" + text.split(separator: "\n").suffix(15).joined(separator: "\n")
    }.joined(separator: "\n")
  }
}
