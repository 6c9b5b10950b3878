import Core
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The entries of one report array, written as they come to a temporary file that is unlinked
/// at once (so nothing is left behind, whatever happens to the run) and read back once when
/// the report is put together. Entries are comma-separated, one a line. Used under
/// ``ReportWriter``'s lock, or by the one pass that owns it.
final class SpillFile: @unchecked Sendable {
  /// -1: the entries are dropped unwritten (a run with no report to write).
  private let descriptor: Int32
  private var buffer = JSONOutput(reservingCapacity: 0)
  private(set) var count = 0
  private static let bufferSize = 1 << 16

  /// A spill file that keeps nothing: no temporary file, and no entry is even encoded.
  static func discarding() -> SpillFile { SpillFile(descriptor: -1) }

  private init(descriptor: Int32) { self.descriptor = descriptor }

  init() throws(FileSystemError) {
    buffer = JSONOutput(reservingCapacity: Self.bufferSize)
    descriptor = try FileSystem.makeScratchFile(for: "report")
  }

  deinit { if descriptor >= 0 { close(descriptor) } }

  /// Adds one entry, written by `element`.
  func append(_ element: (inout JSONOutput) -> Void) throws(FileSystemError) {
    guard descriptor >= 0 else { return }
    if count > 0 { buffer.raw(",\n") }
    element(&buffer)
    count += 1
    if buffer.bytes.count >= Self.bufferSize { try flush() }
  }

  private func flush() throws(FileSystemError) {
    try FileSystem.writeAll(buffer.bytes, to: descriptor, path: "report temporary file")
    buffer.bytes.removeAll(keepingCapacity: true)
  }

  /// Writes `[`, every entry, `]` to `output`.
  func copy(to output: ReportOutput) throws(FileSystemError) {
    try flush()
    try output.write(bytes: Array((count > 0 ? "[\n" : "[").utf8)[...])
    var chunk = [UInt8](repeating: 0, count: Self.bufferSize)
    var offset: off_t = 0
    while true {
      let read = chunk.withUnsafeMutableBytes {
        pread(descriptor, $0.baseAddress, $0.count, offset)
      }
      if read < 0 {
        if errno == EINTR { continue }
        throw FileSystemError("read", path: "report temporary file", errno: errno)
      }
      if read == 0 { break }
      try output.write(bytes: chunk.prefix(read))
      offset += off_t(read)
    }
    try output.write(bytes: Array("]".utf8)[...])
  }
}

/// One place a report goes: a file the user named (written through ``OutputWriter``: a
/// regular file atomically, a device, FIFO or descriptor in place) or stdout (`--json`), where
/// a failed write is not an error. Used under ``ReportWriter``'s lock only.
final class ReportOutput: @unchecked Sendable {
  let path: String?
  private let file: OutputWriter?
  private var failed = false

  /// Opens `file` for writing (a regular file's temporary file beside it, its folder created);
  /// throws for a path that is refused (a folder, a block device) or cannot be created.
  init(file: String) throws(FileSystemError) {
    path = file
    let output = try OutputFile(path: file)
    self.file = try output.open()
    // `--report /dev/stdout` is stdout, as `--json` is.
    writesStandardStreams =
      output.disposition == .descriptor(STDOUT_FILENO)
      || output.disposition == .descriptor(STDERR_FILENO)
  }

  /// The report on stdout.
  init() {
    path = nil
    file = nil
    writesStandardStreams = true
  }

  /// Writes stdout or stderr, where a failed write is not an error (SPEC section 10).
  private let writesStandardStreams: Bool

  /// Writes the bytes gathered in `json` and empties it.
  func write(_ json: inout JSONOutput) throws(FileSystemError) {
    try write(bytes: json.bytes[...])
    json.bytes.removeAll(keepingCapacity: true)
  }

  func write(bytes: ArraySlice<UInt8>) throws(FileSystemError) {
    guard !failed else { return }
    do {
      if let file {
        try file.write(bytes)
      } else {
        try FileSystem.writeAll(bytes, to: STDOUT_FILENO, path: "stdout")
      }
    } catch {
      // stdout closed or full: the run goes on (SPEC section 10); the files still count.
      guard writesStandardStreams else { throw error }
      failed = true
    }
  }

  /// Puts a report file in place; nothing for stdout.
  func commit() throws(FileSystemError) {
    do {
      try file?.commit()
    } catch {
      guard writesStandardStreams else { throw error }
    }
  }
}
