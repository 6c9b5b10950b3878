import Core
import Foundation

/// Builds cache folders with controlled timestamps for maintenance tests.
public struct CacheBuilder {
  public let root: String

  public init(root: String) {
    self.root = root
  }

  /// Writes `relativePath` with `size` bytes and sets its access and modification times
  /// (seconds since the epoch). Returns the full path.
  @discardableResult
  public func file(
    _ relativePath: String, size: Int = 100, accessTime: Int64, modificationTime: Int64? = nil
  ) throws -> String {
    let path = root + "/" + relativePath
    try FileSystem.createDirectory(path: (path as NSString).deletingLastPathComponent)
    guard FileManager.default.createFile(atPath: path, contents: Data(repeating: 7, count: size))
    else { throw FileSystemError("create", path: path, errno: EIO) }
    try FileSystem.setTimes(
      path: path, accessTime: accessTime * 1_000_000_000,
      modificationTime: (modificationTime ?? accessTime) * 1_000_000_000)
    return path
  }

  /// Makes `relativePath` a symbolic link to `destination` and sets the link's own access and
  /// modification times (seconds since the epoch), not its target's. Returns the full path.
  @discardableResult
  public func link(_ relativePath: String, to destination: String, accessTime: Int64) throws
    -> String
  {
    let path = root + "/" + relativePath
    try FileSystem.createDirectory(path: (path as NSString).deletingLastPathComponent)
    try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: destination)
    try FileSystem.setTimes(
      path: path, accessTime: accessTime * 1_000_000_000,
      modificationTime: accessTime * 1_000_000_000)
    return path
  }

  /// The relative paths of the regular, non-hidden files now under the root, sorted.
  public func remainingFiles() throws -> [String] {
    try CacheScanner(root: root).files().map(\.relativePath).sorted()
  }
}
