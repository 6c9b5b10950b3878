import Core
import Foundation
import TestSupport
import XCTest

/// A night on a real Slurm (issue 28 item 7): a one-node cluster on 127.0.0.1 started by
/// `scripts/slurm-local` in a temporary folder runs a 4-task array of `imagecache prefetch`
/// against a loopback image server, then a merge job that waits for it with `afterok`.
///
/// Needs root and Debian's `slurm-wlm` and `munge`; without them the tests skip, saying so,
/// unless `IMAGECACHE_REQUIRE_ENGINES=1` (set by `.ci/run`, which installs them), where they fail.
final class SlurmTests: XCTestCase {
  static let images = 24
  static let missing = 4
  static let shards = 4
  static let tools = ["munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel"]

  var temporary: TemporaryDirectory!
  var server: LoopbackServer!
  /// The cluster's own folder, apart from the test's: munged wants every folder above its
  /// socket open to all (0755), which a test's temporary folder (0700) is not.
  var clusterFolder: TemporaryDirectory!
  var cluster: String { clusterFolder.path }

  static var script: String {
    DeployTests.repository.appendingPathComponent("scripts/slurm-local").path
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    try Self.requireEngines()
    temporary = try TemporaryDirectory()
    var routes: [String: Route] = [:]
    for index in 0..<Self.images {
      routes["/i/\(index).jpg"] = { _ in .image(Fixtures.jpeg, type: "image/jpeg") }
    }
    // /gone/K.jpg has no route: the server answers 404, as a CDN does for a deleted image.
    server = try LoopbackServer(routes: routes)
    clusterFolder = try TemporaryDirectory(prefix: "imagecache-slurm")
    let started = try Command.run("/bin/bash", [Self.script, "start", cluster])
    guard started.status == 0 else {
      _ = try? Command.run("/bin/bash", [Self.script, "stop", cluster])
      throw ClusterError("slurm-local start failed (\(started.status)):\n\(started.stderr)")
    }
  }

  override func tearDown() {
    // Every daemon the cluster started is stopped by its pid file, even after a failure.
    if let clusterFolder {
      let stopped = try? Command.run("/bin/bash", [Self.script, "stop", clusterFolder.path])
      if stopped?.status != 0 { print("slurm-local stop: \(stopped?.stderr ?? "did not run")") }
    }
    clusterFolder?.remove()
    server?.shutdown()
    temporary?.remove()
    super.tearDown()
  }

  /// How each array task runs imagecache: the one line that differs between the two tests.
  enum Worker {
    /// `--shards 4` takes K from SLURM_ARRAY_TASK_ID, `{shard}` names the report, and
    /// `--allow-url-failures` makes a night with 404s exit 0, so that `afterok` holds.
    case slurmAware
    /// What works without those: K computed by the script, exit 1 (URLs failed) let through.
    case explicitShard

    /// How the merge job ends after a night with 404s.
    var mergeState: String { self == .slurmAware ? "COMPLETED" : "FAILED" }
    var mergeExit: String { self == .slurmAware ? "0:0" : "1:0" }

    var command: String {
      let common =
        #""$IMAGECACHE" prefetch "$WORK/urls.txt" --cache "$WORK/cache" --retries 0"#
      switch self {
      case .slurmAware:
        return "exec \(common) --shards \(SlurmTests.shards) --allow-url-failures"
          + #" --report "$WORK/reports/shard-{shard}.json""#
      case .explicitShard:
        return "\(common) --shard \"$SLURM_ARRAY_TASK_ID/\(SlurmTests.shards)\""
          + #" --report "$WORK/reports/shard-$SLURM_ARRAY_TASK_ID.json""# + "\n"
          + "status=$?; [ $status -eq 1 ] && exit 0; exit $status"
      }
    }
  }

  func testAnArrayOfSlurmAwareShardsFetchesEveryURLOnceAndItsMergeRunsAfterANightWith404s()
    throws
  {
    let array = try night(.slurmAware)
    for index in 0..<Self.shards {
      let shard = try reportObject("reports/shard-\(index).json")
      let recorded = try XCTUnwrap(shard["shard"] as? [String: Any], "shard \(index)")
      XCTAssertEqual(recorded["index"] as? Int, index)
      XCTAssertEqual(recorded["count"] as? Int, Self.shards)
      XCTAssertEqual(shard["runID"].map { "\($0)" }, array, "the run is Slurm's array job")
    }

    // A merge that lacks a shard would undercount the night: it is refused, naming the shard.
    let partial = try ImageCacheBinary.run(
      ["report", "merge"]
        + [0, 1, 3].map { temporary.appending("cluster-work/reports/shard-\($0).json") }
        + ["--report", temporary.appending("partial.json")])
    XCTAssertNotEqual(partial.status, 0, partial.stdout)
    XCTAssertTrue(
      partial.stderr.contains("2/\(Self.shards)")
        || partial.stderr.range(of: #"shard 2\b"#, options: .regularExpression) != nil,
      partial.stderr)
  }

  func testAnArrayGivenExplicitShardsFetchesEveryURLOnceAndItsMergeRunsAfterANightWith404s()
    throws
  {
    _ = try night(.explicitShard)
  }

  /// Submits the array and the merge job, waits for both, and checks what every night must
  /// show: each URL fetched once by the whole array, the merge run after it, with the sum.
  /// Returns the array's job id.
  private func night(_ worker: Worker) throws -> String {
    let work = temporary.appending("cluster-work")
    try FileManager.default.createDirectory(
      atPath: work + "/reports", withIntermediateDirectories: true)
    let urls =
      (0..<Self.images).map { server.url("/i/\($0).jpg") }
      + (0..<Self.missing).map { server.url("/gone/\($0).jpg") }
    try urls.joined(separator: "\n").write(
      toFile: work + "/urls.txt", atomically: true, encoding: .utf8)
    try "#!/bin/bash\n\(worker.command)\n".write(
      toFile: work + "/worker.sh", atomically: true, encoding: .utf8)
    try """
    #!/bin/bash
    exec "$IMAGECACHE" report merge "$WORK"/reports/shard-*.json --report "$WORK/run.json"

    """.write(toFile: work + "/merge.sh", atomically: true, encoding: .utf8)

    let array = try submit(
      ["--array=0-\(Self.shards - 1)", "--output=\(work)/worker-%a.log", work + "/worker.sh"],
      work: work)
    let merge = try submit(
      [
        "--dependency=afterok:\(array)", "--kill-on-invalid-dep=yes",
        "--output=\(work)/merge.log", work + "/merge.sh",
      ], work: work)

    let workers = try waitForJob(array, tasks: Self.shards)
    guard workers.allSatisfy({ $0.state == "COMPLETED" }) else {
      throw ClusterError(
        "every task exits 0 on a night with 404s, not \(workers.map(\.state)):\n\(logs(work))")
    }
    let merged = try waitForJob(merge, tasks: 1)[0]
    // Shards that allowed failed URLs say so in their reports, and the merge passes the night
    // as they did; shards that did not make the merge exit 1 for the 404s.
    XCTAssertEqual(
      merged.state, worker.mergeState, "afterok let the merge run: \(logs(work))")
    XCTAssertEqual(merged.exitCode, worker.mergeExit, "merged: \(logs(work))")

    for index in 0..<Self.images {
      XCTAssertEqual(server.requestCount("/i/\(index).jpg"), 1, "fetched once by the array")
    }
    for index in 0..<Self.missing {
      XCTAssertEqual(server.requestCount("/gone/\(index).jpg"), 1)
    }
    let shards = try (0..<Self.shards).map {
      try XCTUnwrap(
        try RunReport.decode(try reportData("cluster-work/reports/shard-\($0).json")).prefetch)
    }
    XCTAssertEqual(shards.map(\.total).reduce(0, +), urls.count, "each URL in one shard")
    let run = try XCTUnwrap(try RunReport.decode(try reportData("cluster-work/run.json")).prefetch)
    XCTAssertEqual(run.total, urls.count)
    XCTAssertEqual(run.downloaded, Self.images)
    XCTAssertEqual(run.failed, Self.missing)
    XCTAssertEqual(Set(run.failures.map(\.url)).count, Self.missing)
    XCTAssertEqual(
      try DiskCache(location: CacheLocation(directory: work + "/cache")).usage().fileCount,
      Self.images)
    return array
  }

  private var slurmEnvironment: [String: String] {
    ProcessInfo.processInfo.environment.merging([
      "SLURM_CONF": cluster + "/slurm.conf",
      "PATH": (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin",
    ]) { $1 }
  }

  /// `sbatch --parsable ARGUMENTS`, with WORK and IMAGECACHE exported to the job; its id.
  private func submit(_ arguments: [String], work: String) throws -> String {
    let environment = slurmEnvironment.merging([
      "WORK": work, "IMAGECACHE": ImageCacheBinary.path,
    ]) { $1 }
    let result = try Command.run(
      try Self.tool("sbatch"), ["--parsable", "--chdir=\(work)"] + arguments,
      environment: environment)
    guard result.status == 0,
      let id = result.stdout.split(separator: ";").first?.trimmingCharacters(
        in: .whitespacesAndNewlines),
      !id.isEmpty
    else { throw ClusterError("sbatch \(arguments): \(result.status) \(result.stderr)") }
    return id
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
        try Self.tool("scontrol"), ["show", "job", id], environment: slurmEnvironment)
      last = shown.stdout + shown.stderr
      records = shown.stdout.components(separatedBy: "\n\n").compactMap { text in
        field("JobState", in: text).map {
          JobRecord(state: $0, exitCode: field("ExitCode", in: text) ?? "")
        }
      }
      return records.count == tasks && records.allSatisfy({ ended.contains($0.state) })
    }
    guard done else {
      throw ClusterError("job \(id) did not end within 60 s:\n\(last)\n\(logs(cluster))")
    }
    // scontrol lists an array's tasks in no fixed order; the states are compared as a set.
    return records.sorted { $0.state < $1.state }
  }

  private func field(_ name: String, in record: String) -> String? {
    guard let range = record.range(of: #"\b\#(name)=(\S+)"#, options: .regularExpression)
    else { return nil }
    return String(record[range].dropFirst(name.count + 1))
  }

  private func reportData(_ path: String) throws -> Data {
    try XCTUnwrap(FileManager.default.contents(atPath: temporary.appending(path)), path)
  }

  private func reportObject(_ path: String) throws -> [String: Any] {
    try XCTUnwrap(
      try JSONSerialization.jsonObject(with: try reportData("cluster-work/" + path))
        as? [String: Any])
  }

  /// The tail of every log in `folder` (the jobs' output, or the daemons'), for a failure.
  private func logs(_ folder: String) -> String {
    let files = (try? FileManager.default.subpathsOfDirectory(atPath: folder)) ?? []
    return files.filter { $0.hasSuffix(".log") }.sorted().map { name in
      let text = (try? String(contentsOfFile: folder + "/" + name, encoding: .utf8)) ?? ""
      return "--- \(name)\n" + text.split(separator: "\n").suffix(15).joined(separator: "\n")
    }.joined(separator: "\n")
  }

  /// The path of a Slurm or munge tool: on PATH or in the sbin folders Debian installs to.
  static func tool(_ name: String) throws -> String {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    for folder in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin"] {
      let candidate = folder + "/" + name
      if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw ClusterError("no \(name)")
  }

  /// Skips when this machine cannot run the cluster, or fails when CI says it must.
  static func requireEngines() throws {
    var reason: String?
    if getuid() != 0 {
      reason = "the one-node Slurm cluster runs its daemons as root; this is uid \(getuid())"
    } else {
      let absent = tools.filter { (try? tool($0)) == nil }
      if !absent.isEmpty {
        reason =
          "no \(absent.joined(separator: ", ")): "
          + "bash scripts/install-system-packages slurm-wlm munge"
      }
    }
    guard let reason else { return }
    try requireOrSkip("Slurm: \(reason)")
  }

  struct ClusterError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
  }
}
