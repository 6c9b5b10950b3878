import DequeModule
import Dispatch

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
