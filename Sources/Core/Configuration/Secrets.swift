/// Secrets never leave the tool (SPEC section 11, issue 26): the password of a URL's user
/// information (`https://user:password@host/`) is masked wherever a URL is shown or kept
/// outside the request itself: reports, `--json`, console lines, the HTML page and the state's
/// blacklist. The cache key and file name stay SD's: they are made from the whole URL, and the
/// file name is an MD5 that gives nothing away.
extension String {
  /// The password every URL in this text carries, masked: `https://user:***@host/a.jpg`.
  /// The user name stays (it says which account); text without `@` comes back as it is.
  package var maskingURLPasswords: String {
    var text = self
    let masked = text.withUTF8 { bytes -> [UInt8]? in
      guard bytes.contains(UInt8(ascii: "@")) else { return nil }
      return Self.maskPasswords(in: bytes)
    }
    guard let masked else { return self }
    return String(decoding: masked, as: UTF8.self)
  }

  /// `nil` when nothing was masked.
  private static func maskPasswords(in bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
    let colon = UInt8(ascii: ":")
    let slash = UInt8(ascii: "/")
    var output: [UInt8] = []
    var copied = 0
    var index = 0
    while index + 2 < bytes.count {
      guard bytes[index] == colon, bytes[index + 1] == slash, bytes[index + 2] == slash else {
        index += 1
        continue
      }
      // The authority: from after "://" to the first "/", "?", "#", or a byte that cannot be
      // in a URL (space, quote, angle bracket, control), as URLs sit in messages.
      let start = index + 3
      var end = start
      var lastAt: Int?
      while end < bytes.count {
        let byte = bytes[end]
        if byte == slash || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#")
          || byte <= 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"")
          || byte == UInt8(ascii: "'") || byte == UInt8(ascii: "<") || byte == UInt8(ascii: ">")
        {
          break
        }
        if byte == UInt8(ascii: "@") { lastAt = end }
        end += 1
      }
      if let at = lastAt, let separator = (start..<at).first(where: { bytes[$0] == colon }),
        !(at - separator - 1 == 3 && bytes[separator + 1] == UInt8(ascii: "*")
          && bytes[separator + 2] == UInt8(ascii: "*") && bytes[separator + 3] == UInt8(ascii: "*"))
      {
        output.append(contentsOf: bytes[copied...separator])
        output.append(contentsOf: "***".utf8)
        copied = at
      }
      index = end
    }
    guard copied > 0 else { return nil }
    output.append(contentsOf: bytes[copied...])
    return output
  }
}
