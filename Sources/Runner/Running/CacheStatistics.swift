import Core
import Foundation
import State

/// What `stats` reports of a cache (SPEC section 7): files, logical and allocated bytes, the
/// oldest and newest access and modification dates, and how many files carry a legacy name.
public struct CacheStatistics: Sendable, Codable, Equatable {
  public var path: String
  public var files = 0
  public var logicalBytes: UInt64 = 0
  public var allocatedBytes: UInt64 = 0
  public var oldestAccess: Date?
  public var newestAccess: Date?
  public var oldestModification: Date?
  public var newestModification: Date?
  public var legacyNames = 0
  /// Temporary files of atomic stores: a live run's, or ones a killed run left (removed by the
  /// next run or `maintain` once an hour old).
  public var temporaryFiles = 0
  public var temporaryBytes: UInt64 = 0
  /// State files: the unsharded one and each shard's (SPEC section 9).
  public var stateFiles = 0
  /// URLs on the blacklist of any state file, each once; `nil` when a state file could not be
  /// read: a count without it would say fewer than there are (0 for a cache whose one file
  /// could not be opened).
  public var blacklistedURLs: Int? = 0
  /// The state files that could not be read.
  public var unreadableStateFiles: [String] = []

  /// Walks the disk cache path of `location` once. Entries that cannot be read go to
  /// `onError` and the walk goes on; so do state files, which are then listed in
  /// ``unreadableStateFiles``, leaving ``blacklistedURLs`` unknown.
  public static func collect(
    location: CacheLocation, onError: (FileSystemError) -> Void
  ) throws -> CacheStatistics {
    var stats = CacheStatistics(path: location.diskCachePath)
    try CacheScanner(root: location.diskCachePath).forEachFile(onError: onError) { file in
      stats.add(file)
      return true
    }
    for (_, attributes) in try FileSystem.temporaryFiles(in: location.diskCachePath) {
      stats.temporaryFiles += 1
      stats.temporaryBytes += attributes.allocatedSize
    }
    stats.stateFiles = try StateStore.stateFiles(location: location).count
    let count = try StateStore.blacklistOfEveryStateFile(location: location) { path, error in
      stats.unreadableStateFiles.append(path)
      onError(FileSystemError("read the blacklist of", path: path, underlying: error))
    }.count
    stats.blacklistedURLs = stats.unreadableStateFiles.isEmpty ? count : nil
    return stats
  }

  init(path: String) {
    self.path = path
  }

  private mutating func add(_ file: ScannedFile) {
    let attributes = file.attributes
    files += 1
    logicalBytes += attributes.size
    allocatedBytes += attributes.allocatedSize
    oldestAccess = min(oldestAccess ?? attributes.accessDate, attributes.accessDate)
    newestAccess = max(newestAccess ?? attributes.accessDate, attributes.accessDate)
    oldestModification = min(
      oldestModification ?? attributes.modificationDate, attributes.modificationDate)
    newestModification = max(
      newestModification ?? attributes.modificationDate, attributes.modificationDate)
    if CacheFileName.isLegacyName(file.name) { legacyNames += 1 }
  }
}
