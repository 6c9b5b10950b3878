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

  /// A dry run reads the manifests as the run would: one that cannot be read as a whole (a
  /// manifest URL the server does not have) is a failed input of the dry run too, which then
  /// does not end as a success (exit 1).
  func testADryRunCountsAManifestThatFailedAsAWhole() async throws {
    var job = Job(name: "nightly", location: location)
    job.manifests = [try manifest(["/a.jpg"]), server.url("/no-such-list.txt")]
    let (outcome, _) = try await run(job, dryRun: true)
    XCTAssertEqual(outcome.failedInputs, 1)
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
  }

  /// Only a run that did not get through its URLs counts what its manifests list
  /// (`urlsListed`, for the URLs not tried, docs/reports.md): a completed run's report has
  /// none, and its manifests are not read a second time to count them.
  func testACompletedRunsReportCountsNoURLsListed() async throws {
    var job = Job(name: "nightly", location: location)
    job.manifests = [try manifest(["/a.jpg", "/b.png"])]
    let (outcome, report) = try await run(job)
    XCTAssertEqual(outcome.status, .completed)
    XCTAssertEqual(report.prefetch?.total, 2)
    XCTAssertNil(report.urlsListed)
  }

  func testOnlyTheListedPassesRun() async throws {
    try builder.file("old", accessTime: 1_000)
    var job = Job(name: "trim-only", location: location)
    job.passes = [.trim]
    let (_, report) = try await run(job)
    XCTAssertEqual(report.maintenance.map(\.pass), [.trim])
    XCTAssertEqual(try builder.remainingFiles(), ["old"], "no expire pass, no size limit")
  }

  /// A fleet's per-host budget M is shared: each of N shards takes M / N (rounded down, at
  /// least 1) in place of the job's own fixed per-host limit, and the run warns only when M is
  /// below N (each shard still opens one connection); at M = N each takes one, as asked.
  func testEachShardTakesItsShareOfTheFleetsPerHostBudgetAndOnlyTooSmallABudgetIsWarned()
    async throws
  {
    var job = Job(name: "fleet", location: location)
    job.shard = Shard(index: 0, count: 4)
    job.prefetch.perHostConcurrency = 6
    job.prefetch.fleetPerHostConcurrency = 13
    XCTAssertEqual(
      JobRunner(job: job, console: RecordingConsole()).job.prefetch.perHostConcurrency, 3)
    for (fleet, warned) in [(4, false), (3, true)] {
      job.prefetch.fleetPerHostConcurrency = fleet
      let (_, report) = try await run(job)
      XCTAssertEqual(
        report.warnings.contains { $0.hasPrefix("fleetPerHostConcurrency \(fleet) is less than") },
        warned, "fleet \(fleet): \(report.warnings)")
    }
  }

  /// A shard may not trim to a size limit (each shard sees only its own files), but a shard's
  /// job that lists trim with no size limit trims nothing and runs.
  func testAShardsTrimIsRefusedOnlyWithASizeLimit() async throws {
    var job = Job(name: "shard", location: location)
    job.shard = Shard(index: 0, count: 2)
    job.passes = [.trim]
    let (outcome, _) = try await run(job)
    XCTAssertEqual(outcome.status, .completed)
    job.cleanup.maxDiskSize = 1_000_000
    do {
      _ = try await run(job)
      XCTFail("a shard trimmed to a size limit")
    } catch {
      XCTAssertEqual(error as? MaintenanceError, .trimOnShard, "\(error)")
    }
  }

  /// The mirror of the above: a job that lists expire and not trim never trims, whatever its
  /// `cache.maxDiskSize` says; the size limit is for a trim pass the job lists.
  func testASizeLimitWithoutTheTrimPassTrimsNothing() async throws {
    let now = Int64(Date().timeIntervalSince1970)
    try builder.file("recent-1", size: 4096, accessTime: now)
    try builder.file("recent-2", size: 4096, accessTime: now)
    var job = Job(name: "expire-only", location: location)
    job.passes = [.expire]
    job.cleanup.maxDiskAge = 7 * 24 * 3600
    job.cleanup.maxDiskSize = 1
    let (_, report) = try await run(job)
    XCTAssertEqual(report.maintenance.map(\.pass), [.expire])
    XCTAssertEqual(try builder.remainingFiles(), ["recent-1", "recent-2"])
  }

  /// `cache.maxDelete` guards a real run: over it, the run deletes nothing and fails. A dry
  /// run over it shows the whole plan all the same, with a warning: it is how an operator
  /// checks the limits before the night.
  func testADryRunOverTheDeletionLimitShowsTheWholePlanAndARealRunDeletesNothing() async throws {
    for index in 0..<3 { try builder.file("old-\(index)", accessTime: 1_000) }
    var job = Job(name: "guarded", location: location)
    job.passes = [.expire]
    job.cleanup.maxDiskAge = 24 * 3600
    job.cleanup.maxDelete = .files(1)
    let (outcome, report) = try await run(job, dryRun: true)
    XCTAssertEqual(outcome.status, .completed)
    XCTAssertEqual(report.maintenance.first?.actions.count, 3, "the whole plan is shown")
    do {
      _ = try await run(job)
      XCTFail("the real run went over its deletion limit")
    } catch {
      guard case .overDeletionLimit(let planned, _, _) = error as? MaintenanceError else {
        return XCTFail("\(error)")
      }
      XCTAssertEqual(planned, 3)
    }
    XCTAssertEqual(try builder.remainingFiles(), ["old-0", "old-1", "old-2"])
  }

  /// A job file that lists no expire or trim pass says so (its author may have expected SD's
  /// own expiry); a `prefetch` of manifests, which is no job file, does not.
  func testOnlyAJobFileWithoutCleaningPassesIsToldItHasNone() async throws {
    var job = Job(name: "nightly", location: location)
    for file in [nil, temporary.appending("nightly.yaml")] {
      job.file = file
      let console = RecordingConsole()
      _ = try await run(job, console: console)
      let told = console.reported.contains {
        if case .noCleaningPasses = $0 { return true }
        return false
      }
      XCTAssertEqual(told, file != nil, "job file \(file ?? "none")")
    }
  }

  /// A run that finds earlier runs still marked running (killed with -9, a power loss) marks
  /// them abandoned and says so, in its report too.
  func testARunSaysItFoundEarlierRunsThatDiedWithoutFinishing() async throws {
    let store = try StateStore(location: location)
    _ = try store.beginRun(job: "killed", at: Date().addingTimeInterval(-3600))
    var job = Job(name: "nightly", location: location)
    job.manifests = [try manifest(["/a.jpg"])]
    let (_, report) = try await run(job)
    XCTAssertTrue(
      report.warnings.contains { $0.hasPrefix("marked 1 earlier run(s) abandoned") },
      "\(report.warnings)")
    let (_, next) = try await run(job)
    XCTAssertFalse(next.warnings.contains { $0.contains("abandoned") }, "\(next.warnings)")
  }

  /// The console says the first 20 failed URLs, then that the others are in the report only:
  /// a night of thousands of failures does not bury the summary.
  func testTheConsoleSaysTheFirstTwentyFailuresAndTheReportListsThemAll() async throws {
    var job = Job(name: "nightly", location: location)
    job.manifests = [try manifest((0..<23).map { "/page.jpg?n=\($0)" })]
    let console = RecordingConsole()
    let (outcome, report) = try await run(job, console: console)
    XCTAssertEqual(outcome.failedURLs, 23)
    XCTAssertEqual(report.prefetch?.failures.count, 23)
    let said = console.reported.filter {
      if case .urlFailed = $0 { return true }
      return false
    }
    let further = console.reported.filter {
      if case .furtherFailuresInReportOnly = $0 { return true }
      return false
    }
    XCTAssertEqual(said.count, 20)
    XCTAssertEqual(further.count, 1)
  }

  /// A failure whose cause is the run's set-up (a host that cannot be reached) has its message
  /// said in full once for all its URLs; each URL's failure is still said by name.
  func testTheCauseOfAFailureIsSaidOnceForAllItsURLs() async throws {
    // A port of the loopback address that nothing listens on: bound, then closed.
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let port = withUnsafeMutablePointer(to: &address) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> UInt16 in
        guard bind(fd, raw, length) == 0, getsockname(fd, raw, &length) == 0 else { return 0 }
        return UInt16(bigEndian: pointer.pointee.sin_port)
      }
    }
    close(fd)
    XCTAssertNotEqual(port, 0)
    let path = temporary.appending("unreachable.txt")
    try (0..<3).map { "http://127.0.0.1:\(port)/\($0).jpg" }.joined(separator: "\n").write(
      toFile: path, atomically: true, encoding: .utf8)
    var job = Job(name: "nightly", location: location)
    job.manifests = [path]
    job.prefetch.retries = 0
    let console = RecordingConsole()
    let (outcome, _) = try await run(job, console: console)
    XCTAssertEqual(outcome.failedURLs, 3)
    let causes = console.reported.filter {
      if case .failureCause = $0 { return true }
      return false
    }
    XCTAssertEqual(causes.count, 1, "\(console.reported)")
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
