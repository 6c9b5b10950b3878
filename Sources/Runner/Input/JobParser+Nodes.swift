import Core
import Foundation
import Yams

extension JobParser {
  func checkKeys(_ mapping: Node.Mapping, known: [String], prefix: String)
    throws(ConfigurationError)
  {
    for (key, _) in mapping {
      guard let name = key.string, known.contains(name) else {
        throw fail(
          key, prefix + (key.string ?? "?"),
          "unknown setting (known: \(known.joined(separator: ", ")))")
      }
    }
  }

  func string(_ node: Node?, _ field: String) throws(ConfigurationError) -> String? {
    guard let node else { return nil }
    guard case .scalar(let scalar) = node, !scalar.string.isEmpty else {
      throw fail(node, field, "expected text")
    }
    return scalar.string
  }

  func strings(_ node: Node, _ field: String) throws(ConfigurationError) -> [String] {
    if case .scalar = node, let single = node.string { return [single] }
    guard let list = node.sequence else { throw fail(node, field, "expected a list") }
    var result: [String] = []
    for item in list {
      guard let text = item.string else { throw fail(item, field, "expected text") }
      result.append(text)
    }
    return result
  }

  /// A whole number that `setting` takes; anything else (a fraction, text, a number past 64
  /// bits) is an error that states the range, in the command line's words.
  func count(_ node: Node, _ setting: JobSetting) throws(ConfigurationError) -> Int {
    do {
      return try setting.check(count: node.int, text: node.string ?? "")
    } catch {
      throw fail(node, setting.field, error.description)
    }
  }

  func duration(_ node: Node, _ setting: JobSetting) throws(ConfigurationError)
    -> TimeInterval
  {
    guard let text = node.string else {
      throw fail(node, setting.field, "expected a duration such as 30s, 15m, 12h or 7d")
    }
    do {
      return try setting.check(seconds: try parseDurationValue(text), text: text)
    } catch {
      throw fail(node, setting.field, error.description)
    }
  }

  func bool(_ node: Node, _ field: String) throws(ConfigurationError) -> Bool {
    guard let value = node.bool else { throw fail(node, field, "expected true or false") }
    return value
  }

  func byteCount(_ node: Node, _ field: String) throws(ConfigurationError) -> UInt64 {
    guard let text = node.string else {
      throw fail(node, field, "expected a size such as 500MB or 2GiB")
    }
    do {
      return try parseByteCount(text)
    } catch {
      throw fail(node, field, error.description)
    }
  }

  func choice<T: RawRepresentable & CaseIterable>(_ node: Node, _ field: String, _ type: T.Type)
    throws(ConfigurationError) -> T
  where T.RawValue == String {
    guard let text = node.string, let value = T(rawValue: text) else {
      throw fail(
        node, field, "expected one of " + T.allCases.map(\.rawValue).joined(separator: ", "))
    }
    return value
  }

  /// A node as JSON, for the context (shared with manifest lines).
  func json(_ node: Node) throws(ConfigurationError) -> JSONValue {
    switch node {
    case .mapping(let mapping):
      var object: [String: JSONValue] = [:]
      for (key, value) in mapping {
        guard let name = key.string else { throw fail(key, "context", "keys must be text") }
        object[name] = try json(value)
      }
      return .object(object)
    case .sequence(let sequence):
      var array: [JSONValue] = []
      for item in sequence { array.append(try json(item)) }
      return .array(array)
    case .scalar(let scalar):
      if scalar.style == .plain {
        if ["null", "~", "Null", "NULL"].contains(scalar.string) { return .null }
        if let value = node.int { return .number(Double(value)) }
        if let value = node.float, value.isFinite { return .number(value) }
        if let value = node.bool { return .bool(value) }
      }
      return .string(scalar.string)
    case .alias:
      throw fail(node, "context", "aliases are not supported")
    }
  }

  /// `path` made absolute: relative to the job file's folder, which is relative to the working
  /// directory when the job file was named that way (reports name absolute paths).
  func resolve(_ path: String) -> String {
    let expanded = (path as NSString).expandingTildeInPath
    guard !expanded.hasPrefix("/") else { return expanded }
    var base = directory
    if !base.hasPrefix("/") {
      base = (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(base)
    }
    return URL(fileURLWithPath: (base as NSString).appendingPathComponent(expanded))
      .standardizedFileURL.path
  }
}
