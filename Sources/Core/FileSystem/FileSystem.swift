import CFileStat
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A failed file-system call, with the path and the operation a user needs to act on it.
public struct FileSystemError: Error, Sendable, Equatable, CustomStringConvertible {
  public let operation: String
  public let path: String
  public let errno: Int32

  public init(_ operation: String, path: String, errno: Int32) {
    self.operation = operation
    self.path = path
    self.errno = errno
  }

  public var description: String {
    "\(operation) \(path): \(String(cString: strerror(errno)))"
  }
}

/// The attributes of one file, read without following symbolic links. Times are kept in
/// nanoseconds since the epoch, as the kernel gives them, so that comparisons at a cutoff are
/// exact; the `Date` views are for people.
public struct FileAttributes: Sendable, Equatable {
  public var mode: UInt32
  /// Logical size in bytes.
  public var size: UInt64
  /// Allocated size in bytes: `st_blocks * 512` (Foundation on Linux gets this wrong).
  public var allocatedSize: UInt64
  public var accessTime: Int64
  public var modificationTime: Int64
  /// The inode change time (`ctime`), SD's `changeDate` (NSURLAttributeModificationDateKey).
  public var changeTime: Int64
  /// The birth time, where `statx` reports one.
  public var creationTime: Int64?

  public var accessDate: Date { Date(nanosecondsSince1970: accessTime) }
  public var modificationDate: Date { Date(nanosecondsSince1970: modificationTime) }
  public var changeDate: Date { Date(nanosecondsSince1970: changeTime) }
  public var creationDate: Date? { creationTime.map { Date(nanosecondsSince1970: $0) } }

  public var isRegularFile: Bool { mode & UInt32(S_IFMT) == UInt32(S_IFREG) }
  public var isDirectory: Bool { mode & UInt32(S_IFMT) == UInt32(S_IFDIR) }
  public var isSymbolicLink: Bool { mode & UInt32(S_IFMT) == UInt32(S_IFLNK) }

  init(_ stat: ic_file_stat) {
    mode = stat.mode
    size = stat.size
    allocatedSize = stat.blocks * 512
    accessTime = stat.access_ns
    modificationTime = stat.modification_ns
    changeTime = stat.change_ns
    creationTime = stat.has_birth != 0 ? stat.birth_ns : nil
  }
}

extension Date {
  public init(nanosecondsSince1970 ns: Int64) {
    self.init(timeIntervalSince1970: Double(ns) / 1_000_000_000)
  }

  /// Nanoseconds since the epoch, rounded down.
  public var nanosecondsSince1970: Int64 {
    let seconds = timeIntervalSince1970.rounded(.down)
    return Int64(seconds) * 1_000_000_000
      + Int64(((timeIntervalSince1970 - seconds) * 1_000_000_000).rounded(.down))
  }
}

/// Thin, throwing wrappers over the POSIX calls the cache relies on.
public enum FileSystem {
  /// The attributes of `path` (not following a final symbolic link), or `nil` if it does not
  /// exist.
  public static func attributes(atPath path: String) throws(FileSystemError) -> FileAttributes? {
    try attributes(directoryFD: AT_FDCWD, name: path)
  }

  /// The attributes of `name` relative to an open directory, or `nil` if it does not exist.
  public static func attributes(directoryFD: Int32, name: String) throws(FileSystemError)
    -> FileAttributes?
  {
    var stat = ic_file_stat()
    guard ic_stat_at(directoryFD, name, &stat) == 0 else {
      if errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG { return nil }
      throw FileSystemError("stat", path: name, errno: errno)
    }
    return FileAttributes(stat)
  }

  /// Sets the access time of `path` to now, leaving the modification time alone. Returns
  /// `false` when the file does not exist.
  ///
  /// Linux mounts with relatime or noatime do not update it on reads, so SD 5.20+ sets it
  /// explicitly on every hit, and so do we (SPEC section 1).
  @discardableResult
  public static func setAccessTimeToNow(path: String) throws -> Bool {
    guard ic_touch_access_time(path) == 0 else {
      if errno == ENOENT || errno == ENOTDIR { return false }
      throw FileSystemError("set access time of", path: path, errno: errno)
    }
    return true
  }

  /// Sets the access and modification times of `path` (used by tests and migrations).
  public static func setTimes(path: String, access: Date, modification: Date) throws {
    try setTimes(
      path: path, accessTime: access.nanosecondsSince1970,
      modificationTime: modification.nanosecondsSince1970)
  }

  /// Sets the access and modification times of `path`, in nanoseconds since the epoch.
  public static func setTimes(path: String, accessTime: Int64, modificationTime: Int64) throws {
    var times = [timespec(nanoseconds: accessTime), timespec(nanoseconds: modificationTime)]
    guard utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0 else {
      throw FileSystemError("set times of", path: path, errno: errno)
    }
  }

  /// Creates `path` and its missing parents (`mkdir -p`).
  public static func createDirectory(path: String) throws(FileSystemError) {
    do {
      try FileManager.default.createDirectory(
        atPath: path, withIntermediateDirectories: true)
    } catch {
      throw FileSystemError("create directory", path: path, errno: errno == 0 ? EIO : errno)
    }
  }

  /// Writes `data` to `path` atomically: a hidden temporary file in the same directory, then
  /// `rename(2)` over the target. A reader sees the old file or the new one, never a partial
  /// one; a crash leaves at most a hidden temporary file, which no pass counts or serves.
  /// Missing directories are created.
  public static func writeAtomically(_ data: Data, toPath path: String) throws {
    // Split at the last "/" by hand: NSString's path methods bridge and normalise, and this
    // runs for every store. Searched as bytes: a search by Character breaks graphemes from the
    // end, about 13,000 instructions for a cache path. A bare name is in the working directory.
    let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))
    let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
    let name = slash.map { String(path[path.utf8.index(after: $0)...]) } ?? path
    let temporary =
      (directory == "/" ? "" : directory) + "/" + temporaryPrefix + name + "." + randomSuffix()
    var fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
    if fd < 0 && errno == ENOENT {
      try createDirectory(path: directory)
      fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
    }
    guard fd >= 0 else { throw FileSystemError("create", path: temporary, errno: errno) }
    do {
      try writeAll(fd: fd, data: data, path: temporary)
      guard close(fd) == 0 else {
        throw FileSystemError("close", path: temporary, errno: errno)
      }
      fd = -1
      guard rename(temporary, path) == 0 else {
        throw FileSystemError("rename to \(path)", path: temporary, errno: errno)
      }
    } catch {
      if fd >= 0 { close(fd) }
      unlink(temporary)
      throw error
    }
  }

  /// The name of a directory entry that `readdir(3)` returned, read in place up to its NUL.
  ///
  /// Never through `entry.pointee.d_name`: that copies the whole 256-byte field, and a record
  /// is only as long as its name (`d_reclen`), so the copy of one near the end of glibc's
  /// buffer read past it, and crashed (SIGSEGV) when that was the end of a mapping.
  public static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
    let name = UnsafeRawPointer(entry) + MemoryLayout<dirent>.offset(of: \.d_name)!
    return String(cString: name.assumingMemoryBound(to: CChar.self))
  }

  /// How the temporary files of atomic writes begin: hidden (no pass, read or count sees them as
  /// cache files) and the tool's own, so that one left by a killed run can be found and removed
  /// (SPEC section 8).
  public static let temporaryPrefix = ".imagecache-tmp."

  /// The tool's temporary files directly in `directory` (stores are flat), with their
  /// attributes. A missing folder has none.
  public static func temporaryFiles(in directory: String) throws(FileSystemError) -> [(
    name: String, attributes: FileAttributes
  )] {
    guard let dir = opendir(directory) else {
      if errno == ENOENT { return [] }
      throw FileSystemError("read directory", path: directory, errno: errno)
    }
    defer { closedir(dir) }
    var found: [(String, FileAttributes)] = []
    while let entry = readdir(dir) {
      let name = entryName(entry)
      guard name.hasPrefix(temporaryPrefix),
        let attributes = try attributes(directoryFD: dirfd(dir), name: name),
        attributes.isRegularFile
      else { continue }
      found.append((name, attributes))
    }
    return found
  }

  /// Removes the tool's temporary files in `directory` last modified before `cutoff`: what a
  /// killed run left (a live store finishes within its download deadline). Returns how many
  /// there were and their allocated bytes; with `dryRun`, only counts them.
  public static func removeStaleTemporaries(
    in directory: String, modifiedBefore cutoff: Date, dryRun: Bool
  ) throws(FileSystemError) -> (count: Int, bytes: UInt64) {
    var count = 0
    var bytes: UInt64 = 0
    for (name, attributes) in try temporaryFiles(in: directory)
    where attributes.modificationDate < cutoff {
      if !dryRun { try removeFile(path: directory + "/" + name) }
      count += 1
      bytes += attributes.allocatedSize
    }
    return (count, bytes)
  }

  /// Removes the file at `path`. Returns `false` when there was none.
  @discardableResult
  public static func removeFile(path: String) throws(FileSystemError) -> Bool {
    guard unlink(path) == 0 else {
      if errno == ENOENT { return false }
      throw FileSystemError("remove", path: path, errno: errno)
    }
    return true
  }

  private static func writeAll(fd: Int32, data: Data, path: String) throws {
    try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
      var offset = 0
      while offset < buffer.count {
        let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
        if written < 0 {
          if errno == EINTR { continue }
          throw FileSystemError("write", path: path, errno: errno)
        }
        offset += written
      }
    }
  }

  /// Unique among the processes and threads that may write one cache (O_EXCL catches the
  /// rest): the process id and a counter, without a getrandom(2) per store.
  private static func randomSuffix() -> String {
    let count = temporaryCounter.add(1, ordering: .relaxed).newValue
    return processTag + "-" + String(count, radix: 36)
  }

  private static let temporaryCounter = Atomic<Int>(0)
  /// The pid in base 36, once: a fork would not share the counter anyway.
  private static let processTag = String(getpid(), radix: 36)
}

extension timespec {
  init(_ date: Date) {
    self.init(nanoseconds: date.nanosecondsSince1970)
  }

  init(nanoseconds: Int64) {
    let seconds =
      nanoseconds >= 0 ? nanoseconds / 1_000_000_000 : (nanoseconds - 999_999_999) / 1_000_000_000
    self.init(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds - seconds * 1_000_000_000))
  }
}
