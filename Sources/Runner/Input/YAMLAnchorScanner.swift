import Foundation

/// Finds YAML anchors (`&name`) and aliases (`*name`) by reading the text, not by composing it
/// (SPEC section 10). A `&` or `*` counts where a node can start (at a line's start, or after
/// `:`, `-`, `?`, `,`, `[` or `{` and spaces), outside quoted scalars and comments, so that
/// `a&b` in a URL or `*` inside quotes is text.
enum YAMLAnchorScanner {
  /// The 1-based line of the first anchor or alias, or `nil`.
  static func firstAnchorOrAlias(in text: String) -> Int? {
    let bytes = Array(text.utf8)
    var line = 1
    var atNodeStart = true
    var index = 0
    func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
    while index < bytes.count {
      let byte = bytes[index]
      switch byte {
      case UInt8(ascii: "\n"):
        line += 1
        atNodeStart = true
      case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
        break
      case UInt8(ascii: "#") where index == 0 || isSpace(bytes[index - 1]) || atNodeStart:
        while index < bytes.count && bytes[index] != UInt8(ascii: "\n") { index += 1 }
        continue
      case UInt8(ascii: "&"), UInt8(ascii: "*"):
        // (A `where` clause would apply to the last pattern only: hence the `if`.)
        if atNodeStart, index + 1 < bytes.count, !isSpace(bytes[index + 1]),
          bytes[index + 1] != UInt8(ascii: "\n")
        {
          return line
        }
        atNodeStart = false
      case UInt8(ascii: "\""), UInt8(ascii: "'"):
        guard atNodeStart else {
          atNodeStart = false
          break
        }
        // A quoted scalar, possibly over several lines; `\"` escapes in double quotes, `''` in
        // single quotes.
        index += 1
        while index < bytes.count {
          if bytes[index] == UInt8(ascii: "\n") { line += 1 }
          if byte == UInt8(ascii: "\"") && bytes[index] == UInt8(ascii: "\\") {
            index += 2
            continue
          }
          if bytes[index] == byte {
            if byte == UInt8(ascii: "'") && index + 1 < bytes.count && bytes[index + 1] == byte {
              index += 2
              continue
            }
            break
          }
          index += 1
        }
        atNodeStart = false
      case UInt8(ascii: ":"), UInt8(ascii: "-"), UInt8(ascii: "?"), UInt8(ascii: ","),
        UInt8(ascii: "["), UInt8(ascii: "{"):
        // An indicator when a space, a line end or a flow bracket follows (`a:b` is text).
        let next = index + 1 < bytes.count ? bytes[index + 1] : UInt8(ascii: "\n")
        atNodeStart =
          isSpace(next) || next == UInt8(ascii: "\n") || byte == UInt8(ascii: "[")
          || byte == UInt8(ascii: "{") || byte == UInt8(ascii: ",")
      default:
        atNodeStart = false
      }
      index += 1
    }
    return nil
  }
}
