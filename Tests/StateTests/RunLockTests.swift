import Core
import Foundation
import Synchronization
import TestSupport
import XCTest

@testable import State

/// The run lock's wait (`--wait`, SPEC section 8) seen from a library caller.
final class RunLockTests: TemporaryFolderTestCase {
  var location: CacheLocation!

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.path, namespace: "default")
  }

  /// A run waiting for the lock is a task like any other: cancelling it ends the wait at once,
  /// without taking the lock, instead of waiting out the holder or the timeout.
  func testCancellingAWaitForTheLockEndsItAtOnce() async throws {
    let holder = try RunLock.acquire(location: location)
    defer { holder.release() }
    let waiting = Mutex(false)
    let ran = Mutex(false)
    let started = Date()
    let waiter = Task { [location = location!] in
      try await RunLock.withLock(
        location: location, options: RunLock.Options(wait: true, timeout: 10),
        waiting: { _ in waiting.withLock { $0 = true } }
      ) { ran.withLock { $0 = true } }
    }
    _ = await waitUntil(timeout: 5, "the second run to begin to wait") { () async in
      waiting.withLock { $0 }
    }
    XCTAssertTrue(waiting.withLock { $0 }, "the second run never began to wait")
    waiter.cancel()
    let result = await waiter.result
    XCTAssertLessThan(Date().timeIntervalSince(started), 5, "it waited on after the cancel")
    XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
    XCTAssertFalse(ran.withLock { $0 }, "it ran without the lock")
  }

  /// The wait ends when the holder releases the lock, and the waiter then holds it.
  func testAWaitEndsWhenTheHolderReleasesTheLock() async throws {
    let holder = try RunLock.acquire(location: location)
    let waiting = Mutex(false)
    let waiter = Task { [location = location!] in
      try await RunLock.withLock(
        location: location, options: RunLock.Options(wait: true, timeout: 10),
        waiting: { _ in waiting.withLock { $0 = true } }
      ) {
        XCTAssertThrowsError(try RunLock.acquire(location: location), "held by the waiter now")
      }
    }
    _ = await waitUntil(timeout: 5, "the second run to begin to wait") { () async in
      waiting.withLock { $0 }
    }
    holder.release()
    try await waiter.value
  }
  /// Without --wait, a held lock is refused at once (exit 3), naming the run that holds it
  /// and when that run started, and the second run's work never starts.
  func testWithoutWaitingAHeldLockIsRefusedAtOnceNamingItsHolderAndItsStart() async throws {
    let holder = try RunLock.acquire(location: location)
    defer { holder.release() }
    let ran = Mutex(false)
    do {
      // A timeout, which only a wait heeds: a run that waited would fail in 5 s, not hang.
      try await RunLock.withLock(
        location: location, options: RunLock.Options(wait: false, timeout: 5)
      ) {
        ran.withLock { $0 = true }
      }
      XCTFail("the lock was taken while another run held it")
    } catch let failure as RunLock.Failure {
      guard case .held(_, let who) = failure else { return XCTFail("\(failure)") }
      XCTAssertEqual(who?.pid, getpid())
      let started = try XCTUnwrap(who?.startedAt, "the holder's start is not said")
      let date = try XCTUnwrap(ISO8601DateFormatter().date(from: started), started)
      XCTAssertLessThan(abs(date.timeIntervalSinceNow), 600, started)
      XCTAssertTrue("\(failure)".contains("started at \(started)"), "\(failure)")
      XCTAssertEqual(failure.exitStatus, .locked)
    }
    XCTAssertFalse(ran.withLock { $0 }, "it ran without the lock")
  }

  /// The shards of a fleet share the cache's lock, each holding its own shard's alone: a
  /// second worker started for the same shard (a retried task while the first still runs)
  /// is refused, as is an unsharded run, while another shard runs beside it.
  func testTwoWorkersOfOneShardNeverRunAtOnce() throws {
    let zero = try XCTUnwrap(Shard(index: 0, count: 2))
    let one = try XCTUnwrap(Shard(index: 1, count: 2))
    let first = try RunLock.acquire(location: location, shard: zero)
    defer { first.release() }
    let other = try RunLock.acquire(location: location, shard: one)
    defer { other.release() }
    for (shard, what) in [(zero, "the same shard"), (nil, "an unsharded run")] {
      XCTAssertThrowsError(try RunLock.acquire(location: location, shard: shard), what) {
        guard case .held = $0 as? RunLock.Failure else { return XCTFail("\(what): \($0)") }
      }
    }
  }
}
