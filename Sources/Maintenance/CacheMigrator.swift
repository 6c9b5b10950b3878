import Core
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Brings caches written by older SD versions into the current layout without losing a file
/// (SPEC section 4):
///
/// - ``mergeDirectory(from:dryRun:now:)`` moves a legacy disk cache folder (SD 3/4, one of
///   ``legacyDirectories``) into `<directory>/<ns>`;
/// - ``renameLegacyFileNames(keys:dryRun:now:)`` renames the files of the given keys from every
///   legacy naming scheme to the current name.
///
/// On a name collision the newer file (by modification date) takes the name and the other is
/// moved to `.imagecache/collisions/<time>/` and reported: nothing is deleted. Running either
/// pass a second time changes nothing.
public struct CacheMigrator: Sendable {
  public let location: CacheLocation
  private var disk: DiskCache { DiskCache(location: location) }
  /// In a dry run, the files the passes run so far would have moved: a later pass of the same
  /// dry run sees the cache as the real run would, so the plan is what the real run does.
  private let plan = DryRunPlan()

  /// Names in the disk cache path that a dry run has moved in or out, on paper.
  final class DryRunPlan: Sendable {
    private let files = Mutex<[String: FileAttributes?]>([:])

    /// What a dry run has put at `name` (`.some(nil)`: moved away), or `nil` if untouched.
    func planned(_ name: String) -> FileAttributes?? { files.withLock { $0[name] } }
    func set(_ name: String, _ attributes: FileAttributes?) {
      files.withLock { $0[name] = .some(attributes) }
    }
  }

  /// The attributes of `name` in the disk cache path, as the dry run so far has left it.
  private func attributes(of name: String, dryRun: Bool) throws -> FileAttributes? {
    if dryRun, let planned = plan.planned(name) { return planned }
    return try FileSystem.attributes(atPath: disk.path + "/" + name)
  }

  /// On a shard, only the shard's files are merged and only its keys renamed (SPEC section 9).
  public let shard: Shard?

  public init(location: CacheLocation, shard: Shard? = nil) {
    self.location = location
    self.shard = shard
  }

  /// Where SD 3.x and 4.x kept this namespace, beside the current directory (in `<Caches>`),
  /// newest layout first (SD 5 migrates from the first itself):
  /// - SD 3.7.3 to 4.4: `<Caches>/<ns>/com.hackemist.SDWebImageCache.<ns>`: `initWithNamespace:`
  ///   made the folder `<Caches>/<ns>` (`makeDiskCachePath:`) and appended the full namespace;
  /// - SD 3.0 to 3.7.2: `<Caches>/com.hackemist.SDWebImageCache.<ns>`: `makeDiskCachePath:` of
  ///   the full namespace.
  public var legacyDirectories: [String] {
    let caches = (location.directory as NSString).deletingLastPathComponent
    let fullNamespace = "com.hackemist.SDWebImageCache.\(location.namespace)"
    return [
      (caches as NSString).appendingPathComponent(location.namespace + "/" + fullNamespace),
      (caches as NSString).appendingPathComponent(fullNamespace),
    ]
  }

  /// Moves every regular, non-hidden file of `source` to the same relative path under the disk
  /// cache path, then removes the folders it emptied. A missing source is nothing to do.
  public func mergeDirectory(from source: String, dryRun: Bool, now: Date = Date()) throws
    -> MaintenancePassReport
  {
    var report = MaintenancePassReport(pass: .migrate, dryRun: dryRun)
    try mergeDirectory(from: source, dryRun: dryRun, now: now, into: &report)
    return report
  }

  /// ``mergeDirectory(from:dryRun:now:)``, handing each move and error to `report` as it
  /// happens and stopping after the file in hand once `stop` returns true.
  /// - Returns: whether the pass ran to the end.
  @discardableResult
  public func mergeDirectory<Recorder: MaintenanceRecorder>(
    from source: String, dryRun: Bool, now: Date = Date(), into report: inout Recorder,
    stop: () -> Bool = { false }
  ) throws -> Bool {
    let sourcePath = (source as NSString).standardizingPath
    let diskPath = (disk.path as NSString).standardizingPath
    guard sourcePath != diskPath else { return true }
    // A source above the cache (`--from` its parent) holds the cache itself: its files are
    // not legacy ones, and those moved into it are never met again by the walk.
    let cacheInSource =
      diskPath.hasPrefix(sourcePath + "/") ? diskPath.dropFirst(sourcePath.count + 1) + "/" : nil
    var stopped = false
    // File by file as the walk finds them, never the whole folder listed first: a legacy
    // folder holds as many files as the cache.
    try CacheScanner(root: sourcePath).forEachFile { file in
      if stop() {
        stopped = true
        return false
      }
      // A name of no digest is shard 0's: left to every shard, it was merged by none.
      if let shard, !shard.ownsFile(named: file.name) { return true }
      if let cacheInSource, file.relativePath.hasPrefix(cacheInSource) { return true }
      let from = sourcePath + "/" + file.relativePath
      let to = disk.path + "/" + file.relativePath
      do {
        let existing = try attributes(of: file.relativePath, dryRun: dryRun)
        try place(
          from: from, attributes: file.attributes, to: to, existing: existing,
          relativeName: file.relativePath, dryRun: dryRun, now: now, report: &report)
        if dryRun
          && (existing == nil || file.attributes.modificationTime > existing!.modificationTime)
        {
          plan.set(file.relativePath, file.attributes)
        }
      } catch {
        report.recordError("\(error)")
      }
      return true
    }
    if stopped { return false }
    if !dryRun { removeEmptyDirectories(under: sourcePath) }
    return true
  }

  /// For each key, moves a file found under a legacy name (no extension; the raw string's
  /// extension; the uncapped URL extension) to the key's current name.
  public func renameLegacyFileNames<Keys: Sequence<String>>(
    keys: Keys, dryRun: Bool, now: Date = Date()
  ) -> MaintenancePassReport {
    var report = MaintenancePassReport(pass: .migrate, dryRun: dryRun)
    renameLegacyFileNames(keys: keys, dryRun: dryRun, now: now, into: &report)
    return report
  }

  /// ``renameLegacyFileNames(keys:dryRun:now:)``, handing each move and error to `report` as
  /// it happens and stopping after the key in hand once `stop` returns true.
  /// - Returns: whether the pass ran to the end.
  @discardableResult
  public func renameLegacyFileNames<Keys: Sequence<String>, Recorder: MaintenanceRecorder>(
    keys: Keys, dryRun: Bool, now: Date = Date(), into report: inout Recorder,
    stop: () -> Bool = { false }
  ) -> Bool {
    for key in keys {
      if stop() { return false }
      if let shard, !shard.owns(cacheKey: key) { continue }
      let currentName = CacheFileName.fileName(forKey: key)
      let to = disk.path + "/" + currentName
      for legacyName in CacheFileName.legacyFileNames(forKey: key) {
        let from = disk.path + "/" + legacyName
        do {
          guard let attributes = try attributes(of: legacyName, dryRun: dryRun),
            attributes.isRegularFile
          else { continue }
          let existing = try self.attributes(of: currentName, dryRun: dryRun)
          try place(
            from: from, attributes: attributes, to: to, existing: existing,
            relativeName: legacyName, dryRun: dryRun, now: now, report: &report)
          // In a dry run nothing moves: the plan remembers what now holds each name.
          if dryRun {
            plan.set(legacyName, nil)
            if existing.map({ $0.modificationTime < attributes.modificationTime }) ?? true {
              plan.set(currentName, attributes)
            }
          }
        } catch {
          report.recordError("\(error)")
        }
      }
    }
    return true
  }

  /// Moves `from` to `to`, or resolves the collision when `to` is taken (by `existing`): the
  /// newer file takes the name, the older goes aside.
  private func place<Recorder: MaintenanceRecorder>(
    from: String, attributes: FileAttributes, to: String, existing: FileAttributes?,
    relativeName: String, dryRun: Bool, now: Date, report: inout Recorder
  ) throws {
    let target = relative(to)
    guard let existing else {
      if !dryRun { try move(from: from, to: to) }
      report.recordMove(from: relativeName, to: target, bytes: attributes.size)
      return
    }
    let aside = try asideRelativePath(relativeName, now, dryRun: dryRun)
    if attributes.modificationTime > existing.modificationTime {
      // The incoming file is newer: the one in place goes aside, the incoming takes its name.
      if !dryRun {
        try move(from: to, to: location.diskCachePath + "/" + aside)
        try move(from: from, to: to)
      }
      if dryRun { plan.set(aside, existing) }
      report.recordKeptAside(path: target, aside: aside, bytes: existing.size)
      report.recordMove(from: relativeName, to: target, bytes: attributes.size)
    } else {
      if !dryRun { try move(from: from, to: location.diskCachePath + "/" + aside) }
      if dryRun { plan.set(aside, attributes) }
      report.recordKeptAside(path: relativeName, aside: aside, bytes: attributes.size)
    }
  }

  /// `.imagecache/collisions/<UTC time>/<relative path>`, relative to the disk cache path, or
  /// that with `.1`, `.2`... when a file of the same name went there already: one run's passes
  /// share one time, and a name can collide in several of them (in both of SD's legacy
  /// folders): a file kept aside is never replaced.
  private func asideRelativePath(_ relativeName: String, _ now: Date, dryRun: Bool) throws
    -> String
  {
    let time = UTCTime(now)
    // ISO 8601's basic form (`20261118T110640`): no colon in a folder name.
    let stamp = time.dateText.replacingOccurrences(of: "-", with: "") + "T" + time.compactTimeText
    let path = ".imagecache/collisions/\(stamp)/\(relativeName)"
    var candidate = path
    var suffix = 1
    while try attributes(of: candidate, dryRun: dryRun) != nil {
      candidate = path + ".\(suffix)"
      suffix += 1
    }
    return candidate
  }

  private func relative(_ path: String) -> String {
    let prefix = disk.path + "/"
    return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
  }

  /// `rename(2)`, creating the destination's folders; across filesystems, a copy (atomic at the
  /// destination, times kept) and then the source's removal.
  private func move(from: String, to: String) throws {
    if rename(from, to) == 0 { return }
    var failure = errno
    if failure == ENOENT {
      try FileSystem.createDirectory(path: (to as NSString).deletingLastPathComponent)
      if rename(from, to) == 0 { return }
      failure = errno
    }
    guard failure == EXDEV else {
      throw FileSystemError("move to \(to)", path: from, errno: failure)
    }
    // The times first: reading the file sets its access time to now (relatime does when it
    // is older than a day), and the copy keeps the times the file had.
    // Gone since the rename said EXDEV: another process moved or removed it.
    guard let attributes = try FileSystem.attributes(atPath: from) else {
      throw FileSystemError("read", path: from, errno: ENOENT)
    }
    let data = try FileSystem.existingContents(atPath: from)
    try FileSystem.writeAtomically(data, toPath: to)
    try FileSystem.setTimes(
      path: to, accessTime: attributes.accessTime, modificationTime: attributes.modificationTime)
    try FileSystem.removeFile(path: from)
  }

  /// Removes the folders under `root` (and `root`) that are now empty, deepest first. A folder
  /// that still holds anything stays.
  private func removeEmptyDirectories(under root: String) {
    let enumerator = FileManager.default.enumerator(atPath: root)
    var directories: [String] = []
    while let relativePath = enumerator?.nextObject() as? String {
      if let type = enumerator?.fileAttributes?[.type] as? FileAttributeType, type == .typeDirectory
      {
        directories.append(root + "/" + relativePath)
      }
    }
    for directory in directories.sorted(by: { $0.count > $1.count }) { rmdir(directory) }
    rmdir(root)
  }
}
