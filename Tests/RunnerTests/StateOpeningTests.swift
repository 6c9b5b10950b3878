import Core
import Foundation
import Runner
import Synchronization
import TestSupport
import XCTest

@testable import State

/// Issue 46, item 2: a prefetch's state opens beside its first requests. A state that turns
/// out not to open once they are out still fails the run as it did when it failed before them:
/// its error and exit code 4, a report marked failed with no outcome, nothing partial in the
/// cache, and the lock released.
final class StateOpeningTests: TemporaryFolderTestCase {
  var server: LoopbackServer!
  var location: CacheLocation!
  /// Held by the test until the first request is in: the run's opening waits for it.
  let writerReleased = DispatchSemaphore(value: 0)

  override func setUpWithError() throws {
    try super.setUpWithError()
    let location = CacheLocation(directory: temporary.appending("cache"))
    self.location = location
    let released = writerReleased
    server = try LoopbackServer(routes: [
      // The state's file system fills, and then the state can be written again: the run's
      // opening, which waited for it, fails to record the run.
      "/first.jpg": { _ in
        RunEndingFailureTests.fill(location.stateDirectory + "/filler")
        released.signal()
        return .image(Fixtures.jpeg, type: "image/jpeg")
      },
      "/answered.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
    ])
  }

  override func tearDown() {
    server.shutdown()
    super.tearDown()
  }

  /// Takes `store`'s write lock on a thread of its own, as another connection would, and
  /// returns once it is held; `holding` runs inside the transaction, and the lock goes with it.
  private func holdWriteLock(of store: StateStore, holding: @escaping @Sendable () -> Void) {
    let held = DispatchSemaphore(value: 0)
    Thread {
      try? store.write { _ in
        held.signal()
        holding()
      }
    }.start()
    held.wait()
  }

  /// A prefetch of the server's `path` alone into the test's cache, with a report file.
  private func run(of path: String) throws -> (Job, RunSettings) {
    let manifest = temporary.appending("urls.txt")
    try server.url(path).write(toFile: manifest, atomically: true, encoding: .utf8)
    var job = Job(name: "opening", location: location)
    job.manifests = [manifest]
    job.passes = []
    var settings = RunSettings()
    settings.reportFiles = [temporary.appending("report.json")]
    return (job, settings)
  }

  func testAStateThatFailsToOpenOnceTheFirstRequestIsOutFailsTheRunAsBefore() async throws {
    _ = try fileSystems.mountTmpfs(at: location.stateDirectory, size: "1m")
    // Another connection holds the state's write lock: the run's opening waits for it (SQLite's
    // busy timeout) while the first request goes out.
    let store = try StateStore(location: location)
    let released = writerReleased
    holdWriteLock(of: store) { _ = released.wait(timeout: .now() + 5) }

    let (job, settings) = try run(of: "/first.jpg")
    let console = RecordingConsole()
    var thrown: (any Error)?
    do {
      _ = try await JobRunner(job: job, settings: settings, console: console).run()
    } catch {
      thrown = error
    }

    XCTAssertEqual(
      server.requestCount("/first.jpg"), 1, "the request went out before the state opened")
    let error = try XCTUnwrap(thrown as? StateStoreError, "\(String(describing: thrown))")
    XCTAssertEqual(error.path, store.path)
    XCTAssertEqual((thrown as? any ExitStatusProviding)?.exitStatus, .fatalIO)
    XCTAssertTrue(
      console.reported.contains { if case .runFailed = $0 { true } else { false } },
      "\(console.reported)")
    let data = try XCTUnwrap(FileManager.default.contents(atPath: settings.reportFiles[0]))
    let report = try RunReport.decode(data)
    XCTAssertEqual(report.status, .failed)
    XCTAssertTrue(report.error?.contains(store.path) ?? false, report.error ?? "no error")
    XCTAssertNil(report.prefetch, "no outcome: the loads were cut short")
    let left = try FileManager.default.contentsOfDirectory(atPath: location.diskCachePath)
    XCTAssertEqual(
      left.filter { $0.hasPrefix(FileSystem.temporaryPrefix) }, [], "nothing partial is left")
    XCTAssertNoThrow(try RunLock.acquire(location: location).release(), "the lock is released")
  }

  /// The first download answered before the state fails to open is not stored: the run fails
  /// with no outcome, and a file in the cache would be one its report and state know nothing of
  /// (no URL for `verify`), which a state failing before the first request never left.
  func testADownloadAnsweredBeforeTheStateFailsToOpenIsNotStored() async throws {
    _ = try fileSystems.mountTmpfs(at: location.stateDirectory, size: "1m")
    let store = try StateStore(location: location)
    let stored = DiskCache(location: location).paths(forKey: server.url("/answered.jpg")).current
    let stateDirectory = location.stateDirectory
    // Holds the state's write lock until the answer is in the cache (or long enough for it to
    // be), then leaves the state's file system full: the run's opening then fails.
    holdWriteLock(of: store) {
      let deadline = Date().addingTimeInterval(3)
      while !FileManager.default.fileExists(atPath: stored) && Date() < deadline {
        usleep(10_000)
      }
      RunEndingFailureTests.fill(stateDirectory + "/filler")
    }

    let (job, settings) = try run(of: "/answered.jpg")
    do {
      _ = try await JobRunner(job: job, settings: settings, console: RecordingConsole()).run()
      XCTFail("the run succeeded without its state")
    } catch {
      XCTAssertTrue(error is StateStoreError, "\(error)")
    }

    XCTAssertEqual(server.requestCount("/answered.jpg"), 1)
    let report = try RunReport.decode(
      try XCTUnwrap(FileManager.default.contents(atPath: settings.reportFiles[0])))
    XCTAssertEqual(report.status, .failed)
    XCTAssertNil(report.prefetch)
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: stored), "stored, unknown to the report and state")
  }

  /// SIGTERM while the run's opening waits for another connection's lock on the state (SQLite's
  /// 10 s busy timeout): the wait ends, and the run stops within its 2 s grace period with its
  /// report marked interrupted and exit 143 (SPEC section 5), instead of being cut off by the
  /// deadline without one. Nothing is in the cache that the state does not know of.
  func testSIGTERMWhileTheStateWaitsForAnotherConnectionsLockReportsInterrupted() throws {
    let store = try StateStore(location: location)
    let release = DispatchSemaphore(value: 0)
    holdWriteLock(of: store) { _ = release.wait(timeout: .now() + 60) }
    var released = false
    defer { if !released { release.signal() } }

    let manifest = temporary.appending("urls.txt")
    try ["/answered.jpg", "/answered.jpg?n=2", "/answered.jpg?n=3"].map { server.url($0) }
      .joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
    let reportPath = temporary.appending("report.json")
    let (process, stdout, stderr) = try ImageCacheBinary.start([
      "prefetch", manifest, "--cache", location.directory, "--report", reportPath,
    ])
    // The first request goes out while the opening waits: the signals are handled by then.
    waitUntil(timeout: 30, "the first request") {
      server.requestCount("/answered.jpg") >= 1 || !process.isRunning
    }
    kill(process.processIdentifier, SIGTERM)
    waitUntil(timeout: 20, "the run to exit") { !process.isRunning }
    let result = ImageCacheBinary.finish(process, stdout, stderr)
    release.signal()
    released = true

    XCTAssertEqual(result.status, 128 + SIGTERM, result.stderr)
    XCTAssertFalse(result.stderr.contains("did not stop within"), result.stderr)
    let data = try XCTUnwrap(
      FileManager.default.contents(atPath: reportPath), "no report: \(result.stderr)")
    XCTAssertEqual(try RunReport.decode(data).status, .interrupted)
    let names = try FileManager.default.contentsOfDirectory(atPath: location.diskCachePath)
      .filter { !$0.hasPrefix(".") }
    for name in names {
      XCTAssertFalse(name.hasPrefix(FileSystem.temporaryPrefix), "partial file \(name)")
      XCTAssertNotNil(try store.storedURL(forFileName: name), "\(name): unknown to the state")
    }
  }
}
