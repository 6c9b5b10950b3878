import Foundation

/// How long an answer's first byte waited, at the least, in the kernel before the transfer
/// loop read it: the client's own lag, which libcurl's time to first byte counts as the
/// origin's. A loop that a busy machine leaves unscheduled for 13 ms reads every answer that
/// came meanwhile 13 ms late, for every host at once; an adaptive limit took that for each
/// host's queue (hosts whose answers took 22 ms were cut for 35, all in the same moment).
/// Without it, what is left is the origin's time as the socket saw it.
///
/// The kernel says how long ago data last arrived on the connection (`tcpi_last_data_recv`: a
/// count of its clock's ticks, in milliseconds); the first byte came no later. A count of `n`
/// ticks is more than `n - 2` ticks' time (one for where in a tick each end fell, one for a
/// tick counter that a CPU without a tick of its own catches up late), so the first byte
/// waited at least that long, less the time since the loop read it: a bound from below,
/// within two ticks of the loop's own lag (8 ms at Debian's 250 Hz), and nothing for an answer
/// read as it came. (Taking the coarse clock for the start of the current tick was a tick
/// closer, but a tick counter caught up in mid-tick moved it, and a tenth of an idle client's
/// answers to a small origin were taken 2-4 ms early: enough to hide the first step of a queue.)
struct ReadLag {
  /// The kernel clock's tick, nanoseconds.
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

  /// The least time the first byte waited unread, nanoseconds: the connection idle for
  /// `idleMilliseconds` as the kernel reported it, the first byte read `sinceRead` nanoseconds
  /// before.
  func unread(idleMilliseconds: Int, sinceRead: UInt64) -> UInt64 {
    // The kernel's count is 32 bits: more says nothing.
    guard (1...Int(UInt32.max)).contains(idleMilliseconds) else { return 0 }
    let ticks = (UInt64(idleMilliseconds) * 1_000_000 + tick / 2) / tick
    guard ticks > 2 else { return 0 }
    let idle = (ticks - 2) * tick
    return idle > sinceRead ? idle - sinceRead : 0
  }
}
