import Core
import Foundation
import Maintenance
import Prefetcher
import Runner
import State
import TestSupport
import XCTest

/// SPEC section 10: manifests and job files from other systems, full disks, stale state. Each
/// test asserts what the user sees: the report, the files on disk, what reached the server.
final class HostileInputTests: LoopbackTestCase {
  var location: CacheLocation!

  override var routes: [String: Route] {
    [
      "/a.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
      "/b.png": { _ in .image(Fixtures.png, type: "image/png") },
      "/echo.png": { _ in .image(Fixtures.png, type: "image/png") },
      "/blob": { _ in ServerResponse(body: Data(repeating: 1, count: 64 * 1024)) },
      "/bomb.png": { _ in
        ServerResponse(
          headers: [("Content-Type", "image/png"), ("Content-Encoding", "gzip")],
          body: HostileInputTests.gzipBomb)
      },
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  /// 4 MiB of zeros, gzip-compressed to a few KiB.
  static let gzipBomb = Fixtures.gzip(Data(count: 4 << 20))

  private func write(_ bytes: [UInt8], to name: String) throws -> String {
    let path = temporary.appending(name)
    XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
    return path
  }

  private func prefetch(
    _ manifests: [String], configure: (inout Job) -> Void = { _ in }
  ) async throws -> (RunOutcome, RunReport) {
    var job = Job(name: "hostile", location: location)
    job.manifests = manifests
    job.passes = []
    configure(&job)
    var settings = RunSettings()
    settings.reportFiles = [temporary.appending("report.json")]
    let outcome = try await JobRunner(job: job, settings: settings, console: RecordingConsole())
      .run()
    let data = try XCTUnwrap(FileManager.default.contents(atPath: outcome.reportFiles[0]))
    return (outcome, try RunReport.decode(data))
  }

  private var cachedFiles: [String] {
    get throws { try CacheScanner(root: location.diskCachePath).files().map(\.name) }
  }

  // MARK: Manifest lines

  func testAByteOrderMarkIsIgnoredInTextAndJSONLinesManifests() async throws {
    let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
    let text = try write(bom + Array(server.url("/a.jpg").utf8), to: "bom.txt")
    let jsonl = try write(
      bom + Array(#"{"url": "\#(server.url("/b.png"))"}"#.utf8), to: "bom.jsonl")
    let (_, report) = try await prefetch([text, jsonl])
    let prefetch = try XCTUnwrap(report.prefetch)
    XCTAssertEqual(prefetch.downloaded, 2, "\(prefetch.lineErrors) \(prefetch.failures)")
    XCTAssertEqual(prefetch.blacklistedURLs, [])
  }

  func testLinesThatAreNotCleanTextAreLineErrorsSentNowhere() async throws {
    let url = Array(server.url("/echo.png").utf8)
    var bytes: [UInt8] = []
    bytes += url + [0xFF, 0xFE] + [0x0A]  // invalid UTF-8
    bytes += url + Array("%00".utf8) + [0x00] + [0x0A]  // a NUL
    bytes +=
      Array(
        #"{"url": "\#(server.url("/echo.png"))", "context": {"headers": {"X": "a\u0000b"}}}"#.utf8)
      + [0x0A]
    bytes +=
      Array(#"{"url": "\#(server.url("/echo.png"))", "context": {"namespace": "a\u0000b"}}"#.utf8)
      + [0x0A]
    bytes +=
      Array(
        #"{"url": "\#(server.url("/echo.png"))", "context": {"headers": {"X\r\nEvil": "1"}}}"#.utf8)
      + [0x0A]
    let path = try write(bytes, to: "dirty.txt")

    let (outcome, report) = try await prefetch([path])

    let prefetch = try XCTUnwrap(report.prefetch)
    XCTAssertEqual(prefetch.skipped, 5)
    XCTAssertEqual(prefetch.failed, 0)
    XCTAssertEqual(outcome.failedURLs, 0)
    XCTAssertEqual(server.requestCount("/echo.png"), 0, "nothing was sent")
    XCTAssertEqual(prefetch.blacklistedURLs, [])
    XCTAssertEqual(prefetch.lineErrors.count, 5)
    for (index, line) in prefetch.lineErrors.enumerated() {
      XCTAssertTrue(line.hasPrefix("\(path):\(index + 1): "), line)
    }
    XCTAssertTrue(prefetch.lineErrors[0].contains("UTF-8"), prefetch.lineErrors[0])
    XCTAssertTrue(prefetch.lineErrors[1].contains("control character"), prefetch.lineErrors[1])
    XCTAssertFalse(prefetch.lineErrors[4].contains("\r"), "a hostile name is not echoed raw")
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: temporary.appending("cache/a\u{0}b")))
  }

  func testAHugeLineIsSkippedWithoutBeingCopiedAnywhere() async throws {
    var bytes = Array(server.url("/echo.png?").utf8)
    bytes += [UInt8](repeating: UInt8(ascii: "x"), count: 20 << 20)
    bytes += [0x0A] + Array(server.url("/a.jpg").utf8)
    let path = try write(bytes, to: "long.txt")
    let (_, report) = try await prefetch([path])
    let prefetch = try XCTUnwrap(report.prefetch)
    XCTAssertEqual(prefetch.lineErrors.count, 1)
    XCTAssertLessThan(prefetch.lineErrors[0].utf8.count, 500, "the line is not in the report")
    XCTAssertTrue(prefetch.lineErrors[0].contains("\(path):1: "), prefetch.lineErrors[0])
    XCTAssertEqual(prefetch.downloaded, 1, "the next line is read")
    XCTAssertEqual(server.requestCount("/echo.png"), 0)
  }

  func testDuplicateAndUnknownKeysInAJSONLineAreLineErrors() async throws {
    let url = server.url("/echo.png")
    let path = try write(
      Array(
        """
        {"url": "\(url)", "url": "\(server.url("/a.jpg"))"}
        {"url": "\(url)", "priority": "high"}
        {"url": "\(url)", "context": {"headers": {"A": "1", "A": "2"}}}
        """.utf8), to: "keys.jsonl")
    let (_, report) = try await prefetch([path])
    let prefetch = try XCTUnwrap(report.prefetch)
    XCTAssertEqual(prefetch.skipped, 3)
    XCTAssertTrue(prefetch.lineErrors[0].contains("duplicate key"), prefetch.lineErrors[0])
    XCTAssertTrue(prefetch.lineErrors[1].contains("unknown key"), prefetch.lineErrors[1])
    XCTAssertTrue(prefetch.lineErrors[2].contains("duplicate key"), prefetch.lineErrors[2])
    XCTAssertEqual(server.requestCount("/echo.png") + server.requestCount("/a.jpg"), 0)
  }

  // MARK: Job files

  func testYAMLAliasesAreRefusedBeforeTheyExpand() throws {
    var yaml =
      "cache: {directory: c}\na0: &a0 [\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\"]\n"
    for level in 1..<12 {
      yaml +=
        "a\(level): &a\(level) ["
        + Array(repeating: "*a\(level - 1)", count: 8).joined(
          separator: ", ") + "]\n"
    }
    yaml += "context: {headers: {X: *a11}}\n"
    let path = temporary.appending("laughs.yaml")
    try yaml.write(toFile: path, atomically: true, encoding: .utf8)
    let started = Date()
    XCTAssertThrowsError(try Job.load(path: path)) { error in
      XCTAssertTrue("\(error)".contains("anchors and aliases"), "\(error)")
      XCTAssertTrue("\(error)".hasPrefix("\(path):"), "\(error)")
    }
    XCTAssertLessThan(Date().timeIntervalSince(started), 5, "refused without expanding 8^12 nodes")
  }

  // MARK: Responses

  func testAGzipBombIsAResponseTooLarge() async throws {
    let path = try write(Array(server.url("/bomb.png").utf8), to: "bomb.txt")
    let (outcome, report) = try await prefetch([path]) { $0.prefetch.maxResponseSize = 1 << 20 }
    XCTAssertEqual(outcome.failedURLs, 1)
    XCTAssertEqual(report.prefetch?.failures.first?.name, "responseTooLarge")
    XCTAssertEqual(try cachedFiles, [])
  }

  // MARK: Disks and state

  func testAFullDiskEndsTheRunAsFailedWithNothingPartialLeft() async throws {
    let mountPoint = temporary.appending("small")
    try FileSystem.createDirectory(path: mountPoint)
    let mount = Process()
    mount.executableURL = URL(fileURLWithPath: "/bin/mount")
    mount.arguments = ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint]
    mount.standardError = FileHandle.nullDevice
    try mount.run()
    mount.waitUntilExit()
    guard mount.terminationStatus == 0 else {
      throw XCTSkip("a small tmpfs needs root (mount -t tmpfs); the full-disk case is not run")
    }
    defer {
      let umount = Process()
      umount.executableURL = URL(fileURLWithPath: "/bin/umount")
      umount.arguments = [mountPoint]
      try? umount.run()
      umount.waitUntilExit()
    }
    location = CacheLocation(directory: mountPoint)
    let urls = (0..<60).map { server.url("/blob") + "?n=\($0)" }
    let path = try write(Array(urls.joined(separator: "\n").utf8), to: "many.txt")

    do {
      _ = try await prefetch([path]) {
        $0.prefetch.validation = .none
        $0.prefetch.concurrency = 1
      }
      XCTFail("the run went on with a full disk")
    } catch let error as RunEndingError {
      XCTAssertTrue(error.failure.endsRun)
    }
    let report = try RunReport.decode(
      XCTUnwrap(FileManager.default.contents(atPath: temporary.appending("report.json"))))
    XCTAssertEqual(report.status, .failed)
    XCTAssertTrue(report.error?.contains("No space left") ?? false, report.error ?? "no error")
    XCTAssertLessThan(server.requestCount("/blob"), 60, "no download after the disk filled")
    for file in try CacheScanner(root: location.diskCachePath).files() {
      XCTAssertEqual(file.attributes.size, 64 * 1024, "whole files only: \(file.name)")
    }
    XCTAssertEqual(
      try FileSystem.temporaryFiles(in: location.diskCachePath).count, 0,
      "the failed store's temporary file is gone")
  }

  func testStaleTemporaryFilesAreRemovedAndCounted() async throws {
    let directory = location.diskCachePath
    try FileSystem.createDirectory(path: directory)
    let stale = directory + "/" + FileSystem.temporaryPrefix + "abc.jpg.x1"
    let fresh = directory + "/" + FileSystem.temporaryPrefix + "def.jpg.x2"
    for path in [stale, fresh] {
      XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(count: 10)))
    }
    let twoHoursAgo = Date().addingTimeInterval(-7200)
    try FileSystem.setTimes(path: stale, access: twoHoursAgo, modification: twoHoursAgo)
    XCTAssertEqual(try CacheStatistics.collect(location: location) { _ in }.temporaryFiles, 2)

    var job = Job(name: "maintain", location: location)
    job.passes = [.expire]
    var settings = RunSettings()
    settings.dryRun = true
    _ = try await JobRunner(job: job, settings: settings, console: RecordingConsole()).run()
    XCTAssertTrue(FileManager.default.fileExists(atPath: stale), "a dry run removes nothing")

    _ = try await JobRunner(job: job, console: RecordingConsole()).run()
    XCTAssertFalse(FileManager.default.fileExists(atPath: stale))
    XCTAssertTrue(FileManager.default.fileExists(atPath: fresh), "a live store's file stays")
    XCTAssertEqual(try CacheStatistics.collect(location: location) { _ in }.temporaryFiles, 1)

    // A prefetch sweeps beside its downloads, and its report still says what went.
    XCTAssertTrue(FileManager.default.createFile(atPath: stale, contents: Data(count: 10)))
    try FileSystem.setTimes(path: stale, access: twoHoursAgo, modification: twoHoursAgo)
    let manifest = try write(Array("\(server.url("/a.jpg"))\n".utf8), to: "one.txt")
    let (outcome, report) = try await prefetch([manifest])
    XCTAssertEqual(outcome.failedURLs, 0)
    XCTAssertEqual(report.prefetch?.downloaded, 1)
    XCTAssertFalse(FileManager.default.fileExists(atPath: stale))
    XCTAssertTrue(FileManager.default.fileExists(atPath: fresh))
    XCTAssertEqual(
      report.warnings.filter { $0.hasPrefix("removed 1 temporary file(s)") }.count, 1,
      "\(report.warnings)")
  }

  func testALineNamingALockedNamespaceFailsAndWritesNothingThere() async throws {
    let avatars = CacheLocation(directory: location.directory, namespace: "avatars")
    let path = try write(
      Array(
        """
        {"url": "\(server.url("/a.jpg"))", "context": {"namespace": "avatars"}}
        \(server.url("/b.png"))
        """.utf8), to: "ns.jsonl")
    let (outcome, report) = try await RunLock.withLock(location: avatars, wait: false) {
      try await prefetch([path])
    }
    XCTAssertEqual(outcome.failedURLs, 1)
    XCTAssertEqual(report.prefetch?.failures.first?.name, "namespaceLocked")
    XCTAssertEqual(report.prefetch?.downloaded, 1)
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
    XCTAssertEqual(try CacheScanner(root: avatars.diskCachePath).files(), [])

    let (again, _) = try await prefetch([path])
    XCTAssertEqual(again.failedURLs, 0, "the lock is free again: the line goes through")
    XCTAssertEqual(try CacheScanner(root: avatars.diskCachePath).files().count, 1)
  }
}

/// Issue 27, items 4 and 5: a state database that can no longer be written and a cache folder
/// that goes away end the run as failed (exit 4) at the first such error; every URL keeps its
/// real outcome, and only what was recorded is reported blacklisted. The server's routes do the
/// damage mid-run, at a known point.
final class RunEndingFailureTests: XCTestCase {
  var temporary: TemporaryDirectory!
  var server: LoopbackServer!
  var location: CacheLocation!

  override func setUpWithError() throws {
    temporary = try TemporaryDirectory()
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
      // Moves the namespace folder away, leaving a file in its place, then answers.
      "/cache-goes-away.jpg": { _ in
        let path = location.diskCachePath
        _ = rename(path, path + ".moved")
        FileManager.default.createFile(atPath: path, contents: Data("a file now".utf8))
        return .image(Fixtures.jpeg, type: "image/jpeg")
      },
    ])
  }

  override func tearDown() {
    server.shutdown()
    temporary.remove()
  }

  /// Writes `path` until its file system is full.
  static func fill(_ path: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let chunk = [UInt8](repeating: 7, count: 4096)
    while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
  }

  private func prefetch(_ paths: [String]) async throws -> (RunEndingError?, RunReport) {
    let manifest = temporary.appending("urls.txt")
    try paths.map { server.url($0) }.joined(separator: "\n").write(
      toFile: manifest, atomically: true, encoding: .utf8)
    var job = Job(name: "ending", location: location)
    job.manifests = [manifest]
    job.passes = []
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
    let state = location.stateDirectory
    try FileSystem.createDirectory(path: state)
    guard Command.status("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", state]) == 0 else {
      throw XCTSkip("a small tmpfs needs root (mount -t tmpfs); the state-failure case is not run")
    }
    defer { Command.status("/bin/umount", [state]) }

    let (ending, report) = try await prefetch(
      ["/bad.jpg", "/state-disk-fills.jpg"] + (0..<20).map { "/a.jpg?n=\($0)" })
    let error = try XCTUnwrap(ending, "the run went on with a state it could not write")
    XCTAssertEqual(error.failure.name, "stateFailed")
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

  func testACacheFolderReplacedDuringTheRunStopsItAtTheFirstStore() async throws {
    let (ending, report) = try await prefetch(
      ["/cache-goes-away.jpg"] + (0..<20).map { "/a.jpg?n=\($0)" })
    let error = try XCTUnwrap(ending, "the run went on without its cache folder")
    XCTAssertEqual(error.failure.name, "storeFailed")
    XCTAssertEqual(report.status, .failed)
    XCTAssertTrue(
      report.error?.contains("removed or replaced") ?? false, report.error ?? "no error")
    // As above: at most the two downloads under way (one running, one ready).
    XCTAssertLessThanOrEqual(
      server.requestCount("/a.jpg"), 2,
      "nothing starts after the first error but what was in flight")
  }
}
