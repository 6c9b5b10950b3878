import Core
import Foundation

/// What makes two loads one download: the prefetcher coalesces loads whose keys are equal (SD
/// coalesces them too), so a field belongs here when it changes what is sent to the origin or
/// what is stored, and only then (as Nuke's `ImageRequest` keys do). Two loads that differ in
/// any of them are two downloads, even for the same URL.
///
/// Left out on purpose: the priority and the timeout (they change when and how long, not what),
/// `fromLoaderOnly` (it skips the cache query, which is over by the time a load is coalesced) and
/// the variant, which the cache key already encodes.
package struct LoadKey: Hashable, Sendable {
  /// The namespace written: another namespace is another cache and another state store.
  let namespace: String
  /// The URL fetched, as parsed.
  let url: String
  /// The key stored under (a derived key for a variant): the same URL stored under two keys is
  /// two stores.
  let cacheKey: String
  /// The request headers that go to the origin: another header (a token, `Accept`) may get
  /// other bytes or another answer.
  let headers: [String: String]
  /// Where else the headers go on a redirect: another set sends them to another server.
  let trustedOrigins: Set<Origin>
  /// Where the image (and, for a variant, its original) is stored: memory, disk or both.
  let storeCacheType: CacheType
  let originalStoreCacheType: CacheType
  /// `refreshCached`: the request is conditional (304 keeps the file) and the validators are
  /// replaced or removed after it.
  let refreshCached: Bool
  /// `retryFailed`: a success takes the URL off the blacklist.
  let retryFailed: Bool
  /// `allowInvalidSSLCertificates`: the same URL may succeed with it and fail without.
  let allowInvalidSSLCertificates: Bool
  /// `handleCookies`: the request sends and keeps cookies.
  let handleCookies: Bool

  init(namespace: String, url: URL, cacheKey: String, options: ImageOptions, context: ImageContext)
  {
    self.namespace = namespace
    self.url = url.absoluteString
    self.cacheKey = cacheKey
    headers = context.headers
    trustedOrigins = context.trustedOrigins
    storeCacheType = context.storeCacheType
    originalStoreCacheType = context.originalStoreCacheType
    refreshCached = options.contains(.refreshCached)
    retryFailed = options.contains(.retryFailed)
    allowInvalidSSLCertificates = options.contains(.allowInvalidSSLCertificates)
    handleCookies = options.contains(.handleCookies)
  }
}
