import Foundation

/// SD's `SDImageCacheType`, used both for where to query and where to store
/// (`queryCacheType`, `storeCacheType`; SPEC section 3).
public enum CacheType: String, Sendable, Codable, CaseIterable {
  case none
  case disk
  case memory
  case all

  package var includesMemory: Bool { self == .memory || self == .all }
  package var includesDisk: Bool { self == .disk || self == .all }

  /// The same tiers but the disk.
  public var withoutDisk: CacheType {
    switch self {
    case .all: .memory
    case .disk: .none
    default: self
    }
  }
}

/// Where a query found its data.
public enum CacheHitSource: String, Sendable, Codable {
  case memory
  case disk
}

/// A cache hit: the data (when it was read) and the tier it came from.
public struct CacheHit: Sendable {
  package var source: CacheHitSource
  package var data: Data?

  public init(source: CacheHitSource, data: Data?) {
    self.source = source
    self.data = data
  }
}

/// The two tiers behind one facade, as SD's `SDImageCache`: memory first, then disk.
public struct ImageCache: Sendable {
  package let memory: MemoryCache
  package let disk: DiskCache

  public init(memory: MemoryCache, disk: DiskCache) {
    self.memory = memory
    self.disk = disk
  }

  /// Looks `key` up in the tiers `cacheType` allows, memory first, and says where it was found.
  ///
  /// With `readData` false a disk hit only sets the file's access time (the prefetcher needs
  /// to know that the image is there, not its bytes). With it true the bytes are read, and a
  /// disk hit is recorded in memory when `promoteToMemory` is set, as SD does (as an
  /// ``MemoryEntry/onDisk`` entry: the bytes stay the disk's).
  public func query(
    key: String, cacheType: CacheType = .all, readData: Bool = true,
    promoteToMemory: Bool = true, paths: DiskCache.KeyPaths? = nil
  ) throws -> CacheHit? {
    switch cacheType.includesMemory ? memory.entry(forKey: key) : nil {
    case .data(let data):
      return CacheHit(source: .memory, data: data)
    case .onDisk:
      guard readData else { return CacheHit(source: .memory, data: nil) }
      // The bytes are the disk tier's (a memory hit, as in SD, so the access time stays),
      // under whichever name the disk hit that recorded the entry had.
      if let (data, _) = try disk.read(forKey: key, paths: paths) {
        return CacheHit(source: .memory, data: data)
      }
      // The file went (another process removed it): the entry goes with it.
      memory.removeData(forKey: key)
    case nil:
      break
    }
    guard cacheType.includesDisk else { return nil }
    if !readData {
      let hit = try paths.map(disk.touch) ?? disk.touch(forKey: key)
      return hit ? CacheHit(source: .disk, data: nil) : nil
    }
    guard let data = try disk.data(forKey: key) else { return nil }
    if promoteToMemory && cacheType.includesMemory {
      memory.setOnDisk(forKey: key, cost: data.count)
    }
    return CacheHit(source: .disk, data: data)
  }

  /// Stores `data` in the tiers `cacheType` names. With both, the memory tier records the
  /// image once the file is written, without a copy of its bytes.
  /// - Parameter spilled: the file in the disk cache's folder that holds `data` (a download
  ///   over the memory buffer): the disk tier renames it into place instead of writing a copy.
  package func store(
    _ data: Data, forKey key: String, cacheType: CacheType = .all,
    paths: DiskCache.KeyPaths? = nil, spilled: SpilledBody? = nil
  ) throws {
    guard cacheType.includesDisk else {
      if cacheType.includesMemory { memory.setData(data, forKey: key) }
      return
    }
    if let spilled {
      try spilled.moveIntoPlace(at: paths?.current ?? disk.cachePath(forKey: key))
    } else if let paths {
      try disk.store(data, at: paths)
    } else {
      try disk.store(data, forKey: key)
    }
    if cacheType.includesMemory { memory.setOnDisk(forKey: key, cost: data.count) }
  }

  /// Removes `key` from both tiers.
  package func removeData(forKey key: String) throws {
    memory.removeData(forKey: key)
    try disk.removeData(forKey: key)
  }
}
