import Foundation

/// Checks a JSON value against the subset of JSON Schema that `docs/report-schema.json` uses:
/// `type`, `required`, `properties`, `additionalProperties` (`false`, or the schema of every
/// other member), `items`, `enum`, `minimum`.
/// Returns one message per violation, with the path to the value.
public enum SchemaValidator {
  public static func validate(_ value: Any, against schema: [String: Any], path: String = "$")
    -> [String]
  {
    var problems: [String] = []
    if let type = schema["type"] as? String, !matches(value, type: type) {
      return ["\(path): expected \(type), found \(Swift.type(of: value))"]
    }
    if let allowed = schema["enum"] as? [Any], !allowed.contains(where: { "\($0)" == "\(value)" }) {
      problems.append("\(path): \(value) is not one of \(allowed)")
    }
    if let minimum = schema["minimum"] as? Double, let number = value as? NSNumber,
      number.doubleValue < minimum
    {
      problems.append("\(path): \(number) is below \(minimum)")
    }
    if let object = value as? [String: Any] {
      let properties = schema["properties"] as? [String: [String: Any]] ?? [:]
      for name in schema["required"] as? [String] ?? [] where object[name] == nil {
        problems.append("\(path): missing required \(name)")
      }
      for (name, member) in object {
        if let memberSchema = properties[name] {
          problems += validate(member, against: memberSchema, path: "\(path).\(name)")
        } else if let memberSchema = schema["additionalProperties"] as? [String: Any] {
          problems += validate(member, against: memberSchema, path: "\(path).\(name)")
        } else if schema["additionalProperties"] as? Bool == false {
          problems.append("\(path): unexpected property \(name)")
        }
      }
    }
    if let array = value as? [Any], let items = schema["items"] as? [String: Any] {
      for (index, element) in array.enumerated() {
        problems += validate(element, against: items, path: "\(path)[\(index)]")
      }
    }
    return problems
  }

  private static func matches(_ value: Any, type: String) -> Bool {
    switch type {
    case "object": return value is [String: Any]
    case "array": return value is [Any]
    case "string": return value is String
    case "boolean": return value is Bool
    case "integer":
      guard let number = value as? NSNumber else { return false }
      return number.doubleValue.rounded() == number.doubleValue
    case "number": return value is NSNumber
    default: return true
    }
  }

  /// `docs/report-schema.json`, parsed.
  public static func reportSchema() throws -> [String: Any] {
    let path = URL(fileURLWithPath: Fixtures.directory).deletingLastPathComponent()
      .deletingLastPathComponent()
      .appendingPathComponent("docs/report-schema.json")
    let data = try Data(contentsOf: path)
    return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
  }
}
