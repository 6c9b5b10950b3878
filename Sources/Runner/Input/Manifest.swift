import Core
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

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
public struct ManifestLineError: Error, Sendable, Equatable, CustomStringConvertible {
  public var file: String
  public var line: Int
  public var field: String?
  public var message: String

  public var description: String {
    "\(file):\(line): " + (field.map { "field '\($0)': " } ?? "") + message
  }
}

/// Reads a manifest line by line, never loading it whole (SPEC section 6): plain text (one URL
/// a line, `#` comments, blank lines ignored) or JSON Lines (a line starting with `{` is an
/// object with `url` and optional `options` and `context`). Both kinds may be mixed.
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
      while let (number, rawLine) = lines.next() {
        let line = rawLine.trimmingCharacters(in: .whitespacesAndNewlines)
        if line.isEmpty || line.hasPrefix("#") { continue }
        if line.hasPrefix("{") { return Self.parseJSON(line, file: path, line: number) }
        return .success(ManifestEntry(url: line, file: path, line: number))
      }
      if let error = lines.error {
        lines.error = nil
        return .failure(
          ManifestLineError(file: path, line: lines.lineNumber, field: nil, message: error))
      }
      return nil
    }

    private struct JSONLine: Decodable {
      var url: String
      var options: [String]?
      var context: [String: JSONValue]?
    }

    static func parseJSON(_ line: String, file: String, line number: Int)
      -> Result<ManifestEntry, ManifestLineError>
    {
      do {
        let decoded = try JSONDecoder().decode(JSONLine.self, from: Data(line.utf8))
        return .success(
          ManifestEntry(
            url: decoded.url, options: decoded.options ?? [], context: decoded.context ?? [:],
            file: file, line: number))
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

/// Reads a file's lines in fixed-size chunks: memory stays bounded whatever the file's size.
public final class LineReader: Sequence, IteratorProtocol {
  private var fd: Int32
  private var buffer: [UInt8] = []
  private var start = 0
  private var atEnd = false
  public private(set) var lineNumber = 0
  /// Set when the file could not be opened or read.
  public var error: String?
  private static let chunkSize = 64 * 1024

  public init(path: String) {
    fd = open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0 {
      error = String(cString: strerror(errno))
      atEnd = true
    }
  }

  /// The next line (without its newline) and its 1-based number.
  public func next() -> (Int, String)? {
    while true {
      if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
        let line = String(decoding: buffer[start..<newline], as: UTF8.self)
        start = newline + 1
        lineNumber += 1
        return (lineNumber, line)
      }
      if atEnd {
        guard start < buffer.count else {
          closeFile()
          return nil
        }
        let line = String(decoding: buffer[start...], as: UTF8.self)
        start = buffer.count
        lineNumber += 1
        return (lineNumber, line)
      }
      fill()
    }
  }

  private func fill() {
    buffer.removeFirst(start)
    start = 0
    let previous = buffer.count
    buffer.reserveCapacity(previous + Self.chunkSize)
    var chunk = [UInt8](repeating: 0, count: Self.chunkSize)
    let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, Self.chunkSize) }
    if count < 0 {
      if errno == EINTR { return }
      error = String(cString: strerror(errno))
      atEnd = true
    } else if count == 0 {
      atEnd = true
    } else {
      buffer.append(contentsOf: chunk[0..<count])
    }
  }

  deinit {
    closeFile()
  }

  private func closeFile() {
    if fd >= 0 {
      close(fd)
      fd = -1
    }
  }
}
