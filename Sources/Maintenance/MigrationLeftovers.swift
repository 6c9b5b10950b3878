import Core
import Foundation

/// What a merge left in the legacy folder it kept, and why (SPEC section 4: a collision or an
/// error never loses a file, so a folder that still holds anything stays): the run says so,
/// so that nobody deletes the folder blind or wonders why it is still there.
public struct MigrationLeftovers: Sendable, Equatable, CustomStringConvertible {
  /// A number of files and their bytes.
  public struct Count: Sendable, Equatable {
    public var files = 0
    public var bytes: UInt64 = 0

    mutating func add(_ size: UInt64) {
      files += 1
      bytes += size
    }
  }

  /// Hidden entries (a name starting with `.`, or inside such a folder): never migrated.
  public var hidden = Count()
  /// Symbolic links, FIFOs, sockets, devices: only regular files are cache files.
  public var notRegularFiles = Count()
  /// Files another shard owns (SPEC section 9): that shard's run merges them.
  public var otherShards = Count()
  /// Regular files the merge did not move: an error (reported by the pass), or the run was
  /// interrupted before it reached them.
  public var notMoved = Count()

  public init() {}

  public var total: Count {
    [hidden, notRegularFiles, otherShards, notMoved].reduce(into: Count()) {
      $0.files += $1.files
      $0.bytes += $1.bytes
    }
  }

  /// `3 files (12 KB): 1 hidden (never migrated), 2 not moved (an error, or the run stopped)`.
  public var description: String {
    let reasons = [
      (hidden, "hidden (never migrated)"),
      (notRegularFiles, "not a regular file (links, FIFOs and devices are not cache files)"),
      (otherShards, "another shard's (its own run merges them)"),
      (notMoved, "not moved (see the pass's errors, or the run stopped before them)"),
    ].filter { $0.0.files > 0 }.map { "\($0.0.files) \($0.1)" }
    let total = total
    return "\(total.files) file(s) (\(formatBytes(total.bytes))) remain"
      + (reasons.isEmpty ? "" : ": " + reasons.joined(separator: ", "))
  }
}

extension CacheMigrator {
  /// Walks the kept folder `source` (without following links) and sorts what is still in it
  /// by why the merge left it.
  public func leftovers(in source: String) -> MigrationLeftovers {
    var leftovers = MigrationLeftovers()
    guard let enumerator = FileManager.default.enumerator(atPath: source) else { return leftovers }
    while let relativePath = enumerator.nextObject() as? String {
      guard let attributes = try? FileSystem.attributes(atPath: source + "/" + relativePath),
        !attributes.isDirectory
      else { continue }
      let name = (relativePath as NSString).lastPathComponent
      if relativePath.split(separator: "/").contains(where: { $0.hasPrefix(".") }) {
        leftovers.hidden.add(attributes.size)
      } else if !attributes.isRegularFile {
        leftovers.notRegularFiles.add(attributes.size)
      } else if let shard, !shard.ownsFile(named: name) {
        leftovers.otherShards.add(attributes.size)
      } else {
        leftovers.notMoved.add(attributes.size)
      }
    }
    return leftovers
  }

  /// How many files of the namespace carry a legacy name (``CacheFileName/isLegacyName(_:)``),
  /// counting, in a dry run, those that the merge of `sources` would bring in.
  public func legacyNameCount(mergedFrom sources: [String], dryRun: Bool) throws -> Int {
    var count = 0
    let roots = [location.diskCachePath] + (dryRun ? sources : [])
    for root in roots {
      try CacheScanner(root: root).forEachFile { file in
        if CacheFileName.isLegacyName(file.name),
          shard.map({ $0.ownsFile(named: file.name) }) ?? true
        {
          count += 1
        }
        return true
      }
    }
    return count
  }
}
