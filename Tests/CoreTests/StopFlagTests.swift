import Core
import Foundation
import Synchronization
import XCTest

/// The run's one stop channel: what waits on it wakes when it is set, once, and nothing polls.
final class StopFlagTests: XCTestCase {
  func testEachHandlerIsCalledOnceWhenSetAndAtOnceWhenSetAlready() {
    let flag = StopFlag()
    let calls = Mutex<[String]>([])
    flag.onStop { calls.withLock { $0.append("first") } }
    let forgotten = flag.onStop { calls.withLock { $0.append("forgotten") } }
    flag.onStop { calls.withLock { $0.append("second") } }
    forgotten.cancel()
    XCTAssertEqual(calls.withLock { $0 }, [], "nothing before the flag is set")
    flag.stop()
    flag.stop()
    XCTAssertTrue(flag.isStopped)
    XCTAssertEqual(calls.withLock { $0 }, ["first", "second"], "in order, once each")
    flag.onStop { calls.withLock { $0.append("late") } }
    XCTAssertEqual(calls.withLock { $0 }.last, "late", "a late observer is told at once")
  }

  func testAWaitingTaskWakesWhenTheFlagIsSet() async {
    let flag = StopFlag()
    let waiter = Task { await flag.wait() }
    // Set from another thread, as a signal's delivery sets it.
    Thread.detachNewThread { flag.stop() }
    await waiter.value
    XCTAssertTrue(flag.isStopped)
    await flag.wait()  // set already: returns at once
  }

  func testAWaitEndsWhenItsTaskIsCancelledWithoutTheFlag() async {
    let flag = StopFlag()
    let waiter = Task { await flag.wait() }
    waiter.cancel()
    await waiter.value
    XCTAssertFalse(flag.isStopped, "a cancelled wait sets nothing")
  }
}
