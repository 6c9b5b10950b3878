import CFileStat
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One regular file found under a disk cache path (or a symbolic link, when the scanner was
/// asked for them: `attributes` are then the link's own).
public struct ScannedFile: Sendable, Equatable {
  /// The path relative to the scanned root, `/`-separated.
  package var relativePath: String
  /// The last component of the path.
  package var name: String
  /// The open directory that holds the file, valid only while the visitor runs: act on the
  /// file with `*at` calls on it rather than by path, so that nothing is resolved twice.
  package var directoryFD: Int32
  package var attributes: FileAttributes
}

/// Walks a disk cache path with the POSIX calls (openat, readdir, statx) rather than
/// Foundation's enumerator, which on Linux is slow and reports allocated sizes wrong.
///
/// The walk is recursive, never follows symbolic links (it never descends into a linked
/// folder), skips every hidden entry (so the tool's `.imagecache/` state and the temporary
/// files of atomic writes are never seen) and reports regular files, and symbolic links
/// themselves when asked (SPEC sections 1 and 4).
public struct CacheScanner: Sendable {
  package let root: String
  /// Whether a symbolic link is reported as an entry of its own, with its own (lstat)
  /// attributes, whatever it points to: what SD's `removeExpiredData` sees, since its
  /// enumerator lists a link without resolving it and `NSURLIsDirectoryKey` is false for one,
  /// even for a link to a folder.
  package let includesSymbolicLinks: Bool
  /// Whether hidden files (never hidden folders, such as `.imagecache/`) are reported too:
  /// `verify` names the temporary files of atomic writes and other hidden files.
  package let includesHiddenFiles: Bool

  public init(root: String, includesSymbolicLinks: Bool = false, includesHiddenFiles: Bool = false)
  {
    self.root = root
    self.includesSymbolicLinks = includesSymbolicLinks
    self.includesHiddenFiles = includesHiddenFiles
  }

  /// Calls `visit` for every regular, non-hidden file below the root (and every symbolic link,
  /// with ``includesSymbolicLinks``), until it returns false.
  /// A missing root is an empty cache. An entry that cannot be read is passed to `onError`,
  /// and the walk goes on.
  public func forEachFile(
    onError: (FileSystemError) -> Void = { _ in },
    _ visit: (ScannedFile) throws -> Bool
  ) throws {
    // Never through a link: a namespace linked out of the cache is not the cache.
    let fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else {
      if errno == ENOENT { return }
      throw FileSystemError("open directory", path: root, errno: errno)
    }
    _ = try walk(directoryFD: fd, prefix: "", onError: onError, visit)
  }

  /// All regular, non-hidden files below the root.
  package func files() throws -> [ScannedFile] {
    var result: [ScannedFile] = []
    try forEachFile {
      result.append($0)
      return true
    }
    return result
  }

  /// Takes ownership of `directoryFD` and closes it. Returns false once `visit` did.
  private func walk(
    directoryFD: Int32, prefix: String,
    onError: (FileSystemError) -> Void,
    _ visit: (ScannedFile) throws -> Bool
  ) throws -> Bool {
    guard let dir = fdopendir(directoryFD) else {
      close(directoryFD)
      onError(FileSystemError("read directory", path: root + "/" + prefix, errno: errno))
      return true
    }
    defer { closedir(dir) }
    while let entry = readdir(dir) {
      let name = FileSystem.entryName(entry)
      let hidden = name.hasPrefix(".")
      let type = entry.pointee.d_type
      if hidden && (!includesHiddenFiles || type == UInt8(DT_DIR)) { continue }
      let relativePath = prefix + name
      if type == UInt8(DT_DIR) {
        guard
          try descend(
            parentFD: directoryFD, name: name, relativePath: relativePath, onError: onError, visit)
        else { return false }
        continue
      }
      let wanted =
        type == UInt8(DT_REG) || type == UInt8(DT_UNKNOWN)
        || (includesSymbolicLinks && type == UInt8(DT_LNK))
      if !wanted { continue }
      let attributes: FileAttributes?
      do throws(FileSystemError) {
        attributes = try FileSystem.attributes(directoryFD: directoryFD, name: name)
      } catch {
        onError(
          FileSystemError(error.operation, path: root + "/" + relativePath, errno: error.errno))
        continue
      }
      guard let attributes else { continue }
      if attributes.isDirectory && hidden { continue }
      if attributes.isDirectory {
        guard
          try descend(
            parentFD: directoryFD, name: name, relativePath: relativePath, onError: onError, visit)
        else { return false }
      } else if attributes.isRegularFile || (includesSymbolicLinks && attributes.isSymbolicLink) {
        guard
          try visit(
            ScannedFile(
              relativePath: relativePath, name: name, directoryFD: directoryFD,
              attributes: attributes))
        else { return false }
      }
    }
    return true
  }

  private func descend(
    parentFD: Int32, name: String, relativePath: String,
    onError: (FileSystemError) -> Void,
    _ visit: (ScannedFile) throws -> Bool
  ) throws -> Bool {
    let child = openat(parentFD, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    guard child >= 0 else {
      onError(FileSystemError("open directory", path: root + "/" + relativePath, errno: errno))
      return true
    }
    return try walk(directoryFD: child, prefix: relativePath + "/", onError: onError, visit)
  }
}
