import Core
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
  import Glibc
#endif

/// The reports `report merge` and `report html` read are input the user names: one that is a
/// FIFO, a device or larger than any report is refused at once, exit 2, naming it, instead of
/// waiting on a writer that never comes or reading without end. Device nodes are made in the
/// temporary folder (`mknod`), never the machine's own.
final class ReportInputTests: TemporaryFolderTestCase {
  /// The largest report docs/security.md says is read: 1 GiB.
  static let documentedBound = 1 << 30

  /// Runs the binary with `arguments` under a memory bound (a tool reading without end fails
  /// instead of taking the machine's memory) and waits for it at most 20 s: one still running
  /// then is killed, and the test fails.
  private func runPromptly(
    _ arguments: [String], file: StaticString = #filePath, line: UInt = #line
  ) throws -> CommandResult {
    let quoted = ([ImageCacheBinary.path] + arguments).map { "'\($0)'" }.joined(separator: " ")
    let (process, stdout, stderr) = try Command.start(
      "/bin/sh", ["-c", "ulimit -v 4194304; exec \(quoted)"])
    let output = PipeReader(stdout)
    let errors = PipeReader(stderr)
    if !waitUntil(timeout: 20, "the command to end", file: file, line: line, { !process.isRunning })
    {
      kill(process.processIdentifier, SIGKILL)
    }
    process.waitUntilExit()
    return CommandResult(
      status: process.terminationStatus,
      stdout: String(decoding: output.readToEnd(), as: UTF8.self),
      stderr: String(decoding: errors.readToEnd(), as: UTF8.self))
  }

  /// `report merge PATH` and `report html PATH` both exit 2 naming `path` and saying `why`.
  private func assertBothRefuse(
    _ path: String, saying why: String, file: StaticString = #filePath, line: UInt = #line
  ) throws {
    for command in [["report", "merge", path, "--json"], ["report", "html", path]] {
      let result = try runPromptly(command, file: file, line: line)
      XCTAssertEqual(result.status, 2, "\(command): \(result.stderr)", file: file, line: line)
      XCTAssertTrue(
        result.stderr.contains(path) && result.stderr.contains(why), result.stderr,
        file: file, line: line)
      XCTAssertEqual(result.stdout, "", file: file, line: line)
    }
  }

  func testAFIFONamedAsAReportIsRefusedAtOnce() throws {
    let fifo = temporary.appending("report.json")
    XCTAssertEqual(mkfifo(fifo, 0o600), 0)
    try assertBothRefuse(fifo, saying: "a FIFO, not a regular file")
  }

  func testACharacterDeviceNamedAsAReportIsRefusedAtOnce() throws {
    guard getuid() == 0 else { try requireOrSkip("mknod needs root: the device test is skipped") }
    let zero = temporary.appending("zero")
    // 1:5 is /dev/zero's number (glibc's makedev is a macro Swift cannot call): it never ends.
    guard mknod(zero, S_IFCHR | 0o666, (1 << 8) | 5) == 0 else {
      try requireOrSkip("mknod refused here (errno \(errno)): the device test is skipped")
    }
    try assertBothRefuse(zero, saying: "a device, not a regular file")
  }

  func testAReportLargerThanTheBoundIsRefusedWithoutReadingIt() throws {
    let path = temporary.appending("huge.json")
    XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: nil))
    // Sparse: the bound is checked by size, so the test writes nothing.
    XCTAssertEqual(truncate(path, off_t(Self.documentedBound + 1)), 0)
    try assertBothRefuse(path, saying: "larger than \(Self.documentedBound) bytes")
  }
}
