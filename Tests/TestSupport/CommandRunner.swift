import Core
import Foundation
import XCTest

/// What a finished command printed and how it exited.
public struct CommandResult: Sendable {
  public var status: Int32
  public var stdout: String
  public var stderr: String

  public init(status: Int32, stdout: String, stderr: String) {
    self.status = status
    self.stdout = stdout
    self.stderr = stderr
  }
}

/// Runs a program to completion with its output captured: the tests' one way to run a tool.
public enum Command {
  /// Starts `executable` with `arguments` (in `directory`, when given; its standard input
  /// `input`, else nothing); the caller waits for it, with ``ImageCacheBinary/finish(_:_:_:)``.
  public static func start(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
    directory: String? = nil, input: Pipe? = nil
  ) throws -> (Process, Pipe, Pipe) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let stdout = Pipe()
    let stderr = Pipe()
    process.standardOutput = stdout
    process.standardError = stderr
    process.standardInput = input ?? FileHandle.nullDevice
    try process.run()
    return (process, stdout, stderr)
  }

  /// Runs `executable` to completion with its output discarded (a `mount`, a `umount`): its
  /// exit status, or -1 when it cannot be started.
  @discardableResult
  public static func status(_ executable: String, _ arguments: [String]) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return -1 }
    process.waitUntilExit()
    return process.terminationStatus
  }

  /// Runs `executable` to completion.
  public static func run(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
    directory: String? = nil
  ) throws -> CommandResult {
    let (process, stdout, stderr) = try start(
      executable, arguments, environment: environment, directory: directory)
    return ImageCacheBinary.finish(process, stdout, stderr)
  }
}

/// Runs the built `imagecache` binary, as a user would.
public enum ImageCacheBinary {
  public static var path: String { BuiltProducts.executable("imagecache") }

  /// Runs the binary as an unprivileged user (nobody) when the tests run as root, who may read
  /// and write anywhere, so that permissions hold; as the tests' own user otherwise.
  /// `sharing`: folders that user must write into, opened to everyone first.
  public static func runUnprivileged(_ arguments: [String], sharing folders: [String]) throws
    -> CommandResult
  {
    guard getuid() == 0 else { return try run(arguments) }
    let setpriv = "/usr/bin/setpriv"
    guard FileManager.default.isExecutableFile(atPath: setpriv) else {
      try requireOrSkip("running as root and no \(setpriv) to drop to an unprivileged user")
    }
    for folder in folders where chmod(folder, 0o777) != 0 {
      throw FileSystemError("chmod", path: folder, errno: errno)
    }
    return try Command.run(
      setpriv, ["--reuid=65534", "--regid=65534", "--clear-groups", "--", path] + arguments)
  }

  /// Starts the binary with `arguments` (its standard input `input`, else nothing); the caller
  /// waits for it.
  public static func start(
    _ arguments: [String], environment: [String: String]? = nil, input: Pipe? = nil
  ) throws -> (Process, Pipe, Pipe) {
    try Command.start(path, arguments, environment: environment, input: input)
  }

  /// Runs the binary to completion (in `directory`, when given).
  public static func run(
    _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil
  ) throws -> CommandResult {
    try Command.run(path, arguments, environment: environment, directory: directory)
  }

  /// Starts the binary with `arguments`, sends it `signal` once its stderr says `text` (or at
  /// once, should it end first), and reads everything it prints until it exits: a run stopped
  /// halfway, at a point it names.
  public static func interrupt(
    _ arguments: [String], when text: String, with signal: Int32 = SIGINT,
    timeout: TimeInterval = 60, file: StaticString = #filePath, line: UInt = #line
  ) throws -> CommandResult {
    let (process, stdout, stderr) = try start(arguments)
    let errors = PipeReader(stderr)
    waitUntil(timeout: timeout, "the run to say \"\(text)\"", file: file, line: line) {
      errors.text.contains(text) || !process.isRunning
    }
    kill(process.processIdentifier, signal)
    return finish(process, stdout, errors)
  }

  /// Reads everything a started process prints and waits for it to exit.
  public static func finish(_ process: Process, _ stdout: Pipe, _ stderr: Pipe) -> CommandResult {
    finish(process, stdout, PipeReader(stderr))
  }

  /// ``finish(_:_:_:)`` for a process whose stderr a test has been reading as it came.
  public static func finish(_ process: Process, _ stdout: Pipe, _ stderr: PipeReader)
    -> CommandResult
  {
    let output = stdout.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return CommandResult(
      status: process.terminationStatus, stdout: String(decoding: output, as: UTF8.self),
      stderr: String(decoding: stderr.readToEnd(), as: UTF8.self))
  }
}

/// Everything a pipe delivers, read on a thread of its own as it arrives: a test can look at
/// what a running command has printed so far (and wait for a line), and a command whose other
/// pipe is read meanwhile never blocks on a full one.
public final class PipeReader: @unchecked Sendable {
  private let lock = NSLock()
  private var data = Data()
  private let ended = DispatchSemaphore(value: 0)

  public init(_ pipe: Pipe) {
    let handle = pipe.fileHandleForReading
    Thread { [self] in
      while true {
        let chunk = handle.availableData
        if chunk.isEmpty { break }
        lock.withLock { data.append(chunk) }
      }
      ended.signal()
    }.start()
  }

  /// What has arrived so far.
  public var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }

  /// Waits until every writer has closed the pipe, and returns all it delivered.
  public func readToEnd() -> Data {
    ended.wait()
    ended.signal()
    return lock.withLock { data }
  }
}

/// Runs a program to its end with its output discarded, and says how much memory it needed at
/// its peak (the kernel's count from `wait4`, which Foundation's `Process` does not expose).
public enum PeakMemory {
  public static func run(_ path: String, _ arguments: [String]) throws -> (
    status: Int32, peakKiB: Int
  ) {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for descriptor: Int32 in [0, 1, 2] {
      posix_spawn_file_actions_addopen(
        &actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
    }
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
    guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO) }
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
    let exitStatus = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    return (exitStatus, usage.ru_maxrss)
  }
}
