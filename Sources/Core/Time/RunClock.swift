import Foundation

/// A run's times (SPEC section 12: durations come from a monotonic clock; a clock step never
/// makes a report invalid for our tools). The start and end are the wall clock's, as observed,
/// for people and for the state; the duration is the monotonic clock's, so that an NTP step
/// mid-run neither makes it negative nor stretches it. An end that the wall clock puts before
/// the start is written as the start plus the duration, and said (``Finish/clockStep``).
public struct RunClock: Sendable {
  /// When the run started, by the wall clock.
  package let startedAt: Date
  private let start: ContinuousClock.Instant

  /// A step of the wall clock smaller than this is not said: NTP slews that much, and the two
  /// clocks are read a moment apart.
  package static let stepTolerance: TimeInterval = 1

  public init() {
    start = ContinuousClock.now
    startedAt = Date()
  }

  /// Seconds since the start, by the monotonic clock: never negative.
  public var elapsed: TimeInterval { Self.seconds(ContinuousClock.now - start) }

  /// The end of a run.
  package struct Finish: Sendable, Equatable {
    /// When it ended: the wall clock's time, or the start plus ``durationSeconds`` when the
    /// wall clock says the run ended before it started. Never before the start.
    package var finishedAt: Date
    /// How long it ran, by the monotonic clock.
    package var durationSeconds: TimeInterval
    /// How far the wall clock stepped during the run (negative: back), when it stepped by more
    /// than ``RunClock/stepTolerance``.
    package var clockStep: TimeInterval?
  }

  /// The end of the run now.
  package func finish() -> Finish {
    Self.finish(startedAt: startedAt, observed: Date(), durationSeconds: elapsed)
  }

  /// The end of a run that started at `startedAt` by the wall clock, lasted `durationSeconds`
  /// by the monotonic clock, and whose end the wall clock read as `observed`.
  package static func finish(startedAt: Date, observed: Date, durationSeconds: TimeInterval)
    -> Finish
  {
    let expected = startedAt.addingTimeInterval(durationSeconds)
    let step = observed.timeIntervalSince(expected)
    return Finish(
      finishedAt: observed < startedAt ? expected : observed, durationSeconds: durationSeconds,
      clockStep: abs(step) > stepTolerance ? step : nil)
  }

  /// `duration` in seconds.
  package static func seconds(_ duration: Duration) -> TimeInterval {
    let (seconds, attoseconds) = duration.components
    return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
  }
}
