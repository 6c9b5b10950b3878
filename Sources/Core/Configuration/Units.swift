import Foundation

/// A value given by a user that could not be understood, or that is outside what is allowed,
/// with what was expected.
public struct UnitParseError: Error, Sendable, Equatable, CustomStringConvertible {
  package var value: String
  package var expected: String
  /// The value is a number of the right form, but too large or too small (`expected` then
  /// states the allowed range).
  package var outOfRange = false

  package init(value: String, expected: String, outOfRange: Bool = false) {
    self.value = value
    self.expected = expected
    self.outOfRange = outOfRange
  }

  public var description: String {
    outOfRange
      ? "\(value.debugDescription) is out of range: expected \(expected)"
      : "\(value.debugDescription) is not \(expected)"
  }
}

/// How long a duration may be (SPEC section 7: numbers from flags, jobs and reports are
/// range-checked). Every duration the tool turns into nanoseconds or milliseconds stays far
/// inside 64 bits within these bounds.
public struct DurationRange: Sendable, Equatable, CustomStringConvertible {
  package var lower: TimeInterval
  package var upper: TimeInterval

  /// 100 years (36500 days): longer than anything a timeout, a deadline or a TTL means.
  package static let longest: TimeInterval = 36_500 * 86_400
  /// Timeouts, deadlines and TTLs: from 1 ms (below it, libcurl reads 0 as "no timeout") to
  /// 100 years.
  package static let positive = DurationRange(lower: 0.001, upper: longest)
  /// Waits: from 0 to 100 years.
  package static let nonNegative = DurationRange(lower: 0, upper: longest)
  /// `maxDiskAge`: a million days either way (about 2700 years), so that a "practically never"
  /// age such as `200000d` is accepted; negative means never (SPEC section 4).
  package static let age = DurationRange(lower: -1_000_000 * 86_400, upper: 1_000_000 * 86_400)

  package func contains(_ seconds: TimeInterval) -> Bool { (lower...upper).contains(seconds) }

  /// `seconds`, parsed from `text`, when in range; else the error that says the range.
  package func check(_ seconds: TimeInterval, text: String) throws(UnitParseError) -> TimeInterval {
    guard contains(seconds) else {
      throw UnitParseError(value: text, expected: description, outOfRange: true)
    }
    return seconds
  }

  /// `a duration from 1ms to 36500d (100 years)`.
  public var description: String {
    let years = upper == Self.longest ? " (100 years)" : " (about 2700 years)"
    return "a duration from \(formatDuration(lower)) to \(formatDuration(upper))\(years)"
  }
}

/// `7d`, `12h`, `15m`, `30s` or `1ms`: the largest unit that divides the duration.
package func formatDuration(_ seconds: TimeInterval) -> String {
  guard seconds.isFinite, abs(seconds) < 1e15 else { return "\(seconds)s" }
  let milliseconds = (seconds * 1000).rounded()
  guard milliseconds / 1000 == seconds else { return "\(seconds)s" }
  let whole = Int64(milliseconds)
  for (unit, size) in [("d", Int64(86_400_000)), ("h", 3_600_000), ("m", 60_000), ("s", 1000)]
  where whole != 0 && whole % size == 0 {
    return "\(whole / size)\(unit)"
  }
  return whole == 0 ? "0s" : "\(whole)ms"
}

/// Durations as users write them (SPEC section 7): `30s`, `15m`, `12h`, `7d`, `2w`, `250ms`, a
/// bare number of seconds; a leading `-` gives a negative duration ("never" for `maxDiskAge`).
/// A value outside `allowed` (including one too large for a `Double`) is an error that says
/// the range.
package func parseDuration(_ text: String, allowed: DurationRange) throws(UnitParseError)
  -> TimeInterval
{
  try allowed.check(try parseDurationValue(text), text: text)
}

/// A duration's value without a range check: infinite when the number is too large for a
/// `Double`. For flags, whose range is checked in `validate()` where the flag's name is known.
package func parseDurationValue(_ text: String) throws(UnitParseError) -> TimeInterval {
  let trimmed = text.trimmingCharacters(in: .whitespaces)
  let units: [(String, TimeInterval)] = [
    ("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800),
  ]
  var number = Substring(trimmed)
  var factor: TimeInterval = 1
  if let (suffix, size) = units.first(where: { trimmed.hasSuffix($0.0) }) {
    number = trimmed.dropLast(suffix.count)
    factor = size
  }
  let digits = number.trimmingCharacters(in: .whitespaces)
  // Only plain decimal numbers: `Double` would also take `nan`, `inf` and hex floats.
  guard isDecimalNumber(digits), let value = Double(digits) else {
    throw UnitParseError(
      value: text,
      expected: "a duration such as 30s, 15m, 12h or 7d (a bare number is seconds)")
  }
  return value * factor
}

/// The largest size: 2^63-1 bytes, which every signed 64-bit count and `off_t` holds.
package let largestByteCount = UInt64(Int64.max)

/// Sizes as users write them (SPEC section 7): decimal `KB`, `MB`, `GB`, `TB` (powers of 1000)
/// and binary `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024), as written; `B` or a bare number is
/// bytes. Case-insensitive. From 0 to 2^63-1 bytes, computed without overflow: a size past it
/// is an error that says the range.
package func parseByteCount(_ text: String) throws(UnitParseError) -> UInt64 {
  let trimmed = text.trimmingCharacters(in: .whitespaces)
  let lower = trimmed.lowercased()
  let units: [(String, UInt64)] = [
    ("kib", 1024), ("mib", 1_048_576), ("gib", 1_073_741_824), ("tib", 1_099_511_627_776),
    ("kb", 1_000), ("mb", 1_000_000), ("gb", 1_000_000_000), ("tb", 1_000_000_000_000),
    ("k", 1_000), ("m", 1_000_000), ("g", 1_000_000_000), ("b", 1),
  ]
  var number = Substring(lower)
  var factor: UInt64 = 1
  if let (suffix, size) = units.first(where: { lower.hasSuffix($0.0) }) {
    number = lower.dropLast(suffix.count)
    factor = size
  }
  let digits = number.trimmingCharacters(in: .whitespaces)
  guard isDecimalNumber(digits) else {
    throw UnitParseError(
      value: text, expected: "a size such as 500MB or 2GiB (a bare number is bytes)")
  }
  let outOfRange = UnitParseError(
    value: text, expected: "a size from 0 to \(largestByteCount) bytes (2^63-1)",
    outOfRange: true)
  // Whole numbers exactly, so that 9223372036854775807 itself is allowed.
  if digits.allSatisfy(\.isASCIIDigit) {
    guard let value = UInt64(digits) else { throw outOfRange }
    let (bytes, overflow) = value.multipliedReportingOverflow(by: factor)
    guard !overflow, bytes <= largestByteCount else { throw outOfRange }
    return bytes
  }
  // Fractions and exponents through a Double: below 2^63 as a Double is at most 2^63-1024.
  guard let value = Double(digits), value * Double(factor) >= 0,
    value * Double(factor) < 9_223_372_036_854_775_808.0
  else { throw outOfRange }
  return UInt64((value * Double(factor)).rounded())
}

/// Request rates as users write them: `20/s`, `300/m`, `0.5/s`, `2/h`; a bare number is per
/// second. Returns requests per second, from 1/h to 10000/s: slower is no prefetch, and faster
/// is no limit an origin needs (past it, one request every 100 us is below the timer's grain).
package func parseRequestRate(_ text: String) throws(UnitParseError) -> Double {
  let trimmed = text.trimmingCharacters(in: .whitespaces)
  let parts = trimmed.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
  let per: [String: Double] = ["s": 1, "m": 60, "h": 3600]
  let digits = parts[0].trimmingCharacters(in: .whitespaces)
  let unit = parts.count > 1 ? per[parts[1].trimmingCharacters(in: .whitespaces)] : 1
  guard let unit, isDecimalNumber(digits), let count = Double(digits) else {
    throw UnitParseError(
      value: text, expected: "a rate such as 20/s, 300/m or 0.5/s (a bare number is per second)")
  }
  let rate = count / unit
  guard requestRateRange.contains(rate) else {
    throw UnitParseError(
      value: text, expected: "a rate from 1/h to 10000/s", outOfRange: true)
  }
  return rate
}

/// What a request rate may be, in requests per second: 1/h to 10000/s.
package let requestRateRange = (1.0 / 3600)...10_000

/// Bandwidths as users write them: a size (``parseByteCount(_:)``'s units) per second, `/s`
/// optional: `10MB/s`, `500KiB/s`, `1MB`. From 1KB/s (slower, one read of a response would
/// take minutes to pay back) to 2^63-1 bytes a second.
package func parseBandwidth(_ text: String) throws(UnitParseError) -> UInt64 {
  let trimmed = text.trimmingCharacters(in: .whitespaces)
  let size = trimmed.lowercased().hasSuffix("/s") ? String(trimmed.dropLast(2)) : trimmed
  let outOfRange = UnitParseError(
    value: text, expected: "a bandwidth from 1KB/s to \(largestByteCount) bytes/s",
    outOfRange: true)
  let bytes: UInt64
  do {
    bytes = try parseByteCount(size)
  } catch  where error.outOfRange {
    throw outOfRange
  } catch {
    throw UnitParseError(
      value: text, expected: "a bandwidth such as 10MB/s or 500KiB/s (a bare number is bytes/s)")
  }
  guard bytes >= smallestBandwidth else { throw outOfRange }
  return bytes
}

/// The smallest bandwidth cap, in bytes a second.
package let smallestBandwidth: UInt64 = 1000

/// `-12`, `1.5`, `.5`, `2e3`: an optional sign, digits with an optional fraction, an optional
/// exponent.
func isDecimalNumber<S: StringProtocol>(_ text: S) -> Bool {
  var characters = Substring(text)[...]
  if characters.first == "-" || characters.first == "+" { characters = characters.dropFirst() }
  let mantissa = characters.prefix { $0 != "e" && $0 != "E" }
  let parts = mantissa.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
  guard parts.allSatisfy({ $0.allSatisfy(\.isASCIIDigit) }),
    parts.contains(where: { !$0.isEmpty })
  else { return false }
  var exponent = characters.dropFirst(mantissa.count)
  guard !exponent.isEmpty else { return true }
  exponent = exponent.dropFirst()
  if exponent.first == "-" || exponent.first == "+" { exponent = exponent.dropFirst() }
  return !exponent.isEmpty && exponent.allSatisfy(\.isASCIIDigit)
}

extension Character {
  fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

/// A byte count for people: `1.5 MB` (decimal units, one decimal). Plain arithmetic: on Linux
/// `String(format:)` builds ICU formatters, which is slow in a loop over a million files.
package func formatBytes(_ bytes: UInt64) -> String {
  let units = ["B", "KB", "MB", "GB", "TB", "PB"]
  var unit = 0
  var scale: UInt64 = 1
  while bytes / scale >= 1000 && unit < units.count - 1 {
    scale *= 1000
    unit += 1
  }
  guard unit > 0 else { return "\(bytes) B" }
  // Whole units and the rest apart: `bytes * 10` would overflow past 1.8 EB.
  let tenths = bytes / scale * 10 + (bytes % scale * 10 + scale / 2) / scale
  return "\(tenths / 10).\(tenths % 10) \(units[unit])"
}
