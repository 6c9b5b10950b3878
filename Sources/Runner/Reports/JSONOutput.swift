import Core
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Compact JSON written into a byte buffer, for the report's per-file and per-URL entries: a
/// million of them must cost little, and `JSONEncoder` builds a tree per value.
struct JSONOutput {
  var bytes: [UInt8] = []

  init(reservingCapacity capacity: Int = 256) {
    bytes.reserveCapacity(capacity)
  }

  mutating func raw(_ text: StaticString) {
    text.withUTF8Buffer { bytes.append(contentsOf: $0) }
  }

  /// `"key":`
  mutating func key(_ name: StaticString) {
    bytes.append(UInt8(ascii: "\""))
    raw(name)
    bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
  }

  /// `,"key":`, for every member of an object after its first.
  mutating func member(_ name: StaticString) {
    bytes.append(UInt8(ascii: ","))
    key(name)
  }

  /// `,"key":"value"`
  mutating func member(_ name: StaticString, _ value: String) {
    member(name)
    string(value)
  }

  /// `,"key":123`
  mutating func member(_ name: StaticString, _ value: some BinaryInteger) {
    member(name)
    integer(value)
  }

  /// `,"key":["a","b"]`
  mutating func member(_ name: StaticString, strings values: [String]) {
    member(name)
    raw("[")
    for (index, value) in values.enumerated() {
      if index > 0 { raw(",") }
      string(value)
    }
    raw("]")
  }

  /// A JSON string, escaped as RFC 8259 requires (control characters, `"` and `\`).
  /// A JSON string; the password of any URL in it is masked (SPEC section 11).
  mutating func string(_ value: String) {
    bytes.append(UInt8(ascii: "\""))
    for byte in value.maskingURLPasswords.utf8 {
      switch byte {
      case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
      case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
      case UInt8(ascii: "\n"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
      case UInt8(ascii: "\r"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
      case UInt8(ascii: "\t"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
      case 0..<0x20:
        let hex = Array("0123456789abcdef".utf8)
        bytes.append(contentsOf: Array("\\u00".utf8))
        bytes.append(hex[Int(byte >> 4)])
        bytes.append(hex[Int(byte & 0xF)])
      default: bytes.append(byte)
      }
    }
    bytes.append(UInt8(ascii: "\""))
  }

  mutating func integer(_ value: some BinaryInteger) {
    bytes.append(contentsOf: String(value).utf8)
  }

  mutating func number(_ value: Double) {
    bytes.append(contentsOf: (value.isFinite ? "\(value)" : "0").utf8)
  }

  mutating func bool(_ value: Bool) {
    value ? raw("true") : raw("false")
  }

  /// An ISO 8601 UTC date with milliseconds, as the report schema has it:
  /// `2026-11-22T03:00:00.000Z`. Formatted by hand: Foundation's formatters cost microseconds
  /// each, which a million-file dry run notices.
  mutating func date(_ date: Date) {
    let time = UTCTime(date)
    bytes.append(UInt8(ascii: "\""))
    digits(time.year, 4)
    bytes.append(UInt8(ascii: "-"))
    digits(time.month, 2)
    bytes.append(UInt8(ascii: "-"))
    digits(time.day, 2)
    bytes.append(UInt8(ascii: "T"))
    digits(time.hour, 2)
    bytes.append(UInt8(ascii: ":"))
    digits(time.minute, 2)
    bytes.append(UInt8(ascii: ":"))
    digits(time.second, 2)
    bytes.append(UInt8(ascii: "."))
    digits(time.millisecond, 3)
    bytes.append(contentsOf: [UInt8(ascii: "Z"), UInt8(ascii: "\"")])
  }

  private mutating func digits(_ value: Int, _ width: Int) {
    var divisor = 1
    for _ in 1..<width { divisor *= 10 }
    var rest = value
    while divisor > 0 {
      bytes.append(UInt8(ascii: "0") + UInt8((rest / divisor) % 10))
      rest %= divisor
      divisor /= 10
    }
  }
}

extension MaintenanceAction {
  /// `{"kind":"delete","path":"...","bytes":4096,"date":"..."}`
  func write(to json: inout JSONOutput) {
    json.raw("{")
    json.key("kind")
    json.string(kind.rawValue)
    json.member("path", path)
    if let destination { json.member("destination", destination) }
    json.member("bytes", bytes)
    if let date {
      json.member("date")
      json.date(date)
    }
    if let url { json.member("url", url.maskingURLPasswords) }
    if let reason { json.member("reason", reason) }
    json.raw("}")
  }
}

extension VerifiedFile {
  /// `{"name":"...","size":4096,"modifiedAt":"...","outcome":"bad","reason":"...","notes":[],`
  /// `"url":"..."}`
  func write(to json: inout JSONOutput) {
    json.raw("{")
    json.key("name")
    json.string(name)
    json.member("size", size)
    json.member("modifiedAt")
    json.date(modifiedAt)
    json.member("outcome", outcome.rawValue)
    if let reason { json.member("reason", reason) }
    json.member("notes", strings: notes)
    if let url { json.member("url", url.maskingURLPasswords) }
    json.raw("}")
  }
}

extension FailureReport {
  func write(to json: inout JSONOutput) {
    json.raw("{")
    json.key("url")
    json.string(url)
    json.member("code", code)
    json.member("name", name)
    if let httpStatus { json.member("httpStatus", httpStatus) }
    json.member("message", message)
    json.member("attempts", attempts)
    json.member("blacklisted")
    json.bool(blacklisted)
    if let source { json.member("source", source) }
    json.raw("}")
  }
}

extension DownloadReport {
  func write(to json: inout JSONOutput) {
    json.raw("{")
    json.key("url")
    json.string(url)
    json.member("bytes", bytes)
    if let format { json.member("format", format.rawValue) }
    if let width { json.member("width", width) }
    if let height { json.member("height", height) }
    json.raw("}")
  }
}

extension VariantReport {
  func write(to json: inout JSONOutput) {
    json.raw("{")
    json.key("url")
    json.string(url)
    json.member("key")
    json.string(key)
    if let format { json.member("format", format.rawValue) }
    if let width { json.member("width", width) }
    if let height { json.member("height", height) }
    if let bytes { json.member("bytes", bytes) }
    json.member("originalBytes")
    json.bool(originalBytes)
    if let skipped {
      json.member("skipped")
      json.string(skipped)
    }
    json.raw("}")
  }
}

extension PlannedURL {
  /// `{"url":"...","action":"download","source":"urls.txt:3"}`
  func write(to json: inout JSONOutput) {
    json.raw("{")
    json.key("url")
    json.string(url)
    json.member("action", action.rawValue)
    if let reason { json.member("reason", reason) }
    if let source { json.member("source", source) }
    json.raw("}")
  }
}
