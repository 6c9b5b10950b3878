import Core
import Foundation
import State
import TestSupport
import XCTest

/// SPEC section 10 on the built binary, as cron runs it: dead consoles, missing manifests,
/// hang-ups, read-only state.
final class UnattendedTests: LoopbackTestCase {
  var location: CacheLocation!

  override var routes: [String: Route] {
    [
      "/photo.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
      "/slow.jpg": { _ in ServerResponse(body: Fixtures.jpeg, headDelay: .seconds(5)) },
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  func testOnlyARunWithAReportNeedsItsTemporaryFolder() throws {
    let urls = try temporary.manifest([server.url("/photo.jpg")])
    var environment = ProcessInfo.processInfo.environment
    environment["TMPDIR"] = temporary.appending("no-such-folder")
    // No report file and no --json: nothing is spilled to TMPDIR, so a bad one does not matter.
    let bare = try ImageCacheBinary.run(
      ["prefetch", urls, "--cache", location.directory], environment: environment)
    XCTAssertEqual(bare.status, 0, bare.stderr)
    XCTAssertTrue(bare.stderr.contains("1 downloaded"), bare.stderr)
    // A report's lists are spilled there as the run goes: a bad TMPDIR stops it at the start.
    let reported = try ImageCacheBinary.run(
      ["prefetch", urls, "--cache", location.directory, "--json"], environment: environment)
    XCTAssertNotEqual(reported.status, 0, reported.stderr)
    XCTAssertTrue(reported.stderr.contains("no-such-folder"), reported.stderr)
  }

  func testAClosedStderrAndAFullStdoutDoNotStopTheRun() throws {
    let urls = try temporary.manifest([server.url("/photo.jpg")])
    let report = temporary.appending("report.json")
    let quoted =
      ([
        ImageCacheBinary.path, "prefetch", urls, "--cache", location.directory,
        "--report", report, "--json",
      ]).map { "'\($0)'" }.joined(separator: " ")
    let shell = Process()
    shell.executableURL = URL(fileURLWithPath: "/bin/sh")
    shell.arguments = ["-c", "exec \(quoted) 2>&- >/dev/full"]
    try shell.run()
    shell.waitUntilExit()
    XCTAssertEqual(shell.terminationStatus, 0)
    let written = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: report)))
    XCTAssertEqual(written.status, .completed)
    XCTAssertEqual(written.prefetch?.downloaded, 1)
  }

  func testAMissingOrFolderManifestStopsEverythingWithExitTwo() throws {
    let job = temporary.appending("job.yaml")
    try "cache: {directory: cache}\nmanifests: [missing.txt]\n".write(
      toFile: job, atomically: true, encoding: .utf8)
    let missing = try ImageCacheBinary.run(["run", job])
    XCTAssertEqual(missing.status, 2)
    XCTAssertTrue(missing.stderr.contains(temporary.appending("missing.txt")), missing.stderr)
    XCTAssertFalse(FileManager.default.fileExists(atPath: temporary.appending("cache")))

    try FileSystem.createDirectory(path: temporary.appending("folder.txt"))
    let folder = try ImageCacheBinary.run([
      "prefetch", temporary.appending("folder.txt"), "--cache", location.directory,
    ])
    XCTAssertEqual(folder.status, 2)
    XCTAssertTrue(folder.stderr.contains("folder.txt"), folder.stderr)
  }

  /// The upstream export that never arrived: nothing runs (exit 2), and the report and metrics
  /// say the night failed, so that the run-failed alert fires; before, the metrics kept the
  /// night before's success and only the no-recent-success alert, a day later, said anything.
  func testANightWhoseManifestNeverArrivedReportsAndExportsAFailure() throws {
    let urls = try temporary.manifest([server.url("/photo.jpg")])
    let job = temporary.appending("nightly.yaml")
    try
      "cache: {directory: cache}\nmanifests: [\(urls)]\nreport: nightly.json\nmetrics: nightly.prom\n"
      .write(toFile: job, atomically: true, encoding: .utf8)
    let night = try ImageCacheBinary.run(["run", job])
    XCTAssertEqual(night.status, 0, night.stderr)
    let metricsFile = temporary.appending("nightly.prom")
    let success = try XCTUnwrap(
      try String(contentsOfFile: metricsFile, encoding: .utf8).split(separator: "\n").first {
        $0.hasPrefix("imagecache_last_success_timestamp_seconds{")
      })
    try FileManager.default.removeItem(atPath: urls)
    let reportFile = temporary.appending("nightly.json")
    // The job's own run, then `prefetch` (another job's name: another set of series).
    for (index, command) in [
      ["run", job],
      [
        "prefetch", urls, "--cache", location.directory, "--report", reportFile, "--metrics",
        metricsFile,
      ],
    ].enumerated() {
      if index > 0 {
        for file in [reportFile, metricsFile] { try FileManager.default.removeItem(atPath: file) }
      }
      let missing = try ImageCacheBinary.run(command)
      XCTAssertEqual(missing.status, 2, missing.stderr)
      let report = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: reportFile)))
      XCTAssertEqual(report.status, .failed, "\(command)")
      XCTAssertTrue(report.error?.contains(urls) == true, report.error ?? "no error")
      let metrics = try String(contentsOfFile: metricsFile, encoding: .utf8)
      XCTAssertTrue(
        metrics.contains(#"status="failed"} 1"#), "the run-failed alert's series: \(metrics)")
      guard index == 0 else { continue }
      XCTAssertTrue(
        metrics.split(separator: "\n").contains(success), "the last success is kept: \(metrics)")
    }
  }

  /// An export that came out empty, or a server's error text saved as the manifest: the run
  /// exits 0 (nothing failed) but says that nothing was tried, and its report keeps it.
  func testARunWhoseManifestsListedNoURLSaysNothingWasTried() throws {
    let reportFile = temporary.appending("report.json")
    for (lines, skipped) in [
      ([String](), 0), (["# only a comment"], 0), (["Error 503", "Busy"], 2),
    ] {
      let manifest = try temporary.manifest(lines)
      let result = try ImageCacheBinary.run([
        "prefetch", manifest, "--cache", location.directory, "--report", reportFile,
      ])
      XCTAssertEqual(result.status, 0, result.stderr)
      let warning =
        "nothing tried: the manifests listed no URL"
        + (skipped > 0 ? " but \(skipped) line(s) that could not be used (see lineErrors)" : "")
      XCTAssertTrue(result.stderr.contains("warning: " + warning), result.stderr)
      let report = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: reportFile)))
      XCTAssertEqual(report.warnings, [warning])
    }
    // A shard may own none of a short list's URLs: no warning there.
    let shard = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest([]), "--cache", location.directory, "--shard", "1/4",
    ])
    XCTAssertEqual(shard.status, 0, shard.stderr)
    XCTAssertFalse(shard.stderr.contains("nothing tried"), shard.stderr)
  }

  func testSIGHUPIsTreatedLikeSIGTERM() throws {
    let urls = try temporary.manifest((0..<4).map { server.url("/slow.jpg") + "?n=\($0)" })
    let report = temporary.appending("report.json")
    let (process, stdout, stderr) = try ImageCacheBinary.start([
      "prefetch", urls, "--cache", location.directory, "--report", report,
    ])
    waitUntil(timeout: 10, "a download under way") { server.requestCount("/slow.jpg") > 0 }
    kill(process.processIdentifier, SIGHUP)
    let result = ImageCacheBinary.finish(process, stdout, stderr)
    XCTAssertEqual(result.status, 128 + SIGHUP, result.stderr)
    let written = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: report)))
    XCTAssertEqual(written.status, .interrupted)
    let run = try XCTUnwrap(try StateStore(location: location).recentRuns().first)
    XCTAssertEqual(run.status, "interrupted", "the state database does not say running")
  }

  /// The warnings job engines send before they end a job (Grid Engine's `-notify` and soft
  /// limits, Slurm's `--signal`) stop the run as SIGTERM does, with its report; by default
  /// each ended the process with no report and the state still saying running.
  func testTheJobEnginesWarningSignalsStopTheRunWithItsReport() throws {
    for signal in [SIGUSR1, SIGUSR2, SIGXCPU] {
      let urls = try temporary.manifest(
        (0..<4).map { server.url("/slow.jpg") + "?s\(signal)=\($0)" })
      let report = temporary.appending("report-\(signal).json")
      let (process, stdout, stderr) = try ImageCacheBinary.start([
        "prefetch", urls, "--cache", location.directory, "--report", report,
      ])
      waitUntil(timeout: 10, "a download under way") {
        server.requests("/slow.jpg").contains { $0.query?.hasPrefix("s\(signal)=") == true }
      }
      kill(process.processIdentifier, signal)
      let result = ImageCacheBinary.finish(process, stdout, stderr)
      XCTAssertEqual(result.status, 128 + signal, result.stderr)
      let written = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: report)))
      XCTAssertEqual(written.status, .interrupted)
    }
  }

  /// `nohup imagecache ...`: the hang-up it was started to survive does not stop it, and
  /// SIGTERM still does. Nor does another process's SIGALRM, before any stop signal.
  func testASignalIgnoredAtTheStartStaysIgnoredAndAStrayAlarmIsNoDeadline() throws {
    let urls = try temporary.manifest((0..<2).map { server.url("/slow.jpg") + "?hup=\($0)" })
    let report = temporary.appending("report.json")
    // nohup sets SIGHUP ignored and executes the binary in its own process.
    let (process, stdout, stderr) = try Command.start(
      "/usr/bin/nohup",
      [ImageCacheBinary.path, "prefetch", urls, "--cache", location.directory, "--report", report])
    waitUntil(timeout: 10, "a download under way") { server.requestCount("/slow.jpg") > 0 }
    kill(process.processIdentifier, SIGHUP)
    kill(process.processIdentifier, SIGALRM)
    let result = ImageCacheBinary.finish(process, stdout, stderr)
    XCTAssertEqual(result.status, 0, result.stderr)
    let written = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: report)))
    XCTAssertEqual(written.status, .completed)
    XCTAssertEqual(written.prefetch?.downloaded, 2)
  }

  func testBlacklistListWorksOnAReadOnlyState() throws {
    let store = try StateStore(location: location)
    try store.recordFailure(
      url: "https://x/a.png", code: 1001, name: "badImageData", reason: "html", at: Date())
    // File modes do not bind root: a read-only bind mount of the state folder does.
    let state = location.stateDirectory
    try fileSystems.bindReadOnly(state)
    XCTAssertFalse(FileManager.default.isWritableFile(atPath: state + "/state.sqlite"))

    let list = try ImageCacheBinary.run(["blacklist", "list", "--cache", location.directory])
    XCTAssertEqual(list.status, 0, list.stderr)
    XCTAssertTrue(list.stdout.contains("https://x/a.png"), list.stdout)
    let clear = try ImageCacheBinary.run(["blacklist", "clear", "--cache", location.directory])
    XCTAssertEqual(clear.status, 4, "writing is a fatal I/O error")
    XCTAssertTrue(clear.stderr.contains(state + "/state.sqlite"), "names the file: \(clear.stderr)")
  }

  /// Issue 39, item 7: cron starts a job in the user's home folder, not where its paths were
  /// tried, so a relative path that cannot be used says what it was relative to.
  func testARelativePathThatCannotBeUsedNamesTheWorkingDirectoryItWasResolvedAgainst() throws {
    let home = temporary.appending("home")
    try FileSystem.createDirectory(path: home)
    let workingDirectory = URL(fileURLWithPath: home).resolvingSymlinksInPath().path
    let advice = "give an absolute path, or cd to the folder it is relative to first"
    func run(_ arguments: [String]) throws -> CommandResult {
      try ImageCacheBinary.run(arguments, directory: home)
    }

    let manifest = try run(["prefetch", "urls.txt", "--cache", location.directory])
    XCTAssertEqual(manifest.status, 2, manifest.stderr)
    XCTAssertTrue(
      manifest.stderr.contains("urls.txt is relative to \(workingDirectory)"), manifest.stderr)
    XCTAssertTrue(manifest.stderr.contains(advice), manifest.stderr)

    let job = try run(["run", "jobs/nightly.yaml"])
    XCTAssertEqual(job.status, 2, job.stderr)
    XCTAssertTrue(
      job.stderr.contains("jobs/nightly.yaml (relative to \(workingDirectory)): No such file"),
      job.stderr)
    XCTAssertTrue(job.stderr.contains(advice), job.stderr)

    // A --from that is gone is a finished migration, not an error: where it was looked for.
    let migrate = try run(["migrate", "--cache", location.directory, "--from", "legacy"])
    XCTAssertEqual(migrate.status, 0, migrate.stderr)
    XCTAssertTrue(
      migrate.stderr.contains("no legacy folder at legacy (relative to \(workingDirectory))"),
      migrate.stderr)

    let merge = try run(["report", "merge", "shard-1.json", "shard-2.json"])
    XCTAssertEqual(merge.status, 2, merge.stderr)
    XCTAssertTrue(
      merge.stderr.contains("shard-1.json (relative to \(workingDirectory)): No such file"),
      merge.stderr)

    // A file where the report's folder would be: the path's mistake (exit 2), said with the
    // folder it was resolved against.
    try Data().write(to: URL(fileURLWithPath: home + "/reports"))
    let urls = try temporary.manifest([server.url("/photo.jpg")])
    let report = try run([
      "prefetch", urls, "--cache", location.directory, "--report", "reports/nightly.json",
    ])
    XCTAssertEqual(report.status, 2, report.stderr)
    XCTAssertTrue(
      report.stderr.contains("reports/nightly.json (relative to \(workingDirectory)): "),
      report.stderr)
    XCTAssertTrue(report.stderr.contains(advice), report.stderr)
  }

  /// Issue 39, item 7: the report is written beside itself under a hidden temporary name; a
  /// folder it cannot be written in names the report, and why its folder matters.
  func testAReportThatCannotBeWrittenNamesItselfNotItsTemporaryFile() throws {
    let reports = temporary.appending("reports")
    try FileSystem.createDirectory(path: reports)
    // File modes do not bind root: a read-only bind mount does.
    try fileSystems.bindReadOnly(reports)
    let urls = try temporary.manifest([server.url("/photo.jpg")])
    let report = reports + "/nightly.json"

    let result = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", location.directory, "--report", report,
    ])
    XCTAssertEqual(result.status, 4, result.stderr)
    XCTAssertTrue(
      result.stderr.contains("write \(report): \(String(cString: strerror(EROFS)))"),
      result.stderr)
    XCTAssertTrue(result.stderr.contains("so that folder must be writable"), result.stderr)
    XCTAssertFalse(result.stderr.contains(FileSystem.temporaryPrefix), result.stderr)
  }

  /// Issue 39, item 7: a cache of another user. The commands that only read the state read
  /// it; one that must write it says whose it is and what to do, not SQLite's "attempt to
  /// write a readonly database" or a bare "Permission denied".
  func testAStateOfAnotherUserIsReadAndACommandThatMustWriteItSaysWhoseItIs() throws {
    guard getuid() == 0 else { try requireOrSkip("needs root to run as another user") }
    let urls = try temporary.manifest([server.url("/photo.jpg")])
    let made = try ImageCacheBinary.run(["prefetch", urls, "--cache", location.directory])
    XCTAssertEqual(made.status, 0, made.stderr)
    let state = location.stateDirectory
    let fix = "run the command as its owner (root)"
    let mode = try XCTUnwrap(
      FileManager.default.attributesOfItem(atPath: state)[.posixPermissions] as? Int)

    for reading in [["stats"], ["blacklist", "list"], ["prefetch", urls, "--dry-run"]] {
      let result = try runUnprivileged(reading + ["--cache", location.directory])
      XCTAssertEqual(result.status, 0, "\(reading): \(result.stderr)")
    }
    let prefetch = try runUnprivileged(["prefetch", urls, "--cache", location.directory])
    XCTAssertEqual(prefetch.status, 4, prefetch.stderr)
    let clear = try runUnprivileged(["blacklist", "clear", "--cache", location.directory])
    XCTAssertEqual(clear.status, 4, clear.stderr)
    for result in [prefetch, clear] {
      XCTAssertTrue(
        result.stderr.contains(
          "the state is read-only for this user (nobody): \(state) is owned by root, mode "
            + String(format: "%04o", mode)),
        result.stderr)
      XCTAssertTrue(result.stderr.contains(fix), result.stderr)
    }
    XCTAssertTrue(clear.stderr.contains(state + "/state.sqlite"), clear.stderr)
  }
}
