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
}
