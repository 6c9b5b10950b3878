import Core
import Foundation

/// The checks of the numeric settings (counts and durations), which a job file and the command
/// line both make here, and put the same words after their own name for the setting:
/// `job.yaml:4: field 'prefetch.concurrency': "0" is out of range: expected a whole number
/// from 1 to 10000` and `--concurrency "0" is out of range: ...`.
extension JobSetting {
  /// `value` (`nil`: `text` is not a whole number) when the setting takes it.
  public func check(count value: Int?, text: String) throws(UnitParseError) -> Int {
    guard case .count(let allowed) = kind else {
      preconditionFailure("\(field) is not a count")
    }
    let expected = "a whole number from \(allowed.lowerBound) to \(allowed.upperBound)"
    guard let value else { throw UnitParseError(value: text, expected: expected) }
    guard allowed.contains(value) else {
      throw UnitParseError(value: text, expected: expected, outOfRange: true)
    }
    return value
  }

  /// `seconds`, parsed from `text`, when the setting takes it.
  public func check(seconds: TimeInterval, text: String) throws(UnitParseError) -> TimeInterval {
    guard case .duration(let allowed) = kind else {
      preconditionFailure("\(field) is not a duration")
    }
    return try allowed.check(seconds, text: text)
  }
}
