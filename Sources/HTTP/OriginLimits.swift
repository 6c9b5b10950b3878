import Core
import DequeModule
import Foundation

/// When each host may next be sent a download, kept by the transfer thread where downloads
/// start: the per-host rate (``PrefetchConfiguration/requestsPerSecondPerHost``: starts to one
/// host at least `1 / rate` apart, no burst) and the host-wide back-off after a 429 or 503 with
/// `Retry-After` (``PrefetchConfiguration/hostBackoff``), each kept by origin (scheme, host and
/// port), as libcurl keys its connections. A download held back waits in the
/// loop's queue, where it already waits for room in the limits; other hosts go on.
struct HostGate {
  /// Nanoseconds between two starts to one host; `nil`: no rate.
  private let interval: UInt64?
  /// The longest a host is held back: the cap on any wait.
  private let longestBackoff: TimeInterval
  private let backsOff: Bool
  /// The earliest each origin (scheme, host and port) may be sent its next download, by the
  /// rate.
  private var nextStart: [Origin: UInt64] = [:]
  /// Origins held back by a `Retry-After`, until when.
  private var heldUntil: [Origin: UInt64] = [:]
  /// What the report says of one host's back-offs.
  struct Record {
    var pauses = 0
    var nanoseconds: UInt64 = 0
    var until: UInt64 = 0
  }

  init(configuration: DownloaderConfiguration) {
    interval = configuration.requestsPerSecondPerHost.map { UInt64((1e9 / $0).rounded()) }
    longestBackoff = configuration.maxRetryDelay
    backsOff = configuration.hostBackoff
  }

  /// Nothing to check: no rate, and no host held back. The common case, kept to one test so
  /// that a run without limits pays nothing per download.
  var isOpen: Bool { interval == nil && heldUntil.isEmpty }

  /// Forgets the back-offs that are over.
  mutating func prune(at now: UInt64) {
    if !heldUntil.isEmpty { heldUntil = heldUntil.filter { $0.value > now } }
  }

  /// Whether a download of `host` may start at `now`; when not, lowers `wake` to when it may.
  func allows(_ host: Origin, at now: UInt64, wake: inout UInt64) -> Bool {
    var earliest: UInt64 = 0
    if interval != nil, let next = nextStart[host] { earliest = next }
    if let held = heldUntil[host] { earliest = max(earliest, held) }
    guard earliest > now else { return true }
    wake = min(wake, earliest)
    return false
  }

  /// A download of `host` started at `now`: the next waits a whole interval from it.
  mutating func started(_ host: Origin, at now: UInt64) {
    guard let interval else { return }
    nextStart[host] = now + interval
  }

  /// `host` answered `failure`: a 429 or 503 with `Retry-After`, or a refused HTTP/2 stream
  /// (a short jittered wait), holds every download of it
  /// back until then, at most the cap on a wait (a longer wait fails the URL itself at once:
  /// its host is still spared for as long as the run waits for anything). Adds it to `log`.
  mutating func answered(
    _ host: Origin, _ failure: DownloadFailure, at now: UInt64, log: inout [String: Record]
  ) {
    guard backsOff, let asked = failure.retryAfter, asked > 0,
      failure.error.httpStatus == 429 || failure.error.httpStatus == 503
        || failure.refusedStream
    else { return }
    let until = now + UInt64(min(asked, longestBackoff) * 1e9)
    let previous = max(heldUntil[host] ?? 0, now)
    // The report names hosts: two ports of one host that each asked to wait share a line.
    var record = log[host.host, default: Record()]
    record.pauses += 1
    if until > previous {
      heldUntil[host] = until
      // Overlapping waits count once: only what this one adds past the one under way.
      record.nanoseconds += until - previous
      record.until = until
    }
    log[host.host] = record
  }

  /// The back-offs so far, by host, each cut at `now` (the end of the run): a wait asked for
  /// but not over when the run ended held nothing back past it.
  static func report(_ log: [String: Record], at now: UInt64) -> [HostBackoff] {
    log.keys.sorted().map { host in
      let record = log[host]!
      let unserved = record.until > now ? record.until - now : 0
      return HostBackoff(
        host: host, pauses: record.pauses,
        seconds: Double(record.nanoseconds - min(unserved, record.nanoseconds)) / 1e9)
    }
  }
}

/// The run's bandwidth cap (``PrefetchConfiguration/maxBytesPerSecond``), kept by the transfer
/// thread as one budget that every download's bodies draw on as they arrive: a read the budget
/// cannot pay for pauses its transfer (libcurl hands the same bytes over again once unpaused),
/// and paused transfers are unpaused in the order they paused as the budget refills. So the
/// cap holds for the run as a whole, however many downloads share it, to within one read (up
/// to 100 KiB, curl's buffer) at any moment: a read larger than a quarter second's budget
/// goes through once that much has built up, and the budget goes into debt for the rest.
final class BandwidthBudget {
  /// Bytes a nanosecond.
  private let rate: Double
  /// The most the budget builds up while nothing is read: a quarter second's worth.
  private let capacity: Double
  private var balance = 0.0
  private var updated: UInt64
  /// Transfers paused for want of budget, the first paused first, with the read they wait to
  /// hand over.
  private var paused = Deque<(transfer: Transfer, bytes: Int)>()

  init(bytesPerSecond: UInt64, now: UInt64) {
    rate = Double(bytesPerSecond) / 1e9
    capacity = Double(bytesPerSecond) / 4
    updated = now
  }

  private func refill(_ now: UInt64) {
    guard now > updated else { return }
    balance = min(capacity, balance + Double(now - updated) * rate)
    updated = now
  }

  /// The most a read of `bytes` waits for before it goes through.
  private func threshold(_ bytes: Int) -> Double { min(Double(bytes), capacity) }

  /// Whether `transfer` may take a read of `bytes` now; if not, it is to pause and is queued
  /// to be unpaused when the budget allows.
  func admit(_ bytes: Int, for transfer: Transfer) -> Bool {
    refill(DispatchTime.now().uptimeNanoseconds)
    guard balance >= threshold(bytes) else {
      paused.append((transfer, bytes))
      return false
    }
    balance -= Double(bytes)
    return true
  }

  /// Unpauses, in turn, the paused transfers the budget can now pay for (`unpause` may hand
  /// their reads over at once, drawing on the budget, or pause them again), dropping those no
  /// longer `live` (ended meanwhile: cancelled, timed out); returns when the next one can go,
  /// or `nil` when none waits.
  func resume(
    at now: UInt64, live: (Transfer) -> Bool, unpause: (Transfer) -> Void
  ) -> UInt64? {
    refill(now)
    // A transfer paused again while unpausing goes to the back: look at each once.
    var turns = paused.count
    while turns > 0, let first = paused.first {
      guard !live(first.transfer) || balance >= threshold(first.bytes) else { break }
      turns -= 1
      paused.removeFirst()
      if live(first.transfer) { unpause(first.transfer) }
    }
    while let first = paused.first, !live(first.transfer) { paused.removeFirst() }
    guard let first = paused.first else { return nil }
    let missing = max(0, threshold(first.bytes) - balance)
    return now + UInt64((missing / rate).rounded(.up))
  }
}
