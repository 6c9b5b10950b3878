import Foundation
import XCTest

@testable import HTTP

/// Review of the binomial tail and the stragglers (issue 44's fourth session): failing tests.
final class AdaptiveLimitReviewTests: XCTestCase {
  private let service: UInt64 = 20_000_000  // 20 ms

  func testTheBinomialTailOfALargeRoundDoesNotUnderflowToOne() {
    // A round at a limit of 2000 (the ceiling may be up to 10 000), each answer late by
    // chance 0.4: 1000 late is nine standard deviations past the mean of 800. (1 - p)^n
    // underflows to zero, every term stays zero, and the tail comes out as 1: no queue, ever.
    let tail = AdaptiveLimit.binomialTail(atLeast: 1000, of: 2000, each: 0.4)
    XCTAssertLessThan(tail, 1e-6, "\(tail)")
    // Every answer of a round of 10 000 late, one in ten late by chance: no chance at all.
    XCTAssertLessThan(AdaptiveLimit.binomialTail(atLeast: 10_000, of: 10_000, each: 0.1), 1e-6)
    XCTAssertTrue(AdaptiveLimit.queued(late: 10_000, of: 10_000, batches: 1, chance: 0.1))
  }

  func testTheBinomialTailAgreesWithKnownValues() {
    // 2 or more late of 16 at 1/60: 1 - (59/60)^16 - 16 (1/60) (59/60)^15 = 0.0247.
    XCTAssertEqual(
      AdaptiveLimit.binomialTail(atLeast: 2, of: 16, each: 1.0 / 60), 0.02855, accuracy: 1e-4)
    XCTAssertEqual(AdaptiveLimit.binomialTail(atLeast: 0, of: 0, each: 0.5), 1)
    XCTAssertEqual(AdaptiveLimit.binomialTail(atLeast: 1, of: 0, each: 0.5), 0)
    // (Summed as 1 less the terms below, a tail under ~1e-15 is lost to rounding: harmless
    // against lateByChanceAtMost, so only its order is checked.)
    XCTAssertLessThan(AdaptiveLimit.binomialTail(atLeast: 256, of: 256, each: 0.5), 1e-12)
  }

  func testLateAnswersFromBeforeARefusalAreNoSampleOfTheOriginsUsualTimes() {
    scenario(stragglersBeforeCut: true)
  }

  func testLateAnswersAfterARefusalAreNoSample() {
    // The control: the same late answers, come after the cut, are ignored.
    scenario(stragglersBeforeCut: false)
  }

  private func scenario(stragglersBeforeCut: Bool) {
    // Slow start at 17 on its way to 64, the usual time 20 ms. What was sent at 16 comes
    // back late (80 ms: a queue), then a 503 cuts the limit. Those late answers came before
    // the cut: kept as stragglers, they are pooled with the first clean round after it and
    // lift the baseline (what nine in ten took) to 80 ms, so that a queue at 60 ms (three
    // service times, twice the tolerance of the usual 20) is no longer late: the median's
    // move cuts once, and the rounds after it are judged (and pooled) clean at 60 ms.
    var adaptive = AdaptiveLimit(ceiling: 64)
    for _ in 0..<(4 + 3 + 7 + 16) { adaptive.answered(after: service) }
    XCTAssertEqual([adaptive.limit, adaptive.target], [17, 64])
    let epoch = adaptive.epoch
    if stragglersBeforeCut {
      for _ in 0..<16 { adaptive.answered(after: service * 4, sentIn: epoch - 1) }
    }
    XCTAssertTrue(adaptive.failed(.refused, sentIn: epoch))
    if !stragglersBeforeCut {
      for _ in 0..<16 { adaptive.answered(after: service * 4, sentIn: epoch - 1) }
    }
    let cutTo = adaptive.limit
    XCTAssertEqual(cutTo, 13)
    // One clean round at the cut limit.
    for _ in 0..<AdaptiveLimit.length(cutTo) { adaptive.answered(after: service) }
    XCTAssertEqual(adaptive.cuts, [.refused: 1], "a clean round")
    // Now the origin queues: every answer three times its usual time (twice the tolerance).
    for _ in 0..<200 where adaptive.cuts[.queue] == nil { adaptive.answered(after: service * 3) }
    XCTAssertEqual(adaptive.cuts[.queue], 1)
    let queuedAt = adaptive.limit
    // The round after the cut is as late: it queued too, and is no clean round at that limit.
    for _ in 0..<AdaptiveLimit.length(queuedAt) { adaptive.answered(after: service * 3) }
    XCTAssertEqual(
      adaptive.cuts[.queue], 2,
      "60 ms judged clean against a usual 20 ms: at \(queuedAt), \(adaptive.cuts)")
  }
}
