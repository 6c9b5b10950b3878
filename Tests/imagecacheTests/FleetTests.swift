import Core
import Foundation
import NIOCore
import TestSupport
import XCTest

/// Fleets that real engines can trust (issue 28): the exit policy for success-gated engines,
/// merges that know whether every shard is there, `{shard}` paths, and a fleet's connections
/// to one origin.
final class FleetTests: LoopbackTestCase {
  static let slowImages = 24

  override var routes: [String: Route] {
    var routes = Self.images
    for index in 0..<Self.slowImages {
      routes["/slow/\(index).jpg"] = { _ in
        var response = ServerResponse.image(Fixtures.jpeg, type: "image/jpeg")
        response.headDelay = .milliseconds(150)
        return response
      }
    }
    return routes
  }

  private var cache: String { temporary.appending("cache") }

  /// A manifest of `paths` on the loopback server.
  private func manifest(_ paths: [String], name: String = "urls.txt") throws -> String {
    let file = temporary.appending(name)
    try paths.map { server.url($0) }.joined(separator: "\n")
      .write(toFile: file, atomically: true, encoding: .utf8)
    return file
  }

  /// The value of the metrics file's sample whose line holds every one of `parts`.
  private func sample(_ file: String, _ parts: [String]) throws -> Double? {
    let text = try String(contentsOfFile: file, encoding: .utf8)
    let line = text.split(separator: "\n").first { line in
      !line.hasPrefix("#") && parts.allSatisfy { line.contains($0) }
    }
    return line.flatMap { Double($0.split(separator: " ").last ?? "") }
  }

  // MARK: Exit policy (item 1)

  func testAllowURLFailuresExitsZeroWhileTheReportAndMetricsKeepTheFailure() throws {
    let urls = try manifest(["/a.jpg", "/missing.jpg"])
    let report = temporary.appending("allowed.json")
    let metrics = temporary.appending("allowed.prom")
    let allowed = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", cache, "--retries", "0", "--allow-url-failures",
      "--report", report, "--metrics", metrics,
    ])
    XCTAssertEqual(allowed.status, 0, allowed.stderr)
    let written = try RunReport.load(path: report)
    XCTAssertEqual(written.status, .completed)
    XCTAssertEqual(written.prefetch?.failed, 1, "the failure stays in the report")
    XCTAssertEqual(written.prefetch?.failures.first?.httpStatus, 404)
    XCTAssertEqual(
      try sample(metrics, ["imagecache_last_run_urls", "outcome=\"failed\""]), 1,
      "and in the metrics, where the failure-ratio alert reads it")

    let strict = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", temporary.appending("strict"), "--retries", "0",
    ])
    XCTAssertEqual(strict.status, 1, "without the flag a failed URL is exit 1: \(strict.stderr)")

    // The job file's field does the same for `run`.
    let job = temporary.appending("nightly.yaml")
    try """
    cache: {directory: \(temporary.appending("job-cache"))}
    manifests: [\(urls)]
    prefetch: {retries: 0}
    allowURLFailures: true
    maintenance: []
    """.write(toFile: job, atomically: true, encoding: .utf8)
    let run = try ImageCacheBinary.run(["run", job, "--report", temporary.appending("job.json")])
    XCTAssertEqual(run.status, 0, run.stderr)
    XCTAssertEqual(try RunReport.load(path: temporary.appending("job.json")).prefetch?.failed, 1)
  }

  func testAllowURLFailuresNeverHidesAFatalError() throws {
    let urls = try manifest(["/a.jpg", "/missing.jpg"])
    let state = cache + "/default/.imagecache"
    try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
    let victim = temporary.appending("victim.db")
    try "precious".write(toFile: victim, atomically: true, encoding: .utf8)
    XCTAssertEqual(symlink(victim, state + "/state.sqlite-wal"), 0)
    let result = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", cache, "--retries", "0", "--allow-url-failures",
    ])
    XCTAssertEqual(result.status, 4, "a fatal error is still exit 4: \(result.stderr)")
  }

  /// Issue 40: an ordinary night (a 404) passes the merge's gate when the shards allowed failed
  /// URLs (their reports say so) or the merge is told to; without either it is exit 1; the
  /// merged report and its counts keep the failure either way.
  func testAMergeOfShardsThatAllowedFailedURLsExitsZeroAndSaysSo() throws {
    let urls = try manifest(["/a.jpg", "/b.png", "/c.gif", "/gone.jpg"])
    func shards(_ name: String, _ extra: [String]) throws -> [String] {
      try [0, 1].map { index in
        let report = temporary.appending("\(name)-\(index).json")
        let result = try ImageCacheBinary.run(
          [
            "prefetch", urls, "--cache", cache, "--shard", "\(index)/2", "--report", report,
            "--run-id", name, "--retries", "0",
          ] + extra)
        XCTAssertTrue([0, 1].contains(result.status), result.stderr)
        return report
      }
    }
    let allowed = try shards("allowed", ["--allow-url-failures"])
    XCTAssertEqual(try allowed.map { try RunReport.load(path: $0).allowURLFailures }, [true, true])
    let gated = try merge(allowed)
    XCTAssertEqual(gated.status, 0, gated.stderr)
    let whole = try RunReport.load(path: temporary.appending("merged.json"))
    XCTAssertEqual(whole.prefetch?.failed, 1)
    XCTAssertEqual(whole.allowURLFailures, true)

    let strict = try shards("strict", [])
    XCTAssertEqual(try strict.map { try RunReport.load(path: $0).allowURLFailures }, [nil, nil])
    XCTAssertEqual(try merge(strict).status, 1)
    let forgiven = try merge(strict, ["--allow-url-failures"])
    XCTAssertEqual(forgiven.status, 0, forgiven.stderr)
    XCTAssertEqual(try RunReport.load(path: temporary.appending("merged.json")).prefetch?.failed, 1)
  }

  /// Issue 40: the run ID of a Kubernetes Indexed Job's shard is the Job's UID (deploy/k8s sets
  /// `JOB_UID` from the pod's `controller-uid` label), new for every Job: a shard report left
  /// by last night's Job of the same name is another run's, and the merge refuses the pair
  /// naming both; without a UID, the Job's name serves as before.
  func testAKubernetesShardsRunIDIsItsJobsUIDSoLastNightsReportNeverMerges() throws {
    let urls = try manifest(["/a.jpg", "/b.png", "/c.gif"])
    func shard(_ index: Int, uid: String?) throws -> String {
      let report = temporary.appending("k8s-\(index)-\(uid ?? "none").json")
      var environment = ProcessInfo.processInfo.environment
      environment["JOB_COMPLETION_INDEX"] = "\(index)"
      environment["JOB_NAME"] = "imagecache-prefetch"
      environment["JOB_UID"] = uid
      let result = try ImageCacheBinary.run(
        ["prefetch", urls, "--cache", cache, "--shards", "2", "--report", report],
        environment: environment)
      XCTAssertEqual(result.status, 0, result.stderr)
      return report
    }
    let lastNight = try shard(0, uid: "5c1d-last")
    let tonight = try shard(1, uid: "9e2f-tonight")
    XCTAssertEqual(try RunReport.load(path: tonight).runID, "9e2f-tonight")
    let refused = try merge([lastNight, tonight])
    XCTAssertEqual(refused.status, 2, refused.stderr)
    XCTAssertTrue(
      refused.stderr.contains("5c1d-last") && refused.stderr.contains("9e2f-tonight"),
      refused.stderr)
    XCTAssertEqual(try RunReport.load(path: try shard(0, uid: nil)).runID, "imagecache-prefetch")
  }

  /// `--allow-url-failures` forgives URLs, not inputs: a manifest that cannot be read at all
  /// (here a manifest URL that answers 404, beside one that is read) still makes exit 1.
  func testAllowURLFailuresNeverHidesAManifestThatFailedAsAWhole() throws {
    let urls = try manifest(["/a.jpg"])
    let result = try ImageCacheBinary.run([
      "prefetch", urls, server.url("/urls-gone.txt"), "--cache", cache,
      "--allow-url-failures", "--report", temporary.appending("inputs.json"),
    ])
    XCTAssertEqual(result.status, 1, result.stderr)
    let report = try RunReport.load(path: temporary.appending("inputs.json"))
    XCTAssertEqual(report.prefetch?.downloaded, 1)
    XCTAssertEqual(report.prefetch?.inputsFailed, 1)
  }

  /// The merge exits as one run would: a night whose every URL the blacklist refused, or whose
  /// passes left files they meant to remove, is exit 1 in each report and in their merge.
  func testAMergeExitsOneWhenTheBlacklistRefusedEveryURLOrAFileWasNotRemoved() throws {
    func merged(_ reports: [Data], _ extra: [String] = []) throws -> Int32 {
      let paths = try reports.enumerated().map { index, data in
        let path = temporary.appending("night-\(index).json")
        try data.write(to: URL(fileURLWithPath: path))
        return path
      }
      let result = try merge(paths, extra)
      return result.status
    }
    let refused = try ReportFixture.json(counts: ["total": 2, "blacklisted": 2])
    XCTAssertEqual(try merged([refused, refused]), 1)
    XCTAssertEqual(try merged([refused, refused], ["--allow-url-failures"]), 0)
    let worked = try ReportFixture.json(counts: ["total": 2, "downloaded": 2])
    XCTAssertEqual(try merged([refused, worked]), 0, "the fleet tried URLs")
    let stuck = try ReportFixture.json(
      counts: ["total": 2, "downloaded": 2], maintenance: ["filesNotRemoved": 3])
    XCTAssertEqual(try merged([stuck, worked]), 1)
  }

  /// Every shard reads every line, but a line that is not a URL is one line of the night:
  /// shard 0 alone counts and reports it, so the merged report has it once, and each shard's
  /// total is its own share.
  func testABadLineIsCountedOnceByTheWholeFleet() throws {
    let urls = temporary.appending("bad-line.txt")
    try (["/a.jpg", "/b.png", "/c.gif"].map { server.url($0) } + ["not a url"])
      .joined(separator: "\n").write(toFile: urls, atomically: true, encoding: .utf8)
    let reports = try [0, 1].map { index in
      let report = temporary.appending("bad-\(index).json")
      let result = try ImageCacheBinary.run([
        "prefetch", urls, "--cache", cache, "--shard", "\(index)/2", "--report", report,
        "--run-id", "night-2",
      ])
      XCTAssertTrue([0, 1].contains(result.status), result.stderr)
      return report
    }
    let skipped = try reports.map { try RunReport.load(path: $0).prefetch?.skipped }
    XCTAssertEqual(skipped, [1, 0])
    _ = try merge(reports)
    let whole = try XCTUnwrap(try RunReport.load(path: temporary.appending("merged.json")).prefetch)
    XCTAssertEqual(whole.skipped, 1)
    XCTAssertEqual(whole.lineErrors.count, 1)
    XCTAssertEqual(whole.total, 4)
    XCTAssertEqual(whole.downloaded, 3)
  }

  // MARK: Complete merges (item 2)

  /// Runs shards `indices` of `count` of one manifest, each with `arguments`, and returns their
  /// report files.
  private func shards(
    _ indices: [Int], of count: Int, manifest urls: String, runID: String? = "night-1",
    name: String = "shard"
  ) throws -> [String] {
    try indices.map { index in
      let report = temporary.appending("\(name)-\(index).json")
      let result = try ImageCacheBinary.run(
        [
          "prefetch", urls, "--cache", cache, "--shard", "\(index)/\(count)", "--report", report,
        ] + (runID.map { ["--run-id", $0] } ?? []))
      XCTAssertEqual(result.status, 0, result.stderr)
      return report
    }
  }

  private func merge(_ reports: [String], _ extra: [String] = []) throws -> CommandResult {
    try ImageCacheBinary.run(
      ["report", "merge"] + reports + ["--report", temporary.appending("merged.json")] + extra)
  }

  func testAShardReportRecordsItsShardRunAndManifestEntries() throws {
    let urls = try manifest(["/a.jpg", "/b.png", "/c.gif"])
    let reports = try shards([0, 1], of: 2, manifest: urls)
    var own = 0
    for (index, path) in reports.enumerated() {
      let report = try RunReport.load(path: path)
      XCTAssertEqual(report.shard, RunReport.ShardIdentity(Shard(index: index, count: 2)!))
      XCTAssertEqual(report.runID, "night-1")
      XCTAssertEqual(report.manifestEntries?.total, 3, "every shard reads every entry")
      XCTAssertEqual(report.manifestEntries?.ownShard, report.prefetch?.total)
      own += report.manifestEntries?.ownShard ?? 0
      let data = try XCTUnwrap(FileManager.default.contents(atPath: path))
      XCTAssertEqual(
        SchemaValidator.validate(
          try JSONSerialization.jsonObject(with: data),
          against: try SchemaValidator.reportSchema()), [])
    }
    XCTAssertEqual(own, 3)
    let merged = try merge(reports)
    XCTAssertEqual(merged.status, 0, merged.stderr)
    let whole = try RunReport.load(path: temporary.appending("merged.json"))
    XCTAssertEqual(whole.status, .completed)
    XCTAssertEqual(whole.runID, "night-1")

    // Unsharded runs' reports have no shard, and merge as they always did.
    let plain = try [1, 2].map { index in
      let report = temporary.appending("plain-\(index).json")
      let result = try ImageCacheBinary.run([
        "prefetch", urls, "--cache", cache, "--report", report,
      ])
      XCTAssertEqual(result.status, 0, result.stderr)
      return report
    }
    XCTAssertNil(try RunReport.load(path: plain[0]).shard)
    XCTAssertNil(try RunReport.load(path: plain[0]).manifestEntries)
    XCTAssertEqual(try merge(plain).status, 0)
    XCTAssertEqual(try RunReport.load(path: temporary.appending("merged.json")).status, .completed)
  }

  /// One report failed (a full disk, exit 4): the merge of it with a completed one is failed
  /// and exits 4, as that run did, in either order; an interrupted one exits 130.
  func testAMergeWithAFailedReportIsFailedAndExitsAsThatRunDid() throws {
    func report(_ name: String, _ status: String) throws -> String {
      let path = temporary.appending(name)
      XCTAssertTrue(
        FileManager.default.createFile(
          atPath: path, contents: try ReportFixture.json(status: status)))
      return path
    }
    let completed = try report("completed.json", "completed")
    let failed = try report("failed.json", "failed")
    let interrupted = try report("interrupted.json", "interrupted")
    for (reports, status, exit) in [
      ([completed, failed], RunReport.Status.failed, Int32(4)), ([failed, completed], .failed, 4),
      ([completed, interrupted], .interrupted, 130), ([interrupted, failed], .failed, 4),
    ] {
      let result = try merge(reports)
      XCTAssertEqual(result.status, exit, "\(reports): \(result.stderr)")
      for report in reports where report != completed {
        let named = "did not complete: \(report): \(report == failed ? "failed" : "interrupted")"
        XCTAssertTrue(result.stderr.contains(named), "\(named) in \(result.stderr)")
      }
      XCTAssertEqual(
        try RunReport.load(path: temporary.appending("merged.json")).status, status, "\(reports)")
    }
  }

  func testAMergeWithAShardMissingIsRefusedNamingIt() throws {
    let urls = try manifest(["/a.jpg", "/b.png", "/c.gif"])
    let reports = try shards([0, 1, 3], of: 4, manifest: urls)
    let result = try merge(reports)
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains("missing shard 2 of 4"), result.stderr)
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: temporary.appending("merged.json")),
      "nothing is written")

    let partial = try merge(reports, ["--partial"])
    XCTAssertEqual(partial.status, 1, "incomplete is exit 1: \(partial.stderr)")
    let whole = try RunReport.load(path: temporary.appending("merged.json"))
    XCTAssertEqual(whole.status, .incomplete)
    XCTAssertTrue(whole.warnings.contains { $0.contains("missing shard 2 of 4") }, "\(whole)")
    let data = try XCTUnwrap(
      FileManager.default.contents(atPath: temporary.appending("merged.json")))
    XCTAssertEqual(
      SchemaValidator.validate(
        try JSONSerialization.jsonObject(with: data), against: try SchemaValidator.reportSchema()),
      [])
    let page = try ImageCacheBinary.run(["report", "html", temporary.appending("merged.json")])
    XCTAssertEqual(page.status, 0, page.stderr)
    XCTAssertTrue(
      page.stdout.contains("<b class=\"incomplete\">incomplete: a partial merge (shards missing"))
  }

  func testAMergeWithAShardRepeatedIsRefusedNamingIt() throws {
    let urls = try manifest(["/a.jpg", "/b.png", "/c.gif"])
    let reports = try shards([0, 1], of: 2, manifest: urls)
    let result = try merge(reports + [reports[1]])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains("shard 1 of 2 repeated"), result.stderr)
  }

  func testAMergeOfDifferentRunsIsRefusedNamingThem() throws {
    let urls = try manifest(["/a.jpg", "/b.png", "/c.gif"])
    let first = try shards([0], of: 2, manifest: urls, runID: "monday", name: "monday")
    let second = try shards([1], of: 2, manifest: urls, runID: "tuesday", name: "tuesday")
    let result = try merge(first + second)
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains("different runs"), result.stderr)
    XCTAssertTrue(result.stderr.contains("runID \"tuesday\" in \(second[0])"), result.stderr)
  }

  func testAMergeOfShardsThatReadDifferentManifestsIsRefused() throws {
    // One worker read an empty manifest (a volume not mounted yet): it did nothing, and
    // exited 0.
    let urls = try manifest(["/a.jpg", "/b.png", "/c.gif"])
    let empty = temporary.appending("empty.txt")
    try "".write(toFile: empty, atomically: true, encoding: .utf8)
    let full = try shards([0], of: 2, manifest: urls)
    let hollow = try shards([1], of: 2, manifest: empty, name: "hollow")
    let result = try merge(full + hollow)
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(
      result.stderr.contains("different numbers of manifest entries: 3 in \(full[0]); 0 in "),
      result.stderr)
  }

  // MARK: {shard} (item 3)

  func testShardPlaceholdersGiveEveryWorkerItsOwnFiles() throws {
    let urls = try manifest(["/a.jpg", "/b.png", "/c.gif"])
    for index in 0..<2 {
      let result = try ImageCacheBinary.run([
        "prefetch", urls, "--cache", cache, "--shard", "\(index)/2",
        "--report", temporary.appending("r-{shard}-of-{shards}.json"),
        "--metrics", temporary.appending("m-{shard}.prom"),
      ])
      XCTAssertEqual(result.status, 0, result.stderr)
    }
    for index in 0..<2 {
      let report = try RunReport.load(path: temporary.appending("r-\(index)-of-2.json"))
      XCTAssertEqual(report.shard?.index, index)
      XCTAssertTrue(FileManager.default.fileExists(atPath: temporary.appending("m-\(index).prom")))
    }
    // Unsharded: `all` of `1`. And in a job file's own paths.
    let job = temporary.appending("nightly.yaml")
    try """
    cache: {directory: \(cache)}
    manifests: [\(urls)]
    maintenance: []
    report: reports/{job}-{shard}-of-{shards}.json
    metrics: reports/{job}-{shard}.prom
    """.write(toFile: job, atomically: true, encoding: .utf8)
    let whole = try ImageCacheBinary.run(["run", job])
    XCTAssertEqual(whole.status, 0, whole.stderr)
    XCTAssertNoThrow(try RunReport.load(path: temporary.appending("reports/nightly-all-of-1.json")))
    let sharded = try ImageCacheBinary.run(["run", job, "--shard", "1/2"])
    XCTAssertEqual(sharded.status, 0, sharded.stderr)
    XCTAssertEqual(
      try RunReport.load(path: temporary.appending("reports/nightly-1-of-2.json")).shard?.count, 2)
    XCTAssertTrue(
      FileManager.default.fileExists(atPath: temporary.appending("reports/nightly-1.prom")))
    // A rerun overwrites its shard's report: {shard} is not {time}.
    XCTAssertEqual(try ImageCacheBinary.run(["run", job, "--shard", "1/2"]).status, 0)
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: temporary.appending("reports/nightly-1-of-2-2.json")))
  }

  // MARK: Slurm (item 4)

  func testSlurmArrayTasksAreShardsAndTheirRunIDIsTheArrayJob() throws {
    let urls = try manifest(["/a.jpg", "/b.png", "/c.gif"])
    var base = ProcessInfo.processInfo.environment
    base["JOB_COMPLETION_INDEX"] = nil
    // sbatch --array=1-4:1
    var reports: [String] = []
    for task in 1...4 {
      var environment = base
      environment.merge([
        "SLURM_ARRAY_JOB_ID": "8812", "SLURM_ARRAY_TASK_ID": "\(task)",
        "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "4", "SLURM_ARRAY_TASK_STEP": "1",
        "SLURM_ARRAY_TASK_COUNT": "4",
      ]) { $1 }
      let report = temporary.appending("slurm-\(task).json")
      let result = try ImageCacheBinary.run(
        [
          "prefetch", urls, "--cache", cache, "--shards", "auto", "--report",
          temporary.appending("slurm-{shard}.json"),
        ], environment: environment)
      XCTAssertEqual(result.status, 0, result.stderr)
      reports.append(temporary.appending("slurm-\(task - 1).json"))
      _ = report
    }
    for (index, path) in reports.enumerated() {
      let report = try RunReport.load(path: path)
      XCTAssertEqual(report.shard, RunReport.ShardIdentity(Shard(index: index, count: 4)!))
      XCTAssertEqual(report.runID, "8812")
    }
    XCTAssertEqual(try merge(reports).status, 0)

    var inconsistent = base
    inconsistent.merge([
      "SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "5",
      "SLURM_ARRAY_TASK_STEP": "1", "SLURM_ARRAY_TASK_COUNT": "3",
    ]) { $1 }
    let refused = try ImageCacheBinary.run(
      ["prefetch", urls, "--cache", cache, "--shards", "auto"], environment: inconsistent)
    XCTAssertEqual(refused.status, 2, refused.stderr)
    XCTAssertTrue(refused.stderr.contains("SLURM_ARRAY_TASK_COUNT"), refused.stderr)
  }

  // MARK: Origins across a fleet (item 5)

  func testTheFleetPerHostLimitBoundsAllShardsTogether() throws {
    let urls = try manifest((0..<Self.slowImages).map { "/slow/\($0).jpg" })
    let workers = try (0..<2).map { index in
      try ImageCacheBinary.start([
        "prefetch", urls, "--cache", cache, "--shard", "\(index)/2",
        "--fleet-per-host-concurrency", "2",
      ])
    }
    for (process, stdout, stderr) in workers {
      let result = ImageCacheBinary.finish(process, stdout, stderr)
      XCTAssertEqual(result.status, 0, result.stderr)
    }
    XCTAssertLessThanOrEqual(server.peakConcurrency, 2, "2 for the fleet: 1 for each shard")
    XCTAssertEqual(
      (0..<Self.slowImages).reduce(0) { $0 + server.requestCount("/slow/\($1).jpg") },
      Self.slowImages)
  }

  // MARK: Reruns count every attempt (issue 40, items 4 and 5)

  func testARerunShardCountsItsKilledAttemptInTheNightsTraffic() throws {
    // Eight slow URLs of shard 1 and four of shard 0, whatever the server's port.
    let candidates = (0..<400).map { "/slow/0.jpg?v=\($0)" }
    let own = { (index: Int) in
      candidates.filter { Shard(index: index, count: 2)!.owns(cacheKey: self.server.url($0)) }
    }
    let urls = try manifest(Array(own(1).prefix(8) + own(0).prefix(4)))
    let reports = temporary.appending("reports")
    let shard = { (index: Int) in
      [
        "prefetch", urls, "--cache", self.cache, "--shard", "\(index)/2", "--run-id", "night-1",
        "--concurrency", "1", "--retries", "0", "--report", reports + "/shard-{shard}.json",
      ]
    }
    let stored = { () -> Int in
      let files = try? FileManager.default.contentsOfDirectory(atPath: self.cache + "/default")
      return (files ?? []).filter { !$0.hasPrefix(".") }.count
    }

    // Shard 1's first attempt is stopped midway, as a drained node stops a pod.
    let (process, stdout, stderr) = try ImageCacheBinary.start(shard(1))
    waitUntil(timeout: 20, "two images of shard 1 stored") { stored() >= 2 }
    kill(process.processIdentifier, SIGTERM)
    let killed = ImageCacheBinary.finish(process, stdout, stderr)
    XCTAssertEqual(killed.status, 143, killed.stderr)
    let first = try RunReport.load(path: reports + "/shard-1.json")
    XCTAssertEqual(first.status, .interrupted)
    let firstDownloads = try XCTUnwrap(first.prefetch?.downloaded)
    XCTAssertLessThan(firstDownloads, 8, "stopped midway")

    // The rerun, with the same run ID and report path, and the other shard.
    let rerun = try ImageCacheBinary.run(shard(1))
    XCTAssertEqual(rerun.status, 0, rerun.stderr)
    let second = try RunReport.load(path: reports + "/shard-1.json")
    XCTAssertEqual(second.previousAttempts, [RunReport.Attempt(of: first)])
    XCTAssertEqual(
      firstDownloads + (second.prefetch?.downloaded ?? 0), 8, "each URL downloaded once")
    let other = try ImageCacheBinary.run(shard(0))
    XCTAssertEqual(other.status, 0, other.stderr)
    let zero = try RunReport.load(path: reports + "/shard-0.json")
    XCTAssertNil(zero.previousAttempts, "a first attempt has none")

    let merged = reports + "/run.json"
    let merge = try ImageCacheBinary.run([
      "report", "merge", reports + "/shard-0.json", reports + "/shard-1.json", "--report", merged,
    ])
    XCTAssertEqual(merge.status, 0, merge.stderr)
    XCTAssertTrue(
      merge.stderr.contains("rerun: shard 1 of 2 (\(reports)/shard-1.json): 2 attempts"),
      merge.stderr)
    let night = try RunReport.load(path: merged)
    XCTAssertEqual(night.mergedFrom?.map(\.attempts), [1, 2])
    XCTAssertEqual(night.night?.attempts, 3)
    XCTAssertEqual(night.night?.downloaded, 12, "every image fetched this night, once")
    XCTAssertEqual(
      night.night?.bytesDownloaded,
      [zero, first, second].reduce(0) { $0 + ($1.prefetch?.bytesDownloaded ?? 0) },
      "both attempts' bytes")
    XCTAssertEqual(
      night.prefetch?.downloaded,
      (zero.prefetch?.downloaded ?? 0) + (second.prefetch?.downloaded ?? 0),
      "the URLs' outcomes are the last attempt's")
    XCTAssertEqual(night.prefetch?.diskHits, firstDownloads, "the rerun found the first's images")
    for file in [reports + "/shard-1.json", merged] {
      let data = try XCTUnwrap(FileManager.default.contents(atPath: file))
      XCTAssertEqual(
        SchemaValidator.validate(
          try JSONSerialization.jsonObject(with: data), against: try SchemaValidator.reportSchema()),
        [], file)
    }
  }

  func testARerunOfAnotherRunStartsItsOwnCount() throws {
    let urls = try manifest(["/a.jpg"])
    let report = temporary.appending("shard.json")
    for run in ["night-1", "night-2"] {
      let result = try ImageCacheBinary.run([
        "prefetch", urls, "--cache", cache, "--shard", "0/1", "--run-id", run, "--report", report,
      ])
      XCTAssertEqual(result.status, 0, result.stderr)
    }
    let written = try RunReport.load(path: report)
    XCTAssertEqual(written.runID, "night-2")
    XCTAssertNil(written.previousAttempts, "last night's report is not this night's attempt")
  }

  func testAShardsProgressCountsItsOwnShare() throws {
    // Three URLs of each shard, whatever the server's port.
    let shard = Shard(index: 0, count: 2)!
    let candidates = (0..<200).map { "/a.jpg?v=\($0)" }
    let own = candidates.filter { shard.owns(cacheKey: server.url($0)) }.prefix(3)
    let others = candidates.filter { !shard.owns(cacheKey: server.url($0)) }.prefix(3)
    let urls = try manifest(Array(own + others))
    let result = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", cache, "--shard", "0/2",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertTrue(
      result.stderr.contains("3/3 done"),
      "the total is the shard's share, not the manifest's 6: \(result.stderr)")
  }
}
