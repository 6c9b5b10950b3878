import Core
import Foundation
import Maintenance
import State
import XCTest

@testable import Runner

/// SPEC section 6: each of our errors says which exit code ends the command it ends, in one
/// place, and the command line exits with it.
final class ExitStatusTests: XCTestCase {
  func testALockAnotherRunHoldsExits3AndOneThatCannotBeOpened4() {
    XCTAssertEqual(RunLock.Failure.held(path: "/c/lock", holder: nil).exitStatus, .locked)
    XCTAssertEqual(
      RunLock.Failure.stillHeld(path: "/c/lock", seconds: 5, holder: nil).exitStatus, .locked)
    XCTAssertEqual(RunLock.Failure.cannotOpen(path: "/c/lock", errno: EACCES).exitStatus, .fatalIO)
  }

  func testMistakesOfTheCommandOrTheJobExit2() {
    XCTAssertEqual(ConfigurationError(source: "job.yaml", message: "bad").exitStatus, .usage)
    XCTAssertEqual(MaintenanceError.trimOnShard.exitStatus, .usage)
    XCTAssertEqual(
      FileSystemError.refused("write report", path: "/c", because: "a folder").exitStatus, .usage)
  }

  func testFailuresOfTheMachineryExit4() {
    XCTAssertEqual(FileSystemError("write", path: "/c/a", errno: ENOSPC).exitStatus, .fatalIO)
    XCTAssertEqual(
      FileSystemError.refused("open", path: "/c/lock", because: "a link", usage: false)
        .exitStatus, .fatalIO)
    XCTAssertEqual(
      StateStoreError(
        path: "/c/state.sqlite", operation: "write", underlying: CocoaError(.fileWriteNoPermission)
      ).exitStatus,
      .fatalIO)
    XCTAssertEqual(
      RunEndingError(failure: .storeFailed(reason: "full", cause: .errno(ENOSPC))).exitStatus,
      .fatalIO)
  }

  /// A cache over its user's disk quota (EDQUOT) is as full as a full disk (ENOSPC): the
  /// job's expire and trim, which free room, still run after the store that failed. Any other
  /// store failure (a folder replaced, no permission) is not one.
  func testADiskOverQuotaCountsAsFullAndOtherStoreFailuresDoNot() {
    for (errno, full) in [(ENOSPC, true), (EDQUOT, true), (ENOTDIR, false), (EACCES, false)] {
      let error = RunEndingError(failure: .storeFailed(reason: "r", cause: .errno(errno)))
      XCTAssertEqual(JobRunner.diskFull(error), full, String(cString: strerror(errno)))
    }
  }
}
