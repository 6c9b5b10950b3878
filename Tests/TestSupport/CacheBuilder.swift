import Core
import Foundation
import XCTest

#if canImport(Glibc)
  import Glibc
#endif

/// Builds cache folders with controlled timestamps for maintenance tests.
///
/// A file has four dates, and SD's `expireType` picks one of them: the access time (atime) and
/// the modification time (mtime), which the builder sets, and the birth time (`statx`'s btime,
/// SD's `creationDate`) and the inode change time (ctime, SD's `changeDate`), which Linux sets
/// on no request: a file is born when it is made, and its ctime moves with every change to its
/// inode, the builder's setting of the other two times included. ``datedFiles(_:changeOrder:)``
/// therefore gets distinct birth and change times by order: it makes the files one at a time
/// and then sets their times one at a time, in orders the test chooses, waiting between two
/// stamps for the clock the kernel stamps files with to move on.
public struct CacheBuilder {
  public let root: String
  /// The modification time of a file or link whose test states none.
  public var unstatedModificationTime: UnstatedModificationTime

  /// What a file's modification time is where its test states none.
  public enum UnstatedModificationTime: Sendable {
    /// The access time: for a test to which the date read does not matter.
    case accessTime
    /// As far after `pivot` as the access time is before it: the older the access, the newer
    /// the modification, so that a pass that reads one where it should read the other sees
    /// another cache (another set of expired files, the opposite order of trim).
    case mirrored(around: Int64)

    func of(accessTime: Int64) -> Int64 {
      switch self {
      case .accessTime: accessTime
      case .mirrored(let pivot): 2 * pivot - accessTime
      }
    }
  }

  public init(root: String, unstatedModificationTime: UnstatedModificationTime = .accessTime) {
    self.root = root
    self.unstatedModificationTime = unstatedModificationTime
  }

  /// Writes `relativePath` with `size` bytes and sets its access and modification times
  /// (seconds since the epoch; the modification time by ``unstatedModificationTime`` unless
  /// given). Returns the full path.
  @discardableResult
  public func file(
    _ relativePath: String, size: Int = 100, accessTime: Int64, modificationTime: Int64? = nil
  ) throws -> String {
    let path = try write(relativePath, size: size)
    try FileSystem.setTimes(
      path: path, accessTime: accessTime * 1_000_000_000,
      modificationTime: (modificationTime ?? unstatedModificationTime.of(accessTime: accessTime))
        * 1_000_000_000)
    return path
  }

  /// Makes `relativePath` a symbolic link to `destination` and sets the link's own access and
  /// modification times (seconds since the epoch; the modification time by
  /// ``unstatedModificationTime`` unless given), not its target's. Returns the full path.
  @discardableResult
  public func link(
    _ relativePath: String, to destination: String, accessTime: Int64,
    modificationTime: Int64? = nil
  ) throws -> String {
    let path = root + "/" + relativePath
    try FileSystem.createDirectory(path: (path as NSString).deletingLastPathComponent)
    try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: destination)
    try FileSystem.setTimes(
      path: path, accessTime: accessTime * 1_000_000_000,
      modificationTime: (modificationTime ?? unstatedModificationTime.of(accessTime: accessTime))
        * 1_000_000_000)
    return path
  }

  /// One file of ``datedFiles(_:changeOrder:)``: its path, size, and access and modification
  /// times in seconds since the epoch.
  public struct DatedFile: Sendable {
    public var path: String
    public var size: Int
    public var accessTime: Int64
    public var modificationTime: Int64

    public init(_ path: String, size: Int = 4096, accessTime: Int64, modificationTime: Int64) {
      self.path = path
      self.size = size
      self.accessTime = accessTime
      self.modificationTime = modificationTime
    }
  }

  /// Writes `files` one at a time in the order given, then sets their access and modification
  /// times one at a time in the order of `changeOrder` (their paths), and returns each file's
  /// attributes as read back, by path.
  ///
  /// The birth times follow the order of `files` and the change times the order of
  /// `changeOrder`, each stamp later than the one before, every change after every birth. The
  /// kernel stamps files from a clock that moves in ticks of a few milliseconds (the coarse
  /// real-time clock; a fine-grained one at most later), so before each stamp the builder waits
  /// until that clock is past the last stamp: a few ticks for a fixture, never a fixed sleep.
  /// The order is checked on the times read back. Where the file system reports no birth
  /// times, `creationTime` is nil.
  @discardableResult
  public func datedFiles(_ files: [DatedFile], changeOrder: [String]) throws -> [String:
    FileAttributes]
  {
    precondition(changeOrder.sorted() == files.map(\.path).sorted(), "one change for each file")
    var latest: Int64 = 0
    var births: [Int64?] = []
    for file in files {
      try waitForTheFileClock(toPass: latest)
      let attributes = try attributes(of: write(file.path, size: file.size))
      births.append(attributes.creationTime)
      latest = attributes.changeTime
    }
    var changes: [Int64] = []
    for relativePath in changeOrder {
      let file = files.first { $0.path == relativePath }!
      try waitForTheFileClock(toPass: latest)
      try FileSystem.setTimes(
        path: root + "/" + relativePath, accessTime: file.accessTime * 1_000_000_000,
        modificationTime: file.modificationTime * 1_000_000_000)
      latest = try attributes(of: root + "/" + relativePath).changeTime
      changes.append(latest)
    }
    var result: [String: FileAttributes] = [:]
    for file in files { result[file.path] = try attributes(of: root + "/" + file.path) }
    let born = births.compactMap { $0 }
    guard born.isEmpty || (zip(born, born.dropFirst()).allSatisfy(<) && born.last! < changes[0]),
      zip(changes, changes.dropFirst()).allSatisfy(<),
      zip(changeOrder, changes).allSatisfy({ result[$0]?.changeTime == $1 })
    else {
      throw FixtureError("the dates came out of order: births \(births), changes \(changes)")
    }
    return result
  }

  /// The relative paths of the regular, non-hidden files now under the root, sorted.
  public func remainingFiles() throws -> [String] {
    try CacheScanner(root: root).files().map(\.relativePath).sorted()
  }

  private func write(_ relativePath: String, size: Int) throws -> String {
    let path = root + "/" + relativePath
    try FileSystem.createDirectory(path: (path as NSString).deletingLastPathComponent)
    guard FileManager.default.createFile(atPath: path, contents: Data(repeating: 7, count: size))
    else { throw FileSystemError("create", path: path, errno: EIO) }
    return path
  }

  private func attributes(of path: String) throws -> FileAttributes {
    guard let attributes = try FileSystem.attributes(atPath: path) else {
      throw FileSystemError("stat", path: path, errno: ENOENT)
    }
    return attributes
  }

  /// Waits until a file stamped now gets a time later than `stamp` (nanoseconds since 1970).
  private func waitForTheFileClock(toPass stamp: Int64) throws {
    func coarseNow() -> Int64 {
      var now = timespec()
      clock_gettime(CLOCK_REALTIME_COARSE, &now)
      return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
    guard
      waitUntil(
        timeout: 5, "the file clock to pass \(stamp)", every: 0.001, { coarseNow() > stamp })
    else { throw FixtureError("the file clock did not pass \(stamp)") }
  }
}

/// A fixture that could not be built as the test asked.
public struct FixtureError: Error, CustomStringConvertible {
  public var description: String
  public init(_ description: String) { self.description = description }
}
