import Core
import Foundation

/// How prefetching runs (SPEC sections 2 and 5): the one configuration value that the
/// downloader, the manager and the prefetcher read, each default stated here once. Job files
/// (`prefetch:`) and the command-line flags of the same names both set it.
public struct PrefetchConfiguration: Sendable, Equatable {
  /// Downloads at once in total.
  public var concurrency = 16
  /// Downloads (and connections) at once to one host: SD's downloader default.
  public var perHostConcurrency = 6
  /// Further attempts after a transient failure (timeouts, connection errors, 429, 502-504).
  public var retries = 2
  /// The first retry waits about this long; each further one twice as long (with jitter).
  public var retryBaseDelay: TimeInterval = 0.5
  /// No wait between attempts, `Retry-After` included, is longer than this.
  public var maxRetryDelay: TimeInterval = 60
  /// Connect timeout and idle timeout between bytes (SD's `downloadTimeout`).
  public var timeout: TimeInterval = 15
  /// The most one download may take from request to last byte.
  public var deadline: TimeInterval = 60
  /// A larger body fails with `responseTooLarge` and nothing is kept.
  public var maxResponseSize: UInt64 = 50 * 1024 * 1024
  public var maxRedirects = 10
  /// How a body is checked before it is stored.
  public var validation: ValidationLevel = .structure
  /// An image with more pixels is `badImageData`, refused before any pixel is decoded: no
  /// header may make validation allocate gigabytes.
  public var maxPixels = 100_000_000
  /// A blacklisted URL counts as blacklisted for this long after its last failure; `nil`:
  /// forever.
  public var blacklistTTL: TimeInterval?
  public var userAgent = "imagecache/\(ImageCacheVersion.current)"
  /// Take only this shard's URLs (SPEC section 9); `nil`: every URL.
  public var shard: Shard?
  /// Downloads at once to one host by a whole fleet of N shards: each shard takes
  /// ``perHostShare(ofFleet:shards:)`` of it in place of `perHostConcurrency` (which is per
  /// worker: N workers open N times as many). `nil`: each takes `perHostConcurrency`.
  public var fleetPerHostConcurrency: Int?

  /// Requests a second that one host is sent at most, by this worker: downloads of a host
  /// start at least `1 / rate` seconds apart (redirect hops are not delayed). `nil`: no limit.
  public var requestsPerSecondPerHost: Double?
  /// Bytes a second that the run's downloads receive in all, at most: bodies as they arrive
  /// (after decompression), held to the cap within one read (up to 100 KiB) at any moment and
  /// on average over a second or more. `nil`: no cap. A cap too low for `deadline` fails
  /// downloads as timed out.
  public var maxBytesPerSecond: UInt64?
  /// When a download gets 429 or 503 with `Retry-After`, every download of that host waits
  /// until then (at most `maxRetryDelay`), not only that URL's next attempt.
  public var hostBackoff = true

  /// One of `shards` workers' part of a fleet-wide per-host limit: `fleet / shards` rounded
  /// down, so that the fleet stays within `fleet`, but at least 1, so that every shard makes
  /// progress (then, with more shards than `fleet`, the fleet opens one per shard).
  public static func perHostShare(ofFleet fleet: Int, shards: Int) -> Int {
    max(1, fleet / max(1, shards))
  }

  public init() {}

  /// What `concurrency` and `perHostConcurrency` may be set to: past it, file descriptors and
  /// memory run out long before downloads go faster (SPEC section 7: numbers are
  /// range-checked).
  public static let concurrencyRange = 1...10_000
  /// What `retries` may be set to.
  public static let retriesRange = 0...100
  /// What `maxPixels` may be set to: a terapixel.
  public static let maxPixelsRange = 1...1_000_000_000_000
}
