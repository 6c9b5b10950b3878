import Foundation
import XCTest

/// Looks at `condition` until it holds, at most `timeout` seconds; at the deadline the test
/// fails, at the caller's line, saying what it waited for. Tests wait for what they need to
/// have happened, never for a fixed time: a loaded machine then only makes them slower, never
/// wrong, and a quick one does not sit out a sleep. The condition is looked at every
/// `interval` seconds (a condition that runs a program may want fewer looks).
///
/// - Returns: whether the condition held in time (the caller may then stop early).
@discardableResult
public func waitUntil(
  timeout: TimeInterval = 10, _ what: @autoclosure () -> String = "the condition",
  every interval: TimeInterval = 0.01, file: StaticString = #filePath, line: UInt = #line,
  _ condition: () throws -> Bool
) rethrows -> Bool {
  let deadline = ContinuousClock.now + .seconds(timeout)
  while true {
    if try condition() { return true }
    guard ContinuousClock.now < deadline else {
      XCTFail("waited \(timeout) s for \(what()), in vain", file: file, line: line)
      return false
    }
    usleep(UInt32(interval * 1_000_000))
  }
}

/// ``waitUntil(timeout:_:every:file:line:_:)`` for async tests and conditions: it suspends between
/// looks instead of holding a thread of the cooperative pool, which the awaited work may need.
@discardableResult
public func waitUntil(
  timeout: TimeInterval = 10, _ what: @autoclosure () -> String = "the condition",
  every interval: TimeInterval = 0.01, file: StaticString = #filePath, line: UInt = #line,
  _ condition: () async throws -> Bool
) async rethrows -> Bool {
  let deadline = ContinuousClock.now + .seconds(timeout)
  while true {
    if try await condition() { return true }
    guard ContinuousClock.now < deadline else {
      XCTFail("waited \(timeout) s for \(what()), in vain", file: file, line: line)
      return false
    }
    try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
  }
}

/// Another process holding an `flock(2)` lock, as a running imagecache would. It is returned
/// only once the lock is taken, so that what the test runs next meets a held lock, however
/// slowly the holder started.
public enum LockHolder {
  /// Starts a process that takes the lock on `path` (shared or exclusive, creating the file if
  /// need be, never truncating it) and then sleeps, and waits until the lock is held. The
  /// process is the sleep itself, holding the locked descriptor: terminating it releases the
  /// lock and leaves nothing behind (`flock path sleep` would leave its sleeping child, and
  /// with it the test's output pipe, open after `flock` is gone).
  public static func start(
    _ path: String, shared: Bool = false, file: StaticString = #filePath, line: UInt = #line
  ) throws -> Process {
    let holder = Process()
    holder.executableURL = URL(fileURLWithPath: "/bin/sh")
    holder.arguments = [
      "-c", "exec 9<>\"$0\" && flock \(shared ? "-s" : "-x") 9 && exec sleep 600", path,
    ]
    holder.standardOutput = FileHandle.nullDevice
    holder.standardError = FileHandle.nullDevice
    try holder.run()
    waitUntil(timeout: 10, "a process to hold the lock on \(path)", file: file, line: line) {
      isLocked(path) || !holder.isRunning
    }
    XCTAssertTrue(holder.isRunning, "the lock holder ended", file: file, line: line)
    return holder
  }

  /// Whether some process holds a lock on `path`: an exclusive lock cannot be taken on it
  /// (checked on an open file description of our own, and given back at once).
  public static func isLocked(_ path: String) -> Bool {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { return errno == EWOULDBLOCK }
    flock(descriptor, LOCK_UN)
    return false
  }
}
