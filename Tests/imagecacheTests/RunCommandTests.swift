import Core
import Foundation
import NIOCore
import Runner
import TestSupport
import XCTest

/// End-to-end: `imagecache run JOB` against a loopback server, as cron would run it.
final class RunCommandTests: LoopbackTestCase {
  override var routes: [String: Route] {
    Self.images.merging([
      "/slow.jpg": { _ in ServerResponse(body: Fixtures.jpeg, headDelay: .seconds(5)) },
      "/held.jpg": { _ in ServerResponse(body: Fixtures.jpeg, headDelay: .milliseconds(600)) },
    ]) { $1 }
  }

  private func job(urls: [String], extra: String = "") throws -> String {
    try urls.joined(separator: "\n").write(
      toFile: temporary.appending("urls.txt"), atomically: true, encoding: .utf8)
    let path = temporary.appending("nightly.yaml")
    try """
    name: nightly
    cache:
      directory: cache
    manifests: [urls.txt]
    report: reports/{date}.json
    \(extra)
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  func testJobThenAllHitsThenMaintainWithASmallLimit() throws {
    let path = try job(urls: ["/a.jpg", "/b.png", "/c.gif"].map(server.url))
    let first = try ImageCacheBinary.run(["run", path, "--json"])
    XCTAssertEqual(first.status, 0, first.stderr)
    let report = try RunReport.decode(Data(first.stdout.utf8))
    XCTAssertEqual(report.job, "nightly")
    XCTAssertEqual(report.prefetch?.downloaded, 3)
    XCTAssertEqual(report.maintenance.map(\.pass), [], "the job lists no maintenance pass")
    let reports = try FileManager.default.contentsOfDirectory(
      atPath: temporary.appending("reports"))
    XCTAssertEqual(reports.count, 1, "the job's report file is written")

    let second = try ImageCacheBinary.run(["run", path, "--json"])
    XCTAssertEqual(second.status, 0, second.stderr)
    let hits = try XCTUnwrap(RunReport.decode(Data(second.stdout.utf8)).prefetch)
    XCTAssertEqual(hits.diskHits, 3)
    XCTAssertEqual(hits.downloaded, 0)
    XCTAssertEqual(server.requestCount("/a.jpg"), 1)

    let cache = temporary.appending("cache")
    let maintain = try ImageCacheBinary.run([
      "maintain", "--cache", cache, "--max-size", "1", "--json",
    ])
    XCTAssertEqual(maintain.status, 0, maintain.stderr)
    let passes = try RunReport.decode(Data(maintain.stdout.utf8)).maintenance
    XCTAssertEqual(passes.map(\.pass), [.trim], "--max-size alone only trims")
    XCTAssertEqual(passes.first?.filesRemoved, 3)
    XCTAssertEqual(try DiskCache(location: CacheLocation(directory: cache)).usage().fileCount, 0)
  }

  func testSecondRunWhileTheFirstHoldsTheLockExitsThree() throws {
    let path = try job(urls: [server.url("/slow.jpg")])
    let (first, out, err) = try ImageCacheBinary.start(["run", path])
    waitUntil(timeout: 10, "the first run's request") { server.requestCount("/slow.jpg") > 0 }
    let second = try ImageCacheBinary.run(["run", path])
    XCTAssertEqual(second.status, 3, second.stderr)
    XCTAssertTrue(second.stderr.contains("lock"), second.stderr)
    XCTAssertEqual(ImageCacheBinary.finish(first, out, err).status, 0)
  }

  /// `--wait-timeout` alone waits (it implies `--wait`), and gives up after its time with
  /// exit 3, saying how long it waited.
  func testAWaitTimeoutAloneWaitsForTheLockThenExitsThree() throws {
    let path = try job(urls: [server.url("/slow.jpg")])
    let (first, out, err) = try ImageCacheBinary.start(["run", path])
    waitUntil(timeout: 10, "the first run's request") { server.requestCount("/slow.jpg") > 0 }
    let second = try ImageCacheBinary.run(["run", path, "--wait-timeout", "1s"])
    XCTAssertEqual(second.status, 3, second.stderr)
    XCTAssertTrue(second.stderr.contains("after 1 s of waiting"), second.stderr)
    XCTAssertEqual(ImageCacheBinary.finish(first, out, err).status, 0)
  }

  /// `run a.yaml b.yaml`: a job whose cache another run holds is no reason to skip the next
  /// job, on a cache of its own; the command ends with the most serious status (3 here).
  func testAJobWhoseCacheIsLockedDoesNotSkipTheNextJob() throws {
    let path = try job(urls: [server.url("/slow.jpg")])
    let (first, out, err) = try ImageCacheBinary.start(["run", path])
    waitUntil(timeout: 10, "the first run's request") { server.requestCount("/slow.jpg") > 0 }
    // The other job fails a URL (exit 1): the lock (exit 3) is the more serious status.
    try (server.url("/a.jpg") + "\n" + server.url("/missing.jpg")).write(
      toFile: temporary.appending("other.txt"), atomically: true, encoding: .utf8)
    let other = temporary.appending("other.yaml")
    try "name: other\ncache: {directory: other-cache}\nmanifests: [other.txt]\nreport: other.json\n"
      .write(toFile: other, atomically: true, encoding: .utf8)
    let both = try ImageCacheBinary.run(["run", path, other])
    XCTAssertEqual(both.status, 3, both.stderr)
    XCTAssertTrue(both.stderr.contains("lock"), both.stderr)
    let report = try RunReport.decode(
      XCTUnwrap(FileManager.default.contents(atPath: temporary.appending("other.json"))))
    XCTAssertEqual(report.status, .completed)
    XCTAssertEqual(report.prefetch?.downloaded, 1, "the next job ran")
    XCTAssertEqual(report.prefetch?.failed, 1)
    XCTAssertEqual(ImageCacheBinary.finish(first, out, err).status, 0)
  }

  /// With several jobs, a `--report` path without `{job}` gets `-<job>` before its extension,
  /// also when it holds another placeholder (`{shard}`): one report per job, named by it, none
  /// written over another's.
  func testSeveralJobsWriteOneReportEachNamedByTheJob() throws {
    var jobs: [String] = []
    for name in ["first", "second"] {
      let path = temporary.appending("\(name).yaml")
      try "name: \(name)\ncache: {directory: \(name)-cache}\n".write(
        toFile: path, atomically: true, encoding: .utf8)
      jobs.append(path)
    }
    let folder = temporary.appending("reports")
    let result = try ImageCacheBinary.run(
      ["run"] + jobs + ["--report", folder + "/night-{shard}.json"])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(
      try FileManager.default.contentsOfDirectory(atPath: folder).sorted(),
      ["night-all-first.json", "night-all-second.json"])
  }

  /// A run waiting for another's lock (`--wait`) and stopped meanwhile (a unit's start
  /// timeout, an engine's time limit) says so: exit 143, its report and metrics interrupted
  /// with nothing done. It died without them.
  func testARunStoppedWhileItWaitsForTheLockReportsInterrupted() throws {
    let path = try job(urls: [server.url("/slow.jpg")])
    let (first, out, err) = try ImageCacheBinary.start(["run", path])
    waitUntil(timeout: 10, "the first run's request") { server.requestCount("/slow.jpg") > 0 }
    let report = temporary.appending("waiting.json")
    let metrics = temporary.appending("waiting.prom")
    let (second, secondOut, secondErr) = try ImageCacheBinary.start([
      "run", path, "--wait", "--report", report, "--metrics", metrics,
    ])
    let errors = PipeReader(secondErr)
    waitUntil(timeout: 10, "the second run waiting") { errors.text.contains("waiting") }
    kill(second.processIdentifier, SIGTERM)
    let stopped = ImageCacheBinary.finish(second, secondOut, errors)
    XCTAssertEqual(stopped.status, 128 + SIGTERM, stopped.stderr)
    let written = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: report)))
    XCTAssertEqual(written.status, .interrupted)
    XCTAssertNil(written.prefetch, "nothing done")
    XCTAssertEqual(
      written.warnings,
      ["interrupted while waiting for the cache's lock (--wait): nothing was done"])
    let exposition = try String(contentsOfFile: metrics, encoding: .utf8)
    XCTAssertTrue(exposition.contains(#"status="interrupted"} 1"#), exposition)
    XCTAssertEqual(ImageCacheBinary.finish(first, out, err).status, 0, "the holder went on")
  }

  func testMalformedJobFileExitsTwoNamingTheLine() throws {
    let path = try job(urls: [], extra: "prefetch:\n  concurrency: lots\n")
    let result = try ImageCacheBinary.run(["run", path])
    XCTAssertEqual(result.status, 2)
    XCTAssertTrue(result.stderr.contains("\(path):7: field 'prefetch.concurrency'"), result.stderr)
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: temporary.appending("cache")), "nothing ran")
  }

  /// As `prefetch` says of the same input: the job's manifest is wrong, not a URL (exit 2).
  func testAJobsManifestURLThatServesAnImageIsAUsageError() throws {
    let path = temporary.appending("nightly.yaml")
    try """
    name: nightly
    cache:
      directory: cache
    manifests: [\(server.url("/b.png"))]
    """.write(toFile: path, atomically: true, encoding: .utf8)
    let result = try ImageCacheBinary.run(["run", path])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains("this is an image (PNG), not a manifest"), result.stderr)
  }

  func testSIGTERMDuringARunWritesAnInterruptedReport() throws {
    let path = try job(
      urls: (0..<8).map { server.url("/slow.jpg") + "?n=\($0)" },
      extra: "prefetch:\n  concurrency: 2\n")
    let (process, out, err) = try ImageCacheBinary.start(["run", path])
    waitUntil(timeout: 10, "two downloads under way") { server.requestCount("/slow.jpg") >= 2 }
    kill(process.processIdentifier, SIGTERM)
    let result = ImageCacheBinary.finish(process, out, err)
    XCTAssertEqual(result.status, 143, result.stderr)
    let reportDirectory = temporary.appending("reports")
    let name = try XCTUnwrap(FileManager.default.contentsOfDirectory(atPath: reportDirectory).first)
    let report = try RunReport.decode(
      XCTUnwrap(FileManager.default.contents(atPath: reportDirectory + "/" + name)))
    XCTAssertEqual(report.status, .interrupted)
    XCTAssertEqual(
      try DiskCache(location: CacheLocation(directory: temporary.appending("cache"))).usage()
        .fileCount, 0)
  }

  func testTheBundledExampleJobParses() throws {
    let example = URL(fileURLWithPath: Fixtures.directory).deletingLastPathComponent()
      .deletingLastPathComponent()
      .appendingPathComponent("jobs/example.yaml").path
    let job = try Job.load(path: example)
    XCTAssertEqual(job.manifests.count, 3)
    XCTAssertEqual(job.sitemap.order, .lastmod)
    for manifest in job.manifests {
      XCTAssertTrue(FileManager.default.fileExists(atPath: manifest), manifest)
    }
  }

  /// A job of four held downloads (the server answers after 600 ms) that allows two at once.
  private func heldJob() throws -> String {
    try job(
      urls: (0..<4).map { server.url("/held.jpg") + "?n=\($0)" },
      extra: "prefetch: {concurrency: 2, perHostConcurrency: 4}\n")
  }

  func testAPrefetchFlagOverridesTheJobsSettingForThisRunOnly() throws {
    let path = try heldJob()
    let written = try String(contentsOfFile: path, encoding: .utf8)
    let plan = try ImageCacheBinary.run([
      "run", path, "--dry-run", "--concurrency", "1", "--json",
    ])
    XCTAssertEqual(plan.status, 0, plan.stderr)
    let said = "nightly: for this run, from the command line: prefetch.concurrency 1"
    XCTAssertTrue(plan.stderr.contains(said), plan.stderr)
    XCTAssertEqual(
      try RunReport.decode(Data(plan.stdout.utf8)).commandLineSettings,
      ["prefetch.concurrency": "1"], "the dry run's plan says so too")

    let result = try ImageCacheBinary.run(["run", path, "--concurrency", "1", "--json"])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertTrue(result.stderr.contains(said), result.stderr)
    let report = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
    XCTAssertEqual(
      SchemaValidator.validate(report, against: try SchemaValidator.reportSchema()), [])
    XCTAssertEqual(
      try RunReport.decode(Data(result.stdout.utf8)).commandLineSettings,
      ["prefetch.concurrency": "1"])
    XCTAssertEqual(server.requestCount("/held.jpg"), 4)
    XCTAssertEqual(server.peakConcurrency, 1, "--concurrency 1 in place of the job's 2")
    XCTAssertEqual(
      try String(contentsOfFile: path, encoding: .utf8), written, "the job file is unchanged")
  }

  func testAPrefetchFlagNotGivenLeavesTheJobsSetting() throws {
    let path = try heldJob()
    let plain = try ImageCacheBinary.run(["run", path, "--dry-run", "--json"])
    XCTAssertNil(try RunReport.decode(Data(plain.stdout.utf8)).commandLineSettings, plain.stdout)
    let result = try ImageCacheBinary.run([
      "run", path, "--max-pixels", "5000000", "--max-bandwidth", "10MB/s",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(server.requestCount("/held.jpg"), 4)
    XCTAssertEqual(server.peakConcurrency, 2, "the job's concurrency, not the default's")
    XCTAssertTrue(
      result.stderr.contains(
        "nightly: for this run, from the command line: prefetch.maxPixels 5000000, "
          + "prefetch.maxBandwidth 10.0 MB/s\n"),
      result.stderr)
  }

  func testAnOverriddenTimeoutTakesEffect() throws {
    let path = try job(
      urls: [server.url("/slow.jpg")], extra: "prefetch: {timeout: 30s, retries: 0}\n")
    let result = try ImageCacheBinary.run(["run", path, "--timeout", "1s", "--json"])
    XCTAssertEqual(result.status, 1, "the job's 30 s would wait for the answer at 5 s")
    let failures = try XCTUnwrap(RunReport.decode(Data(result.stdout.utf8)).prefetch).failures
    XCTAssertEqual(failures.map(\.name), ["timedOut"], result.stderr)
  }

  /// `--deadline` sets the deadline and nothing else: the job's own 1 s timeout still fails
  /// the answer that comes after 5 s.
  func testAnOverriddenDeadlineLeavesTheJobsTimeout() throws {
    let path = try job(
      urls: [server.url("/slow.jpg")], extra: "prefetch: {timeout: 1s, retries: 0}\n")
    let result = try ImageCacheBinary.run(["run", path, "--deadline", "60s", "--json"])
    XCTAssertEqual(result.status, 1, "the job's 1 s timeout fails the answer at 5 s")
    let failures = try XCTUnwrap(RunReport.decode(Data(result.stdout.utf8)).prefetch).failures
    XCTAssertEqual(failures.map(\.name), ["timedOut"], result.stderr)
  }

  /// A proxy given on the command line is said, on the console and in the report's
  /// `commandLineSettings`, with its password masked (SPEC section 11).
  func testAProxyFlagIsSaidWithItsPasswordMasked() throws {
    let path = try job(urls: [server.url("/a.jpg")])
    let result = try ImageCacheBinary.run([
      "run", path, "--dry-run", "--proxy", "http://user:secret@127.0.0.1:9", "--json",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertTrue(
      result.stderr.contains("prefetch.proxy http://user:***@127.0.0.1:9"), result.stderr)
    XCTAssertEqual(
      try RunReport.decode(Data(result.stdout.utf8)).commandLineSettings,
      ["prefetch.proxy": "http://user:***@127.0.0.1:9"])
    XCTAssertFalse((result.stdout + result.stderr).contains("secret"))
  }

  /// Every flag that docs/jobs.md gives for a `prefetch.` setting is one `run` takes.
  func testRunTakesTheFlagOfEveryPrefetchSetting() throws {
    let repository = URL(fileURLWithPath: Fixtures.directory).deletingLastPathComponent()
      .deletingLastPathComponent()
    let jobs = try String(
      contentsOf: repository.appendingPathComponent("docs/jobs.md"), encoding: .utf8)
    let section = try XCTUnwrap(
      jobs.components(separatedBy: "## The same settings on the command line").last?
        .components(separatedBy: "\n## ").first)
    // A `\|` inside a cell (`none\|structure\|full`) is no column's end.
    let rows = section.replacingOccurrences(of: "\\|", with: "/").split(separator: "\n")
      .filter { $0.hasPrefix("| `prefetch.") }
      .compactMap { $0.split(separator: "|").dropFirst().first }
    let flags = Set(rows.flatMap { $0.matches(of: /--[a-z][a-z-]*/).map { String($0.0) } })
    XCTAssertTrue(flags.isSuperset(of: ["--concurrency", "--max-run-time", "--allow-link-local"]))
    let help = try ImageCacheBinary.run(["run", "--help"]).stdout
    XCTAssertEqual(flags.subtracting(HelpPages.options(in: help)), [])
  }
}
