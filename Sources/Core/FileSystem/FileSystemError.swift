import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A failed file-system call, with the path and the operation a user needs to act on it.
public struct FileSystemError: Error, Sendable, Equatable, CustomStringConvertible {
  package let operation: String
  package let path: String
  package let errno: Int32
  /// Why the path was refused, when that was for what it is rather than by a failed call.
  package let reason: String?
  /// The user named the path wrongly (a folder for a report file): exit 2, not 4.
  package let isUsageError: Bool
  /// The working directory a relative ``path`` the user named was resolved against: a cron
  /// job's or a service's is not the shell's the path was tried in (``namingWorkingDirectory()``).
  package private(set) var workingDirectory: String?
  /// What else the user needs to act on it, after the reason.
  package private(set) var note: String?

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
  package static func refused(
    _ operation: String, path: String, because reason: String, usage: Bool = true
  ) -> FileSystemError {
    FileSystemError(operation, path: path, reason: reason, isUsageError: usage)
  }

  /// This error naming the working directory when ``path`` is relative: for a path the user
  /// named (a manifest, a report), so that one given from cron or a unit says where it was
  /// looked for, and how to make it not depend on that.
  package func namingWorkingDirectory() -> FileSystemError {
    guard let directory = FileSystem.workingDirectory(resolving: path) else { return self }
    var error = self
    error.workingDirectory = directory
    return error
  }

  /// This error with `note` after its reason.
  package func noting(_ note: String) -> FileSystemError {
    var error = self
    error.note = note
    return error
  }

  public var description: String {
    var text = "\(operation) \(path)"
    if let workingDirectory { text += " (relative to \(workingDirectory))" }
    text += ": \(reason ?? String(cString: strerror(errno)))"
    if let note { text += "; \(note)" }
    // What an absolute path would mend: not a disk that is full or failing, which no path is.
    if workingDirectory != nil && !Self.notThePathsFault.contains(errno) {
      text += "; \(FileSystem.relativePathAdvice)"
    }
    return text
  }

  /// Failures a path resolved elsewhere would meet the same: the disk or the process is out
  /// of something, or the device failed.
  static let notThePathsFault: Set<Int32> = [ENOSPC, EDQUOT, EIO, EFBIG, EMFILE, ENFILE, ENOMEM]
}

extension FileSystemError: CauseProviding, ExitStatusProviding {
  /// The call's `errno`; none for a path refused for what it is.
  package var cause: FailureCause? { errno == 0 ? nil : .errno(errno) }

  /// A path the user named wrongly is a usage error; any other failure a fatal I/O error.
  package var exitStatus: ExitStatus { isUsageError ? .usage : .fatalIO }
}
