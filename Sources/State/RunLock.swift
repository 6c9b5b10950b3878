import Core
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The cache's run lock, `.imagecache/lock` (SPEC sections 6 and 8): two runs on the same cache
/// never run at once. An `flock(2)` lock, so a crashed run never leaves it held. The holder
/// writes its pid and start time in the file, so that a run that waits can say whom for.
public final class RunLock: Sendable {
  public enum Failure: ExitStatusProviding, Sendable, Equatable {
    /// Another process holds the lock (exit code 3): `holder` as the lock file names it, so
    /// that the message says which run to look at (docs/operations.md).
    case held(path: String, holder: Holder?)
    /// Still held after `--wait-timeout` (exit code 3 too).
    case stillHeld(path: String, seconds: TimeInterval, holder: Holder?)
    case cannotOpen(path: String, errno: Int32)

    public var description: String {
      switch self {
      case .held(let path, let holder):
        "\(Self.who(holder)) holds the cache lock \(path) (use --wait to wait for it)"
      case .stillHeld(let path, let seconds, let holder):
        "\(Self.who(holder)) still held the cache lock \(path) after \(Int(seconds)) s of waiting"
      case .cannotOpen(let path, let errno):
        "cannot open the cache lock \(path): \(String(cString: strerror(errno)))"
          + (Self.whyNotWritable(path, errno: errno).map { "; \($0)" } ?? "")
      }
    }

    /// Why this user cannot open the lock at `path` for writing, when that is the cause.
    private static func whyNotWritable(_ path: String, errno: Int32) -> String? {
      guard [EACCES, EPERM, EROFS].contains(errno) else { return nil }
      return StateAccess.readOnlyForThisUser(
        [(path as NSString).deletingLastPathComponent, path])
    }

    /// Exit code 3 while another run holds the lock; 4 when it cannot be opened.
    public var exitStatus: ExitStatus {
      switch self {
      case .held, .stillHeld: .locked
      case .cannotOpen: .fatalIO
      }
    }

    /// "another imagecache run (pid 4711, started at ...)", or without the parenthesis when
    /// the lock file names no holder (its holder had not written it yet, or could not).
    private static func who(_ holder: Holder?) -> String {
      guard let holder else { return "another imagecache run" }
      return "another imagecache run (pid \(holder.pid)"
        + (holder.startedAt.map { ", started at \($0)" } ?? "") + ")"
    }
  }

  /// The lock file held: the cache's, or a shard's own.
  public let path: String
  private let fd: Int32
  /// A shard's shared hold on the cache's lock file.
  private let shardFD: Int32?

  /// Who holds the lock, as its holder wrote it in the lock file.
  public struct Holder: Sendable, Equatable, CustomStringConvertible {
    public var pid: Int32
    /// When it took the lock (ISO 8601), if it said.
    public var startedAt: String?

    public var description: String {
      "the run of pid \(pid)" + (startedAt.map { " (started at \($0))" } ?? "")
    }
  }

  /// How a lock is taken.
  public struct Options: Sendable {
    /// Wait for the holder to finish instead of failing with ``Failure/held(path:holder:)``.
    public var wait = false
    /// With `wait`, give up (``Failure/held(path:holder:)``) after this long; `nil`: never.
    public var timeout: TimeInterval?
    /// A shared lock for a run that writes nothing (a dry run): it waits for (or fails on) a
    /// run that writes, but neither creates the lock file nor keeps other dry runs out. A cache
    /// with no lock file has never been written by a run: there is nothing to wait for.
    public var readOnly = false
    /// A shard's lock: its own, exclusive, plus the cache's, shared with the other shards.
    public var shard: Shard?
    /// The run's stop channel: a wait ends (``CancellationError``) once it is stopped.
    public var stop: StopFlag?

    public init(
      wait: Bool = false, timeout: TimeInterval? = nil, readOnly: Bool = false, shard: Shard? = nil
    ) {
      self.wait = wait
      self.timeout = timeout
      self.readOnly = readOnly
      self.shard = shard
    }
  }

  /// Runs `body` holding the lock of the cache at `location`, waiting for the lock when `wait`
  /// is set and failing with ``Failure/held(path:holder:)`` otherwise. The lock is released when
  /// `body` returns or throws.
  public static func withLock<Result>(
    location: CacheLocation, wait: Bool, _ body: () async throws -> Result
  ) async throws -> Result {
    try await withLock(location: location, options: Options(wait: wait), body)
  }

  /// Runs `body` holding the lock as `options` say; `waiting` is told who holds it before a
  /// wait begins.
  public static func withLock<Result>(
    location: CacheLocation, options: Options, waiting: (Holder?) -> Void = { _ in },
    _ body: () async throws -> Result
  ) async throws -> Result {
    let lock = try await take(location: location, options: options, waiting: waiting)
    defer { lock?.release() }
    return try await body()
  }

  /// Takes the lock as `options` say, trying again every 50 ms while another run holds it and
  /// `options.wait` allows. The wait suspends the task, so a cancelled task stops waiting at
  /// once (`CancellationError`) and no thread of the pool is held meanwhile; `flock(2)` has no
  /// wait that can be cancelled.
  private static func take(
    location: CacheLocation, options: Options, waiting: (Holder?) -> Void
  ) async throws -> RunLock? {
    var toldWaiting = false
    let deadline = options.timeout.map { (seconds: $0, at: Date().addingTimeInterval($0)) }
    while true {
      do {
        return try RunLock(location: location, options: options)
      } catch Failure.held(let path, let holder) where options.wait {
        if let deadline, Date() >= deadline.at {
          throw Failure.stillHeld(path: path, seconds: deadline.seconds, holder: holder)
        }
        if !toldWaiting {
          toldWaiting = true
          waiting(holder)
        }
        if options.stop?.isStopped == true { throw CancellationError() }
        try await Task.sleep(nanoseconds: 50_000_000)
      }
    }
  }

  /// Takes the lock without waiting, for an owner that releases it when its own scope ends
  /// (the manager, for the namespaces manifest lines name).
  package static func acquire(location: CacheLocation, shard: Shard? = nil) throws -> RunLock {
    try RunLock(location: location, options: Options(shard: shard))!
  }

  /// The holder the lock file names, if it names one.
  public static func holder(location: CacheLocation) -> Holder? {
    holder(path: (location.stateDirectory as NSString).appendingPathComponent("lock"))
  }

  static func holder(path: String) -> Holder? {
    // Only words for a message about waiting: the lock itself is taken through the same file,
    // and that says what is wrong with it.
    guard let fd = try? FileSystem.openOwnFile(path, flags: O_RDONLY) else { return nil }
    defer { close(fd) }
    var bytes = [UInt8](repeating: 0, count: 256)
    let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    guard count > 0 else { return nil }
    let text = String(decoding: bytes[..<count], as: UTF8.self)
    let lines = text.split(separator: "\n").map(String.init)
    guard let first = lines.first, let pid = Int32(first) else { return nil }
    return Holder(pid: pid, startedAt: lines.dropFirst().first)
  }

  /// Takes the lock without waiting: ``Failure/held(path:holder:)`` names the lock file another run
  /// holds. `nil` for a read-only lock on a cache that has no lock file.
  private init?(location: CacheLocation, options: Options) throws {
    let main = (location.stateDirectory as NSString).appendingPathComponent("lock")
    if !options.readOnly { try FileSystem.createDirectory(path: location.stateDirectory) }
    try FileSystem.checkOwnEntry(location.stateDirectory, isFolder: true)
    guard let shard = options.shard else {
      path = main
      guard
        let fd = try Self.take(main, exclusive: !options.readOnly, readOnly: options.readOnly)
      else { return nil }
      self.fd = fd
      shardFD = nil
      if !options.readOnly { Self.writeHolder(fd) }
      return
    }
    // A shard shares the cache's lock with the other shards (an unsharded run, which takes it
    // exclusively, waits for or refuses them all) and holds its own shard's alone.
    path = (location.stateDirectory as NSString).appendingPathComponent(
      "lock." + shard.fileSuffix)
    guard
      let shared = try Self.take(main, exclusive: false, readOnly: options.readOnly)
    else {
      return nil
    }
    do {
      guard
        let fd = try Self.take(path, exclusive: !options.readOnly, readOnly: options.readOnly)
      else {
        close(shared)
        return nil
      }
      self.fd = fd
    } catch {
      close(shared)
      throw error
    }
    shardFD = shared
    if !options.readOnly { Self.writeHolder(fd) }
  }

  /// Opens and locks `path` without waiting; `nil` when it is read-only and missing.
  private static func take(_ path: String, exclusive: Bool, readOnly: Bool) throws -> Int32? {
    let opened = Result { () throws(FileSystemError) in
      try FileSystem.openOwnFile(path, flags: readOnly ? O_RDONLY : O_RDWR | O_CREAT)
    }
    if case .failure(let error) = opened, error.reason == nil {
      throw Failure.cannotOpen(path: path, errno: error.errno)
    }
    guard let fd = try opened.get() else { return nil }
    while flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0 {
      let failure = errno
      if failure == EINTR { continue }
      close(fd)
      throw failure == EWOULDBLOCK
        ? Failure.held(path: path, holder: holder(path: path))
        : Failure.cannotOpen(path: path, errno: failure)
    }
    return fd
  }

  private static func writeHolder(_ fd: Int32) {
    let holder = "\(getpid())\n\(UTCTime(Date()).iso8601())\n"
    ftruncate(fd, 0)
    lseek(fd, 0, SEEK_SET)
    // Who holds the lock is for people (a run that waits says whom for); the lock is the flock
    // itself, held whether or not these bytes land, so a failed write costs only the name.
    try? FileSystem.writeAll(holder.utf8, to: fd, path: "the cache lock")
  }

  package func release() {
    flock(fd, LOCK_UN)
    close(fd)
    if let shardFD {
      flock(shardFD, LOCK_UN)
      close(shardFD)
    }
  }
}
