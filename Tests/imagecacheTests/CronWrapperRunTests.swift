import Core
import Foundation
import NIOCore
import TestSupport
import XCTest

/// `cron/imagecache-cron` running the real binary under `env -i`, as cron starts it, against a
/// loopback server (issues 38 and 39): it prunes only what its own run may, and the job's own
/// reports named with `{job}` are written once a run and pruned.
final class CronWrapperRunTests: LoopbackTestCase {
  override var routes: [String: Route] {
    Self.images.merging([
      // Long enough for a second wrapper to meet the lock this run holds.
      "/slow.jpg": { _ in .init(body: Fixtures.jpeg, headDelay: .seconds(4)) }
    ]) { $1 }
  }

  private var state: String { temporary.appending("state") }

  /// A job on a cache in the temporary folder, fetching `paths`; `extra` is added as it is.
  private func writeJob(_ paths: [String], extra: String = "") throws -> String {
    let manifest = try temporary.manifest(paths.map(server.url))
    let job = temporary.appending("nightly.yaml")
    try """
    cache:
      directory: \(temporary.appending("cache"))
    manifests: [\(manifest)]
    \(extra)
    """.write(toFile: job, atomically: true, encoding: .utf8)
    return job
  }

  /// The wrapper under `env -i`: only the PATH and the binary cron's line would give it.
  /// `environment` is added to it, as the crontab's lines or the unit's `EnvironmentFile=` add.
  private func startWrapper(_ arguments: [String], environment: [String] = []) throws -> (
    Process, Pipe, Pipe
  ) {
    try Command.start(
      "/usr/bin/env",
      ["-i", "PATH=/usr/local/bin:/usr/bin:/bin", "IMAGECACHE=\(ImageCacheBinary.path)"]
        + environment + ["/bin/bash", CronWrapperTests.wrapper] + arguments)
  }

  private func runWrapper(_ arguments: [String], environment: [String] = []) throws
    -> CommandResult
  {
    let (process, stdout, stderr) = try startWrapper(arguments, environment: environment)
    return ImageCacheBinary.finish(process, stdout, stderr)
  }

  private func files(_ folder: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
  }

  /// The systemd unit fails a night that needs someone, not an ordinary one. Under the unit's
  /// own `Environment=`, a night whose only failures are URLs (a 404, counted in the report and
  /// the metrics) exits 0, a success of the unit; a night whose manifest could not be fetched at
  /// all exits 1, which the unit does not count as a success (no `SuccessExitStatus=` for it).
  func testTheUnitPassesANightOfFailedURLsAndFailsOneWhoseManifestFailed() throws {
    let unit = try String(
      contentsOfFile: CronWrapperTests.repository.appendingPathComponent(
        "cron/imagecache-nightly.service"
      ).path, encoding: .utf8)
    let lines = unit.split(separator: "\n").map(String.init)
    let environment = lines.filter { $0.hasPrefix("Environment=") }.map {
      $0.dropFirst("Environment=".count).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
    }
    let successes = Set(
      [0]
        + lines.filter { $0.hasPrefix("SuccessExitStatus=") }.flatMap {
          $0.dropFirst("SuccessExitStatus=".count).split(separator: " ").compactMap { Int32($0) }
        })

    let urls = try runWrapper(
      [try writeJob(["/a.jpg", "/gone.jpg"]), state], environment: environment)
    XCTAssertEqual(urls.status, 0, urls.stderr)
    XCTAssertTrue(successes.contains(urls.status))
    let report = try XCTUnwrap(
      files(state + "/reports").last.map { state + "/reports/" + $0 }, "the night's report")
    XCTAssertEqual(
      try RunReport.decode(Data(contentsOf: URL(fileURLWithPath: report))).prefetch?.failed, 1)

    let job = temporary.appending("remote.yaml")
    try """
    cache:
      directory: \(temporary.appending("cache"))
    manifests: [\(server.url("/no-such-list.txt"))]
    """.write(toFile: job, atomically: true, encoding: .utf8)
    let manifest = try runWrapper([job, state], environment: environment)
    XCTAssertEqual(manifest.status, 1, manifest.stderr)
    XCTAssertFalse(successes.contains(manifest.status), "a failed unit: \(successes)")
  }

  func testAWrapperLockedOutPrunesNothingAndTheRunningRunKeepsItsLog() throws {
    let job = try writeJob(["/slow.jpg"])
    let (first, firstOut, firstErr) = try startWrapper([job, state, "1"])
    waitUntil(timeout: 30, "the first run to hold the cache") {
      server.requestCount("/slow.jpg") == 1
    }
    let firstLog = try XCTUnwrap(files(state + "/logs").first)

    let second = try runWrapper([job, state, "1"])
    XCTAssertEqual(second.status, 3, second.stderr)
    XCTAssertTrue(files(state + "/logs").contains(firstLog), "the running run's log stays")
    // The mail of the run locked out points at its own log, which is there.
    let secondLog = try XCTUnwrap(
      second.stderr.split(separator: "\n").first { $0.hasPrefix("log: ") }?.dropFirst(5))
    XCTAssertTrue(FileManager.default.fileExists(atPath: String(secondLog)), second.stderr)

    let finished = ImageCacheBinary.finish(first, firstOut, firstErr)
    XCTAssertEqual(finished.status, 0, finished.stderr)
    let log = try String(contentsOfFile: state + "/logs/" + firstLog, encoding: .utf8)
    XCTAssertTrue(log.contains("1 downloaded"), log)
    XCTAssertTrue(
      FileManager.default.fileExists(atPath: String(secondLog)),
      "a run that started later is not pruned by an earlier one")
  }

  func testTheJobsOwnReportsNamedWithJobAreWrittenOnceARunAndPruned() throws {
    // The README's job: its reports in the wrapper's state folder, named {job}-{date}.json.
    let job = try writeJob(
      ["/a.jpg"], extra: "name: nightly\nreport: \(state)/reports/{job}-{date}.json")
    for _ in 0..<3 {
      let result = try runWrapper([job, state, "1"])
      XCTAssertEqual(result.status, 0, result.stderr)
    }
    let reports = files(state + "/reports")
    XCTAssertEqual(reports.count, 1, "\(reports)")
    XCTAssertTrue(reports.allSatisfy { $0.hasPrefix("nightly-2") }, "\(reports)")
    XCTAssertEqual(files(state + "/logs").count, 1, "\(files(state + "/logs"))")
  }

  func testAJSONJobsOwnDatedReportsAreWrittenOnceARunAndPruned() throws {
    // A JSON job (YAML reads it too), its keys over several lines, its name not its file's,
    // and a / escaped as JSON may escape it: the wrapper reads `name` and `report` from it as
    // imagecache does.
    let manifest = try temporary.manifest([server.url("/a.jpg")])
    let job = temporary.appending("nightly-job.json")
    try """
    {
      "cache": {"directory": "\(temporary.appending("cache"))"},
      "manifests": ["\(manifest)"],
      "name": "nightly",
      "report":
        "own\\/{job}-{date}-{time}.json"
    }
    """.write(toFile: job, atomically: true, encoding: .utf8)
    for _ in 0..<3 {
      let result = try runWrapper([job, state, "1"])
      XCTAssertEqual(result.status, 0, result.stderr)
    }
    let reports = files(temporary.appending("own"))
    XCTAssertEqual(reports.count, 1, "KEEP 1 of the job's own reports: \(reports)")
    XCTAssertTrue(reports.allSatisfy { $0.hasPrefix("nightly-2") }, "\(reports)")
    XCTAssertEqual(
      files(state + "/reports"), [], "one report a run: the job's own, none beside it")
    XCTAssertEqual(files(state + "/logs").count, 1, "\(files(state + "/logs"))")
  }

  func testAGoodNightWhoseMetricsCannotBeWrittenIsMailed() throws {
    // node_exporter's folder read-only, as systemd's ProtectSystem=strict makes a folder the
    // unit does not list: the run succeeds (exit 0), and the alerts would never hear of it.
    let textfiles = temporary.appending("textfile_collector")
    try fileSystems.bindReadOnly(textfiles)
    let job = try writeJob(["/a.jpg"])
    let metrics = "IMAGECACHE_METRICS=\(textfiles)/imagecache-nightly.prom"
    let result = try runWrapper([job, state, "1"], environment: [metrics])
    XCTAssertEqual(result.status, 0, "the night's work is done: \(result.stderr)")
    XCTAssertTrue(
      result.stderr.contains(
        "warning: metrics not written to \(textfiles)/imagecache-nightly.prom"),
      "cron mails what it prints: \(result.stderr)")
    XCTAssertTrue(result.stderr.contains("log: \(state)/logs/nightly-"), result.stderr)

    let written = try runWrapper(
      [job, state, "1"], environment: ["IMAGECACHE_METRICS=\(temporary.appending("m.prom"))"])
    XCTAssertEqual(written.status, 0, written.stderr)
    XCTAssertEqual(written.stderr, "", "a good night with its metrics written is silent")
  }

  /// A night whose job file was broken by an edit (exit 2) is a failed run in the metrics
  /// that night, so the run-failed alert fires then, not the no-success alert a day later:
  /// the job's own series (`imagecache-{job}.prom` from `IMAGECACHE_METRICS`), its last success
  /// kept, in a file `promtool check metrics` passes; and cron mails the error.
  func testABrokenJobFileIsAFailedRunInThatNightsMetrics() throws {
    let textfiles = temporary.appending("textfile_collector")
    let metrics = "IMAGECACHE_METRICS=\(textfiles)/imagecache-{job}.prom"
    let job = try writeJob(["/a.jpg"])
    let good = try runWrapper([job, state, "1"], environment: [metrics])
    XCTAssertEqual(good.status, 0, good.stderr)
    let file = textfiles + "/imagecache-nightly.prom"
    func line(_ prefix: String) throws -> String? {
      try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
        .first { $0.hasPrefix(prefix) }.map(String.init)
    }
    let labels = "imagecache_job=\"nightly\",namespace=\"default\""
    let success = try XCTUnwrap(try line("imagecache_last_success_timestamp_seconds{\(labels)}"))

    try String(contentsOfFile: job, encoding: .utf8).replacingOccurrences(of: "]", with: "")
      .write(toFile: job, atomically: true, encoding: .utf8)
    let broken = try runWrapper([job, state, "1"], environment: [metrics])
    XCTAssertEqual(broken.status, 2, broken.stderr)
    XCTAssertTrue(broken.stderr.contains("imagecache job \(job) exited 2"), broken.stderr)
    XCTAssertEqual(
      try line("imagecache_last_run_status{\(labels),status=\"failed\"}"),
      "imagecache_last_run_status{\(labels),status=\"failed\"} 1.0")
    XCTAssertEqual(
      try line("imagecache_last_success_timestamp_seconds{\(labels)}"), success,
      "the last success is kept: the no-success alert still counts from it")
    XCTAssertEqual(server.requestCount("/a.jpg"), 1)
    let promtool = "/usr/bin/promtool"
    if FileManager.default.isExecutableFile(atPath: promtool) {
      let check = try Command.run(
        "/bin/sh", ["-c", "\"$0\" check metrics < \"$1\"", promtool, file])
      XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
    }
  }

  func testUnderCronsOwnPathTheWrapperRunsTheBinaryInstalledBesideIt() throws {
    // scripts/install's layout, /usr/local/bin/imagecache-cron beside /usr/local/bin/imagecache,
    // and a crontab line without PATH=: cron gives /usr/bin:/bin.
    let bin = temporary.appending("local/bin")
    try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
    try FileManager.default.copyItem(
      atPath: CronWrapperTests.wrapper, toPath: bin + "/imagecache-cron")
    try FileManager.default.createSymbolicLink(
      atPath: bin + "/imagecache", withDestinationPath: ImageCacheBinary.path)
    let job = try writeJob(["/a.jpg"])
    let (process, stdout, stderr) = try Command.start(
      "/usr/bin/env", ["-i", "PATH=/usr/bin:/bin", bin + "/imagecache-cron", job, state])
    let result = ImageCacheBinary.finish(process, stdout, stderr)
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(server.requestCount("/a.jpg"), 1)
    XCTAssertEqual(files(state + "/reports").count, 1, "\(files(state + "/reports"))")
  }
}
