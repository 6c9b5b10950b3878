import Foundation

/// One URL that failed, in a report.
public struct FailureReport: Sendable, Codable, Equatable {
  package var url: String
  package var code: Int
  package var name: String
  package var httpStatus: Int?
  package var message: String
  package var attempts: Int
  package var blacklisted: Bool
  /// Where the URL came from, for manifest line errors.
  package var source: String?

  public init(
    url: String, code: Int, name: String, httpStatus: Int?, message: String, attempts: Int,
    blacklisted: Bool, source: String? = nil
  ) {
    self.url = url
    self.code = code
    self.name = name
    self.httpStatus = httpStatus
    self.message = message
    self.attempts = attempts
    self.blacklisted = blacklisted
    self.source = source
  }
}

/// One image downloaded in a run, with what validation learned of it (SPEC section 2, step 6).
public struct DownloadReport: Sendable, Codable, Equatable {
  package var url: String
  package var bytes: Int
  package var format: ImageFormat?
  package var width: Int?
  package var height: Int?

  public init(url: String, bytes: Int, info: ImageInfo) {
    self.url = url
    self.bytes = bytes
    format = info.format
    width = info.width
    height = info.height
  }
}

/// One variant (a thumbnail or transformed image) for a derived key (SPEC section 3): what was
/// stored under the key, or why nothing was.
public struct VariantReport: Sendable, Codable, Equatable {
  package var url: String
  package var key: String
  package var format: ImageFormat?
  package var width: Int?
  package var height: Int?
  package var bytes: Int?
  /// The original bytes were stored under the derived key (animated images, a zero
  /// thumbnail size), as SD does.
  package var originalBytes: Bool
  /// Why nothing was stored under the key, when nothing was.
  package var skipped: String?

  public init(
    url: String, key: String, format: ImageFormat? = nil, width: Int? = nil, height: Int? = nil,
    bytes: Int? = nil, originalBytes: Bool = false, skipped: String? = nil
  ) {
    self.url = url
    self.key = key
    self.format = format
    self.width = width
    self.height = height
    self.bytes = bytes
    self.originalBytes = originalBytes
    self.skipped = skipped
  }
}

/// The counts of a prefetch (SPEC section 6): what progress lines and reports show.
public struct PrefetchCounts: Sendable, Codable, Equatable {
  package var total = 0
  package var memoryHits = 0
  package var diskHits = 0
  package var downloaded = 0
  package var notModified = 0
  package var failed = 0
  package var blacklisted = 0
  package var skipped = 0
  /// Manifests and sitemaps that failed as a whole (not fetched, not opened, refused, broken):
  /// inputs, not URLs, so not in `total`; any makes the exit code 1.
  package var inputsFailed = 0
  /// Of `inputsFailed`, those that are no manifest at all (an image, binary data): the
  /// command was given the wrong thing, so the exit code is 2. Not in the report.
  package var inputsNotManifests = 0
  /// Variants stored under derived keys (thumbnails, transformed images).
  package var derived = 0
  /// In a sharded run, manifest entries that belong to other shards: not in `total`, so that
  /// the shards' totals add up to one unsharded run's.
  package var otherShards = 0
  package var bytesDownloaded: UInt64 = 0
  package var durationSeconds = 0.0
  /// The hosts that asked the run to slow down (429 or 503 with `Retry-After`), by host.
  package var hostBackoffs: [HostBackoff] = []
  /// With `--per-host-concurrency auto`: the limit each host settled at, and its spread.
  package var hostLimits: [HostLimit] = []

  /// The manifests listed no URL to try (none, or every line skipped), and none failed as a
  /// whole: a night that did nothing, though nothing failed (a shard may own no URL of a short
  /// list: its caller judges that).
  package var listedNothing: Bool { total == skipped && inputsFailed == 0 }

  package init() {}

  private enum CodingKeys: String, CodingKey {
    case total, memoryHits, diskHits, downloaded, notModified, failed, blacklisted, skipped
    case otherShards, bytesDownloaded, durationSeconds, derived, inputsFailed, hostBackoffs
    case hostLimits
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    total = try container.decode(Int.self, forKey: .total)
    memoryHits = try container.decode(Int.self, forKey: .memoryHits)
    diskHits = try container.decode(Int.self, forKey: .diskHits)
    downloaded = try container.decode(Int.self, forKey: .downloaded)
    notModified = try container.decode(Int.self, forKey: .notModified)
    failed = try container.decode(Int.self, forKey: .failed)
    blacklisted = try container.decode(Int.self, forKey: .blacklisted)
    skipped = try container.decode(Int.self, forKey: .skipped)
    // Absent from unsharded runs' reports.
    otherShards = try container.decodeIfPresent(Int.self, forKey: .otherShards) ?? 0
    // Absent from runs without variants.
    derived = try container.decodeIfPresent(Int.self, forKey: .derived) ?? 0
    // Absent from reports written before inputs were told apart from lines.
    inputsFailed = try container.decodeIfPresent(Int.self, forKey: .inputsFailed) ?? 0
    bytesDownloaded = try container.decode(UInt64.self, forKey: .bytesDownloaded)
    durationSeconds = try container.decode(Double.self, forKey: .durationSeconds)
    // Absent when no host asked the run to wait.
    hostBackoffs =
      try container.decodeIfPresent([HostBackoff].self, forKey: .hostBackoffs) ?? []
    // Absent unless the per-host limits were adaptive.
    hostLimits = try container.decodeIfPresent([HostLimit].self, forKey: .hostLimits) ?? []
  }
}

/// The per-host limit one host had with `--per-host-concurrency auto` (issue 44): where it
/// settled, its spread over the run's rounds, and why it was cut, so that an operator can set
/// a fixed number if wanted.
public struct HostLimit: Sendable, Codable, Equatable {
  package var host: String
  /// The limit when the run ended.
  package var final: Int
  /// The least and the most it had over the run, and the median of its rounds' limits.
  package var min: Int
  package var median: Int
  package var max: Int
  /// Cuts by cause: `queue` (its answers began to wait), `refused` (429, 503, a refused
  /// stream), `timeout`.
  package var cuts: [String: Int]
  /// Transfers under way when the origin refused a probe in an earlier run, still remembered
  /// (``OriginRefusal``): the limit stayed under it. `nil`: none was.
  package var heldUnder: Int?

  public init(
    host: String, final: Int, min: Int, median: Int, max: Int, cuts: [String: Int],
    heldUnder: Int? = nil
  ) {
    self.heldUnder = heldUnder
    self.host = host
    self.final = final
    self.min = min
    self.median = median
    self.max = max
    self.cuts = cuts
  }
}

/// A host that answered 429 or 503 with `Retry-After`, and how long every download of it was
/// held back for that (SPEC section 5: the wait is host-wide, not only the URL's).
public struct HostBackoff: Sendable, Codable, Equatable {
  package var host: String
  /// The answers that asked for a wait.
  package var pauses: Int
  /// How long the host's downloads were held back: each wait as asked (at most the cap on a
  /// wait), overlapping waits counted once, none past the end of the run.
  package var seconds: Double

  public init(host: String, pauses: Int, seconds: Double) {
    self.host = host
    self.pauses = pauses
    self.seconds = seconds
  }
}

/// Receives a prefetch's per-URL entries as they happen, so that a report can be streamed
/// instead of held (SPEC section 6). ``PrefetchReport`` keeps them in memory; the runner's
/// report writer writes them out.
public protocol PrefetchRecorder {
  mutating func recordDownload(_ download: DownloadReport)
  /// A variant stored, or skipped, under a derived key.
  mutating func recordVariant(_ variant: VariantReport)
  mutating func recordFailure(_ failure: FailureReport)
  /// A manifest line that could not be used (counted as skipped), as `file:line: message`.
  mutating func recordLineError(_ message: String)
  /// A manifest or sitemap that failed as a whole (counted in `inputsFailed`), as
  /// `input[:line]: message`.
  mutating func recordInputFailure(_ message: String)
  /// What a dry run's planning prefetch would do with one URL (SPEC section 2, steps 1-4).
  mutating func recordPlanned(_ planned: PlannedURL)
}

extension PrefetchRecorder {
  /// A run's recorder keeps no plan: only a planning prefetch plans.
  public mutating func recordPlanned(_ planned: PlannedURL) {}
}

/// The prefetch part of a report, held in memory: what a decoded report holds. The
/// counts sit beside the lists in JSON, and read as if they were its own properties.
@dynamicMemberLookup
public struct PrefetchReport: Sendable, Codable, Equatable, PrefetchRecorder {
  package var counts = PrefetchCounts()
  package var failures: [FailureReport] = []
  /// Every image downloaded, with its format and dimensions (hits are only counted).
  package var downloads: [DownloadReport] = []
  /// Every variant made or skipped for a derived key.
  package var variants: [VariantReport] = []
  package var blacklistedURLs: [String] = []
  /// Manifest lines that could not be used (counted as skipped), as `file:line: message`.
  package var lineErrors: [String] = []
  /// Manifests and sitemaps that failed as a whole, as `input[:line]: message`.
  package var inputFailures: [String] = []

  package init() {}

  public subscript<T>(dynamicMember keyPath: WritableKeyPath<PrefetchCounts, T>) -> T {
    get { counts[keyPath: keyPath] }
    set { counts[keyPath: keyPath] = newValue }
  }

  private enum CodingKeys: String, CodingKey {
    case failures, downloads, variants, blacklistedURLs, lineErrors, inputFailures
  }

  public init(from decoder: any Decoder) throws {
    counts = try PrefetchCounts(from: decoder)
    let container = try decoder.container(keyedBy: CodingKeys.self)
    failures = try container.decode([FailureReport].self, forKey: .failures)
    downloads = try container.decodeIfPresent([DownloadReport].self, forKey: .downloads) ?? []
    variants = try container.decodeIfPresent([VariantReport].self, forKey: .variants) ?? []
    blacklistedURLs = try container.decode([String].self, forKey: .blacklistedURLs)
    lineErrors = try container.decodeIfPresent([String].self, forKey: .lineErrors) ?? []
    inputFailures = try container.decodeIfPresent([String].self, forKey: .inputFailures) ?? []
  }

  public func encode(to encoder: any Encoder) throws {
    try counts.encode(to: encoder)
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(failures, forKey: .failures)
    try container.encode(downloads, forKey: .downloads)
    try container.encode(variants, forKey: .variants)
    try container.encode(blacklistedURLs, forKey: .blacklistedURLs)
    try container.encode(lineErrors, forKey: .lineErrors)
    try container.encode(inputFailures, forKey: .inputFailures)
  }

  public mutating func recordDownload(_ download: DownloadReport) { downloads.append(download) }
  public mutating func recordVariant(_ variant: VariantReport) { variants.append(variant) }
  public mutating func recordFailure(_ failure: FailureReport) { failures.append(failure) }
  public mutating func recordLineError(_ message: String) { lineErrors.append(message) }
  public mutating func recordInputFailure(_ message: String) { inputFailures.append(message) }
}
