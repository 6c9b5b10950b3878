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
}
