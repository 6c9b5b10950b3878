import Core
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Why a line could not be read as text.
public enum LineProblem: Error, Sendable, Equatable {
  case notUTF8
  case tooLong(limit: Int)

  public var message: String {
    switch self {
    case .notUTF8: "not valid UTF-8; not sent anywhere"
    case .tooLong(let limit): "longer than \(limit / 1024) KiB; skipped"
    }
  }
}

/// Reads a file's lines in fixed-size chunks: memory stays bounded whatever the file's size. A
/// UTF-8 byte order mark at the start is dropped; a line over ``maxLineLength`` bytes is
/// skipped as it streams past, never held whole.
///
/// A stream (a pipe, a FIFO, a terminal) is read only when `poll` says it has data or its
/// writer is gone, and `stop` is looked at in between: a FIFO nobody writes must not hold a
/// signal's stop up (SPEC section 5).
public final class LineReader: Sequence, IteratorProtocol {
  /// The longest line read (SPEC section 10).
  public static let maxLineLength = 64 * 1024
  private var fd: Int32
  private var buffer: [UInt8] = []
  private var start = 0
  private var atEnd = false
  /// Inside a line that is too long: everything up to its newline is dropped.
  private var skippingLongLine = false
  public private(set) var lineNumber = 0
  /// Set when the file could not be opened or read.
  public var error: String?
  /// Set for a stream: reading waits for data in `poll` and ends once this is set.
  private let stop: StopFlag?
  private static let chunkSize = 64 * 1024
  /// How often a stream with no data looks at `stop`.
  private static let stopCheckMilliseconds: Int32 = 100

  public init(path: String) {
    fd = open(path, O_RDONLY | O_CLOEXEC)
    stop = nil
    if fd < 0 {
      error = String(cString: strerror(errno))
      atEnd = true
    }
  }

  /// Reads an open file from its current position; takes ownership of `descriptor`.
  /// - Parameter stop: for a stream (not a regular file): reading ends once it is set.
  public init(descriptor: Int32, stop: StopFlag? = nil) {
    fd = descriptor
    self.stop = stop
  }

  /// The first bytes still to read (a chunk is read if none is held), without taking them.
  func peek() -> ArraySlice<UInt8> {
    if start == buffer.count && !atEnd { fill() }
    return buffer[start...]
  }

  /// The next line (without its newline) or why it cannot be used, and its 1-based number.
  public func next() -> (Int, Result<String, LineProblem>)? {
    while true {
      if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
        let bytes = buffer[start..<newline]
        start = newline + 1
        lineNumber += 1
        if skippingLongLine || bytes.count > Self.maxLineLength {
          skippingLongLine = false
          return (lineNumber, .failure(.tooLong(limit: Self.maxLineLength)))
        }
        return (lineNumber, Self.text(bytes, first: lineNumber == 1))
      }
      if buffer.count - start > Self.maxLineLength {
        // No newline in sight: drop what is buffered and go on dropping to the line's end.
        skippingLongLine = true
        buffer.removeAll(keepingCapacity: true)
        start = 0
      }
      if atEnd {
        guard start < buffer.count || skippingLongLine else {
          closeFile()
          return nil
        }
        let bytes = buffer[start...]
        start = buffer.count
        lineNumber += 1
        if skippingLongLine {
          skippingLongLine = false
          return (lineNumber, .failure(.tooLong(limit: Self.maxLineLength)))
        }
        return (lineNumber, Self.text(bytes, first: lineNumber == 1))
      }
      fill()
    }
  }

  private static func text(_ bytes: ArraySlice<UInt8>, first: Bool) -> Result<String, LineProblem> {
    var bytes = bytes
    if first && bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
    guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(.notUTF8) }
    return .success(text)
  }

  private func fill() {
    if let stop {
      guard Self.waitForData(fd, stop: stop) else {
        atEnd = true
        return
      }
    }
    buffer.removeFirst(start)
    start = 0
    let previous = buffer.count
    buffer.reserveCapacity(previous + Self.chunkSize)
    var chunk = [UInt8](repeating: 0, count: Self.chunkSize)
    let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, Self.chunkSize) }
    if count < 0 {
      // EAGAIN: a stream whose flags (shared with another process) say not to wait.
      if errno == EINTR || errno == EAGAIN { return }
      error = String(cString: strerror(errno))
      atEnd = true
    } else if count == 0 {
      atEnd = true
    } else {
      buffer.append(contentsOf: chunk[0..<count])
    }
  }

  /// Waits until `descriptor` has data or an end to read; `false` once `stop` (or the
  /// producing thread's cancellation) is set first. A FIFO that no writer has opened yet is not
  /// at its end: `poll` reports neither data nor a hang-up for it (Linux), where `read` would
  /// say end of file at once. A producer is told before a wait (the prefetch goes on with the
  /// lines it has).
  private static func waitForData(_ descriptor: Int32, stop: StopFlag) -> Bool {
    var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
    if poll(&entry, 1, 0) > 0 { return true }
    ProducerContext.current?.willWait()
    while !stop.isStopped && !ProducerContext.isCancelled {
      let ready = poll(&entry, 1, stopCheckMilliseconds)
      if ready > 0 { return true }
      if ready < 0 && errno != EINTR { return true }  // `read` says what is wrong
    }
    return false
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
