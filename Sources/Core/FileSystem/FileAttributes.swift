import CFileStat
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The attributes of one file, read without following symbolic links. Times are kept in
/// nanoseconds since the epoch, as the kernel gives them, so that comparisons at a cutoff are
/// exact; the `Date` views are for people.
public struct FileAttributes: Sendable, Equatable {
  package var mode: UInt32
  /// Logical size in bytes.
  package var size: UInt64
  /// Allocated size in bytes: `st_blocks * 512` (Foundation on Linux gets this wrong).
  package var allocatedSize: UInt64
  package var accessTime: Int64
  package var modificationTime: Int64
  /// The inode change time (`ctime`), SD's `changeDate` (NSURLAttributeModificationDateKey).
  package var changeTime: Int64
  /// The birth time, where `statx` reports one.
  package var creationTime: Int64?

  public var accessDate: Date { Date(nanosecondsSince1970: accessTime) }
  public var modificationDate: Date { Date(nanosecondsSince1970: modificationTime) }
  package var changeDate: Date { Date(nanosecondsSince1970: changeTime) }
  package var creationDate: Date? { creationTime.map { Date(nanosecondsSince1970: $0) } }

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
  package init(nanosecondsSince1970 ns: Int64) {
    self.init(timeIntervalSince1970: Double(ns) / 1_000_000_000)
  }

  /// Nanoseconds since the epoch, rounded down.
  package var nanosecondsSince1970: Int64 {
    let seconds = timeIntervalSince1970.rounded(.down)
    return Int64(seconds) * 1_000_000_000
      + Int64(((timeIntervalSince1970 - seconds) * 1_000_000_000).rounded(.down))
  }
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
