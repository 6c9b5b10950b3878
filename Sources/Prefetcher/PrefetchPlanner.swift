import Core
import Foundation
import Pipeline

/// Decides what a prefetch would do with each URL without doing it: `--dry-run`'s plan. It
/// takes the decisions of ``ImageManager/prepare(_:options:context:parsed:)`` in the same order
/// (blacklist, URL check, cache keys, cache lookup), but only reads: no request, no access time
/// set (a hit is found with `stat`, not recorded), no state or cache folder created. The memory
/// tier is a run's own and empty before it starts, so only the disk is looked at.
public final class PrefetchPlanner {
  private let directory: String
  private let defaultNamespace: String
  private let timeToLive: TimeInterval?
  private let now: Date
  /// Each namespace's blacklist, read once from all of its state files (every shard's), as a
  /// run reads it.
  private var blacklists: [String: [String: Date]] = [:]
  /// Reads a namespace's blacklist from all its state files, leaving no trace.
  private let readBlacklist: (CacheLocation) throws -> [BlacklistEntry]

  /// - Parameters:
  ///   - timeToLive: the blacklist TTL of the run planned (`blacklistTTL`).
  ///   - blacklist: reads the blacklist of a namespace's every state file without writing
  ///     anything (the runner's reads the state store's files).
  public init(
    location: CacheLocation, timeToLive: TimeInterval?, now: Date = Date(),
    blacklist: @escaping (CacheLocation) throws -> [BlacklistEntry]
  ) {
    readBlacklist = blacklist
    directory = location.directory
    defaultNamespace = location.namespace
    self.timeToLive = timeToLive
    self.now = now
  }

  /// The plan for one URL of a manifest. Throws when a namespace's state cannot be read.
  public func plan(_ item: PrefetchItem) throws -> PlannedURL {
    let rawURL = item.url
    let trimmed = rawURL.trimmingWhitespace(keepingLineBreaks: true)
    let location = CacheLocation(
      directory: directory, namespace: item.context.namespace ?? defaultNamespace)
    func planned(_ action: PlannedAction, _ reason: String? = nil) -> PlannedURL {
      PlannedURL(url: rawURL, action: action, reason: reason, source: item.source)
    }
    let parsed = (trimmed == rawURL ? item.parsedURL : nil) ?? URL(string: trimmed)
    let blacklistKey = (parsed?.absoluteString ?? trimmed).maskingURLPasswords
    if !item.options.contains(.retryFailed),
      let lastFailure = try blacklist(of: location)[blacklistKey],
      BlacklistRule.isActive(lastFailedAt: lastFailure, at: now, timeToLive: timeToLive)
    {
      return planned(.blacklisted)
    }
    let url: URL
    switch ImageManager.fetchableURL(trimmed, parsed: parsed) {
    case .success(let checked): url = checked
    case .failure(.invalidURL(_, let reason)): return planned(.invalid, reason)
    case .failure(let error): return planned(.invalid, error.message)
    }
    let (originalKey, key) = ImageManager.cacheKeys(for: url, context: item.context)
    let options = item.options
    let context = item.context
    if !options.contains(.fromLoaderOnly) {
      let disk = DiskCache(location: location)
      if context.queryCacheType.includesDisk, try disk.containsData(forKey: key) {
        return planned(
          options.contains(.refreshCached) && !options.contains(.fromCacheOnly)
            ? .revalidate : .hit)
      }
      // The variant would be made from the original in the cache: no request either.
      if key != originalKey && context.originalQueryCacheType.includesDisk,
        try disk.containsData(forKey: originalKey)
      {
        return planned(.hit)
      }
      if options.contains(.fromCacheOnly) { return planned(.miss) }
    }
    return planned(.download)
  }

  private func blacklist(of location: CacheLocation) throws -> [String: Date] {
    if let known = blacklists[location.namespace] { return known }
    let entries = try readBlacklist(location)
    let blacklist = Dictionary(
      entries.map { ($0.url, $0.lastFailedAt) }, uniquingKeysWith: max)
    blacklists[location.namespace] = blacklist
    return blacklist
  }
}
