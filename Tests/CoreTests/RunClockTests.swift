import Core
import Foundation
import XCTest

/// A run's times across a step of the wall clock (issue 38): the duration is the monotonic
/// clock's, and a report never ends before it starts.
final class RunClockTests: XCTestCase {
  private let start = Date(timeIntervalSince1970: 1_763_870_400)

  func testAnEndTheClockPutsBeforeTheStartIsTheStartPlusTheDuration() {
    let finish = RunClock.finish(
      startedAt: start, observed: start.addingTimeInterval(-3600), durationSeconds: 5)
    XCTAssertEqual(finish.finishedAt, start.addingTimeInterval(5))
    XCTAssertEqual(finish.durationSeconds, 5)
    XCTAssertEqual(finish.clockStep ?? 0, -3605, accuracy: 0.001)
  }

  func testAStepForwardKeepsTheObservedEndAndIsSaid() {
    let finish = RunClock.finish(
      startedAt: start, observed: start.addingTimeInterval(3605), durationSeconds: 5)
    XCTAssertEqual(finish.finishedAt, start.addingTimeInterval(3605))
    XCTAssertEqual(finish.durationSeconds, 5)
    XCTAssertEqual(finish.clockStep ?? 0, 3600, accuracy: 0.001)
  }

  func testAnUnsteppedRunSaysNoStep() {
    let finish = RunClock.finish(
      startedAt: start, observed: start.addingTimeInterval(5.2), durationSeconds: 5)
    XCTAssertEqual(finish.finishedAt, start.addingTimeInterval(5.2))
    XCTAssertNil(finish.clockStep)
  }
}
