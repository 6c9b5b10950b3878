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
  /// Why the path was refused, when that was for what it is rather than by a failed call.
  public let reason: String?
  /// The user named the path wrongly (a folder for a report file): exit 2, not 4.
  public let isUsageError: Bool

  public init(_ operation: String, path: String, errno: Int32) {
    self.operation = operation
    self.path = path
    self.errno = errno
    reason = nil
    isUsageError = false
  }

  private init(_ operation: String, path: String, reason: String, isUsageError: Bool) {
    self.operation = operation
    self.path = path
    self.errno = 0
    self.reason = reason
    self.isUsageError = isUsageError
  }

  /// A failure of one of Foundation's file calls, with the POSIX error under it when it
  /// carries one, else its own words: never an errno read after other calls may have changed
  /// it, nor one made up.
  public init(_ operation: String, path: String, underlying error: any Error) {
    if let error = error as? FileSystemError {
      self = error
      return
    }
    let bridged = error as NSError
    let posix = [bridged, bridged.userInfo[NSUnderlyingErrorKey] as? NSError].lazy.compactMap {
      $0
    }.first { $0.domain == NSPOSIXErrorDomain }
    if let posix {
      self.init(operation, path: path, errno: Int32(posix.code))
    } else {
      let words = error is CocoaError ? bridged.localizedDescription : "\(error)"
      self.init(operation, path: path, reason: words, isUsageError: false)
    }
  }

  /// A file that ended before the bytes it was known to hold: not an I/O error (`EIO`), which
  /// would send someone looking at the disk.
  public static func unexpectedEnd(_ operation: String, path: String) -> FileSystemError {
    FileSystemError(operation, path: path, reason: "unexpected end of file", isUsageError: false)
  }

  /// `path` refused for what it is (a symbolic link, a block device...): `reason` says what.
  /// - Parameter usage: the user named `path` for this use (exit 2); otherwise the tool's own
  ///   files were found tampered with (exit 4).
  public static func refused(
    _ operation: String, path: String, because reason: String, usage: Bool = true
  ) -> FileSystemError {
    FileSystemError(operation, path: path, reason: reason, isUsageError: usage)
  }

  public var description: String {
    "\(operation) \(path): \(reason ?? String(cString: strerror(errno)))"
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
      throw FileSystemError("create directory", path: path, underlying: error)
    }
  }

  /// The whole content of the file at `path`, or `nil` when there is none (`ENOENT`,
  /// `ENOTDIR`). Anything else that stops the read (a folder in its place, an I/O error, no
  /// permission) is thrown, naming the path: an unreadable file is not a missing one.
  public static func contents(atPath path: String) throws(FileSystemError) -> Data? {
    var fd: Int32
    repeat { fd = open(path, O_RDONLY | O_CLOEXEC) } while fd < 0 && errno == EINTR
    guard fd >= 0 else {
      let failure = errno
      if failure == ENOENT || failure == ENOTDIR { return nil }
      throw FileSystemError("read", path: path, errno: failure)
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { throw FileSystemError("read", path: path, errno: errno) }
    // The size is a hint (a file may grow or shrink meanwhile): the read goes on to the end.
    var data = Data(capacity: max(Int(info.st_size), 0) + 1)
    var chunk = [UInt8](repeating: 0, count: 64 << 10)
    while true {
      let got = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if got < 0 {
        let failure = errno
        if failure == EINTR { continue }
        throw FileSystemError("read", path: path, errno: failure)
      }
      if got == 0 { return data }
      data.append(contentsOf: chunk[..<got])
    }
  }

  /// Writes `data` to `path` atomically: a hidden temporary file in the same directory, then
  /// `rename(2)` over the target. A reader sees the old file or the new one, never a partial
  /// one; a crash leaves at most a hidden temporary file, which no pass counts or serves.
  /// Missing directories are created, unless `createsFolder` is false.
  public static func writeAtomically(
    _ data: Data, toPath path: String, createsFolder: Bool = true
  ) throws {
    // Split at the last "/" by hand: NSString's path methods bridge and normalise, and this
    // runs for every store. Searched as bytes: a search by Character breaks graphemes from the
    // end, about 13,000 instructions for a cache path. A bare name is in the working directory.
    let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))
    let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
    let name = slash.map { String(path[path.utf8.index(after: $0)...]) } ?? path
    let temporary =
      (directory == "/" ? "" : directory) + "/" + temporaryName(for: name, suffix: randomSuffix())
    var fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
    if fd < 0 && errno == ENOENT && createsFolder {
      try createDirectory(path: directory)
      fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
    }
    guard fd >= 0 else { throw FileSystemError("create", path: temporary, errno: errno) }
    do {
      try writeAll(data, to: fd, path: temporary)
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

  // MARK: The tool's own files

  /// Checks that `path`, one of the tool's own files or folders under `.imagecache/` (SPEC
  /// sections 8 and 11), is what the tool made there, when it exists: a folder, or a regular
  /// file. A symbolic link or anything else is refused, naming it, and nothing is written
  /// through it: a link planted there would make a run as root truncate or overwrite its
  /// target. Returns whether it exists.
  @discardableResult
  public static func checkOwnEntry(_ path: String, isFolder: Bool = false)
    throws(FileSystemError) -> Bool
  {
    var info = stat()
    guard lstat(path, &info) == 0 else {
      if errno == ENOENT { return false }
      throw FileSystemError("look at", path: path, errno: errno)
    }
    let expected = isFolder ? S_IFDIR : S_IFREG
    guard info.st_mode & S_IFMT == expected else {
      throw ownEntryRefused(path, type: info.st_mode & S_IFMT, isFolder: isFolder)
    }
    return true
  }

  /// Opens one of the tool's own files without following a link (`O_NOFOLLOW`), closed on
  /// exec, and never blocking on a FIFO planted there; refuses anything but a regular file.
  /// Returns `nil` when it does not exist and `flags` do not create it.
  public static func openOwnFile(_ path: String, flags: Int32, mode: mode_t = 0o644)
    throws(FileSystemError) -> Int32?
  {
    var fd: Int32
    repeat {
      fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, mode)
    } while fd < 0 && errno == EINTR
    guard fd >= 0 else {
      if errno == ENOENT && flags & O_CREAT == 0 { return nil }
      if errno == ELOOP { throw ownEntryRefused(path, type: S_IFLNK, isFolder: false) }
      throw FileSystemError("open", path: path, errno: errno)
    }
    var info = stat()
    guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
      close(fd)
      throw ownEntryRefused(path, type: info.st_mode & S_IFMT, isFolder: false)
    }
    let status = fcntl(fd, F_GETFL)
    _ = fcntl(fd, F_SETFL, status & ~O_NONBLOCK)
    return fd
  }

  private static func ownEntryRefused(_ path: String, type: mode_t, isFolder: Bool)
    -> FileSystemError
  {
    let found =
      switch type {
      case S_IFLNK: "a symbolic link"
      case S_IFDIR: "a folder"
      case S_IFIFO: "a FIFO"
      case S_IFCHR, S_IFBLK: "a device"
      case S_IFSOCK: "a socket"
      default: "not a regular file"
      }
    return .refused(
      "use", path: path,
      because: "\(found) where imagecache keeps its own \(isFolder ? "folder" : "file"); "
        + "nothing was written through it (remove it, and imagecache makes its own)",
      usage: false)
  }

  /// The longest file name the file systems we write to take (`NAME_MAX`).
  public static let maxNameLength = 255

  /// A hidden temporary name for a file that will be renamed to `name`: the tool's prefix,
  /// `name` shortened as far as needed, and `suffix`. Always at most ``maxNameLength`` bytes:
  /// SD's own names reach 255 (32 + 1 + a 222-byte extension), and a temporary name that did
  /// not fit would make such a file impossible to store. The name is kept only for people
  /// reading a folder; the prefix is what the sweep of stale files looks for.
  public static func temporaryName(for name: String, suffix: String) -> String {
    let room = maxNameLength - temporaryPrefix.utf8.count - 1 - suffix.utf8.count
    var kept = Substring(name)
    if name.utf8.count > room {
      // Cut at a scalar's boundary, so the name stays valid UTF-8.
      var end = name.utf8.index(name.utf8.startIndex, offsetBy: max(0, room))
      while end > name.startIndex && !name.unicodeScalars.indices.contains(end) {
        end = name.utf8.index(before: end)
      }
      kept = name[..<end]
    }
    return temporaryPrefix + kept + "." + suffix
  }

  /// Creates a new hidden file in `folder` for one that will be renamed to `name`, closed on
  /// exec (`mkstemp(3)`); returns its descriptor and path.
  public static func makeTemporaryFile(in folder: String, for name: String)
    throws(FileSystemError) -> (descriptor: Int32, path: String)
  {
    let path = (folder == "/" ? "" : folder) + "/" + temporaryName(for: name, suffix: "XXXXXX")
    var template = Array(path.utf8CString)
    let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    let created = String(
      decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    guard descriptor >= 0 else { throw FileSystemError("create", path: created, errno: errno) }
    _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
    return (descriptor, created)
  }

  /// ``contents(atPath:)`` of a file that must be there: a missing one is an error (`ENOENT`).
  public static func existingContents(atPath path: String) throws(FileSystemError) -> Data {
    guard let data = try contents(atPath: path) else {
      throw FileSystemError("read", path: path, errno: ENOENT)
    }
    return data
  }

  /// A scratch file for the run's own use (a report's entries, trim's records, a fetched
  /// sitemap) in `$TMPDIR`, else `/tmp`: unlinked as soon as it is made, so that nothing is
  /// left behind whatever happens to the run. `name` says whose it is, in an error.
  public static func makeScratchFile(for name: String) throws(FileSystemError) -> Int32 {
    let folder =
      ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    let (descriptor, path) = try makeTemporaryFile(in: folder, for: name)
    unlink(path)
    return descriptor
  }

  /// Writes all of `bytes` to `descriptor`, through short writes and interruptions.
  public static func writeAll(
    _ bytes: some Collection<UInt8>, to descriptor: Int32, path: String
  ) throws(FileSystemError) {
    let written: Int32? =
      bytes.withContiguousStorageIfAvailable { buffer in
        writeAll(UnsafeRawBufferPointer(buffer), to: descriptor)
      } ?? Array(bytes).withUnsafeBytes { writeAll($0, to: descriptor) }
    if let written { throw FileSystemError("write", path: path, errno: written) }
  }

  /// The errno of the write that failed, or `nil` when every byte went.
  private static func writeAll(_ buffer: UnsafeRawBufferPointer, to descriptor: Int32) -> Int32? {
    var offset = 0
    while offset < buffer.count {
      let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
      if written < 0 {
        if errno == EINTR { continue }
        return errno
      }
      offset += written
    }
    return nil
  }

  /// A stream connection to the Unix socket at `path`; `naming` is the path errors name.
  public static func connectUnixSocket(path: String, naming: String) throws(FileSystemError)
    -> Int32
  {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw FileSystemError("connect to", path: naming, errno: errno) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
      close(fd)
      throw FileSystemError("connect to", path: naming, errno: ENAMETOOLONG)
    }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    let result = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    guard result == 0 else {
      let failure = errno
      close(fd)
      throw FileSystemError("connect to", path: naming, errno: failure)
    }
    return fd
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
