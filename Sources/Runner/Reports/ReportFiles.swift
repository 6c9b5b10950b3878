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
    let folder =
      ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 }
      ?? "/tmp"
    let (descriptor, path) = try makeTemporaryFile(folder + "/.imagecache-report-")
    self.descriptor = descriptor
    unlink(path)
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
    try ReportOutput.writeAll(buffer.bytes, to: descriptor, path: "report temporary file")
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

/// One place a report goes: a file, written under a temporary name beside it and renamed into
/// place by ``commit()``, or stdout (`--json`), where a failed write is not an error.
/// Used under ``ReportWriter``'s lock only.
final class ReportOutput: @unchecked Sendable {
  let path: String?
  private let descriptor: Int32
  private let temporaryPath: String?
  private var failed = false

  /// Opens a temporary file beside `file`, creating its folder.
  init(file: String) throws(FileSystemError) {
    path = file
    let parent = (file as NSString).deletingLastPathComponent
    let folder = parent.isEmpty ? "." : parent
    try FileSystem.createDirectory(path: folder)
    let name = (file as NSString).lastPathComponent
    (descriptor, temporaryPath) = try makeTemporaryFile(folder + "/.\(name).imagecache-")
    fchmod(descriptor, 0o644)
  }

  init(descriptor: Int32) {
    path = nil
    self.descriptor = descriptor
    temporaryPath = nil
  }

  deinit {
    if let temporaryPath {
      close(descriptor)
      unlink(temporaryPath)
    }
  }

  /// Writes the bytes gathered in `json` and empties it.
  func write(_ json: inout JSONOutput) throws(FileSystemError) {
    try write(bytes: json.bytes[...])
    json.bytes.removeAll(keepingCapacity: true)
  }

  func write(bytes: ArraySlice<UInt8>) throws(FileSystemError) {
    guard !failed else { return }
    do {
      try Self.writeAll(bytes, to: descriptor, path: path ?? "stdout")
    } catch {
      // stdout closed or full: the run goes on (SPEC section 10); the files still count.
      guard path == nil else { throw error }
      failed = true
    }
  }

  /// Moves a report file into place; nothing for stdout.
  func commit() throws(FileSystemError) {
    guard let path, let temporaryPath else { return }
    guard rename(temporaryPath, path) == 0 else {
      throw FileSystemError("rename into place", path: path, errno: errno)
    }
  }

  static func writeAll(
    _ bytes: some Collection<UInt8>, to descriptor: Int32, path: String
  ) throws(FileSystemError) {
    let contiguous = Array(bytes)
    var written = 0
    while written < contiguous.count {
      let result = contiguous.withUnsafeBytes {
        Glibc.write(descriptor, $0.baseAddress! + written, $0.count - written)
      }
      if result < 0 {
        if errno == EINTR { continue }
        throw FileSystemError("write", path: path, errno: errno)
      }
      written += result
    }
  }
}

/// Creates a new file named `prefix` and six random characters (`mkstemp(3)`), closed on exec.
private func makeTemporaryFile(_ prefix: String) throws(FileSystemError) -> (Int32, String) {
  var template = Array((prefix + "XXXXXX").utf8CString)
  let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
  let path = String(
    decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  guard descriptor >= 0 else { throw FileSystemError("create", path: path, errno: errno) }
  _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
  return (descriptor, path)
}
