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

  /// The longest `ETag` or `Last-Modified` value kept. Real ones are tens of bytes; an origin
  /// may send up to the header limit (100 KiB) with every image, each kept in the state file,
  /// which no size limit trims: 2,000 tiny images with a 90 KB `ETag` made a 174 MB state
  /// file. A longer value is not kept, and its URL is downloaded again, not revalidated.
  package static let maxValueLength = 1024

  /// `value`, unless it is longer than ``maxValueLength``.
  package static func kept(_ value: String?) -> String? {
    value.flatMap { $0.utf8.count <= maxValueLength ? $0 : nil }
  }

  public init(cacheKey: String, etag: String?, lastModified: String?, updatedAt: Date) {
    self.cacheKey = cacheKey
    self.etag = etag
    self.lastModified = lastModified
    self.updatedAt = updatedAt
  }
}

/// Which URL a cache file was downloaded from (issue 45): written when a download is stored, so
/// that `verify` can name the URL of a bad file and `--repair refetch` download it again. Keyed
/// by the file's name in its namespace folder, which is what an audit of the folder meets (a
/// name cannot be turned back into its key). The URL's password is masked, as everywhere in the
/// state (SPEC section 11).
public struct StoredURL: Sendable, Equatable {
  /// The file's name in the namespace folder (SD 5's: the key's MD5 and extension).
  public var fileName: String
  public var url: String
  public var storedAt: Date

  public init(fileName: String, url: String, storedAt: Date) {
    self.fileName = fileName
    self.url = url
    self.storedAt = storedAt
  }
}
