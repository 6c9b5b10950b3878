import Foundation

/// What a prefetch would do with one URL: `--dry-run`'s plan, decided from the cache, the
/// blacklist and the URL alone, without a request (SPEC section 2's steps 1-4).
public enum PlannedAction: String, Sendable, Codable, CaseIterable {
  /// In the cache: on disk under its current or legacy name, or, for a derived key, the
  /// original the variant would be made from.
  case hit
  case download
  /// In the cache, with `refreshCached`: a conditional request.
  case revalidate
  /// On the blacklist (within its TTL): refused without a request.
  case blacklisted
  /// Not an http(s) URL with a host: the run would fail it, and blacklist it as SD does.
  case invalid
  /// Not in the cache, with `fromCacheOnly`: skipped, nothing downloaded.
  case miss
  /// The run would fail it before any request: its namespace's state or the cache cannot be
  /// read (the reason says which).
  case failed
}

/// One URL of a prefetch's plan.
public struct PlannedURL: Sendable, Codable, Equatable {
  package var url: String
  package var action: PlannedAction
  /// Why, for an `invalid` or a `failed` URL.
  package var reason: String?
  /// `file:line`.
  package var source: String?

  public init(url: String, action: PlannedAction, reason: String? = nil, source: String? = nil) {
    self.url = url
    self.action = action
    self.reason = reason
    self.source = source
  }
}

/// The counts of a prefetch's plan, one per ``PlannedAction`` plus the bad lines.
public struct PrefetchPlanCounts: Sendable, Codable, Equatable {
  /// Every manifest entry of this shard, bad lines included.
  package var total = 0
  package var hit = 0
  package var download = 0
  package var revalidate = 0
  package var blacklisted = 0
  package var invalid = 0
  package var miss = 0
  package var failed = 0
  /// Bad manifest lines, as a run skips them.
  package var skipped = 0
  /// Manifests and sitemaps that could not be read as a whole: not in `total`.
  package var inputsFailed = 0

  public init() {}

  private enum CodingKeys: String, CodingKey {
    case total, hit, download, revalidate, blacklisted, invalid, miss, failed, skipped
    case inputsFailed
  }

  /// Reads reports of every version: `failed` came later, and is 0 in one without it.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    func count(_ key: CodingKeys) throws -> Int { try container.decode(Int.self, forKey: key) }
    total = try count(.total)
    hit = try count(.hit)
    download = try count(.download)
    revalidate = try count(.revalidate)
    blacklisted = try count(.blacklisted)
    invalid = try count(.invalid)
    miss = try count(.miss)
    failed = try container.decodeIfPresent(Int.self, forKey: .failed) ?? 0
    skipped = try count(.skipped)
    inputsFailed = try count(.inputsFailed)
  }

  package mutating func count(_ action: PlannedAction) {
    total += 1
    switch action {
    case .hit: hit += 1
    case .download: download += 1
    case .revalidate: revalidate += 1
    case .blacklisted: blacklisted += 1
    case .invalid: invalid += 1
    case .miss: miss += 1
    case .failed: failed += 1
    }
  }
}

/// A dry run's prefetch plan in a report (`prefetch --dry-run`, `run --dry-run`): what each URL
/// would do, in manifest order. Held in memory, it records a planning prefetch.
public struct PrefetchPlan: Sendable, Codable, Equatable, PrefetchRecorder {
  package var counts = PrefetchPlanCounts()
  package var urls: [PlannedURL] = []
  package var lineErrors: [String] = []
  package var inputFailures: [String] = []

  package init() {}

  public mutating func recordPlanned(_ planned: PlannedURL) { urls.append(planned) }
  public mutating func recordLineError(_ message: String) { lineErrors.append(message) }
  public mutating func recordInputFailure(_ message: String) { inputFailures.append(message) }

  // A plan requests nothing: it has no download, variant or failure.
  public mutating func recordDownload(_ download: DownloadReport) {}
  public mutating func recordVariant(_ variant: VariantReport) {}
  public mutating func recordFailure(_ failure: FailureReport) {}
}
