import Foundation
import Runner
import Synchronization
import TestSupport
import XCTest

#if canImport(Glibc)
  import Glibc
#endif

/// One signal scope per process (issue 32): signal dispositions are process-wide, so a second
/// scope would silently take the signals from the run that holds the first.
final class SignalScopeTests: XCTestCase {
  func testANestedScopeIsRefusedAndTheOuterOneStillHearsTheSignal() async throws {
    try await SignalScope.with { outer in
      let nestedRan = Atomic<Bool>(false)
      do {
        try await SignalScope.with { _ in nestedRan.store(true, ordering: .relaxed) }
        XCTFail("a second scope was let in")
      } catch let error as SignalScope.AlreadyActive {
        XCTAssertTrue(error.description.contains("one run at a time per process"), "\(error)")
      }
      XCTAssertFalse(nestedRan.load(ordering: .relaxed), "the refused scope's body never runs")
      kill(getpid(), SIGTERM)
      await waitUntil(timeout: 10, "the outer scope to hear SIGTERM") { outer.signal != nil }
      XCTAssertEqual(outer.signal, SIGTERM)
      XCTAssertTrue(outer.stop.isStopped)
    }
  }

  func testAScopeCanBeOpenedAgainOnceTheLastOneEnded() async throws {
    try await SignalScope.with { _ in }
    let signal = try await SignalScope.with { scope in
      kill(getpid(), SIGHUP)
      await waitUntil(timeout: 10, "the second scope to hear SIGHUP") { scope.signal != nil }
      return scope.signal
    }
    XCTAssertEqual(signal, SIGHUP)
  }
}
