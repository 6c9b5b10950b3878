import Core
import Foundation

/// One URL of a manifest, with its per-URL options and context when the manifest is JSON Lines.
public struct ManifestEntry: Sendable, Equatable {
  public var url: String
  public var options: [String]
  /// The raw `context` object of a JSON Lines entry.
  public var context: [String: JSONValue]
  /// Where it came from, for error messages.
  public var file: String
  public var line: Int

  public init(
    url: String, options: [String] = [], context: [String: JSONValue] = [:], file: String,
    line: Int
  ) {
    self.url = url
    self.options = options
    self.context = context
    self.file = file
    self.line = line
  }
}

/// A manifest line that could not be used. It is reported and skipped; it never stops a run.
/// With `wholeInput`, it is a manifest or sitemap that could not be read to its end (not
/// fetched, not opened, refused, broken): a failure of the run, not a skipped line.
public struct ManifestLineError: Error, Sendable, Equatable, CustomStringConvertible {
  public var file: String
  public var line: Int
  public var field: String?
  public var message: String
  public var wholeInput = false
  /// A whole input that is no manifest at all (an image, binary data): a usage error.
  public var notAManifest = false

  public var description: String {
    "\(file):\(line): " + (field.map { "field '\($0)': " } ?? "") + message
  }
}

/// Reads a manifest line by line, never loading it whole (SPEC section 6): plain text (one URL
/// a line, `#` comments, blank lines ignored) or JSON Lines (a line starting with `{` is an
/// object with `url` and optional `options` and `context`). Both kinds may be mixed.
///
/// Manifests come from other systems and are not trusted (SPEC section 10): a byte order mark
/// is ignored; a line that is not UTF-8, holds a control character, or is longer than
/// ``LineReader/maxLineLength`` is a line error and never sent anywhere; a JSON line with a
/// duplicate or unknown key is a line error.
public struct ManifestReader: Sequence {
  public let path: String

  public init(path: String) {
    self.path = path
  }

  /// Each line's entry or the error that made it unusable.
  public func makeIterator() -> Iterator {
    Iterator(path: path, lines: LineReader(path: path))
  }

  public struct Iterator: IteratorProtocol {
    let path: String
    let lines: LineReader

    public mutating func next() -> Result<ManifestEntry, ManifestLineError>? {
      while let (number, read) = lines.next() {
        let rawLine: String
        switch read {
        case .success(let text): rawLine = text
        case .failure(let problem):
          return .failure(
            ManifestLineError(file: path, line: number, field: nil, message: problem.message))
        }
        let line = rawLine.trimmingWhitespace()
        if line.isEmpty || line.hasPrefix("#") { continue }
        if line.containsControlCharacter() {
          return .failure(
            ManifestLineError(
              file: path, line: number, field: nil, message: Self.controlCharacterMessage))
        }
        guard line.hasPrefix("{") else { return Self.entry(line, file: path, line: number) }
        let entry = Self.parseJSON(line, file: path, line: number)
        if case .success(let found) = entry, let problem = Self.notAURL(found.url) {
          return .failure(
            ManifestLineError(file: path, line: number, field: "url", message: problem))
        }
        return entry
      }
      if let error = lines.error {
        lines.error = nil
        return .failure(
          ManifestLineError(
            file: path, line: lines.lineNumber, field: nil, message: error, wholeInput: true))
      }
      return nil
    }

    /// The entry of a plain-text line (or a `--url`): the URL, or why it cannot be one.
    static func entry(_ url: String, file: String, line: Int) -> Result<
      ManifestEntry, ManifestLineError
    > {
      if let problem = notAURL(url) {
        return .failure(ManifestLineError(file: file, line: line, field: nil, message: problem))
      }
      return .success(ManifestEntry(url: url, file: file, line: line))
    }

    /// Why `url` is text that cannot be a URL, or `nil`: quoted (`"https://..."`, copied
    /// from code or a spreadsheet), holding a space (two URLs on a line, a file name), without
    /// a scheme, an http(s) URL without a host, or text no URL parser reads. Such a line is a
    /// line error naming the file and line, never requested nor blacklisted: SD would blacklist
    /// it for good as `invalidURL`, and every later run would refuse it without a word.
    static func notAURL(_ url: String) -> String? {
      let text = url.trimmingWhitespace()
      if let first = text.first, let last = text.last,
        isQuote(first) || isQuote(last)
      {
        return "not a URL: it is quoted; write the URL alone, without quotes"
      }
      // White space as Character.isWhitespace has it, Unicode's tables looked up only when a
      // byte could be some: a URL's bytes are nearly always ASCII past the space. The lookup
      // for every character was 2% of a run's CPU (this runs twice a line: for the items, and
      // for the count of the progress line's total).
      if text.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x80 }),
        text.unicodeScalars.contains(where: \.properties.isWhitespace)
      {
        return "not a URL: it holds a space (one URL a line; a space in a URL is written %20)"
      }
      if let problem = missingScheme(text) { return problem }
      guard let parsed = URL(string: text), let scheme = parsed.scheme?.lowercased() else {
        return "not a URL"
      }
      if scheme == "http" || scheme == "https", parsed.host?.isEmpty ?? true {
        return "not a URL: no host after \(scheme)://"
      }
      return nil
    }

    /// Quotation marks a copied URL comes wrapped in: ASCII, typographic and angle brackets.
    /// A switch, not a `Set<Character>`: making that set's type was a search of the binary's
    /// protocol conformances on the way to the first request.
    static func isQuote(_ character: Character) -> Bool {
      switch character {
      case "\"", "'", "`", "\u{201C}", "\u{201D}", "\u{2018}", "\u{2019}", "<", ">": true
      default: false
      }
    }

    /// Why `url` is a typo rather than a URL, or `nil`: it has no scheme (`cdn.example.com/a.jpg`,
    /// `//cdn.example.com/a.jpg`, `localhost:8080/a.jpg`). Such a line is skipped as a line
    /// error with the URL that was likely meant, never requested nor blacklisted: SD is never
    /// given a URL without a scheme, and blacklisting the typo would only hide it. A URL with
    /// another scheme (`ftp:`, `data:`) is the pipeline's to refuse, as SD does.
    static func missingScheme(_ url: String) -> String? {
      let text = url.trimmingWhitespace()
      guard !text.contains("://") else { return nil }
      if let colon = text.firstIndex(of: ":"), URL(string: text)?.scheme != nil {
        // `host:port/path` parses with the host as its scheme; a real scheme has no dot and
        // is not followed by a port number.
        let scheme = text[..<colon]
        let after = text[text.index(after: colon)...]
        guard scheme.contains(".") || after.first?.isNumber == true else { return nil }
      }
      let bare = text.hasPrefix("//") ? String(text.dropFirst(2)) : text
      let host = bare.prefix { $0 != "/" }
      guard !bare.contains(where: \.isWhitespace),
        host.contains(".") || host.contains(":")
          || host == "localhost"
      else {
        return "not a URL: no scheme (http:// or https://)"
      }
      return "no scheme: did you mean https://\(bare)?"
    }

    static let controlCharacterMessage =
      "holds a control character (NUL, tab, CR...); not sent anywhere"

    private struct JSONLine: Decodable {
      var url: String
      var options: [String]?
      var context: [String: JSONValue]?

      static let knownKeys: Set<String> = ["url", "options", "context"]

      private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
      }

      init(from decoder: any Decoder) throws {
        let keys = try decoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue)
        if let unknown = keys.sorted().first(where: { !Self.knownKeys.contains($0) }) {
          throw UnknownKey(name: unknown)
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        url = try container.decode(String.self, forKey: .url)
        options = try container.decodeIfPresent([String].self, forKey: .options)
        context = try container.decodeIfPresent([String: JSONValue].self, forKey: .context)
      }

      private enum CodingKeys: String, CodingKey {
        case url, options, context
      }
    }

    private struct UnknownKey: Error {
      var name: String
    }

    static func parseJSON(_ line: String, file: String, line number: Int)
      -> Result<ManifestEntry, ManifestLineError>
    {
      if let duplicate = JSONKeyScanner.firstDuplicateKey(in: Array(line.utf8)) {
        return .failure(
          ManifestLineError(
            file: file, line: number, field: duplicate,
            message: "duplicate key (which one counts would be a guess)"))
      }
      do {
        let decoded = try JSONDecoder().decode(JSONLine.self, from: Data(line.utf8))
        // A JSON escape (`\u0000`, `\t`) gets past the check of the raw line.
        if decoded.url.containsControlCharacter() {
          return .failure(
            ManifestLineError(
              file: file, line: number, field: "url", message: controlCharacterMessage))
        }
        return .success(
          ManifestEntry(
            url: decoded.url, options: decoded.options ?? [], context: decoded.context ?? [:],
            file: file, line: number))
      } catch let unknown as UnknownKey {
        return .failure(
          ManifestLineError(
            file: file, line: number, field: unknown.name.debugDescription,
            message: "unknown key (known: url, options, context)"))
      } catch DecodingError.keyNotFound(let key, _) {
        return .failure(
          ManifestLineError(file: file, line: number, field: key.stringValue, message: "missing"))
      } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(
        _, let context)
      {
        return .failure(
          ManifestLineError(
            file: file, line: number,
            field: context.codingPath.map(\.stringValue).joined(separator: "."),
            message: "wrong type: \(context.debugDescription)"))
      } catch {
        return .failure(
          ManifestLineError(file: file, line: number, field: nil, message: "not valid JSON"))
      }
    }
  }
}

/// Finds a key that appears twice in one JSON object, at any depth, without building the value:
/// JSON parsers silently keep one of them.
enum JSONKeyScanner {
  /// The first duplicate key (as written, escapes and all), or `nil`.
  static func firstDuplicateKey(in bytes: [UInt8]) -> String? {
    // One entry per open container: the keys seen so far, or nil for an array.
    var stack: [Set<ArraySlice<UInt8>>?] = []
    var expectingKey = false
    var index = 0
    while index < bytes.count {
      switch bytes[index] {
      case UInt8(ascii: "{"):
        stack.append([])
        expectingKey = true
      case UInt8(ascii: "["):
        stack.append(nil)
        expectingKey = false
      case UInt8(ascii: "}"), UInt8(ascii: "]"):
        _ = stack.popLast()
        expectingKey = false
      case UInt8(ascii: ","):
        expectingKey = stack.last.map { $0 != nil } ?? false
      case UInt8(ascii: "\""):
        let start = index + 1
        index += 1
        while index < bytes.count && bytes[index] != UInt8(ascii: "\"") {
          index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
        }
        if expectingKey, let keys = stack.last, var seen = keys {
          let key = bytes[start..<min(index, bytes.count)]
          guard seen.insert(key).inserted else { return String(decoding: key, as: UTF8.self) }
          stack[stack.count - 1] = seen
          expectingKey = false
        }
      default:
        break
      }
      index += 1
    }
    return nil
  }
}
