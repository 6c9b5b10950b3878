import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

extension FileSystem {
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

  /// Checks the folders below the cache directory that a command reads and writes: the
  /// namespace folder and its `.imagecache/` (SPEC sections 1 and 12), when they exist. A
  /// symbolic link, or anything but a folder, where one of them is expected is refused, naming
  /// it (exit 2), before anything is read or written: following a namespace linked to
  /// `/some/folder` would expire, trim and store in that folder instead. The cache directory
  /// itself is the user's to place, and may be a link.
  ///
  /// A cache directory (or a folder above it, or the namespace) that is something else, a
  /// FIFO or a file, is the user's mistake, not an I/O failure: refused naming it and what it
  /// is (exit 2), where `lstat` alone would say "Not a directory" (exit 4).
  package static func checkCacheFolders(_ location: CacheLocation) throws(FileSystemError) {
    try checkIsFolder(
      location.directory, what: "the cache directory (--cache, or a job's cache: directory)")
    for path in [location.diskCachePath, location.stateDirectory] {
      var info = stat()
      guard lstat(path, &info) == 0 else {
        if errno == ENOENT { return }
        if errno == ENOTDIR {
          try checkIsFolder(OutputFile.folder(of: path), what: "a folder of the cache")
        }
        throw FileSystemError("look at", path: path, errno: errno)
      }
      let type = info.st_mode & S_IFMT
      guard type == S_IFDIR else {
        let why =
          type == S_IFLNK
          ? "imagecache never follows a link out of the cache, and read and wrote nothing "
            + "(make it a real folder, or point --cache at the real one)"
          : "imagecache read and wrote nothing"
        throw .refused(
          "use", path: path,
          because: "\(describe(type)) where a cache folder is expected; \(why)")
      }
    }
  }

  /// Refuses `path` (links followed: the cache directory may be one), or the nearest folder
  /// above it that exists, when it is not a folder, naming it and what it is (exit 2). A
  /// missing path is no error here; nor is one that cannot be looked at for another reason.
  private static func checkIsFolder(_ path: String, what: String) throws(FileSystemError) {
    var current = path
    while true {
      var info = stat()
      if stat(current, &info) == 0 {
        let type = info.st_mode & S_IFMT
        guard type == S_IFDIR else {
          let expected = current == path ? what : "a folder above the cache directory \(path)"
          throw .refused(
            "use", path: current,
            because: "\(describe(type)) where \(expected) is expected, not a folder; "
              + "imagecache read and wrote nothing")
        }
        return
      }
      // Only a missing path or a file in its way says to look further up: to "/", or to the
      // working directory (".") for a relative path.
      let failure = errno
      let folder = OutputFile.folder(of: current)
      guard failure == ENOENT || failure == ENOTDIR, folder != current else { return }
      current = folder
    }
  }

  /// The content of `path`, an input the user named (a report to merge or render), which must
  /// be a regular file of at most `limit` bytes. It is opened without blocking (a FIFO with no
  /// writer would hang the command) and looked at (`fstat`) before a byte is read: a FIFO, a
  /// device (`/dev/zero` never ends), a socket or a folder is refused, and so is a file over
  /// `limit` (or one that grows past it while read), naming it (exit 2). A missing file is
  /// `ENOENT`.
  package static func regularFileContents(atPath path: String, limit: Int)
    throws(FileSystemError) -> Data
  {
    var fd: Int32
    repeat {
      fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
    } while fd < 0 && errno == EINTR
    guard fd >= 0 else { throw FileSystemError("read", path: path, errno: errno) }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { throw FileSystemError("read", path: path, errno: errno) }
    let type = info.st_mode & S_IFMT
    guard type == S_IFREG else {
      throw .refused("read", path: path, because: "\(describe(type)), not a regular file")
    }
    guard info.st_size <= limit else { throw tooLarge(path, limit: limit) }
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
    return try readToEnd(fd, path: path, size: Int(info.st_size), limit: limit)
  }

  /// `path` refused for holding more than `limit` bytes.
  static func tooLarge(_ path: String, limit: Int) -> FileSystemError {
    .refused(
      "read", path: path, because: "larger than \(limit) bytes, more than any input it can be")
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
    .refused(
      "use", path: path,
      because: "\(describe(type)) where imagecache keeps its own \(isFolder ? "folder" : "file"); "
        + "nothing was written through it (remove it, and imagecache makes its own)",
      usage: false)
  }

  /// What a file of type `type` (`st_mode & S_IFMT`) is, for an error.
  private static func describe(_ type: mode_t) -> String {
    switch type {
    case S_IFLNK: "a symbolic link"
    case S_IFDIR: "a folder"
    case S_IFREG: "a file"
    case S_IFIFO: "a FIFO"
    case S_IFCHR, S_IFBLK: "a device"
    case S_IFSOCK: "a socket"
    default: "not a regular file"
    }
  }
}
