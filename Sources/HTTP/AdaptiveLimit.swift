import Foundation

/// An origin's concurrency limit that finds the origin's knee by itself (`--per-host-concurrency
/// auto`), from the time its answers take to start (the server's time to first byte, without
/// the connection's set-up).
///
/// The measure is Vegas's and Gradient's: a server that is not queueing answers within its
/// usual spread of times; one that queues makes some requests wait a whole service time more.
/// So the limit is judged a round at a time (whole batches of the limit's worth of answers, at
/// least ``minimumRound`` after slow start): an answer later than `tolerance` times the
/// baseline (what nine answers in ten took in the origin's recent clean rounds) is late, and a
/// round with a tenth of its answers late, and at least one a batch, queued (one late answer in
/// a round of several batches is noise); and with more late than the origin's own long tail
/// makes late by chance. That share is the origin's, from the spread of the lower half of its
/// recent answers (their median and 25th percentile, as a lognormal's: a queue makes answers
/// later, so a queue missed moves the upper half, not the estimate): a CDN whose 99th
/// percentile is ten times its median has a fifth of a round late with no queue at all, and
/// held at one transfer at a time it took 60 times as long. Then, as TCP's congestion control
/// does:
///
/// - **slow start**: from a small limit (4), it doubles, at once below ``judgedFrom`` while every
///   answer comes in time, then by four after a judged round, until the first round that
///   queued, or a cut (a round that seemed to queue before the origin's spread is known, with
///   under half of it late, is cut but slow start goes on and no knee is kept: it may have
///   been the origin's long tail);
/// - **additive increase**: +1 a clean round, but just below the limit where a queue or a
///   refusal was last seen (the knee) only after ``probeRounds`` clean rounds
///   (``refusalProbeRounds`` after a refusal), twice as many after each probe that found the
///   knee where it was, so that a small origin is seldom asked for one more than it serves at
///   once; two probes past the knee in a row that go clean forget it;
/// - **decrease**: a round that queued loses the share of it that was late (at least one: what
///   answered in time is about what the origin serves at once), or in a deep queue falls to
///   what Little's law says was served; a 429 or 503 or a refused stream takes a quarter off, a
///   timeout half, ending slow start.
///
/// Each decision begins an epoch: a round is judged on the answers to what was sent in its own
/// epoch only (what was sent under the old limit says nothing of the new one), and a refusal
/// or timeout of what was sent before the last cut is that cut again, not another.
///
/// A raise is paced as TCP's window is by its acknowledgements: the limit the loop sees climbs
/// to the new one by one transfer for each answer that came in time, so that an origin which
/// refuses past its knee is asked for one more, not for a burst more, before it says so. A
/// refusal of a transfer sent with more under way than the origin was last seen to serve
/// cleanly (``refusalIsProbe(inFlight:)``) is the probe's answer: the cut is the back-off, and
/// the host is not held for its `Retry-After`.
///
/// An error answer (a 404, a 500) is not a sample: a fast failure never raises the limit. The
/// limit stays within 1 and `ceiling` (the run's concurrency, `--max-per-host-concurrency`).
struct AdaptiveLimit {
  /// Why the limit was cut, for the report.
  enum Cut: String, CaseIterable, Sendable {
    /// A round's answers took past the tolerance: the origin queued.
    case queue
    /// 429, 503 or a refused HTTP/2 stream: the origin said so.
    case refused
    /// A timeout: the origin did not answer in time.
    case timeout
  }

  static let initial = 4
  /// From this limit up, each step of slow start is judged a round before the next: a step
  /// past an origin's knee there queues that many requests more.
  static let judgedFrom = 16
  /// The fewest answers a round is judged on.
  static let minimumRound = 16
  /// An answer later than this factor of the baseline is late.
  static let tolerance = 1.5
  /// Clean rounds before the first step up near the knee.
  static let probeRounds = 32
  /// Clean rounds before the first step up near a knee where the origin refused.
  static let refusalProbeRounds = 256
  /// The most clean rounds between two steps up near a knee (the wait doubles after each probe
  /// that found the knee where it was).
  static let longestProbeRounds = 4096
  /// The baseline is taken from the last this many rounds (an origin's base latency may change
  /// during a night).
  static let minimumRounds = 64

  let ceiling: Int
  /// Transfers at once the loop may run now: climbs to ``target`` an answer at a time.
  private(set) var limit: Int
  /// The limit decided at the end of the last round.
  private(set) var target: Int
  /// The limit of the last round that ended clean, lowered by a cut to the limit after it;
  /// `nil` before the first clean round.
  private(set) var served: Int?
  private var slowStart = true
  /// The limit at which a queue or a refusal was last seen.
  private var knee: Int?
  /// Clean rounds near the knee before the next step up, and those seen so far.
  private var probeWait = Self.probeRounds
  private var cleanRoundsNearKnee = 0
  /// Probes past the knee in a row that went clean.
  private var cleanProbes = 0
  /// The current round's times, nanoseconds, and its length (fixed when it began).
  private var round: [UInt64] = []
  private var length: Int
  /// The current round's answers that came later than the tolerance.
  private var lateInRound = 0
  /// What nine answers in ten of each recent round took (its 90th percentile), the newest
  /// last.
  private var spreads: [UInt64] = []
  /// What an answer takes when the origin does not queue: the 10th percentile of the recent
  /// rounds' 90th percentiles. A round's 90th percentile holds an origin's own spread of times
  /// (a CDN's long tail is no queue: the least time was, and cut such an origin to 1); the
  /// rounds that queued have a higher one and are not the norm, and a few rounds low by chance
  /// (a server's timer firing early) do not make every later answer look late. `nil` before
  /// the first round ended.
  /// Kept when a round ends, not worked out at every answer.
  private var baseline: UInt64?
  /// The times of the recent answers (at most ``pooledAnswers``; none of a round of which half
  /// came late), the newest last: the origin's own spread of times.
  private var recent: [UInt64] = []
  static let pooledAnswers = 256
  /// Answers from which the origin's spread is known well enough that a round which queued
  /// marks its knee even when the spread allows some late answers by chance.
  static let knownSpread = 64
  /// The mean time of each recent round, the newest last; the 10th percentile of them is
  /// the origin's usual time when it does not queue, for Little's law.
  private var means: [Double] = []
  /// Decisions so far (raises and cuts): a transfer records the epoch it was sent in, and only
  /// those of the current one are samples of the current limit.
  private(set) var epoch = 0
  /// The epoch that began with the last cut: a failure of what was sent before it is that cut;
  /// and whether that cut answered a probe.
  private var lastCut = 0
  private var lastCutAnsweredProbe = false
  /// The rounds spent at each limit, for the report's min, median and max; and the cuts.
  private(set) var roundsAt: [Int: Int] = [:]
  private(set) var cuts: [Cut: Int] = [:]

  init(ceiling: Int) {
    self.ceiling = max(1, ceiling)
    limit = min(Self.initial, self.ceiling)
    target = limit
    length = Self.length(limit, slowStart: true)
  }

  /// Answers a round at `limit` is judged on: whole batches of it, at least ``minimumRound``;
  /// in slow start, one batch (a wrong step costs a round, and most of the night's time is
  /// after it).
  static func length(_ limit: Int, slowStart: Bool = false) -> Int {
    if slowStart { return limit }
    return limit * max(1, (minimumRound + limit - 1) / limit)
  }

  /// An answer (2xx or 304) that took `nanoseconds` from request to first byte, to a transfer
  /// sent in `epoch` (`nil`: this one); returns whether it changed the limit.
  @discardableResult
  mutating func answered(after nanoseconds: UInt64, sentIn epoch: Int? = nil) -> Bool {
    guard epoch ?? self.epoch == self.epoch else { return false }
    // The pace of a raise: one more transfer for an answer in time to what was sent since the
    // raise (so that the one more sent at the raise is answered first); the round at the new
    // limit begins when the limit is reached (what was sent on the way is not a sample of it).
    let before = (limit, target)
    let inTime = isInTime(nanoseconds)
    if !inTime { lateInRound += 1 }
    if limit < target, inTime {
      limit += 1
      if limit == target {
        // Slow start goes on at once while every answer since the raise came in time (as
        // TCP's does, about a doubling a round trip); else the new limit is judged a round.
        // (What it served stays the last judged round's: the last of those just sent is not
        // answered yet.)
        if slowStart, lateInRound == 0, limit < Self.judgedFrom {
          set(Self.slowStartStep(limit), cut: nil)
        } else {
          beginRound()
        }
        return true
      }
    }
    // On the way too: a raise that stalls on late answers is judged on them.
    round.append(nanoseconds)
    if round.count >= length { endRound() }
    return before != (limit, target)
  }

  /// Whether an answer that took `nanoseconds` is within the tolerance of the baseline (any
  /// is, before a round ended).
  private func isInTime(_ nanoseconds: UInt64) -> Bool {
    guard let least = baseline else { return true }
    return Double(nanoseconds) <= Double(least) * Self.tolerance
  }

  /// Whether a refusal that came while `inFlight` transfers (itself among them) were under way
  /// to the origin answers a probe: more than the origin was last seen to serve cleanly.
  /// Before the first clean round, no refusal is.
  /// A refusal of what was sent before the last cut (`epoch`) is that cut's burst: a probe if
  /// the cut answered one.
  func refusalIsProbe(inFlight: Int, sentIn epoch: Int? = nil) -> Bool {
    if let epoch, epoch < lastCut { return lastCutAnsweredProbe }
    guard let served else { return false }
    return inFlight > served
  }

  /// The origin refused (429, 503, a refused stream) or did not answer in time a transfer sent
  /// in `epoch` (`nil`: this one); returns whether the limit was cut: not for a transfer sent
  /// before the last cut, so that a burst of refusals is one cut.
  /// `probe`: the refusal answered a probe (``refusalIsProbe(inFlight:sentIn:)``).
  @discardableResult
  mutating func failed(_ cut: Cut, sentIn epoch: Int? = nil, probe: Bool = false) -> Bool {
    guard epoch ?? self.epoch >= lastCut else { return false }
    lastCutAnsweredProbe = probe
    set(cut == .timeout ? limit / 2 : limit - max(1, limit / 4), cut: cut)
    return true
  }

  private mutating func endRound() {
    let batches = max(1, length / limit)
    let sorted = round.sorted()
    round.removeAll(keepingCapacity: true)
    lateInRound = 0
    roundsAt[limit, default: 0] += 1
    let spread = sorted[sorted.count * 9 / 10]
    // One transfer at a time queues behind nothing of ours: a round at 1 that looks queued
    // says the baseline seen before is no longer the origin's; this one is.
    if limit == 1, let least = baseline, Double(spread) > Double(least) * Self.tolerance {
      spreads.removeAll()
      recent.removeAll()
      means.removeAll()
      baseline = nil
    }
    // The first round only sets the baseline: the first answers of a run (cold caches, new
    // connections) are no queue.
    let judged = !spreads.isEmpty
    let mean = Double(sorted.reduce(0, +)) / Double(sorted.count)
    spreads.append(spread)
    means.append(mean)
    if spreads.count > Self.minimumRounds {
      spreads.removeFirst()
      means.removeFirst()
    }
    let least = spreads.sorted()[spreads.count / 10]
    baseline = least
    let late =
      sorted.count - (sorted.lastIndex { Double($0) <= Double(least) * Self.tolerance } ?? -1) - 1
    // Queued: a tenth of the round late, and at least one answer a batch (a limit's worth in
    // flight), so that one late answer in a round of several batches is noise, not a queue;
    // and more than the origin's own long tail makes late by chance (that share of the round,
    // and three standard deviations of a count of them).
    // (`nil` while fewer than ``minimumRound`` answers are known.)
    let chance =
      recent.count < Self.minimumRound
      ? nil : Self.lateByChance(of: recent, than: Double(least) * Self.tolerance)
    let n = Double(sorted.count)
    let p = chance ?? 0
    let byChance = Int(n * p + 3 * (n * p * (1 - p)).squareRoot()) + 1
    let queued = judged && late >= max(batches, (sorted.count + 9) / 10, byChance)
    // A round of which half or more came late queued whatever the origin's spread, and says
    // nothing of that spread; a round with fewer late ones adds to the upper half.
    let deepQueue = late * 2 >= sorted.count
    if !deepQueue {
      recent.append(contentsOf: sorted)
      if recent.count > Self.pooledAnswers { recent.removeFirst(recent.count - Self.pooledAnswers) }
    }
    if queued {
      // Before the origin's own spread of times is known, a queue seen may be its long tail:
      // no knee is kept for it, and slow start goes on.
      let uncertain =
        !deepQueue && recent.count < Self.knownSpread && (chance ?? 1) >= 0.01
      // What answered in time is about what the origin serves at once: the late share goes;
      // but when most were late (a deep queue), what it serves is the limit times its usual
      // mean time over this round's (Little's law).
      let usual = means.sorted()[means.count / 10]
      let served = Int(Double(limit) * usual / mean)
      set(
        max(limit - max(1, late * limit / sorted.count), min(limit - 1, served)), cut: .queue,
        uncertain: uncertain)
      return
    }
    served = limit
    if slowStart {
      set(Self.slowStartStep(limit), cut: nil)
    } else if let knee, limit >= knee {
      // A probe past the knee went clean: the limit stays, and the knee moves up one, to be
      // probed as it was; a second clean probe in a row says the origin serves more now:
      // climb again. (One more than an origin serves queues each answer a little when its
      // answers are out of step, which one round may not show.)
      cleanProbes += 1
      cleanRoundsNearKnee = 0
      if cleanProbes >= 2 {
        cleanProbes = 0
        self.knee = nil
        set(limit + 1, cut: nil)
      } else {
        self.knee = limit + 1
      }
    } else if let knee, limit + 1 >= knee {
      cleanRoundsNearKnee += 1
      if cleanRoundsNearKnee >= probeWait {
        cleanRoundsNearKnee = 0
        set(limit + 1, cut: nil)
      }
    } else {
      set(limit + 1, cut: nil)
    }
  }

  /// The share of answers that come later than `threshold` by chance when the origin does not
  /// queue, from the spread of the lower half of its recent answers' `times`: their median
  /// and 25th percentile, as a lognormal's (a queue makes answers later, so it is the upper
  /// half that a queue missed would move, and the estimate stays the origin's own).
  static func lateByChance(of times: [UInt64], than threshold: Double) -> Double {
    let sorted = times.sorted()
    let median = log(Double(max(1, sorted[sorted.count / 2])))
    let quarter = log(Double(max(1, sorted[sorted.count / 4])))
    let sigma = (median - quarter) / 0.6745
    guard sigma > 0 else { return 0 }
    return 0.5 * erfc((log(threshold) - median) / sigma / 2.0.squareRoot())
  }

  /// A new epoch, and its round.
  private mutating func beginRound() {
    epoch += 1
    round.removeAll(keepingCapacity: true)
    lateInRound = 0
  }

  /// Slow start's next limit after `limit`: twice it below ``judgedFrom``, where each step
  /// goes on at once; four times it from there, where each step is judged a round first (an
  /// origin that refuses is still asked for one more at a time, the raise being paced).
  static func slowStartStep(_ limit: Int) -> Int { limit < judgedFrom ? limit * 2 : limit * 4 }

  /// Decides the limit `proposed`, for `cut` (a raise when `nil`); `uncertain`: a queue seen
  /// before the origin's spread was known, which keeps slow start and marks no knee.
  private mutating func set(_ proposed: Int, cut: Cut?, uncertain: Bool = false) {
    let new = min(ceiling, max(1, proposed))
    if new == ceiling { slowStart = false }
    // Already there: the round goes on, in the same epoch.
    if cut == nil, new == target, new == limit { return }
    beginRound()
    guard let cut else {
      // A raise: one more now, and the rest an answer at a time.
      target = new
      limit = min(new, limit + 1)
      length = Self.length(new, slowStart: slowStart)
      return
    }
    cuts[cut, default: 0] += 1
    // A probe that found the knee where it was waits twice as long for the next one.
    let base = cut == .queue ? Self.probeRounds : Self.refusalProbeRounds
    if let knee, limit + 1 >= knee {
      probeWait = min(Self.longestProbeRounds, max(base, probeWait * 2))
    } else {
      probeWait = base
    }
    knee = uncertain ? nil : limit
    cleanProbes = 0
    lastCut = epoch
    slowStart = slowStart && uncertain
    cleanRoundsNearKnee = 0
    limit = new
    target = new
    served = served.map { min($0, new) }
    length = Self.length(new)
  }

  /// The least, the median and the most limit its rounds had (weighted by rounds), or the
  /// current limit alone before a round ended.
  var spread: (min: Int, median: Int, max: Int) {
    guard let least = roundsAt.keys.min(), let most = roundsAt.keys.max() else {
      return (limit, limit, limit)
    }
    let total = roundsAt.values.reduce(0, +)
    var seen = 0
    var median = least
    for key in roundsAt.keys.sorted() {
      seen += roundsAt[key]!
      median = key
      if seen * 2 >= total { break }
    }
    return (least, median, most)
  }
}
