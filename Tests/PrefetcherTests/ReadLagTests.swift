import XCTest

@testable import HTTP

/// What an answer waited in the kernel before the loop read it (``ReadLag``): a bound from
/// below, from the connection's idle time in the kernel's ticks and when the current tick began.
final class ReadLagTests: XCTestCase {
  private let ms: UInt64 = 1_000_000

  func testTheKernelsTickIsTheCoarseClocksResolution() {
    XCTAssertTrue((ms / 10...10 * ms).contains(ReadLag.kernelTick), "\(ReadLag.kernelTick) ns")
    let coarse = ReadLag.now(CLOCK_MONOTONIC_COARSE)
    let fine = ReadLag.now(CLOCK_MONOTONIC)
    XCTAssertLessThanOrEqual(coarse, fine + ReadLag.kernelTick, "the same clock, coarser")
    XCTAssertGreaterThan(coarse + 2 * ReadLag.kernelTick, fine)
  }

  func testTheFirstByteCameBeforeTheEndOfTheTickTheKernelCountsFrom() {
    let lag = ReadLag(tick: 4 * ms)
    // Idle 12 ms: 3 ticks, so the data came in the tick that ended 8 ms before the current
    // one began (at 1,000 ms); read at 999 ms, it waited more than 7 ms.
    XCTAssertEqual(lag.unread(idleMilliseconds: 12, tickBegan: 1000 * ms, read: 999 * ms), 7 * ms)
    XCTAssertEqual(
      lag.unread(idleMilliseconds: 12, tickBegan: 1000 * ms, read: 1003 * ms), 11 * ms,
      "read after the current tick began")
    // One tick: it came before the current tick began.
    XCTAssertEqual(lag.unread(idleMilliseconds: 4, tickBegan: 1000 * ms, read: 1001 * ms), ms)
    // At 300 Hz the kernel says 10 ms for 3 ticks.
    let odd = ReadLag(tick: 3_333_333)
    XCTAssertEqual(
      odd.unread(idleMilliseconds: 10, tickBegan: 1000 * ms, read: 1000 * ms), 6_666_666)
  }

  func testAnAnswerReadAsItCameWaitedNothingThatIsProven() {
    let lag = ReadLag(tick: 4 * ms)
    XCTAssertEqual(lag.unread(idleMilliseconds: 0, tickBegan: 1000 * ms, read: 1003 * ms), 0)
    XCTAssertEqual(
      lag.unread(idleMilliseconds: 12, tickBegan: 1000 * ms, read: 991 * ms), 0,
      "read before the data can be proven to have come")
    XCTAssertEqual(lag.unread(idleMilliseconds: 12, tickBegan: 1000 * ms, read: 992 * ms), 0)
    XCTAssertEqual(
      lag.unread(idleMilliseconds: .max, tickBegan: 1000 * ms, read: 1000 * ms), 0,
      "an idle time past the clock's start says nothing")
    XCTAssertEqual(lag.unread(idleMilliseconds: -1, tickBegan: 1000 * ms, read: 1000 * ms), 0)
  }
}
