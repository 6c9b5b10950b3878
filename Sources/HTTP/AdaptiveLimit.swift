/// An origin's concurrency limit that finds the origin's knee by itself (`--per-host-concurrency
/// auto`), from the time its answers take to start (the server's time to first byte, without
/// the connection's set-up).
///
/// The measure is Vegas's and Gradient's: a server that is not queueing answers in about the
/// least time it was seen to take; one that queues makes some requests wait a whole service
/// time more. So the limit is judged a round at a time (whole batches of the limit's worth of
/// answers, at least ``minimumRound``): an answer later than `tolerance` times the least time
/// seen lately is late, and a round with a tenth of its answers late, and at least one a batch,
/// queued (one late answer in a round of several batches is noise). Then, as TCP's congestion
/// control does:
///
/// - **slow start**: from a small limit (4), it doubles each clean round up to 16, then grows by
///   half, until the first round that queued, or a cut;
/// - **additive increase**: +1 a clean round, but just below the limit where a queue or a
///   refusal was last seen (the knee) only every ``probeRounds`` rounds (``refusalProbeRounds``
///   after a refusal: each probe of such an origin costs a refused request), so that a small
///   origin is seldom asked for one more than it serves at once; a probe past the knee that
///   goes clean forgets it;
/// - **decrease**: a round that queued loses the share of it that was late (at least one: what
///   answered in time is about what the origin serves at once); a 429 or 503 or a refused
///   stream takes a quarter off, a timeout half (at most once a round), ending slow start.
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
  /// The fewest answers a round is judged on.
  static let minimumRound = 16
  /// A round whose 90th percentile is within this factor of the least time seen did not queue.
  static let tolerance = 1.5
  /// Rounds between two steps up near the knee.
  static let probeRounds = 32
  /// Rounds between two steps up near a knee where the origin refused.
  static let refusalProbeRounds = 256
  /// The least time is the least of the last this many rounds' (an origin's base latency may
  /// change during a night).
  static let minimumRounds = 64

  let ceiling: Int
  private(set) var limit: Int
  private var slowStart = true
  /// The limit at which a queue or a refusal was last seen, and whether it was a refusal.
  private var knee: Int?
  private var kneeRefused = false
  private var cleanRoundsNearKnee = 0
  /// The current round's times, nanoseconds.
  private var round: [UInt64] = []
  /// The least time of each recent round, the newest last.
  private var minima: [UInt64] = []
  /// Whether a cut for a refusal or timeout was made in this round already.
  private var cutThisRound = false
  /// The rounds spent at each limit, for the report's min, median and max; and the cuts.
  private(set) var roundsAt: [Int: Int] = [:]
  private(set) var cuts: [Cut: Int] = [:]

  init(ceiling: Int) {
    self.ceiling = max(1, ceiling)
    limit = min(Self.initial, self.ceiling)
  }

  /// Answers a round is judged on: whole batches of the limit, at least ``minimumRound``.
  var roundLength: Int {
    limit * max(1, (Self.minimumRound + limit - 1) / limit)
  }

  /// An answer (2xx or 304) that took `nanoseconds` from request to first byte; returns
  /// whether it ended a round.
  @discardableResult
  mutating func answered(after nanoseconds: UInt64) -> Bool {
    round.append(nanoseconds)
    guard round.count >= roundLength else { return false }
    endRound()
    return true
  }

  /// The origin refused (429, 503, a refused stream) or did not answer in time; returns
  /// whether the limit was cut (once a round).
  @discardableResult
  mutating func failed(_ cut: Cut) -> Bool {
    guard !cutThisRound else { return false }
    cutThisRound = true
    set(cut == .timeout ? limit / 2 : limit - max(1, limit / 4), cut: cut)
    return true
  }

  private mutating func endRound() {
    let batches = roundLength / limit
    let sorted = round.sorted()
    round.removeAll(keepingCapacity: true)
    cutThisRound = false
    roundsAt[limit, default: 0] += 1
    minima.append(sorted[0])
    if minima.count > Self.minimumRounds { minima.removeFirst() }
    let least = minima.min()!
    let late = sorted.count - (sorted.lastIndex { Double($0) <= Double(least) * Self.tolerance } ?? -1) - 1
    // Queued: a tenth of the round late, and at least one answer a batch (a limit's worth in
    // flight), so that one late answer in a round of several batches is noise, not a queue.
    if late >= max(batches, (sorted.count + 9) / 10) {
      // What answered in time is about what the origin serves at once: the late share goes.
      set(limit - max(1, late * limit / sorted.count), cut: .queue)
    } else if slowStart {
      set(limit < 16 ? limit * 2 : limit + limit / 2, cut: nil)
    } else if let knee, limit >= knee {
      // A probe past the knee went clean: the origin serves more now; climb again.
      self.knee = nil
      set(limit + 1, cut: nil)
    } else if let knee, limit + 1 >= knee {
      cleanRoundsNearKnee += 1
      if cleanRoundsNearKnee >= (kneeRefused ? Self.refusalProbeRounds : Self.probeRounds) {
        cleanRoundsNearKnee = 0
        set(limit + 1, cut: nil)
      }
    } else {
      set(limit + 1, cut: nil)
    }
  }

  private mutating func set(_ proposed: Int, cut: Cut?) {
    if let cut {
      cuts[cut, default: 0] += 1
      knee = limit
      kneeRefused = cut != .queue
      slowStart = false
      cleanRoundsNearKnee = 0
    }
    let new = min(ceiling, max(1, proposed))
    if new == ceiling { slowStart = false }
    limit = new
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
