import Foundation

/// An origin's concurrency limit that finds the origin's knee by itself (`--per-host-concurrency
/// auto`), from the time its answers take to start (the server's time to first byte, without
/// the connection's set-up).
///
/// The measure is Vegas's and Gradient's: a server that is not queueing answers within its
/// usual spread of times; one that queues makes some requests wait a whole service time more.
/// So the limit is judged a round at a time (whole batches of the limit's worth of answers, at
/// least ``minimumRound`` after slow start): an answer later than `tolerance` times the
/// baseline (what nine answers in ten took among the origin's recent answers in rounds that did
/// not queue, pooled) is late, and a round with a tenth of its answers late, and at least one a
/// batch, queued (one late answer in a round of several batches is noise); and with more late
/// than the origin's own long tail makes late by chance. That share is the origin's, from the spread of the lower half of its
/// recent answers (their median and 25th percentile, as a lognormal's: a queue makes answers
/// later, so a queue missed moves the upper half, not the estimate): a CDN whose 99th
/// percentile is ten times its median has a fifth of a round late with no queue at all, and
/// held at one transfer at a time it took 60 times as long. A round queued too when, after a
/// raise, its median moved past the usual one by more than the origin's spread explains: one
/// more than an origin serves, its answers out of step, makes every answer wait a little and
/// none late. Then, as TCP's congestion control does:
///
/// - **slow start**: from a small limit (4), it doubles, at once below ``judgedFrom`` while every
///   answer comes in time, then by four after a judged round, until the first round that
///   queued, which ends as soon as its late answers say so and falls back where the step
///   began; or a cut (a queue seen before the origin's spread is known, unless its times are
///   tight or the median moved, is cut but slow start goes on and no knee is kept: it may have
///   been the origin's long tail);
/// - **additive increase**: +1 a clean round, but just below the limit where a queue or a
///   refusal was last seen (the knee) only after ``probeRounds`` clean rounds
///   (``slowStartProbeRounds`` after the queue that ended slow start, ``refusalProbeRounds``
///   after a refusal), twice as many after each probe that found the knee where it was, so
///   that a small origin is seldom asked for one more than it serves at once; two probes past
///   the knee in a row that go clean forget it;
/// - **decrease**: a round that queued falls to what Little's law says was served (the limit x
///   the usual time / the round's: the medians when the median moved, then the knee is one
///   above; the means otherwise), or, when only late answers said so, to the gentler of that
///   and the limit less its late share; a 429 or 503 or a refused stream takes a quarter off, a
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
  static let probeRounds = 128
  /// Clean rounds before the first step up near a knee where slow start met a queue: a step
  /// there is a doubling, and a client's bad moment (its own lag read as the origin's queue)
  /// must not hold a CDN at 16 for thousands of answers.
  static let slowStartProbeRounds = 32
  /// Clean rounds before the first step up near a knee where the origin refused.
  static let refusalProbeRounds = 256
  /// The most clean rounds between two steps up near a knee (the wait doubles after each probe
  /// that found the knee where it was).
  static let longestProbeRounds = 4096

  let ceiling: Int
  /// What of the client's own lag an answer's time may still hold, nanoseconds: the two ticks
  /// of the kernel's clock that ``ReadLag`` cannot see (8 ms at 250 Hz).
  let lagSlack: UInt64
  static let lagSlack = 2 * ReadLag.kernelTick
  /// Transfers under way when an earlier run's transfer was refused at the knee
  /// (``OriginRefusal``): this run's ceiling is under it. `nil`: none remembered.
  let remembered: Int?
  /// Transfers under way when a transfer the origin refused at its knee in this run was sent
  /// (at least as many as it served cleanly: ``failed(_:sentIn:probe:inFlight:)``), the last
  /// time it did; `nil` when none was refused so, or two probes past the knee since went clean at that many or
  /// more (the origin serves more now). What the run leaves for the next (``OriginRefusal``).
  private(set) var refusedWith: Int?
  /// Transfers at once the loop may run now: climbs to ``target`` an answer at a time.
  private(set) var limit: Int {
    didSet { reached = (Swift.min(reached.least, limit), Swift.max(reached.most, limit)) }
  }
  /// The least and the most the limit has been, rounds ended or not (a short run's limit may
  /// climb past every level a round ended at).
  private(set) var reached: (least: Int, most: Int)
  /// The limit decided at the end of the last round.
  private(set) var target: Int
  /// The limit of the last round that ended clean, lowered by a cut to the limit after it;
  /// `nil` before the first clean round.
  private(set) var served: Int?
  /// The most the limit was at a round that ended clean in this run (0 before the first).
  private var servedMost = 0
  /// Whether the origin refused with fewer than three quarters of ``servedMost`` under way:
  /// at random (a backend in trouble, an outage), not at a knee. No refusal of the run is then
  /// kept for the next: an origin that refused 3% of its requests at random fell by a quarter
  /// at each, and its refusal at 2 held the next week's runs at 1.
  private(set) var refusesBelowKnee = false
  private var slowStart = true
  /// The limit slow start's last step began from.
  private var stepFrom = Self.initial
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
  /// Answers to what was sent in an earlier epoch since the last cut, that came during the
  /// current round: pooled with it (a cut drops them). A round is its first answers, so the
  /// slow ones of what was sent in a short round (slow start's) come in the next: without
  /// them, the pooled answers were the fast ones (a CDN's usual time seemed half what it was,
  /// and a limit of 64 that served it cleanly was cut to 16 for a median "moved" from it).
  private var stragglers: [UInt64] = []
  /// The times of the recent answers of rounds that did not queue (at most
  /// ``pooledAnswers``; the first round's among them), the newest last: what nine in ten of
  /// them took is the baseline, their median the origin's usual time. Pooled, not a round's
  /// statistic at a time: a small round's (slow start's first four) is a poor sample of an
  /// origin with a long tail, and as the least of a few rounds it was the norm.
  private var clean: [UInt64] = []
  /// The limit of the last round that ended, and the one the last cut left.
  private var lastRoundLimit = 0
  private var cutTo: Int?
  /// What nine answers in ten took when the origin did not queue (see ``clean``): an answer
  /// later than the tolerance past it is late. `nil` before the first round ended.
  private var baseline: UInt64?
  /// The times of the recent answers (at most ``pooledAnswers``; none of a round of which half
  /// came late), the newest last: the origin's own spread of times.
  private var recent: [UInt64] = []
  static let pooledAnswers = 256
  /// Answers from which the origin's spread is known well enough that a round which queued
  /// marks its knee even when the spread allows some late answers by chance.
  static let knownSpread = 64
  /// Answers from which the origin's spread is estimated at all.
  static let knownFrom = 8
  /// Answers from which an origin whose times look tight (the sigma of their logarithms under
  /// ``tightSigma``) is taken to be so.
  static let knownTight = 12
  static let tightSigma = 0.1
  /// A round whose median is this share later than usual (and past the noise) queued.
  static let medianShift = 0.05
  /// Standard errors of a round's median past which its move is no chance (the usual median
  /// being a low percentile, about 1.3 of them are the norm).
  static let medianNoise = 4.0
  /// The most a round's late answers may be the origin's long tail by chance, and the round
  /// still be taken to have queued (a normal's one-sided three standard deviations).
  static let lateByChanceAtMost = 0.00135
  /// Decisions so far (raises and cuts): a transfer records the epoch it was sent in, and only
  /// those of the current one are samples of the current limit.
  private(set) var epoch = 0
  /// The epoch that began with the last cut: a failure of what was sent before it is that cut;
  /// and whether that cut answered a probe.
  private var lastCut = 0
  private var lastCutAnsweredProbe = false
  /// The rounds spent at each limit, for the report's min, median and max; and the cuts.
  private(set) var roundsAt: [Int: Int] = [:]
  /// Rounds judged so far.
  private(set) var rounds = 0
  private(set) var cuts: [Cut: Int] = [:]

  /// `initial`: the first limit (a test's fixed one, on an origin that never queues).
  /// `refusedWith`: an earlier run's refusal of a probe with that many under way
  /// (``OriginRefusal``): the limit stays under it. An origin that refuses past its knee gives
  /// no sign before it does, so a run that found it on its own would draw a refusal every
  /// night; and a refusal is the origin's own word, not a reading of times that may be the
  /// client's lag, so it is kept as said, not probed again while it is remembered.
  /// `epoch`: the first epoch, past those of a limit the origin had before (what was sent in
  /// them is neither a sample nor a cut of this one).
  init(
    ceiling: Int, initial: Int = Self.initial, refusedWith remembered: Int? = nil,
    from epoch: Int = 0, lagSlack: UInt64 = Self.lagSlack
  ) {
    self.lagSlack = lagSlack
    self.epoch = epoch
    lastCut = epoch
    self.ceiling = max(1, min(ceiling, (remembered ?? .max) - 1))
    self.remembered = remembered
    limit = min(initial, self.ceiling)
    reached = (limit, limit)
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
  /// sent in `epoch` (`nil`: this one); returns whether it changed the limit or ended a round:
  /// what the report says of the limit (its median of rounds) changes at each.
  @discardableResult
  mutating func answered(after nanoseconds: UInt64, sentIn epoch: Int? = nil) -> Bool {
    guard epoch ?? self.epoch == self.epoch else {
      // Sent before a raise (not before a cut: into a queue, perhaps): a sample of the origin's
      // times all the same, and more often a slow one (``stragglers``).
      if let epoch, epoch >= lastCut, epoch < self.epoch, stragglers.count < Self.pooledAnswers {
        stragglers.append(nanoseconds)
      }
      return false
    }
    // The pace of a raise: one more transfer for an answer in time to what was sent since the
    // raise (so that the one more sent at the raise is answered first); the round at the new
    // limit begins when the limit is reached (what was sent on the way is not a sample of it).
    let before = (limit, target, rounds)
    let inTime = isInTime(nanoseconds)
    if !inTime { lateInRound += 1 }
    if limit < target, inTime {
      limit += 1
      if limit == target {
        // Slow start goes on at once while every answer since the raise came in time (as
        // TCP's does, about a doubling a round trip); else the new limit is judged a round.
        // (What it served stays the last judged round's: the last of those just sent is not
        // answered yet.)
        // A climb whose answers all came in time gave samples of the origin's times, as a
        // clean round's: the origin's spread is known sooner.
        if lateInRound == 0 { pool(round + [nanoseconds]) }
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
    // In slow start a step past the knee queues all it added until its round ends: it ends
    // as soon as its late answers say it queued.
    if round.count >= length || (slowStart && lateInRound >= 2 && lateSaysQueued()) {
      endRound()
    }
    return before != (limit, target, rounds)
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
  /// `inFlight`: transfers under way to the origin when the refused one was sent, itself among
  /// them: a refusal with at least as many as the origin served cleanly (a probe's, or one at
  /// that very level: the origin counts its answers until they are sent, so a client may
  /// finish a round clean at one more than it takes) is what the run leaves for the next
  /// (``refusedWith``); one with fewer is an outage's, and is not; and one with fewer than
  /// three quarters of the most it served cleanly says that the origin refuses at random
  /// (``refusesBelowKnee``): none of the run's is kept.
  @discardableResult
  mutating func failed(
    _ cut: Cut, sentIn epoch: Int? = nil, probe: Bool = false, inFlight: Int? = nil
  ) -> Bool {
    guard epoch ?? self.epoch >= lastCut else { return false }
    lastCutAnsweredProbe = probe
    let inFlight = inFlight ?? limit
    if cut == .refused, let served {
      if inFlight * 4 < servedMost * 3 {
        refusesBelowKnee = true
        refusedWith = nil
      } else if !refusesBelowKnee, probe || inFlight >= served {
        refusedWith = inFlight
      }
    }
    set(cut == .timeout ? limit / 2 : limit - max(1, limit / 4), cut: cut)
    return true
  }

  private mutating func endRound() {
    let batches = max(1, length / limit)
    let sorted = round.sorted()
    round.removeAll(keepingCapacity: true)
    lateInRound = 0
    roundsAt[limit, default: 0] += 1
    rounds += 1
    // Above what the last cut left, or the first round after a raise (see `shifted`).
    let raised = limit > lastRoundLimit || limit > (cutTo ?? .max)
    lastRoundLimit = limit
    // One transfer at a time queues behind nothing of ours: a round at 1 that looks queued
    // says the baseline seen before is no longer the origin's; this one is.
    if limit == 1, let least = baseline,
      Double(sorted[sorted.count * 9 / 10]) > Double(least) * Self.tolerance
    {
      clean.removeAll()
      recent.removeAll()
      baseline = nil
    }
    // The first round only sets the baseline: the first answers of a run (cold caches, new
    // connections) are no queue.
    let judged = !clean.isEmpty
    if !judged { clean = sorted }
    let pooled = clean.sorted()
    let least = pooled[pooled.count * 9 / 10]
    baseline = least
    let usualMedian = Double(pooled[pooled.count / 2])
    let median = sorted[sorted.count / 2]
    let late =
      sorted.count - (sorted.lastIndex { Double($0) <= Double(least) * Self.tolerance } ?? -1) - 1
    // The origin's own spread of times, from the lower half of its recent answers (`nil` while
    // fewer than ``knownFrom`` are known).
    let known = recent.count
    let origin = known < Self.knownFrom ? nil : Self.logSpread(of: recent)
    // Queued: a tenth of the round late, and at least one answer a batch (a limit's worth in
    // flight), so that one late answer in a round of several batches is noise, not a queue;
    // and more than the origin's own long tail makes late by chance (as many late by chance
    // at most ``lateByChanceAtMost`` of the time).
    let chance = origin.map { Self.lateByChance($0, than: Double(least) * Self.tolerance) }
    let lateShare = Self.queued(late: late, of: sorted.count, batches: batches, chance: chance)
    // A round that slow start ended early (``lateSaysQueued()``) is its first answers, the
    // late ones among them: no median or share of it says more than that it queued.
    let complete = sorted.count >= length
    // Or, after a raise: the whole round later than usual. One more than an origin serves at
    // once, when its answers are out of step, makes each wait a little (a fraction of a
    // service time, under the tolerance), and the step after it does again, each queue
    // becoming the norm; the round's median then moves, where a long tail moves
    // only the late few. The usual median is that of the recent answers that did not queue;
    // the move counts past 5%, half a millisecond, and ``medianNoise`` standard errors of a
    // median of a round of the origin's spread. Only in the first round after a raise, or
    // above what the last cut left: at a limit that served cleanly, a median a little later
    // is the client's own load as often as the origin's, and a limit cut for it falls step
    // by step.
    var shifted = false
    if judged, raised, complete, let origin, recent.count >= Self.knownSpread {
      let noise = exp(
        Self.medianNoise * 1.2533 * origin.sigma / Double(Self.minimumRound).squareRoot())
      let bar = max(usualMedian * max(1 + Self.medianShift, noise), usualMedian + 500_000)
      shifted = Double(median) > bar
    }
    // Or the round's own median later than the tolerance past the usual median, and past
    // what the origin's spread moves the median of a round that size by chance: half of it
    // waited. The baseline, a high percentile of a pool still small, is moved by a few answers
    // of a climb past the knee that came just in time (two of fifteen moved it from 21 to 28
    // ms; a round queued behind the 8 an origin serves, at 40 ms, was then in time, and the
    // limit climbed to 45 and stayed near 20 all night); the median is not.
    // Only where the spread is known, or its times tight (a spread estimated from a few
    // answers of a long tail is often too narrow, and a CDN's rounds then looked queued); as
    // the moved median, only after a raise (at a limit that served, a round of cache misses
    // is no queue), but in a round slow start ended early too (its first answers late by the
    // baseline of the last round, in time by the one the climb's answers lifted: the case
    // above); never at 1, where nothing of ours queues; and by more than what the client's
    // own lag may leave in the times (``lagSlack``: a fast origin's median is moved by a few
    // milliseconds of it).
    var medianLate = false
    if judged, raised, limit > 1, let origin,
      recent.count >= Self.knownSpread
        || (known >= Self.knownTight && origin.sigma < Self.tightSigma)
    {
      let noise = exp(
        Self.medianNoise * 1.2533 * origin.sigma / Double(sorted.count).squareRoot())
      let bar = max(usualMedian * max(Self.tolerance, noise), usualMedian + Double(lagSlack))
      medianLate = Double(median) > bar
    }
    let queued = judged && (lateShare || shifted || medianLate)
    if judged, !queued { pool(sorted + stragglers, clean: true) }
    // A round of which half or more came late queued whatever the origin's spread, and says
    // nothing of that spread; a round with fewer late ones adds to the upper half.
    let deepQueue = late * 2 >= sorted.count || medianLate
    if !deepQueue { pool(sorted + stragglers, clean: false) }
    stragglers.removeAll()
    if queued {
      // Before the origin's own spread of times is known, late answers with the median where
      // it was may be its long tail: no knee is kept for them, and slow start goes on. An
      // origin whose times are tight (their sigma under ``tightSigma``: few late by chance)
      // is known sooner; a few answers of a long tail can look tight, so not before
      // ``knownTight`` (of those the estimate is from: this round's are pooled by now, and a
      // spread of 9 answers counted as one of 23 held a CDN at 4).
      let tight =
        known >= Self.knownTight && (origin?.sigma ?? 1) < Self.tightSigma
        && (chance ?? 1) < 0.01
      let uncertain = !shifted && !tight && recent.count < Self.knownSpread
      // What the origin serves at once, by Little's law: the limit times its usual time over
      // this round's: the means, as the law has it (a queue that makes some wait a whole
      // service time moves the mean, not the median); the medians when it is the median that
      // moved (a long tail moves a mean, not the queue). When the median moved, or in a deep
      // queue, that is the new limit (and when the median moved, one more is the knee); when
      // only late answers said so, the gentler of it and the limit less the late share (what
      // answered in time).
      // (A moved median is a fraction of a service time: its share is rounded, not cut down.)
      let served =
        shifted
        ? Int((Double(limit) * usualMedian / Double(median)).rounded())
        : Int(Double(limit) * Self.mean(pooled) / Self.mean(sorted))
      var proposed =
        shifted || deepQueue
        ? min(limit - 1, served)
        : max(limit - max(1, late * limit / sorted.count), min(limit - 1, served))
      // In slow start, what the origin serves is the limit the last step began from (all
      // its answers came in time), unless a cut since went below it (falling back there would
      // be a raise). A doubling past the knee puts it just above where the step began.
      var measured = shifted
      if slowStart, !uncertain, stepFrom < limit {
        proposed = stepFrom
        measured = measured || Self.slowStartStep(stepFrom) == stepFrom * 2
      }
      set(proposed, cut: .queue, uncertain: uncertain, measured: measured)
      return
    }
    served = limit
    servedMost = max(servedMost, limit)
    if slowStart, limit >= ceiling {
      slowStart = false
    } else if slowStart {
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
        if let refused = refusedWith, limit >= refused { refusedWith = nil }
        set(limit + 1, cut: nil)
      } else {
        self.knee = limit + 1
      }
    } else if let knee, limit + 1 >= knee {
      cleanRoundsNearKnee += 1
      if cleanRoundsNearKnee >= probeWait {
        cleanRoundsNearKnee = 0
        set(limit + 1, cut: nil)
        // A probe is judged on one batch: each of its answers may have queued.
        length = limit
      }
    } else {
      set(limit + 1, cut: nil)
    }
  }

  /// Adds `times` to the recent answers (the origin's spread) and, when `clean` (`nil`: both),
  /// to those of rounds that did not queue; each keeps the last ``pooledAnswers``.
  private mutating func pool(_ times: [UInt64], clean isClean: Bool? = nil) {
    if isClean != true {
      recent.append(contentsOf: times)
      if recent.count > Self.pooledAnswers { recent.removeFirst(recent.count - Self.pooledAnswers) }
    }
    if isClean != false, !clean.isEmpty {
      clean.append(contentsOf: times)
      if clean.count > Self.pooledAnswers { clean.removeFirst(clean.count - Self.pooledAnswers) }
    }
  }

  static func mean(_ times: [UInt64]) -> Double {
    Double(times.reduce(0, +)) / Double(max(1, times.count))
  }

  /// Whether `late` answers of a round of `count` (`batches` limits' worth) say it queued: a
  /// tenth of them, at least one a batch, and more than `chance` (the share the origin's
  /// spread makes late; `nil` while unknown) makes late: as many by chance at most
  /// ``lateByChanceAtMost`` of the time.
  static func queued(late: Int, of count: Int, batches: Int, chance: Double?) -> Bool {
    guard late >= max(batches, (count + 9) / 10) else { return false }
    guard let p = chance, p > 0 else { return true }
    return binomialTail(atLeast: late, of: count, each: p) < Self.lateByChanceAtMost
  }

  /// The chance that `count` answers, each late with chance `p`, have `late` or more late:
  /// the binomial's upper tail, summed exactly. A normal's three standard deviations, the
  /// test before it, took two late of 16 for a queue when one in 60 is late by chance, which
  /// happens in one round in 40; with the chance underestimated from few answers, in one in
  /// six: a CDN with no queue at all was held at 3 for a night 15 times as long.
  static func binomialTail(atLeast late: Int, of count: Int, each p: Double) -> Double {
    guard late > 0 else { return 1 }
    guard late <= count, p > 0 else { return 0 }
    guard p < 1 else { return 1 }
    let n = Double(count)
    let first = Double(late)
    // At or below the mean, one less the other side's tail (on time: count - late + 1 or
    // more), which is past its mean: there the terms only fall from the first.
    if first <= n * p {
      return 1 - binomialTail(atLeast: count - late + 1, of: count, each: 1 - p)
    }
    // From the first term, in logarithms (`(1 - p)^count` alone underflows to 0 from about
    // 7,000 answers at 0.1, and 1 less the terms below then said 1: no queue, ever): each
    // next term is the last times (count - k) / (k + 1) x p / (1 - p), until they no longer
    // count. A first term that underflows is a tail under 1e-308.
    let logTerm: Double =
      lgamma(n + 1) - lgamma(first + 1) - lgamma(n - first + 1) + first * log(p) + (n - first)
      * log1p(-p)
    let ratio = p / (1 - p)
    var term = exp(logTerm)
    var tail = 0.0
    for k in late...count {
      tail += term
      term *= (n - Double(k)) / Double(k + 1) * ratio
      if term <= tail * 1e-17 { break }
    }
    return min(1, tail)
  }

  /// Whether the current round's late answers already say it queued (before it ends).
  private func lateSaysQueued() -> Bool {
    guard let least = baseline, !clean.isEmpty else { return false }
    let threshold = Double(least) * Self.tolerance
    let late = round.filter { Double($0) > threshold }.count
    let chance =
      recent.count < Self.knownFrom
      ? nil : Self.lateByChance(Self.logSpread(of: recent), than: threshold)
    // As many batches as ``endRound()`` judges it with: a round it ended early and then found
    // clean would raise the limit on late answers (two late at 5 raised it to 10).
    return Self.queued(
      late: late, of: round.count, batches: max(1, length / limit), chance: chance)
  }

  /// The spread of an origin's times (nanoseconds): the median and sigma of their logarithms,
  /// from the lower half (their median and 25th percentile, as a lognormal's: a queue makes
  /// answers later, so it is the upper half that a queue missed would move, and the estimate
  /// stays the origin's own).
  static func logSpread(of times: [UInt64]) -> (median: Double, sigma: Double) {
    let sorted = times.sorted()
    let median = log(Double(max(1, sorted[sorted.count / 2])))
    let quarter = log(Double(max(1, sorted[sorted.count / 4])))
    return (median, max(0, (median - quarter) / 0.6745))
  }

  /// The share of answers that come later than `threshold` by chance when the origin does not
  /// queue, from its spread (``logSpread(of:)``).
  static func lateByChance(_ spread: (median: Double, sigma: Double), than threshold: Double)
    -> Double
  {
    guard spread.sigma > 0 else { return 0 }
    return 0.5 * erfc((log(threshold) - spread.median) / spread.sigma / 2.0.squareRoot())
  }

  /// ``lateByChance(_:than:)`` of the spread of `times`.
  static func lateByChance(of times: [UInt64], than threshold: Double) -> Double {
    lateByChance(logSpread(of: times), than: threshold)
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
  private mutating func set(
    _ proposed: Int, cut: Cut?, uncertain: Bool = false, measured: Bool = false
  ) {
    let new = min(ceiling, max(1, proposed))
    // Already there: the round goes on, in the same epoch.
    if cut == nil, new == target, new == limit { return }
    beginRound()
    guard let cut else {
      // A raise: one more now, and the rest an answer at a time.
      if slowStart { stepFrom = limit }
      target = new
      limit = min(new, limit + 1)
      length = Self.length(new, slowStart: slowStart)
      return
    }
    cuts[cut, default: 0] += 1
    // What was sent before a cut came back into a queue, perhaps: no sample of the origin.
    stragglers.removeAll()
    let endsSlowStart = slowStart
    // A probe that found the knee where it was waits twice as long for the next one.
    let base =
      cut != .queue
      ? Self.refusalProbeRounds : endsSlowStart ? Self.slowStartProbeRounds : Self.probeRounds
    if let knee, limit + 1 >= knee {
      probeWait = min(Self.longestProbeRounds, max(base, probeWait * 2))
    } else {
      probeWait = base
    }
    // Where the round's median said what the origin serves, one more than that is the knee.
    knee = uncertain ? nil : measured ? min(limit, new + 1) : limit
    cleanProbes = 0
    lastCut = epoch
    slowStart = slowStart && uncertain
    cleanRoundsNearKnee = 0
    limit = new
    target = new
    // What the round's times measured, or a step of slow start undone, is the level B (a
    // median moved) is not armed at; a cut for a few late answers is not.
    if measured || (endsSlowStart && !uncertain) { cutTo = new }
    served = served.map { min($0, new) }
    // An origin cut for a queue or a timeout serves less now: a refusal at its new knee is
    // judged against that, not against what it served before (``refusesBelowKnee``).
    if cut != .refused { servedMost = min(servedMost, new) }
    length = Self.length(new)
  }

  /// The least and the most the limit has been, and the median limit of its rounds (weighted
  /// by rounds), or the current limit before a round ended.
  var spread: (min: Int, median: Int, max: Int) {
    guard let least = roundsAt.keys.min() else { return (reached.least, limit, reached.most) }
    let total = roundsAt.values.reduce(0, +)
    var seen = 0
    var median = least
    for key in roundsAt.keys.sorted() {
      seen += roundsAt[key]!
      median = key
      if seen * 2 >= total { break }
    }
    return (reached.least, median, reached.most)
  }
}
