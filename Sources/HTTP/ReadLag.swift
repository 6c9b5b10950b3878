import Foundation

/// How long an answer's first byte waited, at the least, in the kernel before the transfer
/// loop read it: the client's own lag, which libcurl's time to first byte counts as the
/// origin's. A loop that a busy machine leaves unscheduled for 13 ms reads every answer that
/// came meanwhile 13 ms late, for every host at once; an adaptive limit took that for each
/// host's queue (hosts whose answers took 22 ms were cut for 35, all in the same moment).
/// Without it, what is left is the origin's time as the socket saw it.
///
/// The kernel says how long ago data last arrived on the connection (`tcpi_last_data_recv`: a
/// count of its clock's ticks, in milliseconds); the first byte came no later. The tick the
/// data came in ended that many ticks, less one, before the current tick began, which the
/// coarse monotonic clock tells (it moves once a tick). So the first byte waited at least from
/// there to when the loop read it: a bound from below, within a tick of the loop's own lag (4
/// ms at Debian's 250 Hz), and nothing for an answer read as it came.
struct ReadLag {
  /// The kernel clock's tick, nanoseconds: the coarse clock's resolution.
  let tick: UInt64

  init(tick: UInt64 = Self.kernelTick) {
    self.tick = max(1, tick)
  }

  /// The resolution of `CLOCK_MONOTONIC_COARSE`: one tick of the kernel's clock (10 ms, the
  /// coarsest common one, should it not say).
  static var kernelTick: UInt64 {
    var resolution = timespec()
    guard clock_getres(CLOCK_MONOTONIC_COARSE, &resolution) == 0 else { return 10_000_000 }
    let nanoseconds = UInt64(resolution.tv_sec) * 1_000_000_000 + UInt64(resolution.tv_nsec)
    return nanoseconds > 0 ? nanoseconds : 10_000_000
  }

  /// Now on the coarse monotonic clock (when the current tick began) and on the monotonic
  /// clock, nanoseconds.
  static func now(_ clock: clockid_t) -> UInt64 {
    var time = timespec()
    clock_gettime(clock, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
  }

  /// The least time the first byte waited unread, nanoseconds: the connection idle for
  /// `idleMilliseconds` as the kernel reported it when the coarse clock said `tickBegan`, the
  /// first byte read at `read` (monotonic clock).
  func unread(idleMilliseconds: Int, tickBegan: UInt64, read: UInt64) -> UInt64 {
    // The kernel's count is 32 bits: more says nothing.
    guard (1...Int(UInt32.max)).contains(idleMilliseconds) else { return 0 }
    let ticks = (UInt64(idleMilliseconds) * 1_000_000 + tick / 2) / tick
    guard ticks > 0 else { return 0 }
    // Data came before the end of the tick `ticks` before the current one.
    let (elapsed, overflow) = (ticks - 1).multipliedReportingOverflow(by: tick)
    guard !overflow, elapsed <= tickBegan else { return 0 }
    let cameBefore = tickBegan - elapsed
    return read > cameBefore ? read - cameBefore : 0
  }
}
