import Core
import Foundation
import NIOCore
import Synchronization
import TestSupport
import XCTest

/// docs/fleets.md's Grid Engine recipe and its rerun of one shard, as written there (issue 40,
/// item 5), on a real Grid Engine: a one-node cell started by `scripts/sge-local` in a
/// temporary folder runs the recipe's `qsub -t 1-4` array of `imagecache run` and its merge
/// held by `-hold_jid`, against a loopback image server that counts what reaches it.
///
/// Needs root and Debian's `gridengine-master`, `gridengine-exec` and `gridengine-client`;
/// without them the tests skip, saying so, unless `IMAGECACHE_REQUIRE_ENGINES=1` (set by
/// `.ci/run`, which installs them), where they fail.
final class GridEngineTests: XCTestCase {
  static let images = 32
  static let missing = 8
  static let shards = 4
  /// The task the docs' rerun narrows the array to (`qsub -t 3`), and its shard.
  static let rerunTask = 3
  static let rerunShard = 2
  static let tools = ["sge_qmaster", "sge_execd", "qconf", "qsub", "qstat", "qacct", "qdel"]

  static let paths =
    (0..<images).map { "/i/\($0).jpg" } + (0..<missing).map { "/gone/\($0).jpg" }

  var temporary: TemporaryDirectory!
  var server: LoopbackServer!
  /// Paths whose answers the server holds back: one shard's, so that its task ends last, or is
  /// still running when the test kills it.
  let heldBack = HeldBack()
  /// The cell's SGE_ROOT, apart from the test's folder.
  var cellFolder: TemporaryDirectory!
  /// SGE_ROOT, SGE_CELL and the ports, as `sge-local start` printed them.
  var cell: [String: String] = [:]

  /// Where the recipe runs: its job file, manifest, cache, reports and the jobs' output.
  var work: String { temporary.appending("night") }

  static var script: String {
    DeployTests.repository.appendingPathComponent("scripts/sge-local").path
  }

  final class HeldBack: Sendable {
    private let held = Mutex<(paths: Set<String>, delay: TimeAmount)>(([], .zero))

    func hold(_ paths: [String], for delay: TimeAmount) {
      held.withLock { $0 = (Set(paths), delay) }
    }
    func release() { held.withLock { $0 = ([], .zero) } }
    /// How late the answer to `path` is, if it is held back.
    func delay(_ path: String) -> TimeAmount? {
      held.withLock { $0.paths.contains(path) ? $0.delay : nil }
    }
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    try JobEngine.require(
      "Grid Engine cell", tools: Self.tools,
      packages: "gridengine-master gridengine-exec gridengine-client")
    temporary = try TemporaryDirectory()
    var routes: [String: Route] = [:]
    let heldBack = heldBack
    for path in Self.paths {
      // /gone/K.jpg answers 404, as a CDN does for a deleted image.
      let answer =
        path.hasPrefix("/i/")
        ? ServerResponse.image(Fixtures.jpeg, type: "image/jpeg")
        : ServerResponse(status: 404, body: Data("gone".utf8))
      routes[path] = { request in
        var answer = answer
        answer.headDelay = heldBack.delay(request.path)
        return answer
      }
    }
    server = try LoopbackServer(routes: routes)
    cellFolder = try TemporaryDirectory(prefix: "imagecache-sge")
    let started = try Command.run("/bin/bash", [Self.script, "start", cellFolder.path])
    guard started.status == 0 else {
      _ = try? Command.run("/bin/bash", [Self.script, "stop", cellFolder.path])
      throw JobEngineError("sge-local start failed (\(started.status)):\n\(started.stderr)")
    }
    cell = try Self.exports(started.stdout)
    try prepareNight()
  }

  override func tearDown() {
    // Both daemons are stopped by their pid files, and the cell's jobs deleted, even after a
    // failure.
    if let cellFolder {
      let stopped = try? Command.run("/bin/bash", [Self.script, "stop", cellFolder.path])
      if stopped?.status != 0 { print("sge-local stop: \(stopped?.stderr ?? "did not run")") }
    }
    cellFolder?.remove()
    server?.shutdown()
    temporary?.remove()
    super.tearDown()
  }

  func testTheRecipesArrayFetchesEveryURLOnceAndItsHeldMergePassesANightWith404s() throws {
    // Shard 1's answers come late, so that its task ends well after the others (the queue has
    // slots for all, the merge too): a merge that did not wait for every task would miss its
    // report.
    heldBack.hold(paths(ofShard: 1), for: .seconds(2))
    let night = try submit(try recipe("## Recipes"))
    let tasks = try accounting(night.array, records: Self.shards)
    XCTAssertEqual(tasks.map(\.exitStatus), [0, 0, 0, 0], "a night with 404s: \(jobOutput())")
    let merge = try accounting(night.merge, records: 1)[0]
    XCTAssertEqual(merge.exitStatus, 0, "the merge passes the night: \(jobOutput())")
    XCTAssertGreaterThanOrEqual(
      merge.started, tasks.map(\.ended).max()!, "-hold_jid starts the merge after the array")

    for path in Self.paths {
      XCTAssertEqual(server.requestCount(path), 1, "\(path): fetched once by the array")
    }
    for index in 0..<Self.shards {
      let shard = try RunReport.load(path: work + "/reports/shard-\(index).json")
      XCTAssertEqual(shard.shard?.index, index)
      XCTAssertEqual(shard.runID, night.array, "the run ID is Grid Engine's JOB_ID")
    }
    try assertTheMergedReportIsTheWholeNight()
    XCTAssertEqual(
      try DiskCache(location: CacheLocation(directory: work + "/cache")).usage().fileCount,
      Self.images)
  }

  func testAShardKilledMidwayFailsTheMergeAndTheDocsRerunOfItAloneCompletesTheNight() throws {
    let killedPaths = paths(ofShard: Self.rerunShard)
    heldBack.hold(killedPaths, for: .seconds(60))

    let night = try submit(try recipe("## Recipes"))
    // The shard's task is fetching (its first request has arrived, held back): kill it as the
    // kernel's OOM killer or a lost node would, with no chance to write its report.
    waitUntil(timeout: 120, "task \(Self.rerunTask)'s first request", every: 0.1) {
      killedPaths.contains { server.requestCount($0) > 0 }
    }
    var task: pid_t?
    waitUntil(timeout: 30, "task \(Self.rerunTask)'s imagecache", every: 0.1) {
      task = Self.imagecacheProcess(job: night.array, task: Self.rerunTask)
      return task != nil
    }
    XCTAssertEqual(kill(try XCTUnwrap(task), SIGKILL), 0)

    let tasks = try accounting(night.array, records: Self.shards)
    XCTAssertEqual(
      tasks.filter { $0.exitStatus != 0 }.map(\.task), [Self.rerunTask], "\(tasks)")
    XCTAssertEqual(tasks.first { $0.task == Self.rerunTask }?.exitStatus, 128 + Int(SIGKILL))
    let failedMerge = try accounting(night.merge, records: 1)[0]
    XCTAssertNotEqual(failedMerge.exitStatus, 0, "the merge fails the night: \(jobOutput())")
    let failedMergeErrors = try jobErrors(night.merge)
    XCTAssertTrue(
      failedMergeErrors.range(of: #"shard \#(Self.rerunShard)\b"#, options: .regularExpression)
        != nil, "the merge names the killed shard: \(failedMergeErrors)")
    XCTAssertFalse(FileManager.default.fileExists(atPath: work + "/reports/run.json"))

    // The docs' rerun, with the first array's job ID, as the server answers at once again.
    heldBack.release()
    let before = Dictionary(uniqueKeysWithValues: Self.paths.map { ($0, server.requestCount($0)) })
    let rerun = try submit(try recipe("### Rerunning one shard"), gid: night.array)
    let rerunTask = try accounting(rerun.array, records: 1)[0]
    XCTAssertEqual(rerunTask.task, Self.rerunTask)
    XCTAssertEqual(rerunTask.exitStatus, 0, jobOutput())
    let merge = try accounting(rerun.merge, records: 1)[0]
    XCTAssertEqual(merge.exitStatus, 0, "the merge passes the night now: \(jobOutput())")

    // A quarter of the work, give or take the hash: the killed shard's URLs, each once.
    for path in Self.paths {
      XCTAssertEqual(
        server.requestCount(path) - before[path]!, killedPaths.contains(path) ? 1 : 0,
        "\(path) in the rerun")
    }
    let rerunReport = try RunReport.load(
      path: work + "/reports/shard-\(Self.rerunShard).json")
    XCTAssertEqual(rerunReport.runID, night.array, "the rerun keeps the night's run ID")
    XCTAssertEqual(rerunReport.prefetch?.total, killedPaths.count)
    XCTAssertNil(rerunReport.previousAttempts, "the killed attempt wrote no report to count")
    try assertTheMergedReportIsTheWholeNight()
  }

  /// The paths of shard `index`'s URLs (the shards depend on the server's port).
  private func paths(ofShard index: Int) -> [String] {
    let paths = Self.paths.filter {
      Shard.index(ofCacheKey: server.url($0), count: Self.shards) == index
    }
    XCTAssertFalse(paths.isEmpty, "shard \(index) has URLs")
    return paths
  }

  /// The merge's report: completed, of every shard, with every URL once and the 404s passed.
  private func assertTheMergedReportIsTheWholeNight(
    file: StaticString = #filePath, line: UInt = #line
  ) throws {
    let run = try RunReport.load(path: work + "/reports/run.json")
    XCTAssertEqual(run.status, .completed, file: file, line: line)
    XCTAssertEqual(run.allowURLFailures, true, file: file, line: line)
    XCTAssertEqual(run.mergedFrom?.count, Self.shards, file: file, line: line)
    XCTAssertEqual(run.prefetch?.total, Self.paths.count, file: file, line: line)
    XCTAssertEqual(run.prefetch?.downloaded, Self.images, file: file, line: line)
    XCTAssertEqual(run.prefetch?.failed, Self.missing, file: file, line: line)
  }

  /// The night's job file and manifest, and `.sge_request`: Grid Engine's default request
  /// for jobs submitted from the folder, which puts the built imagecache on the jobs' PATH (an
  /// installed one is on it already). The reports' folder is made by the first shard.
  private func prepareNight() throws {
    try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    try Self.paths.map { server.url($0) }.joined(separator: "\n").write(
      toFile: work + "/urls.txt", atomically: true, encoding: .utf8)
    try """
    name: nightly
    cache:
      directory: cache
    manifests:
      - urls.txt
    prefetch:
      retries: 0

    """.write(toFile: work + "/nightly.yaml", atomically: true, encoding: .utf8)
    let binaries = URL(fileURLWithPath: ImageCacheBinary.path).deletingLastPathComponent().path
    try "-v PATH=\(binaries):/usr/bin:/bin\n".write(
      toFile: work + "/.sge_request", atomically: true, encoding: .utf8)
  }

  /// The Grid Engine lines of docs/fleets.md's first block after `heading`: from the end of
  /// its `# Grid Engine` comment to the next comment or the end of the block.
  private func recipe(_ heading: String) throws -> String {
    let text = try String(
      contentsOf: DeployTests.repository.appendingPathComponent("docs/fleets.md"),
      encoding: .utf8)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    let section = try XCTUnwrap(lines.firstIndex { $0 == heading }, heading)
    let start = try XCTUnwrap(
      lines[section...].firstIndex { $0.hasPrefix("# Grid Engine") }, "Grid Engine, \(heading)")
    let body = lines[(start + 1)...].drop { $0.hasPrefix("#") }
      .prefix { !$0.hasPrefix("#") && !$0.hasPrefix("```") }
    let script = body.joined(separator: "\n")
    XCTAssertTrue(script.contains("qsub"), script)
    return script
  }

  /// Runs a recipe in the night's folder, as a user on the cell's submit host would (with
  /// `gid` set, for the rerun); the ids of the jobs it submitted: the array's, which its
  /// first line keeps in a variable (`gid=$(qsub -terse ...)`), and the merge's, which qsub
  /// prints (`Your job ID`).
  private func submit(_ recipe: String, gid: String? = nil) throws -> (array: String, merge: String)
  {
    let variable = try XCTUnwrap(recipe.firstMatch(of: /^(\w+)=\$\(qsub -terse/)?.output.1, recipe)
    var environment = cellEnvironment
    if let gid { environment["gid"] = gid }
    let result = try Command.run(
      "/bin/bash", ["-euo", "pipefail", "-c", recipe + "\necho \"array $\(variable)\""],
      environment: environment, directory: work)
    guard result.status == 0 else {
      throw JobEngineError("the recipe exited \(result.status):\n\(recipe)\n\(result.stderr)")
    }
    let array = try XCTUnwrap(result.stdout.firstMatch(of: /array (\d+)/)?.output.1, result.stdout)
    let merge = try XCTUnwrap(
      result.stdout.firstMatch(of: /Your job (\d+)/)?.output.1, result.stdout)
    return (String(array), String(merge))
  }

  struct TaskRecord: CustomStringConvertible {
    var task: Int
    var exitStatus: Int
    var started: Date
    var ended: Date
    var description: String { "task \(task): exit \(exitStatus)" }
  }

  /// Polls `qacct -j ID` until `records` of its tasks have ended (at most 120 s): each one's
  /// exit status and times, by task number.
  private func accounting(_ id: String, records: Int) throws -> [TaskRecord] {
    var last = ""
    var tasks: [TaskRecord] = []
    let done = try waitUntil(timeout: 120, "job \(id) to end", every: 0.5) {
      let shown = try Command.run(
        try JobEngine.tool("qacct"), ["-j", id], environment: cellEnvironment)
      last = shown.stdout + shown.stderr
      tasks = shown.stdout.components(separatedBy: "=====").compactMap(Self.taskRecord)
      return tasks.count == records
    }
    guard done else {
      throw JobEngineError("job \(id) did not end within 120 s:\n\(last)\n\(jobOutput())")
    }
    return tasks.sorted { $0.task < $1.task }
  }

  private static func taskRecord(_ text: String) -> TaskRecord? {
    var fields: [String: String] = [:]
    for line in text.split(separator: "\n") {
      let parts = line.split(separator: " ", maxSplits: 1)
      guard parts.count == 2 else { continue }
      // Padded: `exit_status  137                  (Killed)`, `start_time   Sun Nov  1 ...`.
      fields[String(parts[0])] = parts[1].split(separator: " ").joined(separator: " ")
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

  /// Every job's output in the night's folder, for a failure.
  private func jobOutput() -> String {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []
    return names.filter { $0.range(of: #"\.[eo]\d+"#, options: .regularExpression) != nil }
      .sorted().map { name in
        "--- \(name)\n" + ((try? String(contentsOfFile: work + "/" + name, encoding: .utf8)) ?? "")
      }.joined(separator: "\n")
  }

  /// The imagecache that task `task` of job `job` runs: the process of that name whose
  /// environment has Grid Engine's JOB_ID and SGE_TASK_ID for it.
  private static func imagecacheProcess(job: String, task: Int) -> pid_t? {
    let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return processes.compactMap { pid_t($0) }.first { pid in
      let name = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)
      guard name?.trimmingCharacters(in: .newlines) == "imagecache",
        let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ")
      else { return false }
      let variables = Set(environ.split(separator: 0).map { String(decoding: $0, as: UTF8.self) })
      return variables.isSuperset(of: ["JOB_ID=\(job)", "SGE_TASK_ID=\(task)"])
    }
  }

  private var cellEnvironment: [String: String] {
    ProcessInfo.processInfo.environment.merging(cell) { $1 }.merging([
      "PATH": (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin"
    ]) { $1 }
  }

  /// `export A=1 B=2` (what `sge-local start` prints to eval) as a dictionary.
  private static func exports(_ line: String) throws -> [String: String] {
    let words = line.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
    guard words.first == "export" else { throw JobEngineError("not an export line: \(line)") }
    return Dictionary(
      uniqueKeysWithValues: words.dropFirst().map { word in
        let parts = word.split(separator: "=", maxSplits: 1).map(String.init)
        return (parts[0], parts.count > 1 ? parts[1] : "")
      })
  }
}
