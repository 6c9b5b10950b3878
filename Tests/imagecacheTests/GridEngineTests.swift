import Core
import Foundation
import NIOCore
import Synchronization
import TestSupport
import XCTest

/// docs/fleets.md's Grid Engine recipe and its rerun of one shard, as written there (issue 40,
/// item 5), on a real Grid Engine: a one-node cell started by `scripts/sge-local` in a
/// temporary folder runs the page's `qsub -t 1-4` array of `imagecache run` and its merge held
/// by `-hold_jid`, against a loopback server that serves a ``FleetNight``; and, after a task
/// killed with SIGKILL, the page's rerun of that task alone and its merge.
///
/// Needs root and Debian's `gridengine-master`, `gridengine-exec` and `gridengine-client`;
/// without them the tests skip, saying so, unless `IMAGECACHE_REQUIRE_ENGINES=1` (set by
/// `.ci/run`, which installs them), where they fail.
final class GridEngineTests: TemporaryFolderTestCase {
  static let shards = FleetNight.shards
  static let tools = ["sge_qmaster", "sge_execd", "qconf", "qsub", "qstat", "qacct", "qdel"]
  /// The task the page's rerun narrows the array to (`qsub -t 3`): the victim's.
  static let victimTask = FleetNight.victim + 1

  let fleet = FleetNight()
  /// Paths the server answers late: in the ordinary night, one shard's images.
  let late = LatePaths()
  var server: LoopbackServer!
  /// The cell's SGE_ROOT, apart from the test's folder.
  var localCell: LocalCluster?
  /// SGE_ROOT, SGE_CELL and the ports, as `sge-local start` printed them.
  var cell: [String: String] = [:]
  /// Where the jobs are submitted from and run (-cwd): the recipe's folder.
  var work: String { temporary.appending("cell-work") }

  final class LatePaths: Sendable {
    private let paths = Mutex<Set<String>>([])

    func answerLate(_ paths: [String]) { self.paths.withLock { $0 = Set(paths) } }
    func contains(_ path: String) -> Bool { paths.withLock { $0.contains(path) } }
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    try FleetDocs.requireCluster(
      "Grid Engine cell", tools: Self.tools,
      packages: "gridengine-master gridengine-exec gridengine-client")
    let late = late
    server = try LoopbackServer(
      routes: fleet.routes.mapValues { route in
        { request in
          var response = route(request)
          if late.contains(request.path) { response.headDelay = .seconds(2) }
          return response
        }
      })
    let started = try LocalCluster(script: "sge-local", prefix: "imagecache-sge")
    localCell = started
    cell = try Self.exports(started.exports)
  }

  override func tearDown() {
    // Both daemons are stopped by their pid files, and the cell's jobs deleted, even after a
    // failure.
    localCell?.stop()
    server?.shutdown()
    super.tearDown()
  }

  func testTheRecipesArrayFetchesEveryURLOnceAndItsHeldMergePassesANightWith404s() throws {
    let urls = try prepare(broken: false)
    // Shard 1's images answer late, so that its task ends well after the others (the queue has
    // slots for all of them and the merge): a merge not held for the whole array would start
    // before it ends, and miss its report.
    late.answerLate(
      urls.filter { FleetNight.shard(of: $0) == 1 && $0.contains("/i/") }.map {
        $0.replacing(server.baseURL, with: "")
      })
    let (array, merge) = try submitRecipe(after: "## Recipes", arrayVariable: "gid")
    let tasks = try accounting(array, records: Self.shards)
    XCTAssertEqual(tasks.map(\.exitStatus), [0, 0, 0, 0], "a night with 404s: \(jobOutput())")
    let merged = try accounting(merge, records: 1)[0]
    XCTAssertEqual(merged.exitStatus, 0, "the merge passes the night: \(jobOutput())")
    XCTAssertGreaterThanOrEqual(
      merged.started, tasks.map(\.ended).max()!, "-hold_jid starts the merge after every task")
    try FleetNight.checkArrayNight(
      in: work + "/reports", runID: array, engine: "Grid Engine (JOB_ID)", server: server,
      urls: urls)
  }

  func testATaskKilledWithSIGKILLFailsTheMergeNamingItsShardAndItsRerunAloneCompletesTheNight()
    throws
  {
    let urls = try prepare(broken: true)
    let (array, merge) = try submitRecipe(after: "## Recipes", arrayVariable: "gid")
    try FleetNight.signalVictimMidway(server: server, urls: urls, cache: work + "/cache")
    let tasks = try accounting(array, records: Self.shards)
    XCTAssertEqual(
      tasks.map(\.exitStatus), (1...Self.shards).map { $0 == Self.victimTask ? 137 : 0 },
      "SIGKILL ends the victim's task alone: \(jobOutput())")
    let failed = try accounting(merge, records: 1)[0]
    XCTAssertNotEqual(failed.exitStatus, 0, "-hold_jid ran the merge, which failed")
    let mergeErrors = try jobErrors(merge)
    XCTAssertTrue(
      mergeErrors.contains("missing shard \(FleetNight.victim) of \(Self.shards)"), mergeErrors)
    XCTAssertFalse(FileManager.default.fileExists(atPath: work + "/reports/run.json"))

    let survivors = try FleetNight.survivors.map { try report("shard-\($0)") }

    fleet.release()
    let before = server.allRequests.count
    let (rerun, remerge) = try submitRecipe(
      after: "### Rerunning one shard", arrayVariable: "rid", variables: ["gid": array])
    let rerunTask = try accounting(rerun, records: 1)[0]
    XCTAssertEqual(rerunTask.task, Self.victimTask)
    XCTAssertEqual(rerunTask.exitStatus, 0, jobOutput())
    let merged = try accounting(remerge, records: 1)[0]
    XCTAssertEqual(merged.exitStatus, 0, "the merge after the rerun: \(jobOutput())")
    FleetNight.checkRerun(
      requests: Array(server.allRequests[before...]),
      report: try report("shard-\(FleetNight.victim)"), merged: try report("run"),
      server: server, urls: urls)
    XCTAssertEqual(
      try FleetNight.survivors.map { try report("shard-\($0)") }, survivors,
      "the tasks that completed are not run again")
  }

  /// The night's manifest and the recipe's job, `nightly.yaml`, in the work folder, and
  /// `.sge_request`: Grid Engine's default request for jobs submitted from the folder, which
  /// puts the built imagecache on the jobs' PATH (an installed one is on it already); the
  /// night's URLs. The job's long timeout and deadline let a held image wait for the kill
  /// however loaded the machine. No reports folder: imagecache makes a report's folders.
  private func prepare(broken: Bool) throws -> [String] {
    let urls = try FleetNight.writeJob(in: work, server: server, broken: broken)
    let binaries = URL(fileURLWithPath: ImageCacheBinary.path).deletingLastPathComponent().path
    try "-v PATH=\(binaries):/usr/bin:/bin\n".write(
      toFile: work + "/.sge_request", atomically: true, encoding: .utf8)
    return urls
  }

  /// The page's Grid Engine lines after `heading`, run in the work folder as a user on the
  /// cell's submit host would, with `variables` set (a rerun's `gid`): the id of the array
  /// they submit (kept in `arrayVariable` by `qsub -terse`) and of their merge (`Your job ID`).
  private func submitRecipe(
    after heading: String, arrayVariable: String, variables: [String: String] = [:]
  ) throws -> (array: String, merge: String) {
    let lines = try FleetDocs.commands("Grid Engine", after: heading)
    XCTAssertTrue(lines.contains("-hold_jid \"$\(arrayVariable)\""), lines)
    let result = try Command.run(
      "/bin/bash", ["-euo", "pipefail", "-c", lines + "echo \"array $\(arrayVariable)\"\n"],
      environment: cellEnvironment.merging(variables) { $1 }, directory: work)
    guard result.status == 0,
      let array = result.stdout.firstMatch(of: /array (\d+)/)?.output.1,
      let merge = result.stdout.firstMatch(of: /Your job (\d+)/)?.output.1
    else { throw FleetError("the recipe: \(result.status) \(result.stdout) \(result.stderr)") }
    return (String(array), String(merge))
  }

  private func report(_ name: String) throws -> RunReport {
    try RunReport.load(path: work + "/reports/\(name).json")
  }

  struct TaskRecord {
    var task: Int
    var exitStatus: Int
    var started: Date
    var ended: Date
  }

  /// Polls `qacct -j ID` until `records` of its tasks have ended (at most 120 s): each one's
  /// exit status and times, by task number.
  private func accounting(_ id: String, records: Int) throws -> [TaskRecord] {
    var last = ""
    var tasks: [TaskRecord] = []
    let done = try waitUntil(timeout: 120, "job \(id) to end", every: 0.5) {
      let shown = try Command.run(
        try FleetDocs.tool("qacct"), ["-j", id], environment: cellEnvironment)
      last = shown.stdout + shown.stderr
      tasks = shown.stdout.components(separatedBy: "=====").compactMap(Self.taskRecord)
      return tasks.count == records
    }
    guard done else {
      throw FleetError("job \(id) did not end within 120 s:\n\(last)\n\(jobOutput())")
    }
    return tasks.sorted { $0.task < $1.task }
  }

  /// One task's record in `qacct -j`: lines of a name and its value, padded
  /// (`exit_status  137                  (Killed)`, `start_time   Sun Nov  1 03:17:02 2026`).
  private static func taskRecord(_ text: String) -> TaskRecord? {
    var fields: [String: String] = [:]
    for line in text.split(separator: "\n") {
      let words = line.split(separator: " ")
      guard let name = words.first else { continue }
      fields[String(name)] = words.dropFirst().joined(separator: " ")
    }
    let format = DateFormatter()
    format.locale = Locale(identifier: "en_US_POSIX")
    format.dateFormat = "EEE MMM d HH:mm:ss yyyy"
    guard let exit = fields["exit_status"]?.split(separator: " ").first.flatMap({ Int($0) }),
      let started = fields["start_time"].flatMap(format.date(from:)),
      let ended = fields["end_time"].flatMap(format.date(from:))
    else { return nil }
    // An array's tasks have their number; a job of one task says `undefined`.
    let task = fields["taskid"].flatMap { Int($0) } ?? 1
    return TaskRecord(task: task, exitStatus: exit, started: started, ended: ended)
  }

  /// What a job wrote on stderr: its `NAME.eID` file in the folder it ran in (-cwd).
  private func jobErrors(_ id: String) throws -> String {
    let names = try FileManager.default.contentsOfDirectory(atPath: work)
    let name = try XCTUnwrap(names.first { $0.hasSuffix(".e\(id)") }, "\(names)")
    return try String(contentsOfFile: work + "/" + name, encoding: .utf8)
  }

  /// Every job's output in the work folder (`NAME.oID.TASK`, `NAME.eID`), for a failure.
  private func jobOutput() -> String {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []
    return names.filter { $0.range(of: #"\.[eo]\d+"#, options: .regularExpression) != nil }
      .sorted().map { name in
        let text = (try? String(contentsOfFile: work + "/" + name, encoding: .utf8)) ?? ""
        return "--- \(name)\n" + text.split(separator: "\n").suffix(15).joined(separator: "\n")
      }.joined(separator: "\n")
  }

  private var cellEnvironment: [String: String] {
    ProcessInfo.processInfo.environment.merging(cell) { $1 }.merging([
      "PATH": (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin",
      "HOME": temporary.path,
    ]) { $1 }
  }

  /// `export A=1 B=2` (what `sge-local start` prints to eval) as a dictionary.
  private static func exports(_ line: String) throws -> [String: String] {
    let words = line.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
    guard words.first == "export" else { throw FleetError("not an export line: \(line)") }
    return Dictionary(
      uniqueKeysWithValues: words.dropFirst().map { word in
        let parts = word.split(separator: "=", maxSplits: 1).map(String.init)
        return (parts[0], parts.count > 1 ? parts[1] : "")
      })
  }
}
