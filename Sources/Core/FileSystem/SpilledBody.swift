import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A response body that went, as it arrived, to a hidden temporary file in the cache folder
/// instead of memory (SPEC section 12): peak memory follows the number of downloads, not what
/// origins send. The file becomes the cache file by ``moveIntoPlace(at:)``, the rename of an
/// atomic store (SPEC section 1); a body dropped otherwise removes its file, and one left by a
/// killed run carries the tool's temporary prefix and is swept as every other (SPEC section 8).
public final class SpilledBody: Sendable {
  /// The temporary file's path, until it is moved into place.
  package let path: String
  /// Whether the file was renamed to a cache name: then it is no longer this body's to remove.
  private let moved = Mutex(false)

  public init(path: String) {
    self.path = path
  }

  deinit {
    if !moved.withLock({ $0 }) { unlink(path) }
  }

  /// Renames the file to `destination` (in the same folder), atomically.
  package func moveIntoPlace(at destination: String) throws(FileSystemError) {
    try moved.withLock { moved throws(FileSystemError) in
      guard !moved else { return }
      guard rename(path, destination) == 0 else {
        throw FileSystemError("rename to \(destination)", path: path, errno: errno)
      }
      moved = true
    }
  }

  /// The first `count` bytes of `descriptor`'s file, mapped read-only: the kernel reads the
  /// pages as they are used and may drop them again, so a large body is not the process's
  /// memory to keep. The mapping outlives the descriptor, a rename and an unlink.
  package static func map(descriptor: Int32, count: Int, path: String) throws(FileSystemError)
    -> Data
  {
    guard count > 0 else { return Data() }
    guard let start = mmap(nil, count, PROT_READ, MAP_PRIVATE, descriptor, 0),
      start != MAP_FAILED
    else { throw FileSystemError("map", path: path, errno: errno) }
    return Data(
      bytesNoCopy: start, count: count,
      deallocator: .custom { start, count in munmap(start, count) })
  }
}
