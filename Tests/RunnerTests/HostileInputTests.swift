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

  /// A line's `context.headers` are added to the job's (SPEC section 6: headers are merged,
  /// the line's value winning for a name both give): the job's `Authorization` still goes.
  func testALinesHeadersAreMergedWithTheJobsNotInPlaceOfThem() async throws {
    let path = try write(
      Array(
        #"{"url": "\#(server.url("/echo.png"))", "context": {"headers": {"X-Line": "l", "X-Both": "line"}}}"#
          .utf8), to: "headers.jsonl")
    let (_, report) = try await prefetch([path]) {
      $0.context.headers = ["Authorization": "Bearer job", "X-Both": "job"]
    }
    XCTAssertEqual(report.prefetch?.downloaded, 1)
    let request = try XCTUnwrap(server.requests("/echo.png").first)
    XCTAssertEqual(request.header("Authorization"), "Bearer job")
    XCTAssertEqual(request.header("X-Line"), "l")
    XCTAssertEqual(request.header("X-Both"), "line")
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

  /// Prefetches 60 files of 64 KiB, one at a time, into the cache at `location` (on a small
  /// disk): the error that ended the run when the disk filled.
  private func prefetchUntilTheDiskFills(_ configure: (inout Job) -> Void = { _ in })
    async throws -> RunEndingError
  {
    let urls = (0..<60).map { server.url("/blob") + "?n=\($0)" }
    let path = try write(Array(urls.joined(separator: "\n").utf8), to: "many.txt")
    do {
      _ = try await prefetch([path]) {
        $0.prefetch.validation = .none
        $0.prefetch.concurrency = 1
        configure(&$0)
      }
    } catch let error as RunEndingError {
      return error
    }
    struct WentOn: Error, CustomStringConvertible {
      var description: String { "the run went on with a full disk" }
    }
    throw WentOn()
  }

  func testAFullDiskEndsTheRunAsFailedWithNothingPartialLeft() async throws {
    let mountPoint = try fileSystems.mountTmpfs(at: temporary.appending("small"), size: "1m")
    location = CacheLocation(directory: mountPoint)
    let error = try await prefetchUntilTheDiskFills()
    XCTAssertTrue(error.failure.endsRun)
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

  /// The job's expire and trim only delete: a full disk that ends the prefetch still runs them,
  /// so that the next night finds the room the job's limits leave. Without them, a cache grown
  /// past its disk failed the same way every night, and its trim never ran.
  func testAFullDiskStillRunsTheJobsExpireAndTrimAndTheRunStillFails() async throws {
    let mountPoint = try fileSystems.mountTmpfs(at: temporary.appending("small"), size: "1m")
    location = CacheLocation(directory: mountPoint)
    // Last month's files, which expire's 7 days remove.
    try FileSystem.createDirectory(path: location.diskCachePath)
    let lastMonth = Date().addingTimeInterval(-30 * 24 * 3600)
    for index in 0..<4 {
      let old = location.diskCachePath + "/\(String(repeating: "\(index)", count: 32)).png"
      XCTAssertTrue(FileManager.default.createFile(atPath: old, contents: Data(count: 64 * 1024)))
      try FileSystem.setTimes(path: old, access: lastMonth, modification: lastMonth)
    }
    let error = try await prefetchUntilTheDiskFills {
      $0.passes = [.expire, .trim]
      $0.cleanup.maxDiskSize = 512 * 1024
    }
    XCTAssertTrue(JobRunner.diskFull(error), "\(error)")
    let report = try RunReport.decode(
      XCTUnwrap(FileManager.default.contents(atPath: temporary.appending("report.json"))))
    XCTAssertEqual(report.status, .failed, "the night's downloads did not all fit")
    XCTAssertEqual(report.maintenance.map(\.pass), [.expire, .trim], "\(report.warnings)")
    XCTAssertEqual(report.maintenance.first?.filesRemoved, 4, "last month's files")
    let left = try CacheScanner(root: location.diskCachePath).files()
    XCTAssertLessThanOrEqual(
      left.reduce(0) { $0 + $1.attributes.size }, 256 * 1024, "trimmed to half the limit")
    XCTAssertFalse(report.warnings.contains { $0.hasPrefix("not run") }, "\(report.warnings)")
  }

  /// A temporary file a killed run left while the wall clock ran ahead, dated 2036: a run
  /// dates it now, so that it ages from now and is swept once it is an hour old, not in 2036.
  func testATemporaryFileDatedInTheFutureAgesFromNowAndIsSwept() async throws {
    let directory = location.diskCachePath
    try FileSystem.createDirectory(path: directory)
    let stale = directory + "/" + FileSystem.temporaryPrefix + "abc.jpg.x1"
    XCTAssertTrue(FileManager.default.createFile(atPath: stale, contents: Data(count: 10)))
    let in2036 = Date(timeIntervalSince1970: 2_082_758_400)
    try FileSystem.setTimes(path: stale, access: in2036, modification: in2036)

    var job = Job(name: "maintain", location: location)
    job.passes = [.expire]
    _ = try await JobRunner(job: job, console: RecordingConsole()).run()
    let dated = try XCTUnwrap(try FileSystem.attributes(atPath: stale)).modificationDate
    XCTAssertLessThanOrEqual(dated, Date(), "dated when the run saw it")

    let anHourLater = dated.addingTimeInterval(JobRunner.staleTemporaryAge + 1)
    let swept = try FileSystem.removeStaleTemporaries(
      in: directory, olderThan: JobRunner.staleTemporaryAge, now: anHourLater, dryRun: false)
    XCTAssertEqual(swept.count, 1)
    XCTAssertFalse(FileManager.default.fileExists(atPath: stale))
  }

  /// Shards share a cache: a temporary file a little newer than a run's start is another
  /// worker's store in flight, not a clock that ran ahead. The sweep leaves its times alone
  /// (it used to re-date it, and failed the run, exit 4, when the store renamed it meanwhile:
  /// seen in SlurmTests' four workers).
  func testAnotherWorkersTemporaryFileInFlightIsLeftAlone() throws {
    let directory = location.diskCachePath
    try FileSystem.createDirectory(path: directory)
    let inFlight = directory + "/" + FileSystem.temporaryPrefix + "abc.jpg.x1"
    XCTAssertTrue(FileManager.default.createFile(atPath: inFlight, contents: Data(count: 10)))
    let runStarted = Date(timeIntervalSince1970: 1_800_000_000)
    let written = runStarted.addingTimeInterval(5)
    try FileSystem.setTimes(path: inFlight, access: written, modification: written)
    let swept = try FileSystem.removeStaleTemporaries(
      in: directory, olderThan: JobRunner.staleTemporaryAge, now: runStarted, dryRun: false)
    XCTAssertEqual(swept.count, 0)
    XCTAssertEqual(try FileSystem.attributes(atPath: inFlight)?.modificationDate, written)
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

  /// A leftover the sweep cannot remove (`chattr +i`) is a warning, as a file expire cannot
  /// delete is: the night's prefetch and passes stand (it used to end every run failed, exit 4,
  /// and keep `maintain` from expiring anything).
  func testAStaleTemporaryFileThatCannotBeRemovedIsAWarningAndTheRunGoesOn() async throws {
    let directory = location.diskCachePath
    try FileSystem.createDirectory(path: directory)
    let stuck = directory + "/" + FileSystem.temporaryPrefix + "abc.jpg.x1"
    let old = directory + "/old.jpg"
    for path in [stuck, old] {
      XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(count: 10)))
    }
    let twoHoursAgo = Date().addingTimeInterval(-7200)
    try FileSystem.setTimes(path: stuck, access: twoHoursAgo, modification: twoHoursAgo)
    try fileSystems.makeImmutable(stuck)

    var job = Job(name: "maintain", location: location)
    job.cleanup.maxDiskAge = 0
    job.passes = [.expire]
    job.report = temporary.appending("report.json")
    let outcome = try await JobRunner(job: job, console: RecordingConsole()).run()
    XCTAssertEqual(outcome.status, .completed)
    XCTAssertFalse(FileManager.default.fileExists(atPath: old), "the expire pass ran")
    let report = try RunReport.decode(
      try XCTUnwrap(FileManager.default.contents(atPath: temporary.appending("report.json"))))
    XCTAssertEqual(report.maintenance.first?.filesRemoved, 1)
    XCTAssertTrue(
      report.warnings.contains {
        $0.hasPrefix("a temporary file left by a killed run was not removed: ")
          && $0.contains(stuck)
      }, "\(report.warnings)")
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
    XCTAssertTrue(
      FileManager.default.fileExists(atPath: avatars.stateDirectory + "/state.sqlite"),
      "another namespace keeps its own state")
  }
}
