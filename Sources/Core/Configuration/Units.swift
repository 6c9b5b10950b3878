import Foundation

/// A value given by a user that could not be understood, with what was expected.
public struct UnitParseError: Error, Sendable, Equatable, CustomStringConvertible {
  public var value: String
  public var expected: String
  public var description: String { "\(value.debugDescription) is not \(expected)" }
}

/// Durations as users write them (SPEC section 7): `30s`, `15m`, `12h`, `7d`, `2w`, a bare
/// number of seconds; a leading `-` gives a negative duration ("never" for `maxDiskAge`).
public func parseDuration(_ text: String) throws -> TimeInterval {
  let trimmed = text.trimmingCharacters(in: .whitespaces)
  let units: [(String, TimeInterval)] = [
    ("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800),
  ]
  for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
    let number = trimmed.dropLast(suffix.count).trimmingCharacters(in: .whitespaces)
    if let value = Double(number), value.isFinite { return value * factor }
  }
  if let value = Double(trimmed), value.isFinite { return value }
  throw UnitParseError(
    value: text, expected: "a duration such as 30s, 15m, 12h or 7d (a bare number is seconds)")
}

/// Sizes as users write them (SPEC section 7): decimal `KB`, `MB`, `GB`, `TB` (powers of 1000)
/// and binary `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024), as written; `B` or a bare number is
/// bytes. Case-insensitive.
public func parseByteCount(_ text: String) throws -> UInt64 {
  let trimmed = text.trimmingCharacters(in: .whitespaces)
  let lower = trimmed.lowercased()
  let units: [(String, Double)] = [
    ("kib", 1024), ("mib", 1_048_576), ("gib", 1_073_741_824), ("tib", 1_099_511_627_776),
    ("kb", 1e3), ("mb", 1e6), ("gb", 1e9), ("tb", 1e12), ("k", 1e3), ("m", 1e6), ("g", 1e9),
    ("b", 1),
  ]
  for (suffix, factor) in units where lower.hasSuffix(suffix) {
    let number = lower.dropLast(suffix.count).trimmingCharacters(in: .whitespaces)
    if let value = Double(number), value >= 0, value.isFinite {
      return UInt64((value * factor).rounded())
    }
  }
  if let value = UInt64(trimmed) { return value }
  throw UnitParseError(
    value: text, expected: "a size such as 500MB or 2GiB (a bare number is bytes)")
}

/// A byte count for people: `1.5 MB` (decimal units, one decimal). Plain arithmetic: on Linux
/// `String(format:)` builds ICU formatters, which is slow in a loop over a million files.
public func formatBytes(_ bytes: UInt64) -> String {
  let units = ["B", "KB", "MB", "GB", "TB", "PB"]
  var unit = 0
  var scale: UInt64 = 1
  while bytes / scale >= 1000 && unit < units.count - 1 {
    scale *= 1000
    unit += 1
  }
  guard unit > 0 else { return "\(bytes) B" }
  let tenths = (bytes * 10 + scale / 2) / scale
  return "\(tenths / 10).\(tenths % 10) \(units[unit])"
}
