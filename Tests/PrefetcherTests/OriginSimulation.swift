import Foundation
import TestSupport

@testable import HTTP

/// An origin on a simulated clock, and a client that keeps as many requests under way to it
/// as an ``AdaptiveLimit`` allows, as the transfer loop does: each answer goes to the limit
/// with the epoch its request was sent in, a refusal that is no probe holds the host for its
/// `Retry-After`, and a refused request is sent again. What the origin's log would show comes
/// back: each request's time in its queue, its refusals, the limits the client ran at.
struct OriginSimulation {
  /// Serves this many at once and queues the rest in arrival order.
  var capacity = Int.max
  /// Refuses at once (503) a request that arrives with more than this many under way.
  var refusesAbove = Int.max
  /// Refuses at once (503) this share of all requests, at random, however many are under way.
  var refusesAtRandom = 0.0
  /// Each request's service time, and up to this share more at random.
  var service: UInt64 = 20_000_000
  var noise = 0.1
  /// When set, each service time is instead lognormal about `service` with this sigma (a
  /// CDN's long tail: 1 gives a 99th percentile about ten times the median).
  var lognormalSigma: Double?
  /// How long a refusal takes to arrive, and the `Retry-After` it asks for.
  var refusalTime: UInt64 = 500_000
  var retryAfter: UInt64 = 1_000_000_000

  struct Outcome {
    /// Requests answered (the refused ones sent again are counted once, when answered).
    var answered = 0
    /// Each answered request's time in the origin's queue, nanoseconds.
    var queueTimes: [UInt64] = []
    var refusals = 0
    /// Refusals that held the host for their `Retry-After` (no probe's).
    var holds = 0
    /// The limit at each start.
    var limits: [Int] = []
    /// Simulated time from the first request to the last answer.
    var elapsed: UInt64 = 0

    /// Requests that waited in the origin's queue at all.
    var queued: Int { queueTimes.filter { $0 > 0 }.count }
    /// Requests that waited a millisecond or more.
    var waitedAMillisecond: Int { queueTimes.filter { $0 >= 1_000_000 }.count }
  }

  private struct Pending {
    var at: UInt64
    var sentAt: UInt64
    var epoch: Int
    var inFlight: Int
    var refused: Bool
    var queued: UInt64
  }

  /// One request's service time.
  private func serviceTime(_ random: inout SeededRandom) -> UInt64 {
    guard let sigma = lognormalSigma else {
      let jitter = 1 + Double(random.below(1000)) / 1000 * noise
      return UInt64(Double(service) * jitter)
    }
    // Box-Muller: a standard normal from two uniforms in (0, 1].
    let u1 = Double(random.below(1_000_000) + 1) / 1_000_000
    let u2 = Double(random.below(1_000_000) + 1) / 1_000_000
    let normal = (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    return UInt64(Double(service) * exp(sigma * normal))
  }

  /// Sends `requests` requests under `adaptive`, starting at `start` on the simulated clock.
  func run(
    _ adaptive: inout AdaptiveLimit, requests: Int, random: inout SeededRandom, start: UInt64 = 0
  ) -> Outcome {
    var outcome = Outcome()
    var now = start
    var pending: [Pending] = []
    var toSend = requests
    var heldUntil: UInt64 = 0
    // When each of the origin's `capacity` places is free next (none kept when unlimited).
    var places: [UInt64] = []
    func send() {
      toSend -= 1
      let inFlight = pending.count + 1
      outcome.limits.append(adaptive.limit)
      // The origin counts what it holds: a refusal holds no place.
      let unlucky =
        refusesAtRandom > 0 && Double(random.below(1_000_000)) < refusesAtRandom * 1_000_000
      if unlucky || pending.filter({ !$0.refused }).count + 1 > refusesAbove {
        let answer = Pending(
          at: now + refusalTime, sentAt: now, epoch: adaptive.epoch, inFlight: inFlight,
          refused: true, queued: 0)
        return pending.append(answer)
      }
      var begins = now
      if capacity != .max {
        if places.count < capacity {
          places.append(now)
        }
        let free = places.indices.min { places[$0] < places[$1] }!
        begins = max(now, places[free])
        places[free] = begins + serviceTime(&random)
        pending.append(
          Pending(
            at: places[free], sentAt: now, epoch: adaptive.epoch, inFlight: inFlight,
            refused: false, queued: begins - now))
      } else {
        pending.append(
          Pending(
            at: now + serviceTime(&random), sentAt: now, epoch: adaptive.epoch,
            inFlight: inFlight, refused: false, queued: 0))
      }
    }
    func fill() {
      while toSend > 0, pending.count < adaptive.limit, now >= heldUntil { send() }
    }
    fill()
    while toSend > 0 || !pending.isEmpty {
      guard let next = pending.indices.min(by: { pending[$0].at < pending[$1].at }) else {
        // Nothing under way: the host is held; wake when it opens.
        now = heldUntil
        fill()
        continue
      }
      if pending[next].at > heldUntil, now < heldUntil, heldUntil < pending[next].at {
        now = heldUntil
        fill()
        continue
      }
      let answer = pending.remove(at: next)
      now = answer.at
      if answer.refused {
        outcome.refusals += 1
        // What was under way when it was sent, as the transfer loop counts it.
        let probe = adaptive.refusalIsProbe(inFlight: answer.inFlight, sentIn: answer.epoch)
        adaptive.failed(.refused, sentIn: answer.epoch, probe: probe, inFlight: answer.inFlight)
        if !probe {
          outcome.holds += 1
          heldUntil = max(heldUntil, now + retryAfter)
        }
        toSend += 1
      } else {
        outcome.answered += 1
        outcome.queueTimes.append(answer.queued)
        adaptive.answered(after: answer.at - answer.sentAt, sentIn: answer.epoch)
      }
      fill()
    }
    outcome.elapsed = now - start
    return outcome
  }
}
