import Core
import Foundation
import HTTP
import Maintenance
import Pipeline
import Prefetcher
import Runner
import State
import TestSupport
import XCTest

/// Issue 27, items 4 and 5: a state database that can no longer be written and a cache folder
/// that goes away end the run as failed (exit 4) at the first such error; every URL keeps its
/// real outcome, and only what was recorded is reported blacklisted. The server's routes do the
/// damage mid-run, at a known point.
final class RunEndingFailureTests: TemporaryFolderTestCase {
  var server: LoopbackServer!
  var location: CacheLocation!

  override func setUpWithError() throws {
    try super.setUpWithError()
    let location = CacheLocation(directory: temporary.appending("cache"))
    self.location = location
    let notAnImage = ServerResponse(body: Data("<html>not an image</html>".utf8))
    server = try LoopbackServer(routes: [
      "/bad.jpg": { _ in notAnImage },
      "/a.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
      // Fills the state folder's own small file system, then answers: once the failure of
      // the URL before it is on the blacklist (the transfer thread starts this request while
      // that one is still being checked and recorded).
      "/state-disk-fills.jpg": { _ in
        waitUntil(timeout: 10, "the first failure on the blacklist") {
          (try? StateStore.openForReading(location: location)?.blacklist().isEmpty) == false
        }
        RunEndingFailureTests.fill(location.stateDirectory + "/filler")
        return notAnImage
      },
      // Moves the namespace folder away, leaving a file in its place, then answers: once the
      // run is recorded in its state, which opens beside the first request (issue 46).
      "/cache-goes-away.jpg": { _ in
        waitUntil(timeout: 10, "the run recorded in its state") {
          (try? StateStore.openForReading(location: location)?.recentRuns().isEmpty) == false
        }
        let path = location.diskCachePath
        _ = rename(path, path + ".moved")
        FileManager.default.createFile(atPath: path, contents: Data("a file now".utf8))
        return .image(Fixtures.jpeg, type: "image/jpeg")
      },
    ])
  }

  override func tearDown() {
    server.shutdown()
    super.tearDown()
  }

  /// Writes `path` until its file system is full.
  static func fill(_ path: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let chunk = [UInt8](repeating: 7, count: 4096)
    while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
  }

  private func prefetch(_ paths: [String], passes: [JobPass] = []) async throws -> (
    RunEndingError?, RunReport
  ) {
    let manifest = temporary.appending("urls.txt")
    try paths.map { server.url($0) }.joined(separator: "\n").write(
      toFile: manifest, atomically: true, encoding: .utf8)
    var job = Job(name: "ending", location: location)
    job.manifests = [manifest]
    job.passes = passes
    job.prefetch.concurrency = 1
    var settings = RunSettings()
    settings.reportFiles = [temporary.appending("report.json")]
    var ending: RunEndingError?
    do {
      _ = try await JobRunner(job: job, settings: settings, console: RecordingConsole()).run()
    } catch let error as RunEndingError {
      ending = error
    }
    let data = try XCTUnwrap(FileManager.default.contents(atPath: settings.reportFiles[0]))
    return (ending, try RunReport.decode(data))
  }

  func testAStateThatCannotBeWrittenEndsTheRunAndNothingUnrecordedIsReportedBlacklisted()
    async throws
  {
    let state = try fileSystems.mountTmpfs(at: location.stateDirectory, size: "1m")

    let (ending, report) = try await prefetch(
      ["/bad.jpg", "/state-disk-fills.jpg"] + (0..<20).map { "/a.jpg?n=\($0)" })
    let error = try XCTUnwrap(ending, "the run went on with a state it could not write")
    XCTAssertEqual(error.failure.name, "stateFailed")
    guard case .sqlite(let code)? = error.cause else {
      return XCTFail("no SQLite code under \(error)")
    }
    XCTAssertEqual(code & 0xff, 13, "SQLITE_FULL, with its extended code: \(code)")
    XCTAssertEqual(report.status, .failed)
    XCTAssertTrue(report.error?.contains("state.sqlite") ?? false, report.error ?? "no error")
    let failures = try XCTUnwrap(report.prefetch?.failures)
    XCTAssertEqual(failures.map(\.name), ["badImageData", "badImageData"], "the real outcomes")
    XCTAssertEqual(failures.map(\.blacklisted), [true, false], "only what was recorded")
    // With concurrency 1 the downloader holds one more request ready, so that a finished
    // download is followed at once on the transfer thread: at most those two were under way.
    XCTAssertLessThanOrEqual(
      server.requestCount("/a.jpg"), 2,
      "nothing starts after the state failed but what was in flight")
    try FileSystem.removeFile(path: state + "/filler")
    let recorded = try XCTUnwrap(try StateStore.openForReading(location: location)).blacklist()
    XCTAssertEqual(recorded.map(\.url), [server.url("/bad.jpg")])
  }

  /// The state lives on the cache's disk: SQLite finding it full is a full disk too, and the
  /// job's expire still runs after it (HostileInputTests, for a store that found it so).
  func testAStateThatFoundTheDiskFullStillLetsTheJobsExpireRun() async throws {
    let state = try fileSystems.mountTmpfs(at: location.stateDirectory, size: "1m")
    try FileSystem.createDirectory(path: location.diskCachePath)
    let old = location.diskCachePath + "/" + String(repeating: "a", count: 32) + ".jpg"
    XCTAssertTrue(FileManager.default.createFile(atPath: old, contents: Data(Fixtures.jpeg)))
    let lastMonth = Date().addingTimeInterval(-30 * 24 * 3600)
    try FileSystem.setTimes(path: old, access: lastMonth, modification: lastMonth)

    let (ending, report) = try await prefetch(
      ["/bad.jpg", "/state-disk-fills.jpg"] + (0..<20).map { "/a.jpg?n=\($0)" },
      passes: [.expire])
    XCTAssertEqual(try XCTUnwrap(ending).failure.name, "stateFailed")
    XCTAssertEqual(report.status, .failed)
    XCTAssertEqual(report.maintenance.map(\.pass), [.expire], "\(report.warnings)")
    XCTAssertFalse(FileManager.default.fileExists(atPath: old), "last month's file expired")
    try FileSystem.removeFile(path: state + "/filler")
  }

  func testACacheFolderReplacedDuringTheRunStopsItAtTheFirstStore() async throws {
    let (ending, report) = try await prefetch(
      ["/cache-goes-away.jpg"] + (0..<20).map { "/a.jpg?n=\($0)" }, passes: [.expire, .trim])
    let error = try XCTUnwrap(ending, "the run went on without its cache folder")
    // No pass runs where the cache went away, and the report says which the job listed.
    XCTAssertEqual(report.maintenance.map(\.pass), [])
    XCTAssertTrue(
      report.warnings.contains(
        "not run: expire, trim (the job lists them; the run failed before them)"),
      "\(report.warnings)")
    XCTAssertEqual(error.failure.name, "storeFailed")
    XCTAssertEqual(error.cause, .errno(ENOTDIR), "a file where the folder was")
    XCTAssertEqual(report.status, .failed)
    XCTAssertTrue(
      report.error?.contains("removed or replaced") ?? false, report.error ?? "no error")
    // As above: at most the two downloads under way (one running, one ready).
    XCTAssertLessThanOrEqual(
      server.requestCount("/a.jpg"), 2,
      "nothing starts after the first error but what was in flight")
  }
}
