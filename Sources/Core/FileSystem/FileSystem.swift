import CFileStat
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
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
  package static func setTimes(path: String, access: Date, modification: Date)
    throws(FileSystemError)
  {
    try setTimes(
      path: path, accessTime: access.nanosecondsSince1970,
      modificationTime: modification.nanosecondsSince1970)
  }

  /// Sets the access and modification times of `path`, in nanoseconds since the epoch.
  package static func setTimes(path: String, accessTime: Int64, modificationTime: Int64)
    throws(FileSystemError)
  {
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

  /// The working directory a relative `path` is resolved against, for errors to name; `nil`
  /// for an absolute path (or none).
  package static func workingDirectory(resolving path: String) -> String? {
    guard !path.isEmpty, !path.hasPrefix("/") else { return nil }
    return FileManager.default.currentDirectoryPath
  }

  /// `path` as messages name a path the user named: a relative one with the working directory
  /// it was resolved against.
  package static func named(_ path: String) -> String {
    workingDirectory(resolving: path).map { "\(path) (relative to \($0))" } ?? path
  }

  /// `reason`, the failure of a `path` the user named, with the working directory a relative
  /// one was resolved against and what to do about it.
  package static func reason(_ reason: String, forUserPath path: String) -> String {
    guard let directory = workingDirectory(resolving: path) else { return reason }
    return "\(reason) (\(path) is relative to \(directory)); \(relativePathAdvice)"
  }

  /// What an error about a relative path the user named says to do.
  package static let relativePathAdvice =
    "give an absolute path, or cd to the folder it is relative to first (cron starts a job in "
    + "the user's home folder, a systemd service in /)"

  /// The whole content of the file at `path`, or `nil` when there is none (`ENOENT`,
  /// `ENOTDIR`). Anything else that stops the read (a folder in its place, an I/O error, no
  /// permission) is thrown, naming the path: an unreadable file is not a missing one.
  package static func contents(atPath path: String) throws(FileSystemError) -> Data? {
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
    return try readToEnd(fd, path: path, size: Int(info.st_size), limit: nil)
  }

  /// Reads `fd` to its end, straight into the result, sized by `size` (one byte more,
  /// so that the end shows in the same read). The size is a hint (a file may grow or shrink
  /// meanwhile): the read goes on to the end, growing the buffer if it must, but with a
  /// `limit` never past it: more is refused, naming `path`.
  static func readToEnd(_ fd: Int32, path: String, size: Int, limit: Int?)
    throws(FileSystemError) -> Data
  {
    var data = Data(count: max(size, 0) + 1)
    var filled = 0
    while true {
      if filled == data.count {
        var grown = data.count + max(data.count, 64 << 10)
        if let limit {
          guard data.count <= limit else { throw tooLarge(path, limit: limit) }
          grown = min(limit + 1, grown)
        }
        data.count = grown
      }
      let got = data.withUnsafeMutableBytes { buffer in
        read(fd, buffer.baseAddress! + filled, buffer.count - filled)
      }
      if got < 0 {
        let failure = errno
        if failure == EINTR { continue }
        throw FileSystemError("read", path: path, errno: failure)
      }
      if got == 0 {
        data.count = filled
        return data
      }
      filled += got
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
    let created = try createTemporaryFile(in: directory, for: name, createsFolder: createsFolder)
    let temporary = created.path
    var fd = created.descriptor
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

  /// Creates a hidden temporary file in `directory` for one that will be renamed to `name`,
  /// with the permissions of a new file (`0666` less the umask), open for reading and writing (a
  /// spilled body is mapped from it) and closed on
  /// exec; returns its descriptor and path. Missing directories are created, unless
  /// `createsFolder` is false.
  public static func createTemporaryFile(
    in directory: String, for name: String, createsFolder: Bool = false
  ) throws(FileSystemError) -> (descriptor: Int32, path: String) {
    let temporary =
      (directory == "/" ? "" : directory) + "/" + temporaryName(for: name, suffix: randomSuffix())
    var fd = open(temporary, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
    if fd < 0 && errno == ENOENT && createsFolder {
      try createDirectory(path: directory)
      fd = open(temporary, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
    }
    guard fd >= 0 else { throw FileSystemError("create", path: temporary, errno: errno) }
    return (fd, temporary)
  }

  /// The name of a directory entry that `readdir(3)` returned, read in place up to its NUL.
  ///
  /// Never through `entry.pointee.d_name`: that copies the whole 256-byte field, and a record
  /// is only as long as its name (`d_reclen`), so the copy of one near the end of glibc's
  /// buffer read past it, and crashed (SIGSEGV) when that was the end of a mapping.
  package static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
    let name = UnsafeRawPointer(entry) + MemoryLayout<dirent>.offset(of: \.d_name)!
    return String(cString: name.assumingMemoryBound(to: CChar.self))
  }

  /// How the temporary files of atomic writes begin: hidden (no pass, read or count sees them as
  /// cache files) and the tool's own, so that one left by a killed run can be found and removed
  /// (SPEC section 8).
  package static let temporaryPrefix = ".imagecache-tmp."

  /// The tool's temporary files directly in `directory` (stores are flat), with their
  /// attributes. A missing folder has none.
  package static func temporaryFiles(in directory: String) throws(FileSystemError) -> [(
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

  /// Removes the tool's temporary files in `directory` last modified more than `age` before
  /// `now`: what a killed run left (a live store finishes within its download deadline).
  /// Returns how many there were and their allocated bytes; with `dryRun`, only counts them.
  ///
  /// One modified more than `age` after `now` was written while the wall clock ran ahead: it
  /// is dated `now` (not in a dry run), so that it ages from now and goes once `age` has
  /// passed, instead of staying until the clock catches up, years later. One modified just
  /// after `now` is another worker's store in flight (shards share the cache): left alone,
  /// and one that a store renames or removes meanwhile is no error.
  ///
  /// A file that cannot be removed or re-dated (`EPERM`: `chattr +i`) is left, its error in
  /// `notRemoved`, and the sweep goes on: housekeeping nobody asked for never ends a run, as a
  /// file expire cannot delete does not. Only a folder that cannot be read throws.
  package static func removeStaleTemporaries(
    in directory: String, olderThan age: TimeInterval, now: Date, dryRun: Bool
  ) throws(FileSystemError) -> (count: Int, bytes: UInt64, notRemoved: [FileSystemError]) {
    let cutoff = now.addingTimeInterval(-age)
    var count = 0
    var bytes: UInt64 = 0
    var notRemoved: [FileSystemError] = []
    for (name, attributes) in try temporaryFiles(in: directory) {
      let path = directory + "/" + name
      if attributes.modificationDate > now {
        if !dryRun && attributes.modificationDate > now.addingTimeInterval(age) {
          do {
            try setTimes(path: path, access: now, modification: now)
          } catch  where error.errno == ENOENT {
            // Stored or removed by its writer since the folder was read.
          } catch {
            notRemoved.append(error)
          }
        }
        continue
      }
      guard attributes.modificationDate < cutoff else { continue }
      if !dryRun {
        do {
          try removeFile(path: path)
        } catch {
          notRemoved.append(error)
          continue
        }
      }
      count += 1
      bytes += attributes.allocatedSize
    }
    return (count, bytes, notRemoved)
  }

  /// Removes the file at `path`. Returns `false` when there was none.
  @discardableResult
  package static func removeFile(path: String) throws(FileSystemError) -> Bool {
    guard unlink(path) == 0 else {
      if errno == ENOENT { return false }
      throw FileSystemError("remove", path: path, errno: errno)
    }
    return true
  }

  /// The longest file name the file systems we write to take (`NAME_MAX`).
  package static let maxNameLength = 255

  /// A hidden temporary name for a file that will be renamed to `name`: the tool's prefix,
  /// `name` shortened as far as needed, and `suffix`. Always at most ``maxNameLength`` bytes:
  /// SD's own names reach 255 (32 + 1 + a 222-byte extension), and a temporary name that did
  /// not fit would make such a file impossible to store. The name is kept only for people
  /// reading a folder; the prefix is what the sweep of stale files looks for.
  package static func temporaryName(for name: String, suffix: String) -> String {
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
  /// exec (`mkstemp(3)`); returns its descriptor and path. `tag`, when given, goes in the name
  /// before the random part: who wrote it (an output's writer, ``OutputLeftovers``).
  package static func makeTemporaryFile(in folder: String, for name: String, tag: String? = nil)
    throws(FileSystemError) -> (descriptor: Int32, path: String)
  {
    let suffix = tag.map { $0 + ".XXXXXX" } ?? "XXXXXX"
    let path = (folder == "/" ? "" : folder) + "/" + temporaryName(for: name, suffix: suffix)
    var template = Array(path.utf8CString)
    let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    let created = String(
      decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    guard descriptor >= 0 else { throw FileSystemError("create", path: created, errno: errno) }
    _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
    return (descriptor, created)
  }

  /// ``contents(atPath:)`` of a file that must be there: a missing one is an error (`ENOENT`).
  package static func existingContents(atPath path: String) throws(FileSystemError) -> Data {
    guard let data = try contents(atPath: path) else {
      throw FileSystemError("read", path: path, errno: ENOENT)
    }
    return data
  }

  /// A scratch file for the run's own use (a report's entries, trim's records, a fetched
  /// sitemap) in `$TMPDIR`, else `/tmp`: unlinked as soon as it is made, so that nothing is
  /// left behind whatever happens to the run. `name` says whose it is, in an error.
  package static func makeScratchFile(for name: String) throws(FileSystemError) -> Int32 {
    let folder =
      ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    let (descriptor, path) = try makeTemporaryFile(in: folder, for: name)
    unlink(path)
    return descriptor
  }

  /// Writes all of `bytes` to `descriptor`, through short writes and interruptions.
  package static func writeAll(
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
  package static func connectUnixSocket(path: String, naming: String) throws(FileSystemError)
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
