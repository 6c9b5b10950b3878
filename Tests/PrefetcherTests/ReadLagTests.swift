import XCTest

@testable import HTTP

/// What an answer waited in the kernel before the loop read it (``ReadLag``): a bound from
/// below, from the connection's idle time in the kernel's ticks.
final class ReadLagTests: XCTestCase {
  private let ms: UInt64 = 1_000_000

  func testTheKernelsTickIsTheCoarseClocksResolution() {
    XCTAssertTrue((ms / 10...10 * ms).contains(ReadLag.kernelTick), "\(ReadLag.kernelTick) ns")
  }

  func testAnIdleTimeOfNTicksIsMoreThanNLessTwoTicksWait() {
    let lag = ReadLag(tick: 4 * ms)
    // 20 ms: 5 ticks, so more than 3 ticks (12 ms) came and went since the data came; the
    // loop read it 2 ms ago: it waited more than 10 ms.
    XCTAssertEqual(lag.unread(idleMilliseconds: 20, sinceRead: 2 * ms), 10 * ms)
    XCTAssertEqual(lag.unread(idleMilliseconds: 12, sinceRead: 0), 4 * ms)
    // At 300 Hz the kernel says 10 ms for 3 ticks: more than one tick.
    XCTAssertEqual(ReadLag(tick: 3_333_333).unread(idleMilliseconds: 10, sinceRead: 0), 3_333_333)
    // At 1000 Hz, closer.
    XCTAssertEqual(ReadLag(tick: ms).unread(idleMilliseconds: 20, sinceRead: 3 * ms), 15 * ms)
  }

  func testAnAnswerReadAsItCameWaitedNothingThatIsProven() {
    let lag = ReadLag(tick: 4 * ms)
    XCTAssertEqual(lag.unread(idleMilliseconds: 0, sinceRead: 0), 0)
    XCTAssertEqual(lag.unread(idleMilliseconds: 8, sinceRead: 0), 0, "two ticks prove nothing")
    XCTAssertEqual(lag.unread(idleMilliseconds: 20, sinceRead: 12 * ms), 0, "read as it came")
    XCTAssertEqual(lag.unread(idleMilliseconds: 20, sinceRead: .max), 0)
    XCTAssertEqual(lag.unread(idleMilliseconds: .max, sinceRead: 0), 0, "past the kernel's count")
    XCTAssertEqual(lag.unread(idleMilliseconds: -1, sinceRead: 0), 0)
  }
}
