import Foundation

/// One URL on the failed-URL blacklist (SPEC section 2). Unlike SD's in-memory set it persists
/// across runs and remembers when and why the URL failed. A plain value here, so that the
/// pipeline can hold and pass it without a database; the State module stores it.
public struct BlacklistEntry: Codable, Sendable, Equatable {
  package var url: String
  package var code: Int
  package var name: String
  package var reason: String
  package var firstFailedAt: Date
  package var lastFailedAt: Date
  package var failureCount: Int

  public init(
    url: String, code: Int, name: String, reason: String, firstFailedAt: Date,
    lastFailedAt: Date, failureCount: Int
  ) {
    self.url = url
    self.code = code
    self.name = name
    self.reason = reason
    self.firstFailedAt = firstFailedAt
    self.lastFailedAt = lastFailedAt
    self.failureCount = failureCount
  }

  /// Whether the entry still counts at `now`, given an optional time-to-live after the last
  /// failure.
  public func isActive(at now: Date, timeToLive: TimeInterval?) -> Bool {
    BlacklistRule.isActive(lastFailedAt: lastFailedAt, at: now, timeToLive: timeToLive)
  }
}

/// The HTTP validators stored for a cache key, used by `refreshCached` to revalidate
/// (SPEC section 3).
public struct CacheValidators: Codable, Sendable, Equatable {
  package var cacheKey: String
  package var etag: String?
  package var lastModified: String?
  package var updatedAt: Date

  public init(cacheKey: String, etag: String?, lastModified: String?, updatedAt: Date) {
    self.cacheKey = cacheKey
    self.etag = etag
    self.lastModified = lastModified
    self.updatedAt = updatedAt
  }
}
