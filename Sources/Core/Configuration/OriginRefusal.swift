import Foundation

/// An origin that refused at its adaptive per-host limit's knee (`--per-host-concurrency
/// auto`): a 429, 503 or refused HTTP/2 stream of a transfer sent with `inFlight` under way to
/// it, at least as many as it had served cleanly (``AdaptiveLimit/refusedWith``). The run leaves it in the state for the next ones
/// against the same origin, which keep its limit under `inFlight` for ``lifetime`` from
/// `since`: an origin that refuses past its knee gives no sign before it refuses, so without
/// this every night's run would draw a refusal from it on its way up (issue 44).
public struct OriginRefusal: Sendable, Equatable {
  public var origin: Origin
  /// Transfers under way to the origin, the refused one with them.
  public var inFlight: Int
  /// When the refusal came.
  public var since: Date

  /// How long a refusal is remembered: an origin's capacity changes over days, and a week
  /// still holds a weekly job. An origin is so asked for more than it last took at most once
  /// a week.
  public static let lifetime: TimeInterval = 7 * 24 * 3600

  public init(origin: Origin, inFlight: Int, since: Date) {
    self.origin = origin
    self.inFlight = inFlight
    self.since = since
  }

  /// Whether a run at `now` still keeps under it: within ``lifetime`` of `since`, and not
  /// after `now` (a date from a clock that was ahead would keep it for longer than a week).
  public func isRemembered(at now: Date) -> Bool {
    since <= now && now.timeIntervalSince(since) < Self.lifetime
  }
}
