extension String {
  /// Whether the text holds a control character (NUL, CR, LF, ESC, C1 controls...): such text
  /// never goes into a path, a request or onto a terminal as it is (SPEC section 10). A tab may
  /// be allowed, as in header values.
  package func containsControlCharacter(allowingTab: Bool = false) -> Bool {
    // The bytes in place (every manifest line comes through here): nil once one is not ASCII.
    var text = self
    let asciiControl = text.withUTF8 { bytes -> Bool? in
      for byte in bytes {
        if byte >= 0x80 { return nil }
        if byte < 0x20 || byte == 0x7F, !(allowingTab && byte == 0x09) { return true }
      }
      return false
    }
    if let asciiControl { return asciiControl }
    // Outside ASCII (C1 controls, U+0080-U+009F): ask Unicode.
    return unicodeScalars.contains {
      $0.properties.generalCategory == .control && !(allowingTab && $0 == "\t")
    }
  }

  /// The text without leading and trailing white space (and line breaks, unless
  /// `keepingLineBreaks`), exactly as Foundation's `trimmingCharacters(in:)` with
  /// `.whitespacesAndNewlines` (or `.whitespaces`), without bridging to `NSString`: it runs for
  /// every manifest line and URL.
  package func trimmingWhitespace(keepingLineBreaks: Bool = false) -> String {
    func isBlank(_ scalar: Unicode.Scalar) -> Bool {
      switch scalar.value {
      case 0x20, 0x09: true
      case 0x0A...0x0D, 0x85, 0x2028, 0x2029: !keepingLineBreaks
      case 0..<0x80: false
      default: scalar.properties.generalCategory == .spaceSeparator
      }
    }
    let scalars = unicodeScalars
    guard let first = scalars.firstIndex(where: { !isBlank($0) }) else { return "" }
    let last = scalars.lastIndex { !isBlank($0) }!
    if first == scalars.startIndex && scalars.index(after: last) == scalars.endIndex {
      return self
    }
    return String(scalars[first...last])
  }
}
