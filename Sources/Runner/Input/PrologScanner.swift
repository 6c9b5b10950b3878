/// Finds a DOCTYPE in the prolog as the bytes stream past, before libxml2 parses any of it:
/// what a DTD can do (entities) is refused before it starts, with the line it is on.
struct PrologScanner {
  private(set) var isOver = false
  private(set) var line = 1
  /// The bytes of `<!DOCTYPE` matched so far (a match may span two reads).
  private var matched = 0
  /// Just after a `<`: the next byte says whether the root element starts.
  private var afterOpen = false
  private static let doctype = Array("<!DOCTYPE".utf8)

  /// The line of a DOCTYPE in `bytes`, if one starts there.
  mutating func scan(_ bytes: UnsafeRawBufferPointer) -> Int? {
    for byte in bytes {
      if afterOpen {
        afterOpen = false
        // `<?` and `<!` (declarations, comments) belong to the prolog; `<name` ends it.
        if byte != UInt8(ascii: "?") && byte != UInt8(ascii: "!") {
          isOver = true
          return nil
        }
      }
      if byte == UInt8(ascii: "\n") { line += 1 }
      if byte == Self.doctype[matched] {
        matched += 1
        if matched == Self.doctype.count { return line }
      } else {
        matched = byte == Self.doctype[0] ? 1 : 0
      }
      if byte == UInt8(ascii: "<") { afterOpen = true }
    }
    return nil
  }
}
