import Core
import Foundation
import TestSupport
import XCTest

@testable import HTTP

/// The adaptive per-host limit's decisions on recorded series of times to first byte: an
/// origin that never queues (a CDN), one that serves 8 at a time and queues the rest, one
/// that changes during the run, noise, and refusals.
final class AdaptiveLimitTests: XCTestCase {
  private let service: UInt64 = 20_000_000  // 20 ms

  /// One round of answers from an origin that serves `capacity` at a time, `service` each, and
  /// queues the rest a whole service time more; `noise` up to that share of jitter on each.
  private func round(
    _ adaptive: AdaptiveLimit, capacity: Int = .max, noise: Double = 0.1,
    random: inout SeededRandom
  ) -> [UInt64] {
    // A round of fewer than `minimumRound` in flight spans several batches of the limit.
    let limit = adaptive.limit
    return (0..<adaptive.roundLength).map { index in
      let waits = index % limit >= capacity ? 2.0 : 1.0
      let jitter = 1 + Double(random.below(1000)) / 1000 * noise
      return UInt64(Double(service) * waits * jitter)
    }
  }

  /// Feeds `rounds` rounds; returns the limit each round ran at.
  @discardableResult
  private func run(
    _ adaptive: inout AdaptiveLimit, rounds: Int, capacity: Int = .max, noise: Double = 0.1,
    random: inout SeededRandom
  ) -> [Int] {
    var limits: [Int] = []
    for _ in 0..<rounds {
      limits.append(adaptive.limit)
      for time in round(adaptive, capacity: capacity, noise: noise, random: &random) {
        adaptive.answered(after: time)
      }
    }
    return limits
  }

  func testOnAnOriginThatNeverQueuesItClimbsToTheCeilingInAFewRoundsAndStays() {
    var random = SeededRandom(seed: 1)
    var adaptive = AdaptiveLimit(ceiling: 64)
    XCTAssertEqual(adaptive.limit, 4, "it starts small")
    let limits = run(&adaptive, rounds: 200, random: &random)
    XCTAssertEqual(
      Array(limits.prefix(8)), [4, 8, 16, 24, 36, 54, 64, 64], "slow start doubles, then by half")
    XCTAssertEqual(adaptive.limit, 64)
    XCTAssertEqual(adaptive.cuts, [:], "jitter within the tolerance is no queue")
  }

  func testOnAnOriginThatServesEightAtATimeItSettlesAtEightAndSeldomAsksForMore() {
    var random = SeededRandom(seed: 2)
    var adaptive = AdaptiveLimit(ceiling: 64)
    let limits = run(&adaptive, rounds: 2000, capacity: 8, random: &random)
    // What the origin's log would show: the share of requests that waited in its queue, under
    // a hundredth, so that its 99th percentile queue time is that of a fixed 8.
    let settled = limits.dropFirst(50)
    let queued = settled.map { max(0, $0 - 8) }.reduce(0, +)
    let sent = settled.reduce(0, +)
    XCTAssertLessThan(Double(queued) / Double(sent), 0.01, "\(queued) of \(sent) queued")
    XCTAssertEqual(adaptive.spread.median, 8)
    XCTAssertGreaterThan(adaptive.cuts[.queue] ?? 0, 0)
    XCTAssertGreaterThanOrEqual(settled.min() ?? 0, 5, "a queue takes an eighth, not all")
  }

  func testWhenTheOriginStartsToQueueTheLimitFallsAndWhenItRecoversItClimbsBack() {
    var random = SeededRandom(seed: 3)
    var adaptive = AdaptiveLimit(ceiling: 64)
    run(&adaptive, rounds: 20, random: &random)
    XCTAssertEqual(adaptive.limit, 64)
    // The origin now serves 16 at a time.
    let falling = run(&adaptive, rounds: 40, capacity: 16, random: &random)
    // Within a tenth of the knee: a round where fewer than a tenth queue looks clean.
    XCTAssertLessThanOrEqual(adaptive.limit, 18, "\(falling)")
    XCTAssertLessThanOrEqual(falling.firstIndex { $0 <= 18 } ?? .max, 12, "\(falling)")
    // It serves everything again: the limit climbs, one a round away from the knee.
    run(&adaptive, rounds: 400, random: &random)
    XCTAssertEqual(adaptive.limit, 64)
  }

  func testNoiseWithinTheToleranceNeverCutsButASlowTenthOfARoundDoes() {
    var random = SeededRandom(seed: 4)
    var adaptive = AdaptiveLimit(ceiling: 32)
    run(&adaptive, rounds: 100, noise: 0.4, random: &random)
    XCTAssertEqual(adaptive.cuts, [:])
    XCTAssertEqual(adaptive.limit, 32)
    // A round where a fifth of the answers took twice as long: queued, and the late share goes.
    for index in 0..<32 { adaptive.answered(after: index % 5 == 0 ? service * 2 : service) }
    XCTAssertEqual(adaptive.limit, 25, "7 of 32 late: 32 - 7")
    XCTAssertEqual(adaptive.cuts, [.queue: 1])
  }

  func testARefusalTakesAQuarterATimeoutHalfOnceARoundAndSlowStartEnds() {
    var random = SeededRandom(seed: 5)
    var adaptive = AdaptiveLimit(ceiling: 64)
    run(&adaptive, rounds: 3, random: &random)
    XCTAssertEqual(adaptive.limit, 24)
    XCTAssertTrue(adaptive.failed(.refused))
    XCTAssertFalse(adaptive.failed(.refused), "a burst of 503s is one cut")
    XCTAssertEqual(adaptive.limit, 18)
    run(&adaptive, rounds: 1, random: &random)
    XCTAssertTrue(adaptive.failed(.timeout))
    XCTAssertEqual(adaptive.limit, 9, "19 halved, rounded down")
    XCTAssertEqual(adaptive.cuts, [.refused: 1, .timeout: 1])
    // No more doubling: one a round, and only every few rounds near the knee.
    let climbing = run(&adaptive, rounds: 4, random: &random)
    XCTAssertEqual(climbing, [9, 10, 11, 12])
    // Refused round after round: down to one, never to none.
    var refused = AdaptiveLimit(ceiling: 64)
    var afterCuts: [Int] = []
    for _ in 0..<10 {
      refused.failed(.refused)
      afterCuts.append(refused.limit)
      for _ in 0..<AdaptiveLimit.initial { refused.answered(after: service) }
    }
    XCTAssertEqual(afterCuts.min(), 1, "\(afterCuts)")
  }

  func testTheHostTableKeepsOneAdaptiveLimitPerOriginWithinTheCeiling() {
    var configuration = DownloaderConfiguration()
    configuration.concurrency = 64
    configuration.adaptivePerHost = true
    configuration.maxPerHostConcurrency = 16
    var hosts = HostTable(configuration: configuration)
    let cdn = Origin(URL(string: "https://cdn.example/a.jpg")!)
    let other = Origin(URL(string: "https://other.example/a.jpg")!)
    XCTAssertEqual(hosts.connectionsPerHost, 16, "connections may reach the ceiling")
    XCTAssertEqual(hosts.limit(for: cdn), 4)
    hosts.started(cdn, at: 0)
    for _ in 0..<200 { _ = hosts.answered(cdn, after: service) }
    XCTAssertEqual(hosts.limit(for: cdn), 16, "--max-per-host-concurrency caps it")
    XCTAssertEqual(hosts.limit(for: other), 4, "each origin finds its own")
    XCTAssertTrue(hosts.cut(cdn, .refused))
    XCTAssertEqual(hosts.limit(for: cdn), 12)
    let reported = hosts.hostLimit(cdn)
    XCTAssertEqual(reported?.final, 12)
    XCTAssertEqual(reported?.max, 16)
    XCTAssertEqual(reported?.cuts, ["refused": 1])
    XCTAssertNil(hosts.hostLimit(other), "no transfer yet: nothing to report")
    XCTAssertNil(HostTable(configuration: DownloaderConfiguration()).adaptiveCeiling)
  }
}
