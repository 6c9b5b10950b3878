import Core
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The cache's run lock, `.imagecache/lock` (SPEC sections 6 and 8): two runs on the same cache
/// never run at once. An `flock(2)` lock, so a crashed run never leaves it held.
public final class RunLock: Sendable {
  public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
    /// Another process holds the lock (exit code 3).
    case held(path: String)
    case cannotOpen(path: String, errno: Int32)

    public var description: String {
      switch self {
      case .held(let path):
        "another imagecache run holds the cache lock \(path) (use --wait to wait for it)"
      case .cannotOpen(let path, let errno):
        "cannot open the cache lock \(path): \(String(cString: strerror(errno)))"
      }
    }
  }

  public let path: String
  private let fd: Int32

  /// Runs `body` holding the lock of the cache at `location`, waiting for the lock when `wait`
  /// is set and failing with ``Failure/held(path:)`` otherwise. The lock is released when
  /// `body` returns or throws.
  public static func withLock<Result>(
    location: CacheLocation, wait: Bool, _ body: () async throws -> Result
  ) async throws -> Result {
    let lock = try RunLock(location: location, wait: wait)
    defer { lock.release() }
    return try await body()
  }

  /// Takes the lock without waiting, for an owner that releases it when its own scope ends
  /// (the manager, for the namespaces manifest lines name).
  package static func acquire(location: CacheLocation) throws -> RunLock {
    try RunLock(location: location, wait: false)
  }

  private init(location: CacheLocation, wait: Bool) throws {
    try FileSystem.createDirectory(path: location.stateDirectory)
    path = (location.stateDirectory as NSString).appendingPathComponent("lock")
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw Failure.cannotOpen(path: path, errno: errno) }
    while flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0 {
      if errno == EINTR { continue }
      let failure = errno
      close(fd)
      if failure == EWOULDBLOCK { throw Failure.held(path: path) }
      throw Failure.cannotOpen(path: path, errno: failure)
    }
    let pid = "\(getpid())\n"
    ftruncate(fd, 0)
    _ = pid.withCString { write(fd, $0, strlen($0)) }
  }

  package func release() {
    flock(fd, LOCK_UN)
    close(fd)
  }
}
