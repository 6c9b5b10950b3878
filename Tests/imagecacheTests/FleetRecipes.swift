import Core
import Foundation
import Synchronization
import TestSupport
import XCTest

/// docs/fleets.md's engine recipes as their tests take them (issue 40, item 5): the page's own
/// lines, run as written but for the folders a test moves into its temporary folder.
enum FleetDocs {
  static var page: String {
    get throws {
      try String(
        contentsOf: DeployTests.repository.appendingPathComponent("docs/fleets.md"),
        encoding: .utf8)
    }
  }

  /// An engine's commands in the first block after `heading` that has them: from its comment
  /// (`# Slurm`, `# GNU parallel`), whose lines are skipped, up to a blank line, another
  /// comment or the end of the block.
  static func commands(_ engine: String, after heading: String) throws -> String {
    let lines = try page.split(separator: "\n", omittingEmptySubsequences: false)
    let section = try XCTUnwrap(lines.firstIndex { $0 == heading }, "no \(heading)")
    let start = try XCTUnwrap(
      lines[section...].firstIndex { $0.hasPrefix("# \(engine)") }, "no \(engine) after \(heading)")
    let body = lines[start...].drop { $0.hasPrefix("#") }
      .prefix { !$0.isEmpty && !$0.hasPrefix("#") && !$0.hasPrefix("```") }
    return body.joined(separator: "\n") + "\n"
  }

  /// Skips the test when `program` is not installed, or fails it under
  /// `IMAGECACHE_REQUIRE_ENGINES=1` (`.ci/run`, which installs every engine).
  static func require(_ program: String, package: String) throws {
    guard !FileManager.default.isExecutableFile(atPath: program) else { return }
    let missing = "\(program) is not installed (Debian: \(package))"
    try requireOrSkip(missing)
  }

  /// The path of an engine's tool: on PATH or in the sbin folders Debian installs daemons to.
  static func tool(_ name: String) throws -> String {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    for folder in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin"] {
      let candidate = folder + "/" + name
      if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw FleetError("no \(name)")
  }

  /// ``require(_:package:)`` for an engine whose daemons a test starts (`cluster`: a one-node
  /// Slurm cluster, a Grid Engine cell): they run as root, and need every one of `tools`,
  /// which the Debian `packages` install.
  static func requireCluster(_ cluster: String, tools: [String], packages: String) throws {
    var reason: String?
    if getuid() != 0 {
      reason = "the one-node \(cluster) runs its daemons as root; this is uid \(getuid())"
    } else {
      let absent = tools.filter { (try? tool($0)) == nil }
      if !absent.isEmpty {
        reason =
          "no \(absent.joined(separator: ", ")): bash scripts/install-system-packages \(packages)"
      }
    }
    guard let reason else { return }
    try requireOrSkip("\(cluster): \(reason)")
  }

  /// The fenced block whose first line starts with `firstLine`, without its fences.
  static func block(startingWith firstLine: String) throws -> String {
    let lines = try page.split(separator: "\n", omittingEmptySubsequences: false)
    let start = try XCTUnwrap(
      lines.indices.first {
        $0 > 0 && lines[$0].hasPrefix(firstLine) && lines[$0 - 1].hasPrefix("```")
      },
      "no block starting with \(firstLine)")
    return lines[start...].prefix { !$0.hasPrefix("```") }.joined(separator: "\n") + "\n"
  }
}

/// One night of four shards for any engine's recipe, ordinary (some 404s) or broken (shard 2
/// killed midway, then rerun as the page says): its URLs, how the loopback server answers them,
/// and what the night must show. Images are at `/i/K.jpg`, and 404s at `/gone/K.jpg`. A broken
/// night has one image of shard 2, at `/held/K.jpg`, that the server holds unanswered until
/// ``release()``: the shard is still running, its other images stored, when the test kills it,
/// and its rerun finds it answered.
final class FleetNight: Sendable {
  static let shards = 4
  /// The shard a broken night loses: the page's example (task 3 of `--array=1-4`, job 3 of
  /// GNU parallel).
  static let victim = 2
  static let images = 24
  static let missing = 4

  private let held = Atomic(true)

  var routes: [String: Route] {
    var routes: [String: Route] = [:]
    for index in 0..<64 {
      routes["/i/\(index).jpg"] = { _ in .image(Fixtures.jpeg, type: "image/jpeg") }
      routes["/held/\(index).jpg"] = { [self] _ in
        var response = ServerResponse.image(Fixtures.jpeg, type: "image/jpeg")
        // Longer than any test: a timed-out attempt's retry is held too.
        if held.load(ordering: .sequentiallyConsistent) { response.headDelay = .seconds(600) }
        return response
      }
    }
    return routes
  }

  /// The held image is answered from now on.
  func release() { held.store(false, ordering: .sequentiallyConsistent) }

  static func shard(of url: String) -> Int {
    Shard.index(ofCacheKey: url, count: shards)
  }

  /// The night's manifest on `server`: `images` images (one of them the victim's held image
  /// when `broken`) and `missing` 404s.
  static func urls(on server: LoopbackServer, broken: Bool) -> [String] {
    var images = (0..<images).map { server.url("/i/\($0).jpg") }
    if broken {
      let held = (0..<64).lazy.map { server.url("/held/\($0).jpg") }.first {
        shard(of: $0) == victim
      }!
      images[images.count - 1] = held
    }
    return images + (0..<missing).map { server.url("/gone/\($0).jpg") }
  }

  /// The night's manifest `urls.txt` and the recipes' job `nightly.yaml` on it, caching into
  /// `cache`, in `folder`; the URLs. The job's long timeout and deadline let a held image wait
  /// for the kill however loaded the machine.
  static func writeJob(
    in folder: String, server: LoopbackServer, broken: Bool, cache: String = "cache"
  ) throws -> [String] {
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let urls = urls(on: server, broken: broken)
    try urls.joined(separator: "\n").write(
      toFile: folder + "/urls.txt", atomically: true, encoding: .utf8)
    try """
    name: nightly
    cache: {directory: \(cache)}
    manifests: [urls.txt]
    prefetch: {timeout: 300s, deadline: 300s}
    """.write(toFile: folder + "/nightly.yaml", atomically: true, encoding: .utf8)
    return urls
  }

  /// The files of shard `shard` stored in the cache under `folder` (SD's names, whose first
  /// hex digits give the shard).
  static func storedFiles(of shard: Int, under folder: String) -> Int {
    let owner = Shard(index: shard, count: shards)!
    let names = (try? FileManager.default.subpathsOfDirectory(atPath: folder)) ?? []
    return names.filter {
      owner.owns(fileName: URL(fileURLWithPath: $0).lastPathComponent) == true
    }.count
  }

  /// The shards a broken night does not lose.
  static let survivors = (0..<shards).filter { $0 != victim }

  /// Waits until the victim shard is midway (its held image asked for, all its other images
  /// stored under `cache`), then sends its imagecache `signal` (SIGKILL, as a lost node or the
  /// OOM killer ends it): the process holding the shard's lock, `.imagecache/lock.shard-2-of-4`,
  /// whichever engine started it.
  static func signalVictimMidway(
    _ signal: Int32 = SIGKILL, server: LoopbackServer, urls: [String], cache: String,
    file: StaticString = #filePath, line: UInt = #line
  ) throws {
    let own = urls.filter { shard(of: $0) == victim && $0.contains("/i/") }.count
    let heldPath = try XCTUnwrap(urls.first { $0.contains("/held/") }).replacing(
      server.baseURL, with: "")
    let midway = waitUntil(
      timeout: 120, "shard \(victim) to ask for \(heldPath) and store its \(own) other images",
      every: 0.1, file: file, line: line
    ) {
      server.requestCount(heldPath) > 0 && storedFiles(of: victim, under: cache) == own
    }
    guard midway else { throw FleetError("shard \(victim) never got midway") }
    let lock = "/.imagecache/lock.shard-\(victim)-of-\(shards)"
    let holders = lockHolders(suffix: lock, under: cache)
    guard !holders.isEmpty else { throw FleetError("no process holds \(cache)/*\(lock)") }
    for pid in holders { kill(pid, signal) }
  }

  /// The processes with a file open under `folder` whose path ends in `suffix`, from /proc.
  private static func lockHolders(suffix: String, under folder: String) -> [pid_t] {
    let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return processes.compactMap { pid_t($0) }.filter { pid in
      let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
      return fds.contains { fd in
        guard
          let target = try? FileManager.default.destinationOfSymbolicLink(
            atPath: "/proc/\(pid)/fd/\(fd)")
        else { return false }
        return target.hasPrefix(folder) && target.hasSuffix(suffix)
      }
    }
  }

  /// What an engine array's ordinary night leaves in `reports` (the recipes' folder): a report
  /// per shard, each of its own shard and of the run `runID` (`engine`'s array job), and a
  /// merged `run.json` as ``checkOrdinaryNight(_:server:urls:file:line:)`` wants it.
  static func checkArrayNight(
    in reports: String, runID: String, engine: String, server: LoopbackServer, urls: [String],
    file: StaticString = #filePath, line: UInt = #line
  ) throws {
    for index in 0..<shards {
      let shard = try RunReport.load(path: reports + "/shard-\(index).json")
      XCTAssertEqual(shard.shard?.index, index, file: file, line: line)
      XCTAssertEqual(shard.shard?.count, shards, file: file, line: line)
      XCTAssertEqual(
        shard.runID, runID, "the run is \(engine)'s array job", file: file, line: line)
    }
    checkOrdinaryNight(
      try RunReport.load(path: reports + "/run.json"), server: server, urls: urls, file: file,
      line: line)
  }

  /// What an ordinary night's merged report and server show: every URL fetched once by the
  /// fleet, the 404s in the report, the gate passed (`completed`, failed URLs allowed).
  static func checkOrdinaryNight(
    _ merged: RunReport, server: LoopbackServer, urls: [String], file: StaticString = #filePath,
    line: UInt = #line
  ) {
    for url in urls {
      XCTAssertEqual(
        server.requestCount(url.replacing(server.baseURL, with: "")), 1,
        "\(url): fetched once by the fleet", file: file, line: line)
    }
    checkMerged(merged, urls: urls, file: file, line: line)
    XCTAssertEqual(merged.prefetch?.downloaded, images, file: file, line: line)
  }

  /// What a merged report of the whole night says, whatever attempts made it.
  static func checkMerged(
    _ merged: RunReport, urls: [String], file: StaticString = #filePath, line: UInt = #line
  ) {
    XCTAssertEqual(merged.status, .completed, file: file, line: line)
    XCTAssertEqual(merged.mergedFrom?.count, shards, file: file, line: line)
    XCTAssertEqual(
      Set((merged.mergedFrom ?? []).map(\.status)), [.completed], file: file, line: line)
    XCTAssertEqual(merged.allowURLFailures, true, file: file, line: line)
    XCTAssertEqual(merged.prefetch?.total, urls.count, file: file, line: line)
    XCTAssertEqual(
      (merged.prefetch?.downloaded ?? 0) + (merged.prefetch?.diskHits ?? 0), images,
      "each image downloaded by the night or found stored by a rerun", file: file, line: line)
    XCTAssertEqual(merged.prefetch?.failed, missing, file: file, line: line)
    XCTAssertEqual(
      Set(merged.prefetch?.failures.map(\.httpStatus) ?? []), [404], file: file, line: line)
  }

  /// What the rerun of the killed shard shows: it asked the server only for the victim's URLs
  /// (`requests`, those the rerun made), a quarter of the night, among them the held
  /// image, once; its report is the victim's, of the night's run, with the images the killed
  /// attempt stored as hits; and the night's merge is whole.
  static func checkRerun(
    requests: [ServerRequest], report: RunReport, merged: RunReport, server: LoopbackServer,
    urls: [String], file: StaticString = #filePath, line: UInt = #line
  ) {
    let own = urls.filter { shard(of: $0) == victim }
    let asked = requests.map { server.url($0.path) }
    XCTAssertEqual(
      asked.filter { shard(of: $0) != victim }, [], "the rerun asks for its shard's URLs only",
      file: file, line: line)
    XCTAssertEqual(
      asked.filter { $0.contains("/held/") }.count, 1, "the held image, once", file: file,
      line: line)
    XCTAssertEqual(report.shard?.index, victim, file: file, line: line)
    XCTAssertEqual(
      report.prefetch?.total, own.count, "a quarter of the night", file: file, line: line)
    XCTAssertEqual(report.prefetch?.otherShards, urls.count - own.count, file: file, line: line)
    XCTAssertEqual(report.prefetch?.downloaded, 1, "only the held image", file: file, line: line)
    XCTAssertEqual(
      report.prefetch?.diskHits, own.filter { $0.contains("/i/") }.count,
      "what the killed attempt stored", file: file, line: line)
    XCTAssertEqual(report.runID, merged.runID, "the night's run ID", file: file, line: line)
    checkMerged(merged, urls: urls, file: file, line: line)
  }
}

/// A test of one engine's recipe on docs/fleets.md run on this machine (GNU parallel,
/// Snakemake): the engine runs the page's lines in the temporary folder, against a loopback
/// server that serves a ``FleetNight``.
class FleetRecipeTestCase: LoopbackTestCase {
  let fleet = FleetNight()

  override var routes: [String: Route] { fleet.routes }

  /// The engine's program and Debian package, which a subclass names: a machine without it
  /// skips the test, unless `IMAGECACHE_REQUIRE_ENGINES=1` (`.ci/run`, which installs it).
  var engine: (program: String, package: String) { ("/bin/false", "") }

  override func setUpWithError() throws {
    try FleetDocs.require(engine.program, package: engine.package)
    try super.setUpWithError()
  }

  /// Writes the night's manifest, `urls.txt`; its URLs.
  func writeManifest(broken: Bool) throws -> [String] {
    let urls = FleetNight.urls(on: server, broken: broken)
    try urls.joined(separator: "\n").write(
      toFile: temporary.appending("urls.txt"), atomically: true, encoding: .utf8)
    return urls
  }

  /// Starts the page's `name` lines after `heading` (``FleetDocs/commands(_:after:)``) in the
  /// temporary folder, with the binary on PATH, `replacements` made in them (the page's
  /// folders) and `variables` set (a rerun's).
  func start(
    _ name: String, after heading: String, replacing replacements: [String: String] = [:],
    variables: [String: String] = [:]
  ) throws -> BackgroundCommand {
    let script = try replacements.reduce(FleetDocs.commands(name, after: heading)) {
      $0.replacingOccurrences(of: $1.key, with: $1.value)
    }
    return try start(script, variables: variables)
  }

  /// Starts `script` with bash in the temporary folder, with the binary on PATH and
  /// `variables` set.
  func start(_ script: String, variables: [String: String] = [:]) throws -> BackgroundCommand {
    let binaries = URL(fileURLWithPath: ImageCacheBinary.path).deletingLastPathComponent().path
    return try BackgroundCommand(
      "/bin/bash", ["-euo", "pipefail", "-c", script],
      environment: ["PATH": "\(binaries):/usr/bin:/bin", "HOME": temporary.path]
        .merging(variables) { $1 },
      directory: temporary.path)
  }
}

/// A command started in the background, its output read as it comes (so that a full pipe
/// never blocks it) until it ends.
struct BackgroundCommand {
  let process: Process
  let stdout: PipeReader
  let stderr: PipeReader

  init(
    _ executable: String, _ arguments: [String], environment: [String: String], directory: String
  )
    throws
  {
    let (process, stdout, stderr) = try Command.start(
      executable, arguments, environment: environment, directory: directory)
    self.process = process
    self.stdout = PipeReader(stdout)
    self.stderr = PipeReader(stderr)
  }

  func finish() -> CommandResult {
    let output = stdout.readToEnd()
    let errors = stderr.readToEnd()
    process.waitUntilExit()
    return CommandResult(
      status: process.terminationStatus, stdout: String(decoding: output, as: UTF8.self),
      stderr: String(decoding: errors, as: UTF8.self))
  }
}

/// A one-node engine of our own (`scripts/slurm-local`, `scripts/sge-local`) in a scratch
/// folder apart from the test's (munged wants every folder above its socket open to all, which
/// a test's temporary folder is not), started by `init` and stopped by ``stop()``, which a
/// test's tearDown calls even after a failure.
final class LocalCluster {
  let folder: TemporaryDirectory
  /// What the script's `start` printed: the line to `eval` (the engine's variables).
  let exports: String
  private let script: String

  init(script name: String, prefix: String) throws {
    script = DeployTests.repository.appendingPathComponent("scripts/" + name).path
    folder = try TemporaryDirectory(prefix: prefix)
    let started = try Command.run("/bin/bash", [script, "start", folder.path])
    guard started.status == 0 else {
      _ = try? Command.run("/bin/bash", [script, "stop", folder.path])
      folder.remove()
      throw FleetError("\(name) start failed (\(started.status)):\n\(started.stderr)")
    }
    exports = started.stdout
  }

  var path: String { folder.path }

  /// Stops every daemon the script started, by its pid file (jobs still running cancelled
  /// first), and removes the folder.
  func stop() {
    let stopped = try? Command.run("/bin/bash", [script, "stop", folder.path])
    if stopped?.status != 0 {
      print("\((script as NSString).lastPathComponent) stop: \(stopped?.stderr ?? "did not run")")
    }
    folder.remove()
  }
}

struct FleetError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}
