import Foundation

/// A moment's calendar fields in UTC: the one conversion (`gmtime_r`) behind every time the
/// tool writes as text — reports, the state database, the lock file, report paths, listings,
/// the folders of kept-aside files. Not Foundation's formatters: each costs microseconds and
/// looks up the system's time zone first, and one time is written per download, or per file
/// of a dry run.
package struct UTCTime: Sendable, Equatable {
  package var year: Int
  /// 1 to 12.
  package var month: Int
  /// 1 to 31.
  package var day: Int
  package var hour: Int
  package var minute: Int
  package var second: Int
  package var millisecond: Int

  /// The moment `milliseconds` after the epoch (rounding to them is the caller's).
  package init(millisecondsSince1970 milliseconds: Int64) {
    var (seconds, remainder) = milliseconds.quotientAndRemainder(dividingBy: 1000)
    if remainder < 0 {
      seconds -= 1
      remainder += 1000
    }
    var clock = time_t(seconds)
    var parts = tm()
    gmtime_r(&clock, &parts)
    year = Int(parts.tm_year) + 1900
    month = Int(parts.tm_mon) + 1
    day = Int(parts.tm_mday)
    hour = Int(parts.tm_hour)
    minute = Int(parts.tm_min)
    second = Int(parts.tm_sec)
    millisecond = Int(remainder)
  }

  /// `date`, rounded down to the millisecond.
  package init(_ date: Date) {
    self.init(millisecondsSince1970: Int64((date.timeIntervalSince1970 * 1000).rounded(.down)))
  }

  /// `2026-11-23`.
  package var dateText: String {
    Self.padded(year, 4) + "-" + Self.padded(month, 2) + "-" + Self.padded(day, 2)
  }

  /// `123456` for 12:34:56: a time for a file name, with no colon.
  package var compactTimeText: String {
    Self.padded(hour, 2) + Self.padded(minute, 2) + Self.padded(second, 2)
  }

  /// `2026-11-23T12:34:56Z`, as `ISO8601DateFormatter` writes by default (reports write their
  /// milliseconds with `JSONOutput`'s own digits).
  package func iso8601() -> String {
    dateText + "T" + Self.padded(hour, 2) + ":" + Self.padded(minute, 2) + ":"
      + Self.padded(second, 2) + "Z"
  }

  private static func padded(_ value: Int, _ width: Int) -> String {
    let text = String(value)
    return String(repeating: "0", count: max(0, width - text.count)) + text
  }
}
