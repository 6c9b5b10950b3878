import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A path the user named for the tool's output: a report, a metrics file, an HTML page (SPEC
/// section 11). Every such path is written through this one type.
///
/// Users name more than regular files there: `/dev/null` to throw output away, `/dev/stdout`,
/// a named pipe read by another program, a symbolic link their tooling keeps. What each gets:
/// - nothing there yet, or a regular file: written beside it under a hidden temporary name and
///   renamed over it, so that a reader sees the old file or the new one, never half of one;
/// - a symbolic link (or a chain of them) that ends at a regular file or at nothing: the same,
///   done to the file the link ends at. The link stays a link and names the new contents, as
///   `ln -sf latest.json` set-ups expect;
/// - a character device or a FIFO (also behind links, as `/dev/stdout` is): opened and written
///   in place, never renamed over nor removed. Run as root, a rename over `/dev/null` replaces
///   it for every process on the machine;
/// - one of this process's own descriptors (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`):
///   written to that descriptor, whatever it is (a pipe, a terminal, systemd's journal socket);
/// - a Unix socket: connected to and written to;
/// - a directory, a block device, or a name ending in `/`: refused, naming it. Callers resolve
///   every output before the run does any work, so that this comes first.
public struct OutputFile: Sendable, Equatable, CustomStringConvertible {
  /// How the output is written.
  package enum Disposition: Sendable, Equatable {
    /// Written under a temporary name in `target`'s folder, then renamed to `target`.
    case replace(target: String)
    /// Opened (following links, truncating where that means anything) and written in place.
    case inPlace
    /// This process's descriptor: duplicated and written to.
    case descriptor(Int32)
    /// A Unix socket: connected to and written to.
    case socket(path: String)
  }

  /// The path as the user named it.
  package let path: String
  package let disposition: Disposition

  public var description: String { path }

  /// Looks at what `path` names now and decides how it is written; throws for what is refused,
  /// naming the working directory when `path` is relative.
  package init(path: String) throws(FileSystemError) {
    self.path = path
    do {
      disposition = try Self.disposition(of: path)
    } catch {
      throw error.namingWorkingDirectory()
    }
  }

  private static func disposition(of path: String) throws(FileSystemError) -> Disposition {
    guard !path.isEmpty else { throw FileSystemError("write", path: "''", errno: ENOENT) }
    guard !path.hasSuffix("/") else { throw folderRefused(path) }
    var current = path
    // Until a link is followed, the output is the path as named (messages and the temporary
    // file's folder keep the user's spelling of it).
    var followedLink = false
    // Links are followed by hand, at most as many as the kernel follows (MAXSYMLINKS), so that
    // what the chain ends at is known: `stat` alone would replace a link by a file.
    for _ in 0..<40 {
      current = withResolvedFolder(current)
      if let descriptor = ownDescriptor(current) {
        return .descriptor(descriptor)
      }
      var info = stat()
      guard lstat(current, &info) == 0 else {
        // A file where the path needs a folder: the user's mistake, as a folder named as the
        // output is, not an I/O failure.
        if errno == ENOTDIR {
          throw FileSystemError.refused(
            "write to", path: path,
            because: "a part of the path before its name is a file, not a folder")
        }
        guard errno == ENOENT else { throw FileSystemError("look at", path: path, errno: errno) }
        return .replace(target: followedLink ? current : path)
      }
      switch info.st_mode & S_IFMT {
      case S_IFREG:
        return .replace(target: followedLink ? current : path)
      case S_IFCHR, S_IFIFO:
        return .inPlace
      case S_IFSOCK:
        return .socket(path: current)
      case S_IFDIR:
        throw folderRefused(path)
      case S_IFBLK:
        throw FileSystemError.refused(
          "write to", path: path, because: "a block device (output is never written over a disk)")
      case S_IFLNK:
        guard let target = readLink(current) else {
          throw FileSystemError("read the link", path: current, errno: errno)
        }
        if current.hasPrefix("/proc/") && !target.hasPrefix("/") {
          // A descriptor of another process (`pipe:[123]`): only the kernel can follow it.
          return .inPlace
        }
        current = target.hasPrefix("/") ? target : folder(of: current) + "/" + target
        followedLink = true
      default:
        throw FileSystemError.refused(
          "write to", path: path, because: "not a file, device, FIFO or socket")
      }
    }
    throw FileSystemError("follow the links of", path: path, errno: ELOOP)
  }

  private static func folderRefused(_ path: String) -> FileSystemError {
    .refused("write to", path: path, because: "a folder (name a file inside it)")
  }

  /// `path` with its folder made absolute and free of links (`realpath(3)`), when the folder
  /// exists; the last part is left as it is, since it may itself be a link.
  static func withResolvedFolder(_ path: String) -> String {
    let folder = folder(of: path)
    let name = lastComponent(of: path)
    guard let resolved = realpath(folder, nil) else { return path }
    defer { free(resolved) }
    let real = String(cString: resolved)
    return (real == "/" ? "" : real) + "/" + name
  }

  static func folder(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
  }

  static func lastComponent(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return path }
    return String(path[path.index(after: slash)...])
  }

  /// The descriptor `path` names when it is one of this process's own (`/proc/self/fd/N` once
  /// its folder is resolved: `/dev/stdout` and `/dev/fd/N` lead there).
  static func ownDescriptor(_ path: String) -> Int32? {
    for folder in ["/proc/\(getpid())/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"]
    where path.hasPrefix(folder) {
      return Int32(path.dropFirst(folder.count))
    }
    let task = "/proc/\(getpid())/task/"
    if path.hasPrefix(task), let fd = path.dropFirst(task.count).split(separator: "/").last,
      path.dropFirst(task.count).split(separator: "/").count == 3
    {
      return Int32(fd)
    }
    return nil
  }

  static func readLink(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = readlink(path, &buffer, buffer.count - 1)
    guard count >= 0 else { return nil }
    return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// `error`, met while writing this output, as the user's path says it: the same errno,
  /// named for the output with `note`, and the working directory when the path is relative.
  func failure(_ error: FileSystemError, note: String? = nil) -> FileSystemError {
    var failure =
      error.errno == 0 ? error : FileSystemError("write", path: path, errno: error.errno)
    if let note { failure = failure.noting(note) }
    return failure.namingWorkingDirectory()
  }

  /// Opens the output for writing: see ``OutputWriter``.
  package func open(mode: mode_t = 0o644) throws(FileSystemError) -> OutputWriter {
    try OutputWriter(self, mode: mode)
  }

  /// Writes `bytes` to the output at once.
  package func write(_ bytes: some Collection<UInt8>) throws(FileSystemError) {
    let writer = try open()
    try writer.write(bytes)
    try writer.commit()
  }

  /// The contents of the regular file this output replaces, if it replaces one: what an
  /// earlier run wrote there. A device, a FIFO or a descriptor is never read.
  package func previousContents(limit: Int = 1 << 20) -> String? {
    guard case .replace(let target) = disposition else { return nil }
    let fd = Glibc.open(target, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
    var bytes = [UInt8](repeating: 0, count: min(limit, max(0, Int(info.st_size))))
    let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    guard count >= 0 else { return nil }
    return String(decoding: bytes[..<count], as: UTF8.self)
  }
}

/// One output being written: for a file, a hidden temporary file beside it that ``commit()``
/// renames into place and that is removed if the writer goes away uncommitted; for a device,
/// FIFO, socket or descriptor, the thing itself, opened on the first write (a FIFO's open
/// waits for its reader: that wait comes when there is something to write, not before the run).
public final class OutputWriter: @unchecked Sendable {
  package let output: OutputFile
  private var descriptor: Int32 = -1
  private var temporaryPath: String?
  private var committed = false

  init(_ output: OutputFile, mode: mode_t) throws(FileSystemError) {
    self.output = output
    guard case .replace(let target) = output.disposition else { return }
    let folder = OutputFile.folder(of: target)
    let fd: Int32
    let path: String
    // The temporary file is ours, not the user's: a failure names the output and says why
    // its folder matters (a file the user may write in a folder they may not is refused too).
    do {
      try FileSystem.createDirectory(path: folder)
    } catch {
      throw output.failure(error, note: "its folder \(folder) could not be created")
    }
    do {
      (fd, path) = try FileSystem.makeTemporaryFile(
        in: folder, for: OutputFile.lastComponent(of: target), tag: OutputLeftovers.tag)
    } catch {
      throw output.failure(
        error,
        note: "it is written as a new file in its folder \(folder) and renamed over the old "
          + "one, so that folder must be writable")
    }
    fchmod(fd, mode)
    descriptor = fd
    temporaryPath = path
  }

  deinit {
    if descriptor >= 0 { close(descriptor) }
    if let temporaryPath, !committed { unlink(temporaryPath) }
  }

  package func write(_ bytes: some Collection<UInt8>) throws(FileSystemError) {
    do {
      if descriptor < 0 { try openInPlace() }
      try FileSystem.writeAll(bytes, to: descriptor, path: output.path)
    } catch {
      throw error.namingWorkingDirectory()
    }
  }

  private func openInPlace() throws(FileSystemError) {
    switch output.disposition {
    case .replace: return
    case .inPlace:
      var fd: Int32
      repeat {
        fd = Glibc.open(output.path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY)
      } while fd < 0 && errno == EINTR
      guard fd >= 0 else { throw FileSystemError("open", path: output.path, errno: errno) }
      var info = stat()
      // Checked again on the open descriptor: the path may have changed since it was looked at.
      if fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFBLK || info.st_mode & S_IFMT == S_IFDIR
      {
        close(fd)
        throw FileSystemError.refused(
          "write to", path: output.path, because: "no longer a device or FIFO")
      }
      descriptor = fd
    case .descriptor(let number):
      let fd = fcntl(number, F_DUPFD_CLOEXEC, 0)
      guard fd >= 0 else { throw FileSystemError("write to", path: output.path, errno: errno) }
      descriptor = fd
    case .socket(let path):
      descriptor = try FileSystem.connectUnixSocket(path: path, naming: output.path)
    }
  }

  /// Puts the output in place: the temporary file renamed over the target (after it is on
  /// disk), or the device, FIFO, socket or descriptor closed. Nothing written: an empty output.
  package func commit() throws(FileSystemError) {
    if descriptor < 0 {
      do { try openInPlace() } catch { throw error.namingWorkingDirectory() }
    }
    let closing = descriptor
    descriptor = -1
    // A write that failed late (NFS, a full disk) is reported by close: the old file stays.
    guard close(closing) == 0 || errno == EINTR else {
      throw output.failure(FileSystemError("write", path: output.path, errno: errno))
    }
    if let temporaryPath, case .replace(let target) = output.disposition {
      guard rename(temporaryPath, target) == 0 else {
        throw FileSystemError("rename into place", path: target, errno: errno)
          .namingWorkingDirectory()
      }
      // What killed runs left of this output, now that it is in place.
      OutputLeftovers.sweep(
        folder: OutputFile.folder(of: target), target: OutputFile.lastComponent(of: target))
    }
    committed = true
  }
}

/// The temporary files of outputs (a report, a metrics file, a page) that killed runs left
/// beside them: a run killed (SIGKILL, the OOM killer, a power cut) between opening its output
/// and renaming it into place leaves `.imagecache-tmp.NAME.TAG.XXXXXX` in the output's folder,
/// which no later rename replaces. Each writer of an output removes its own output's leftovers
/// once it has put its own in place, but never the temporary file of a writer that may still be
/// writing: report folders are shared by jobs, shards and hosts (NFS).
///
/// `TAG` is `PID@HOST~BOOT~PIDNS`: the writer's process, its host name (for people), and what
/// makes a process id mean one process: the kernel's boot (`/proc/sys/kernel/random/boot_id`)
/// and the PID namespace (a container). A leftover goes when:
/// - its tag names this boot and PID namespace, and no process has that id (`kill(pid, 0)`
///   fails with `ESRCH`): its writer is dead. While a process has the id (its writer, however
///   long it runs, or one that reused the id) it stays;
/// - or, from another host, boot or container, or untagged (an older version's), it was last
///   modified more than ``OutputLeftovers/age`` ago: a writer's temporary file is made when
///   its run starts and written when it ends, so this is far past any nightly run.
enum OutputLeftovers {
  /// How old a leftover that no process check can clear must be: a week.
  static let age: TimeInterval = 7 * 24 * 3600

  /// This process's tag, made once.
  static let tag: String = {
    var buffer = [CChar](repeating: 0, count: 256)
    let host =
      gethostname(&buffer, buffer.count - 1) == 0
      ? String(cString: buffer) : "unknown"
    let hostPart = String(
      host.prefix(32).map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") ? $0 : "-" })
    return "\(getpid())@\(hostPart)~\(machine ?? "0~0")"
  }()

  /// The boot and PID namespace of this process, as the tag writes them: `BOOT~PIDNS`; `nil`
  /// when either cannot be read (no `/proc`), and then no process check clears a leftover.
  static let machine: String? = {
    let boot =
      (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))
      .map { String($0.filter(\.isHexDigit).prefix(12)) } ?? ""
    let namespace =
      OutputFile.readLink("/proc/self/ns/pid").map {
        String($0.filter(\.isNumber))
      } ?? ""
    return boot.isEmpty || namespace.isEmpty ? nil : boot + "~" + namespace
  }()

  /// What a leftover's name says of its writer.
  enum Writer: Equatable {
    /// An older version's temporary file, without a tag.
    case untagged
    case tagged(pid: Int32, machine: String)
  }

  /// The writer of `name` when it is a temporary file of the output named `target` (the last
  /// part of its path), else `nil`: another output's, or not the tool's.
  static func writer(of name: String, target: String) -> Writer? {
    guard name.hasPrefix(FileSystem.temporaryPrefix) else { return nil }
    let rest = name.dropFirst(FileSystem.temporaryPrefix.count)
    guard let lastDot = rest.lastIndex(of: "."),
      rest[rest.index(after: lastDot)...].count == 6
    else { return nil }
    let body = rest[..<lastDot]
    // A name cut short to fit NAME_MAX keeps only the start of the target's.
    let full = name.utf8.count >= FileSystem.maxNameLength - 3
    func isTarget(_ kept: Substring) -> Bool {
      kept == target || (full && !kept.isEmpty && target.hasPrefix(kept))
    }
    if let dot = body.lastIndex(of: "."), isTarget(body[..<dot]),
      let writer = tagged(body[body.index(after: dot)...])
    {
      return writer
    }
    return isTarget(body) ? .untagged : nil
  }

  /// `PID@HOST~BOOT~PIDNS` read back.
  private static func tagged(_ tag: Substring) -> Writer? {
    guard let at = tag.firstIndex(of: "@"), let pid = Int32(tag[..<at]), pid > 0 else {
      return nil
    }
    let parts = tag[tag.index(after: at)...].split(separator: "~", omittingEmptySubsequences: false)
    guard parts.count == 3 else { return nil }
    return .tagged(pid: pid, machine: parts[1] + "~" + parts[2])
  }

  /// Whether the leftover `name`, of `writer`, last modified at `modified`, is safe to remove
  /// at `now`.
  static func isAbandoned(writer: Writer, modified: Date, now: Date) -> Bool {
    if case .tagged(let pid, let machine) = writer, let own = Self.machine, machine == own {
      // Its writer may be looked at: alive (or an id reused since) it stays, however old.
      return kill(pid, 0) != 0 && errno == ESRCH
    }
    return modified < now.addingTimeInterval(-age)
  }

  /// Removes the leftovers of the output `target` in `folder` (see the type). Housekeeping
  /// nobody asked for: one that cannot be read or removed (another user's, in a shared folder)
  /// is left, and the output that was written stays written. Returns the names removed.
  @discardableResult
  static func sweep(folder: String, target: String, now: Date = Date()) -> [String] {
    guard let files = try? FileSystem.temporaryFiles(in: folder) else { return [] }
    var removed: [String] = []
    for (name, attributes) in files {
      guard let writer = writer(of: name, target: target),
        isAbandoned(writer: writer, modified: attributes.modificationDate, now: now),
        unlink(folder + "/" + name) == 0
      else { continue }
      removed.append(name)
    }
    return removed
  }
}
