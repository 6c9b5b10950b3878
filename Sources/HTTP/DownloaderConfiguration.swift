import Core
import Foundation

/// How the downloader reaches origins (SPEC section 5): its limits in all and per host, its
/// timeouts and sizes, its headers and connections. Knows nothing of SD or caches; the
/// prefetch's ``PrefetchConfiguration`` holds one.
public struct DownloaderConfiguration: Sendable, Equatable {
  /// Downloads at once in total. Over HTTP/1.1 a host gets what its adaptive limit finds
  /// (`adaptivePerHost`, the default) or `perHostConcurrency`; over HTTP/2 `perHostStreams`,
  /// which is this by default: 256 streams to one CDN (on more than one connection when its
  /// server caps the streams a connection may carry) match wget2's defaults (5 connections of
  /// 30 streams) out of the box, where curl's `--parallel` 50 took 3x as long
  /// (docs/benchmarks.md, "Ahead of wget2 where users are").
  public var concurrency = 256
  /// Connections at once to one host, and so downloads at once to a host that answers over
  /// HTTP/1.1, where each download needs a connection of its own: a fixed number (SD's
  /// downloader takes ``sdPerHostConcurrency``), or `nil`, the default, for an adaptive limit
  /// (`--per-host-concurrency auto`, ``adaptivePerHost``).
  public var perHostConcurrency: Int?
  /// SD's downloader's connections at once to one host, which imagecache kept before the
  /// adaptive limit (issue 44).
  public static let sdPerHostConcurrency = 6
  /// Downloads at once to one host that multiplexes them over HTTP/2 (streams on its
  /// connections, which stay within libcurl's per-host connection cap (`HostTable.connectionCap`)
  /// and the server's `SETTINGS_MAX_CONCURRENT_STREAMS`). `nil`: up to `concurrency`. A host
  /// counts as HTTP/2 from its first answer over it; until its first answer it gets the lower
  /// of this and its limit over HTTP/1.1 (`perHostConcurrency`, or its adaptive limit).
  public var perHostStreams: Int?
  /// `--per-host-concurrency auto`, the default (issue 44; `perHostConcurrency` unset): the
  /// limit of each origin that answers over HTTP/1.1, or has not answered yet, is found as the
  /// run goes (``AdaptiveLimit``: from 4, up while its answers start as fast as they did, down
  /// when they queue or it refuses), up to `maxPerHostConcurrency`.
  public var adaptivePerHost: Bool { perHostConcurrency == nil }
  /// `--per-host-streams auto`: so is the limit of each origin that answers over HTTP/2, in
  /// place of `perHostStreams`.
  public var adaptiveStreams = false
  /// The most an adaptive per-host limit may reach (`--max-per-host-concurrency`); `nil`:
  /// `concurrency`.
  public var maxPerHostConcurrency: Int?
  /// Earlier runs' refusals of probes of an adaptive limit, still remembered
  /// (``OriginRefusal``): each origin's adaptive limit stays under its own. Unused with fixed
  /// limits.
  public var rememberedRefusals: [OriginRefusal] = []
  /// The first retry waits about this long; each further one twice as long (with jitter). A
  /// host that refused an HTTP/2 stream is held back about this long.
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
  public var userAgent = "imagecache/\(ImageCacheVersion.current)"
  /// Which servers are trusted and how they are reached: the same for image downloads and
  /// for sitemap and manifest fetches.
  public var connection = Connection()
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

  public init() {}

  /// Whether some origin's limit may be adaptive: over HTTP/1.1, over HTTP/2, or both.
  public var adapts: Bool { adaptivePerHost || adaptiveStreams }

  /// The most downloads at once to one host that multiplexes: `perHostStreams`, or
  /// `concurrency` when unset.
  public var streamsPerHost: Int { perHostStreams ?? concurrency }

  /// What `concurrency`, `perHostConcurrency` and `perHostStreams` may be set to: past it, file
  /// descriptors and memory run out long before downloads go faster (SPEC section 7: numbers
  /// are range-checked).
  public static let concurrencyRange = 1...10_000
}
