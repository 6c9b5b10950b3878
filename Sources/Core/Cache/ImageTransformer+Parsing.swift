import Foundation

extension ImageTransformer {
  /// CGBlendMode by name, for `tint.blendMode`.
  package static let blendModes: [String: Int] = [
    "normal": 0, "multiply": 1, "screen": 2, "overlay": 3, "darken": 4, "lighten": 5,
    "colorDodge": 6, "colorBurn": 7, "softLight": 8, "hardLight": 9, "difference": 10,
    "exclusion": 11, "hue": 12, "saturation": 13, "color": 14, "luminosity": 15, "clear": 16,
    "copy": 17, "sourceIn": 18, "sourceOut": 19, "sourceAtop": 20, "destinationOver": 21,
    "destinationIn": 22, "destinationOut": 23, "destinationAtop": 24, "xor": 25,
    "plusDarker": 26, "plusLighter": 27,
  ]

  /// The `imageTransformer` context value: one transformer object, an array of them (a
  /// pipeline, applied in order), or `null` (explicitly none, `nil`). Each object has one key
  /// naming the transformer. Throws a message naming what is wrong.
  package static func parse(_ value: JSONValue) throws(TransformerError) -> [ImageTransformer]? {
    if case .null = value { return nil }
    return try parseList(value)
  }

  private static func parseList(_ value: JSONValue) throws(TransformerError) -> [ImageTransformer] {
    switch value {
    case .null: throw TransformerError("null is only allowed as the whole value")
    case .array(let items):
      var transformers: [ImageTransformer] = []
      for (index, item) in items.enumerated() {
        do throws(TransformerError) {
          transformers += try parseList(item)
        } catch {
          throw TransformerError("[\(index)]: \(error.message)")
        }
      }
      return transformers
    case .object(let object):
      guard object.count == 1, let (name, body) = object.first else {
        throw TransformerError("each transformer is an object with one key, its name")
      }
      return [try parse(name: name, body)]
    default:
      throw TransformerError("expected a transformer object, an array of them, or null")
    }
  }

  private static func parse(name: String, _ body: JSONValue) throws(TransformerError)
    -> ImageTransformer
  {
    guard case .object(let fields) = body else {
      if name == "filter" { throw TransformerError(filterRefusal) }
      throw TransformerError("\(name): expected an object of its parameters")
    }
    func number(_ key: String, default fallback: Double? = nil) throws(TransformerError) -> Double {
      switch fields[key] {
      case .number(let value)?: return value
      case nil: if let fallback { return fallback }
      default: break
      }
      throw TransformerError("\(name).\(key): expected a number")
    }
    func bool(_ key: String) throws(TransformerError) -> Bool {
      switch fields[key] {
      case .bool(let value)?: return value
      case nil: return false
      default: throw TransformerError("\(name).\(key): expected true or false")
      }
    }
    func numbers(_ key: String, count: Int) throws(TransformerError) -> [Double] {
      guard case .array(let items)? = fields[key], items.count == count else {
        throw TransformerError("\(name).\(key): expected \(count) numbers")
      }
      var values: [Double] = []
      for item in items {
        guard case .number(let value) = item else {
          throw TransformerError("\(name).\(key): expected \(count) numbers")
        }
        values.append(value)
      }
      return values
    }
    func color(_ key: String) throws(TransformerError) -> Color? {
      switch fields[key] {
      case nil, .null?: return nil
      case .string(let text)?:
        if let color = Color(hex: text) { return color }
        fallthrough
      default: throw TransformerError("\(name).\(key): expected #rrggbb or #aarrggbb")
      }
    }
    switch name {
    case "resizing":
      let size = try numbers("size", count: 2)
      var mode = ScaleMode.fill
      if let given = fields["scaleMode"] {
        guard case .string(let text) = given,
          let found = ScaleMode.allCases.first(where: { $0.name == text })
        else {
          throw TransformerError("resizing.scaleMode: expected fill, aspectFit or aspectFill")
        }
        mode = found
      }
      return .resizing(width: size[0], height: size[1], scaleMode: mode)
    case "cropping":
      let rect = try numbers("rect", count: 4)
      return .cropping(x: rect[0], y: rect[1], width: rect[2], height: rect[3])
    case "flipping":
      return .flipping(horizontal: try bool("horizontal"), vertical: try bool("vertical"))
    case "rotation":
      return .rotation(angle: try number("angle"), fitSize: try bool("fitSize"))
    case "roundCorner":
      var corners = Corners.all
      switch fields["corners"] {
      case nil, .string("all")?: break
      case .array(let names)?:
        corners = []
        let known: [String: Corners] = [
          "topLeft": .topLeft, "topRight": .topRight, "bottomLeft": .bottomLeft,
          "bottomRight": .bottomRight,
        ]
        for item in names {
          guard case .string(let text) = item, let corner = known[text] else {
            throw TransformerError(
              "roundCorner.corners: expected \"all\" or a list of topLeft, topRight, bottomLeft, bottomRight"
            )
          }
          corners.insert(corner)
        }
      default:
        throw TransformerError("roundCorner.corners: expected \"all\" or a list of corners")
      }
      return .roundCorner(
        radius: try number("radius"), corners: corners,
        borderWidth: try number("borderWidth", default: 0), borderColor: try color("borderColor"))
    case "tint":
      guard let tint = try color("color") else { throw TransformerError("tint.color: required") }
      var mode = 18
      switch fields["blendMode"] {
      case nil: break
      case .number(let value)? where value >= 0 && value <= 27 && value.rounded() == value:
        mode = Int(value)
      case .string(let text)? where blendModes[text] != nil: mode = blendModes[text]!
      default: throw TransformerError("tint.blendMode: expected a CGBlendMode name or number 0-27")
      }
      return .tint(color: tint, blendMode: mode)
    case "blur":
      return .blur(radius: try number("radius"))
    case "filter":
      throw TransformerError(filterRefusal)
    default:
      throw TransformerError(
        "unknown transformer \(name.debugDescription) (known: resizing, cropping, flipping, "
          + "rotation, roundCorner, tint, blur)")
    }
  }

  static let filterRefusal =
    "filter is SD's Core Image transformer (CIFilter), which cannot be reproduced off Apple's "
    + "platforms"
}

/// Why an `imageTransformer` value cannot be used.
package struct TransformerError: Error, Sendable, Equatable, CustomStringConvertible {
  package var message: String
  package init(_ message: String) { self.message = message }
  package var description: String { message }
}
