import Core
import Foundation
import HTTP
import Maintenance
import Pipeline
import Prefetcher
import Runner
import State
import Synchronization
import TestSupport
import XCTest

/// What a run reported, kept for assertions; `onEvent` may act on an event (send a signal,
/// say).
final class RecordingConsole: RunConsole {
  private let events = Mutex<[RunEvent]>([])
  private let onEvent: @Sendable (RunEvent) -> Void

  init(onEvent: @escaping @Sendable (RunEvent) -> Void = { _ in }) {
    self.onEvent = onEvent
  }

  func report(_ event: RunEvent) {
    events.withLock { $0.append(event) }
    onEvent(event)
  }

  func progress(total: @escaping @Sendable () -> Int?) -> (any PrefetchProgress)? { nil }

  var reported: [RunEvent] { events.withLock { $0 } }
}

/// SPEC sections 4-6 through the runner library, without the binary: jobs as the command line
/// would build them, against a loopback server and real folders.
final class JobRunnerTests: LoopbackTestCase {
  var location: CacheLocation!
  var builder: CacheBuilder!

  override var routes: [String: Route] {
    [
      "/a.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
      "/b.png": { _ in .image(Fixtures.png, type: "image/png") },
      "/c.gif": { _ in .image(Fixtures.gif, type: "image/gif") },
      "/page.jpg": { _ in .image(Data("<html></html>".utf8), type: "text/html") },
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
    builder = CacheBuilder(root: location.diskCachePath)
  }

  private func manifest(_ paths: [String]) throws -> String {
    let path = temporary.appending("urls.txt")
    try paths.map(server.url).joined(separator: "\n").write(
      toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  private func run(
    _ job: Job, dryRun: Bool = false, verbose: Bool = false,
    console: RecordingConsole = RecordingConsole()
  ) async throws -> (RunOutcome, RunReport) {
    var settings = RunSettings()
    settings.dryRun = dryRun
    settings.verbose = verbose
    settings.reportFiles = [temporary.appending("reports/{job}.json")]
    let outcome = try await JobRunner(job: job, settings: settings, console: console).run()
    let data = try XCTUnwrap(FileManager.default.contents(atPath: outcome.reportFiles[0]))
    return (outcome, try RunReport.decode(data))
  }

  func testAJobMigratesThenPrefetchesThenExpiresAndTrims() async throws {
    // SD 4's folder beside the cache holds a.jpg under its pre-3.7.4 name (no extension) and
    // a file nobody read for years.
    let legacy = CacheBuilder(
      root: temporary.appending("default/com.hackemist.SDWebImageCache.default"))
    let now = Int64(Date().timeIntervalSince1970)
    try legacy.file(CacheFileName.md5Hex(server.url("/a.jpg")), size: 50, accessTime: now)
    try legacy.file("forgotten", size: 4096, accessTime: 1_000)
    var job = Job(name: "nightly", location: location)
    job.manifests = [try manifest(["/a.jpg", "/b.png", "/c.gif"])]
    job.passes = [.migrate, .expire, .trim]
    job.cleanup = CleanupConfiguration(maxDiskAge: 30 * 86_400, maxDiskSize: 1_000_000_000)

    let (outcome, report) = try await run(job)

    XCTAssertEqual(outcome.status, .completed)
    XCTAssertNil(outcome.signal)
    XCTAssertEqual(outcome.failedURLs, 0)
    XCTAssertEqual(report.maintenance.map(\.pass), [.migrate, .migrate, .expire, .trim])
    XCTAssertEqual(report.maintenance[0].filesMoved, 2, "both legacy files merged in")
    XCTAssertEqual(report.maintenance[1].filesMoved, 1, "a.jpg renamed to its SD 5 name")
    let prefetch = try XCTUnwrap(report.prefetch)
    XCTAssertEqual(prefetch.diskHits, 1, "the migrated a.jpg is a hit")
    XCTAssertEqual(prefetch.downloaded, 2)
    XCTAssertEqual(
      Set(prefetch.downloads.map(\.url)), [server.url("/b.png"), server.url("/c.gif")])
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
    XCTAssertEqual(report.maintenance[2].filesRemoved, 1, "the forgotten file expired")
    XCTAssertEqual(report.maintenance[3].filesRemoved, 0, "far below the size limit")
    XCTAssertEqual(
      try builder.remainingFiles(),
      [server.url("/a.jpg"), server.url("/b.png"), server.url("/c.gif")].map(
        CacheFileName.fileName(forKey:)
      ).sorted())
  }

  func testADryRunDownloadsNothingAndDeletesNothing() async throws {
    try builder.file("old", accessTime: 1_000)
    var job = Job(name: "nightly", location: location)
    job.manifests = [try manifest(["/a.jpg"])]
    job.passes = [.expire, .trim]
    let (outcome, report) = try await run(job, dryRun: true)
    XCTAssertEqual(outcome.status, .completed)
    XCTAssertNil(report.prefetch)
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
    XCTAssertEqual(report.maintenance[0].actions.map(\.path), ["old"])
    XCTAssertTrue(report.maintenance[0].dryRun)
    XCTAssertEqual(try builder.remainingFiles(), ["old"])
  }

  func testOnlyTheListedPassesRun() async throws {
    try builder.file("old", accessTime: 1_000)
    var job = Job(name: "trim-only", location: location)
    job.passes = [.trim]
    let (_, report) = try await run(job)
    XCTAssertEqual(report.maintenance.map(\.pass), [.trim])
    XCTAssertEqual(try builder.remainingFiles(), ["old"], "no expire pass, no size limit")
  }

  func testTwoJobsOnOneCacheRunOneAfterTheOther() async throws {
    var job = Job(name: "first", location: location)
    job.manifests = [try manifest(["/a.jpg", "/page.jpg"])]
    job.passes = []
    let (first, firstReport) = try await run(job)
    XCTAssertEqual(first.failedURLs, 1)
    XCTAssertEqual(firstReport.prefetch?.failures.map(\.name), ["badImageData"])
    XCTAssertEqual(firstReport.prefetch?.blacklistedURLs, [server.url("/page.jpg")])
    job.name = "second"
    let (second, secondReport) = try await run(job)
    XCTAssertEqual(second.failedURLs, 0)
    XCTAssertEqual(secondReport.prefetch?.diskHits, 1)
    XCTAssertEqual(secondReport.prefetch?.blacklisted, 1, "refused up front this time")
    XCTAssertEqual(server.requestCount("/page.jpg"), 1)
  }

  func testAMissingManifestFailsALibraryRunBeforeItDoesAnything() async throws {
    var job = Job(name: "nightly", location: location)
    let missing = temporary.appending("gone.txt")
    job.manifests = [try manifest(["/a.jpg"]), missing]
    do {
      _ = try await run(job)
      XCTFail("the run went ahead without its manifest")
    } catch let error as ConfigurationError {
      XCTAssertEqual(error.description, "manifest \(missing): no such file")
    }
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: location.diskCachePath), "no cache made, no lock")
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
  }

  func testAHeldLockFailsTheRunBeforeItDoesAnything() async throws {
    try builder.file("old", accessTime: 1_000)
    var job = Job(name: "blocked", location: location)
    job.passes = [.expire]
    try await RunLock.withLock(location: location, wait: false) {
      do {
        _ = try await JobRunner(job: job, console: RecordingConsole()).run()
        XCTFail("ran while the lock was held")
      } catch let failure as RunLock.Failure {
        guard case .held = failure else { return XCTFail("\(failure)") }
      }
    }
    XCTAssertEqual(try builder.remainingFiles(), ["old"])
  }

  func testSIGINTDuringATrimStopsAfterTheFileInHandAndReportsInterrupted() async throws {
    for index in 0..<2_000 {
      try builder.file("f\(index)", size: 10, accessTime: 10_000 + Int64(index))
    }
    var job = Job(name: "trim", location: location)
    job.passes = [.expire, .trim]
    job.cleanup = CleanupConfiguration(maxDiskAge: -1, maxDiskSize: 1)
    let sent = Atomic<Bool>(false)
    let console = RecordingConsole { event in
      guard case .passAction(let action, let pass) = event, pass.pass == .trim,
        action.kind == .delete, action.path == "f50",
        sent.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
      else { return }
      kill(getpid(), SIGINT)
    }

    let (outcome, report) = try await run(job, verbose: true, console: console)

    XCTAssertEqual(outcome.signal, SIGINT)
    XCTAssertEqual(outcome.status, .interrupted)
    XCTAssertEqual(report.status, .interrupted)
    let trim = try XCTUnwrap(report.maintenance.last)
    XCTAssertEqual(trim.pass, .trim)
    let remaining = try builder.remainingFiles().count
    XCTAssertGreaterThan(remaining, 0, "stopped before the end")
    XCTAssertEqual(trim.filesRemoved, 2_000 - remaining, "every delete made is reported")
    XCTAssertEqual(trim.actions.count, trim.filesRemoved)
    XCTAssertTrue(
      console.reported.contains {
        if case .interrupted(_, SIGINT) = $0 { true } else { false }
      })
  }
}
