import Foundation

/// Where a cache lives: the disk cache directory (which holds namespaces) and a namespace.
/// The disk cache path is `<directory>/<namespace>` (SPEC section 1).
public struct CacheLocation: Sendable, Equatable, Codable {
  /// The folder SD calls the disk cache directory, e.g. `~/.cache/com.hackemist.SDImageCache`.
  package var directory: String
  /// The sub-folder for one cache; SD's default is `default`.
  package var namespace: String

  public static let defaultNamespace = "default"
  package static let directoryName = "com.hackemist.SDImageCache"

  public init(directory: String, namespace: String = CacheLocation.defaultNamespace) {
    self.directory = directory
    self.namespace = namespace
  }

  /// Why `name` cannot be a namespace, or `nil` when it can: a namespace becomes a folder name,
  /// so it must be one path component with no control characters (SPEC section 10). The one
  /// rule for job files, manifest lines and the command line, and for every other name that
  /// becomes part of a path (a job's name in `{job}`).
  package static func namespaceProblem(_ name: String) -> String? {
    pathComponentProblem(name)
  }

  /// Why `name` cannot be one component of a path the tool makes, or `nil` when it can.
  package static func pathComponentProblem(_ name: String) -> String? {
    if name.isEmpty || name == "." || name == ".." {
      return "must be a single folder name, not \(name.debugDescription)"
    }
    if name.contains("/") { return "must be a single folder name without '/'" }
    if name.containsControlCharacter() {
      return "must not hold control characters"
    }
    return nil
  }

  /// `<directory>/<namespace>`.
  public var diskCachePath: String {
    (directory as NSString).appendingPathComponent(namespace)
  }

  /// The tool's own hidden state folder inside the disk cache path (SPEC section 8).
  public var stateDirectory: String {
    (diskCachePath as NSString).appendingPathComponent(".imagecache")
  }

  /// `$XDG_CACHE_HOME/com.hackemist.SDImageCache`, falling back to
  /// `~/.cache/com.hackemist.SDImageCache` when `XDG_CACHE_HOME` is unset or empty.
  package static func defaultDirectory(
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) -> String {
    let base: String
    if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty {
      base = xdg
    } else {
      let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
      base = (home as NSString).appendingPathComponent(".cache")
    }
    return (base as NSString).appendingPathComponent(directoryName)
  }
}

/// Totals over the files of a disk cache, hidden entries excluded.
public struct DiskUsage: Sendable, Equatable {
  package var fileCount = 0
  package var logicalBytes: UInt64 = 0
  package var allocatedBytes: UInt64 = 0

  package init() {}
}

/// The disk tier, laid out exactly as SD's `SDDiskCache`: one file a key, named by
/// ``CacheFileName``, in one folder. It knows nothing of HTTP.
public struct DiskCache: Sendable {
  /// The disk cache path (`<directory>/<namespace>`).
  package let path: String

  package init(path: String) {
    self.path = path
  }

  public init(location: CacheLocation) {
    self.init(path: location.diskCachePath)
  }

  /// Where `key` is stored under the current naming scheme.
  package func cachePath(forKey key: String) -> String {
    path + "/" + CacheFileName.fileName(forKey: key)
  }

  /// `key`'s paths, worked out once (one MD5, one URL parse) for the several calls a load
  /// makes: the current name, and the legacy name without extension when it differs.
  public struct KeyPaths: Sendable {
    package let current: String
    /// SD's fallback: the name without extension (SD 3.7.3 and earlier, and SD 5 still reads
    /// it), when it differs from the current one.
    package let fallback: String?

    /// The current name, then the legacy one: the order every lookup tries them in.
    package var candidates: [String] { fallback.map { [current, $0] } ?? [current] }
  }

  /// - Parameter parsedKey: `URL(string: key)`, when the caller has parsed `key` already (a
  ///   key is usually the URL just downloaded, and parsing is most of what a name costs).
  public func paths(forKey key: String, parsedKey: URL? = nil) -> KeyPaths {
    let digest = CacheFileName.md5Hex(key)
    let name = CacheFileName.join(
      digest, CacheFileName.currentExtension(forKey: key, parsedKey: parsedKey))
    let fallback = path + "/" + digest
    guard name != digest else { return KeyPaths(current: fallback, fallback: nil) }
    return KeyPaths(current: path + "/" + name, fallback: fallback)
  }

  /// ``touch(forKey:)`` with the paths already worked out.
  public func touch(_ paths: KeyPaths) throws -> Bool {
    if try FileSystem.setAccessTimeToNow(path: paths.current) { return true }
    if let fallback = paths.fallback { return try FileSystem.setAccessTimeToNow(path: fallback) }
    return false
  }

  /// ``touch(_:)`` for a caller that needs to know which file it touched (a revalidation, whose
  /// file learns its URL): the current name's path, else the legacy one's, else `nil`. Hits
  /// keep ``touch(_:)``, which the release build inlines.
  package func touchedPath(_ paths: KeyPaths) throws -> String? {
    if try FileSystem.setAccessTimeToNow(path: paths.current) { return paths.current }
    guard let fallback = paths.fallback, try FileSystem.setAccessTimeToNow(path: fallback) else {
      return nil
    }
    return fallback
  }

  /// ``store(_:forKey:)`` with the paths already worked out, into a cache folder that exists:
  /// the pipeline's store, under a run's lock (which made the folder). A folder that is gone
  /// is an error (`ENOENT`, `ENOTDIR`) that ends the run, never made again in silence.
  package func store(_ data: Data, at paths: KeyPaths) throws {
    try FileSystem.writeAtomically(data, toPath: paths.current, createsFolder: false)
  }

  /// The path holding `key`'s data (the current name, else the legacy name without extension),
  /// or `nil`.
  public func existingPath(forKey key: String) throws -> String? {
    for candidate in paths(forKey: key).candidates {
      if let attributes = try FileSystem.attributes(atPath: candidate), attributes.isRegularFile {
        return candidate
      }
    }
    return nil
  }

  /// Whether `key` is on disk, under its current or its legacy name. Not a hit: the access time
  /// is left alone.
  public func containsData(forKey key: String) throws -> Bool {
    try existingPath(forKey: key) != nil
  }

  /// Reads `key`'s data, falling back to the legacy name without extension, and sets the file's
  /// access time to now on a hit.
  package func data(forKey key: String) throws -> Data? {
    guard let (data, path) = try read(forKey: key) else { return nil }
    try FileSystem.setAccessTimeToNow(path: path)
    return data
  }

  /// `key`'s bytes and the file they came from (the current name, else the legacy name),
  /// leaving its access time alone. A file that is there but cannot be read is thrown, never
  /// taken for a miss: a miss would download and store over it.
  func read(forKey key: String, paths: KeyPaths? = nil) throws(FileSystemError) -> (
    data: Data, path: String
  )? {
    for candidate in (paths ?? self.paths(forKey: key)).candidates {
      if let data = try FileSystem.contents(atPath: candidate) { return (data, candidate) }
    }
    return nil
  }

  /// Records a hit without reading the data: sets the access time of `key`'s file to now.
  /// Returns `false` on a miss. One system call on the common path, which is what keeps a warm
  /// run close to `touch -a`.
  public func touch(forKey key: String) throws -> Bool {
    try touch(paths(forKey: key))
  }

  /// Stores `data` under `key`'s current name, atomically (SPEC section 1).
  package func store(_ data: Data, forKey key: String) throws {
    try FileSystem.writeAtomically(data, toPath: cachePath(forKey: key))
  }

  /// Removes `key`'s file under its current name and its legacy fallback name, so that a
  /// later read cannot find stale data. Returns whether anything was removed.
  @discardableResult
  package func removeData(forKey key: String) throws -> Bool {
    var removed = false
    for candidate in paths(forKey: key).candidates {
      if try FileSystem.removeFile(path: candidate) { removed = true }
    }
    return removed
  }

  /// Removes every non-hidden entry of the disk cache path. Unlike SD, which deletes the whole
  /// folder, the tool's hidden `.imagecache/` state is kept.
  package func removeAllData() throws {
    let entries: [String]
    do {
      entries = try FileManager.default.contentsOfDirectory(atPath: path)
    } catch CocoaError.fileReadNoSuchFile {
      return
    }
    for entry in entries where !entry.hasPrefix(".") {
      let entryPath = path + "/" + entry
      do {
        try FileManager.default.removeItem(atPath: entryPath)
      } catch {
        throw FileSystemError("remove", path: entryPath, underlying: error)
      }
    }
  }

  /// File count and logical and allocated bytes of every regular, non-hidden file.
  /// With `shard`, only the files that shard owns (``Shard/ownsFile(named:)``): the shards of a
  /// fleet count each file once, so that their figures add up to the cache's.
  package func usage(shard: Shard? = nil) throws -> DiskUsage {
    var usage = DiskUsage()
    try CacheScanner(root: path).forEachFile { file in
      if let shard, !shard.ownsFile(named: file.name) { return true }
      usage.fileCount += 1
      usage.logicalBytes += file.attributes.size
      usage.allocatedBytes += file.attributes.allocatedSize
      return true
    }
    return usage
  }
}
