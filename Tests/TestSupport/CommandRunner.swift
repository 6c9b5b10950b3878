import Foundation

/// What a finished command printed and how it exited.
public struct CommandResult: Sendable {
  public var status: Int32
  public var stdout: String
  public var stderr: String
}

/// Runs the built `imagecache` binary, as a user would.
public enum ImageCacheBinary {
  public static var path: String { BuiltProducts.executable("imagecache") }

  /// Starts the binary with `arguments`; the caller waits for it.
  public static func start(_ arguments: [String], environment: [String: String]? = nil) throws
    -> (Process, Pipe, Pipe)
  {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let stdout = Pipe()
    let stderr = Pipe()
    process.standardOutput = stdout
    process.standardError = stderr
    process.standardInput = FileHandle.nullDevice
    try process.run()
    return (process, stdout, stderr)
  }

  /// Runs the binary to completion.
  public static func run(_ arguments: [String], environment: [String: String]? = nil) throws
    -> CommandResult
  {
    let (process, stdout, stderr) = try start(arguments, environment: environment)
    return finish(process, stdout, stderr)
  }

  /// Reads everything a started process prints and waits for it to exit.
  public static func finish(_ process: Process, _ stdout: Pipe, _ stderr: Pipe) -> CommandResult {
    // Drain stderr on another thread so that neither pipe can fill up and block the child.
    let errorData = LockedBox(Data())
    let reader = Thread { errorData.set(stderr.fileHandleForReading.readDataToEndOfFile()) }
    reader.start()
    let output = stdout.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    while !errorData.isSet { usleep(1000) }
    return CommandResult(
      status: process.terminationStatus, stdout: String(decoding: output, as: UTF8.self),
      stderr: String(decoding: errorData.value, as: UTF8.self))
  }
}

/// A value written once by one thread and read by another.
final class LockedBox: @unchecked Sendable {
  private let lock = NSLock()
  private var stored: Data
  private var written = false
  init(_ value: Data) { stored = value }
  func set(_ value: Data) {
    lock.withLock {
      stored = value
      written = true
    }
  }
  var value: Data { lock.withLock { stored } }
  var isSet: Bool { lock.withLock { written } }
}
