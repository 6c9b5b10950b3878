import Foundation

/// Which file date maintenance compares, SD's `SDImageCacheConfigExpireType` (SPEC section 4).
public enum ExpireType: String, Sendable, Codable, CaseIterable {
  case accessDate
  case modificationDate
  case creationDate
  /// The inode change time (ctime), SD's NSURLAttributeModificationDateKey.
  case changeDate
}

/// The limits the expire and trim passes ran with, as a report states them (SD's
/// `maxDiskAge`, `maxDiskSize` and `expireType`; SPEC section 4): what a person reading the
/// report needs to tell a pass that deleted by age from one that trimmed by size.
public struct CleanupLimits: Sendable, Codable, Equatable {
  /// Seconds; negative: the expire pass was off (not listed, or a negative age).
  public var maxDiskAge: Double
  /// Bytes; zero: the trim pass was off (not listed, or no size).
  public var maxDiskSize: UInt64
  public var expireType: ExpireType

  public init(maxDiskAge: Double, maxDiskSize: UInt64, expireType: ExpireType) {
    self.maxDiskAge = maxDiskAge
    self.maxDiskSize = maxDiskSize
    self.expireType = expireType
  }
}

/// One thing a maintenance pass did, or would do under `--dry-run`.
public struct MaintenanceAction: Sendable, Codable, Equatable {
  public enum Kind: String, Sendable, Codable {
    case delete
    case move
    /// A name collision: the older file was kept aside instead of overwriting the newer one.
    case keptAside
  }

  public var kind: Kind
  /// The file, relative to the disk cache path when it is inside it.
  public var path: String
  /// Where it goes, for moves.
  public var destination: String?
  public var bytes: UInt64
  public var date: Date?

  public init(
    kind: Kind, path: String, destination: String? = nil, bytes: UInt64, date: Date? = nil
  ) {
    self.kind = kind
    self.path = path
    self.destination = destination
    self.bytes = bytes
    self.date = date
  }
}

/// What a maintenance pass did, counted: the figures a report and the console give.
public struct PassSummary: Sendable, Equatable {
  public var pass: MaintenancePassReport.Pass
  public var dryRun: Bool
  public var filesRemoved = 0
  public var filesMoved = 0
  /// Name collisions whose loser was kept aside.
  public var filesKeptAside = 0
  /// Allocated bytes of the removed files.
  public var bytesFreed: UInt64 = 0
  public var errorCount = 0
  /// The limits an expire or trim pass ran with.
  public var limits: CleanupLimits?
  /// The allocated bytes of the cache's files (a shard's: its own) before and after an expire
  /// or trim pass (in a dry run: as they would be after); unknown when the pass was stopped.
  public var cacheBytesBefore: UInt64?
  public var cacheBytesAfter: UInt64?

  public init(pass: MaintenancePassReport.Pass, dryRun: Bool) {
    self.pass = pass
    self.dryRun = dryRun
  }

  mutating func count(_ action: MaintenanceAction) {
    switch action.kind {
    case .delete:
      filesRemoved += 1
      bytesFreed += action.bytes
    case .move:
      filesMoved += 1
    case .keptAside:
      filesKeptAside += 1
    }
  }
}

/// Receives a maintenance pass's actions and per-file errors as they happen, so that a report
/// can be streamed instead of held (SPEC section 6). ``MaintenancePassReport`` keeps them in
/// memory; the runner's report writer writes them out.
public protocol MaintenanceRecorder {
  var summary: PassSummary { get set }
  /// Keeps or writes one action (already counted).
  mutating func keep(_ action: MaintenanceAction)
  /// Keeps or writes one per-file error (already counted).
  mutating func keep(error: String)
}

extension MaintenanceRecorder {
  public mutating func record(_ action: MaintenanceAction) {
    summary.count(action)
    keep(action)
  }

  /// Records a per-file error; the pass goes on.
  public mutating func recordError(_ message: String) {
    summary.errorCount += 1
    keep(error: message)
  }

  /// Records a delete (or, in a dry run, a planned one).
  public mutating func recordDelete(path: String, bytes: UInt64, date: Date?) {
    record(MaintenanceAction(kind: .delete, path: path, bytes: bytes, date: date))
  }

  /// Records a move (or a planned one).
  public mutating func recordMove(from path: String, to destination: String, bytes: UInt64) {
    record(MaintenanceAction(kind: .move, path: path, destination: destination, bytes: bytes))
  }

  /// Records a collision whose loser was kept at `aside`.
  public mutating func recordKeptAside(path: String, aside: String, bytes: UInt64) {
    record(MaintenanceAction(kind: .keptAside, path: path, destination: aside, bytes: bytes))
  }
}

/// One maintenance pass in a report (SPEC section 6), held in memory: what a decoded report
/// holds, and a recorder for callers that want the whole pass back.
public struct MaintenancePassReport: Sendable, Codable, Equatable, MaintenanceRecorder {
  public enum Pass: String, Sendable, Codable {
    case migrate
    case expire
    case trim
  }

  public var pass: Pass
  public var dryRun: Bool
  public var filesRemoved = 0
  public var filesMoved = 0
  /// Allocated bytes of the removed files.
  public var bytesFreed: UInt64 = 0
  /// Per-file errors; the pass went on after each.
  public var errors: [String] = []
  /// Every action taken (or, in a dry run, planned), in order.
  public var actions: [MaintenanceAction] = []
  /// The limits an expire or trim pass ran with (absent from migrate passes and from the
  /// reports of versions before them).
  public var limits: CleanupLimits?
  /// The allocated bytes of the cache's files (a shard's: its own) before and after an expire
  /// or trim pass (in a dry run: as they would be after).
  public var cacheBytesBefore: UInt64?
  public var cacheBytesAfter: UInt64?

  public init(pass: Pass, dryRun: Bool) {
    self.pass = pass
    self.dryRun = dryRun
  }

  public var summary: PassSummary {
    get {
      var summary = PassSummary(pass: pass, dryRun: dryRun)
      summary.filesRemoved = filesRemoved
      summary.filesMoved = filesMoved
      summary.filesKeptAside = actions.filter { $0.kind == .keptAside }.count
      summary.bytesFreed = bytesFreed
      summary.errorCount = errors.count
      summary.limits = limits
      summary.cacheBytesBefore = cacheBytesBefore
      summary.cacheBytesAfter = cacheBytesAfter
      return summary
    }
    set {
      filesRemoved = newValue.filesRemoved
      filesMoved = newValue.filesMoved
      bytesFreed = newValue.bytesFreed
      limits = newValue.limits
      cacheBytesBefore = newValue.cacheBytesBefore
      cacheBytesAfter = newValue.cacheBytesAfter
    }
  }

  public mutating func keep(_ action: MaintenanceAction) { actions.append(action) }
  public mutating func keep(error: String) { errors.append(error) }
}

/// One URL that failed, in a report.
public struct FailureReport: Sendable, Codable, Equatable {
  public var url: String
  public var code: Int
  public var name: String
  public var httpStatus: Int?
  public var message: String
  public var attempts: Int
  public var blacklisted: Bool
  /// Where the URL came from, for manifest line errors.
  public var source: String?

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
  public var url: String
  public var bytes: Int
  public var format: ImageFormat?
  public var width: Int?
  public var height: Int?

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
  public var url: String
  public var key: String
  public var format: ImageFormat?
  public var width: Int?
  public var height: Int?
  public var bytes: Int?
  /// The original bytes were stored under the derived key (animated images, a zero
  /// thumbnail size), as SD does.
  public var originalBytes: Bool
  /// Why nothing was stored under the key, when nothing was.
  public var skipped: String?

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
  public var total = 0
  public var memoryHits = 0
  public var diskHits = 0
  public var downloaded = 0
  public var notModified = 0
  public var failed = 0
  public var blacklisted = 0
  public var skipped = 0
  /// Manifests and sitemaps that failed as a whole (not fetched, not opened, refused, broken):
  /// inputs, not URLs, so not in `total`; any makes the exit code 1.
  public var inputsFailed = 0
  /// Variants stored under derived keys (thumbnails, transformed images).
  public var derived = 0
  /// In a sharded run, manifest entries that belong to other shards: not in `total`, so that
  /// the shards' totals add up to one unsharded run's.
  public var otherShards = 0
  public var bytesDownloaded: UInt64 = 0
  public var durationSeconds = 0.0
  /// The hosts that asked the run to slow down (429 or 503 with `Retry-After`), by host.
  public var hostBackoffs: [HostBackoff] = []

  public init() {}

  private enum CodingKeys: String, CodingKey {
    case total, memoryHits, diskHits, downloaded, notModified, failed, blacklisted, skipped
    case otherShards, bytesDownloaded, durationSeconds, derived, inputsFailed, hostBackoffs
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
  }
}

/// A host that answered 429 or 503 with `Retry-After`, and how long every download of it was
/// held back for that (SPEC section 5: the wait is host-wide, not only the URL's).
public struct HostBackoff: Sendable, Codable, Equatable {
  public var host: String
  /// The answers that asked for a wait.
  public var pauses: Int
  /// How long the host's downloads were held back: each wait as asked (at most the cap on a
  /// wait), overlapping waits counted once, none past the end of the run.
  public var seconds: Double

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
}

/// The prefetch part of a report, held in memory: what a decoded report holds. The
/// counts sit beside the lists in JSON, and read as if they were its own properties.
@dynamicMemberLookup
public struct PrefetchReport: Sendable, Codable, Equatable, PrefetchRecorder {
  public var counts = PrefetchCounts()
  public var failures: [FailureReport] = []
  /// Every image downloaded, with its format and dimensions (hits are only counted).
  public var downloads: [DownloadReport] = []
  /// Every variant made or skipped for a derived key.
  public var variants: [VariantReport] = []
  public var blacklistedURLs: [String] = []
  /// Manifest lines that could not be used (counted as skipped), as `file:line: message`.
  public var lineErrors: [String] = []
  /// Manifests and sitemaps that failed as a whole, as `input[:line]: message`.
  public var inputFailures: [String] = []

  public init() {}

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
}

/// One URL of a prefetch's plan.
public struct PlannedURL: Sendable, Codable, Equatable {
  public var url: String
  public var action: PlannedAction
  /// Why, for an `invalid` URL.
  public var reason: String?
  /// `file:line`.
  public var source: String?

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
  public var total = 0
  public var hit = 0
  public var download = 0
  public var revalidate = 0
  public var blacklisted = 0
  public var invalid = 0
  public var miss = 0
  /// Bad manifest lines, as a run skips them.
  public var skipped = 0
  /// Manifests and sitemaps that could not be read as a whole: not in `total`.
  public var inputsFailed = 0

  public init() {}

  public mutating func count(_ action: PlannedAction) {
    total += 1
    switch action {
    case .hit: hit += 1
    case .download: download += 1
    case .revalidate: revalidate += 1
    case .blacklisted: blacklisted += 1
    case .invalid: invalid += 1
    case .miss: miss += 1
    }
  }
}

/// A dry run's prefetch plan in a report (`prefetch --dry-run`, `run --dry-run`): what each URL
/// would do, in manifest order.
public struct PrefetchPlan: Sendable, Codable, Equatable {
  public var counts = PrefetchPlanCounts()
  public var urls: [PlannedURL] = []
  public var lineErrors: [String] = []
  public var inputFailures: [String] = []

  public init() {}
}

/// The JSON report of one run, schema version 1 (SPEC section 6; `docs/report-schema.json`).
public struct RunReport: Sendable, Codable, Equatable {
  public enum Status: String, Sendable, Codable {
    case completed
    case interrupted
    case failed
    /// A merge with `--partial` of a fleet run's reports that lacks shards, repeats one or
    /// disagrees on the run (`report merge`); never a run's own status.
    case incomplete
  }

  public struct Cache: Sendable, Codable, Equatable {
    public var path: String
    public var namespace: String
  }

  public var schemaVersion = 1
  public var job: String
  public var status: Status
  public var startedAt: Date
  public var finishedAt: Date
  public var cache: Cache
  public var prefetch: PrefetchReport?
  public var maintenance: [MaintenancePassReport] = []
  /// Warnings for people (a corrupt state file moved aside, ignored options...).
  public var warnings: [String] = []
  /// Metrics files (`--metrics`, `metrics:`) that could not be written, each named with the
  /// reason; also among `warnings`. Not a failure of the run.
  public var metricsErrors: [String]?
  /// What ended a `failed` run.
  public var error: String?
  /// A merged report (`report merge`): the shards' reports it was made of.
  public var mergedFrom: [MergedReport]?
  /// The fleet run the report is part of (`--run-id`, else the engine's job ID): the same in
  /// every shard's report of one run.
  public var runID: String?
  /// A shard's report: which shard of how many it was.
  public var shard: ShardIdentity?
  /// A shard's report: the manifest entries it read, all of them and its own.
  public var manifestEntries: ManifestEntries?
  /// A dry run's prefetch plan, in place of `prefetch`.
  public var plan: PrefetchPlan?

  /// Shard `index` (from 0) of `count`.
  public struct ShardIdentity: Sendable, Codable, Equatable {
    public var index: Int
    public var count: Int

    public init(_ shard: Shard) {
      index = shard.index
      count = shard.count
    }
  }

  /// The manifest entries a shard read: every shard reads every entry, so `total` is the same
  /// in each shard's report of one run; `ownShard` are the ones that hashed to it.
  public struct ManifestEntries: Sendable, Codable, Equatable {
    public var total: Int
    public var ownShard: Int

    public init(total: Int, ownShard: Int) {
      self.total = total
      self.ownShard = ownShard
    }
  }

  /// One report of a merged report's, in brief.
  public struct MergedReport: Sendable, Codable, Equatable {
    public var file: String
    public var status: Status
    public var startedAt: Date
    public var finishedAt: Date
    public var total: Int
    public var downloaded: Int
    public var failed: Int

    public init(file: String, report: RunReport) {
      self.file = file
      status = report.status
      startedAt = report.startedAt
      finishedAt = report.finishedAt
      total = report.prefetch?.total ?? 0
      downloaded = report.prefetch?.downloaded ?? 0
      failed = report.prefetch?.failed ?? 0
    }
  }

  public init(job: String, location: CacheLocation, startedAt: Date) {
    self.job = job
    status = .completed
    self.startedAt = startedAt
    finishedAt = startedAt
    cache = Cache(path: location.directory, namespace: location.namespace)
  }

  public static func decode(_ data: Data) throws -> RunReport {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .custom { decoder in
      let text = try decoder.singleValueContainer().decode(String.self)
      let formatter = ISO8601DateFormatter()
      formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
      if let date = formatter.date(from: text) { return date }
      formatter.formatOptions = [.withInternetDateTime]
      if let date = formatter.date(from: text) { return date }
      throw DecodingError.dataCorrupted(
        .init(codingPath: decoder.codingPath, debugDescription: "not an ISO 8601 date: \(text)"))
    }
    return try decoder.decode(RunReport.self, from: data)
  }
}

extension RunReport {
  /// The largest count or byte figure a report holds: 2^53-1, the largest whole number that
  /// every JSON reader (JavaScript, jq) holds exactly. `report merge` refuses a sum past it.
  public static let largestCount = 9_007_199_254_740_991
  /// The schema versions this imagecache reads.
  public static let knownSchemaVersions = 1...1

  /// The first figure of this report that no run writes (SPEC section 7: numbers from reports
  /// are range-checked): an unknown schema version, a negative count, a count past
  /// ``largestCount``, a negative or overlong duration. `nil` when every figure is in range.
  public func rangeProblem() -> (field: String, message: String)? {
    guard Self.knownSchemaVersions.contains(schemaVersion) else {
      return ("schemaVersion", Self.unknownSchemaMessage(schemaVersion))
    }
    func check<T: BinaryInteger>(_ value: T?, _ field: @autoclosure () -> String) -> (
      field: String, message: String
    )? {
      guard let value, value < 0 || value > Self.largestCount else { return nil }
      return (field(), "\(value) is out of range: expected 0 to \(Self.largestCount)")
    }
    if let prefetch {
      let counts = prefetch.counts
      let figures: [(String, Int)] = [
        ("total", counts.total), ("memoryHits", counts.memoryHits),
        ("diskHits", counts.diskHits), ("downloaded", counts.downloaded),
        ("notModified", counts.notModified), ("failed", counts.failed),
        ("blacklisted", counts.blacklisted), ("skipped", counts.skipped),
        ("derived", counts.derived), ("otherShards", counts.otherShards),
      ]
      for (name, value) in figures {
        if let problem = check(value, "prefetch.\(name)") { return problem }
      }
      if let problem = check(counts.bytesDownloaded, "prefetch.bytesDownloaded") {
        return problem
      }
      guard DurationRange.nonNegative.contains(counts.durationSeconds) else {
        return (
          "prefetch.durationSeconds",
          "\(counts.durationSeconds) is out of range: expected \(DurationRange.nonNegative)"
        )
      }
      for (index, backoff) in counts.hostBackoffs.enumerated() {
        let field = "prefetch.hostBackoffs[\(index)]"
        if let problem = check(backoff.pauses, "\(field).pauses") { return problem }
        guard DurationRange.nonNegative.contains(backoff.seconds) else {
          return (
            "\(field).seconds",
            "\(backoff.seconds) is out of range: expected \(DurationRange.nonNegative)"
          )
        }
      }
      for (index, failure) in prefetch.failures.enumerated() {
        if let problem = check(failure.attempts, "prefetch.failures[\(index)].attempts") {
          return problem
        }
      }
      for (index, download) in prefetch.downloads.enumerated() {
        if let problem = check(download.bytes, "prefetch.downloads[\(index)].bytes")
          ?? check(download.width, "prefetch.downloads[\(index)].width")
          ?? check(download.height, "prefetch.downloads[\(index)].height")
        {
          return problem
        }
      }
      for (index, variant) in prefetch.variants.enumerated() {
        if let problem = check(variant.bytes, "prefetch.variants[\(index)].bytes")
          ?? check(variant.width, "prefetch.variants[\(index)].width")
          ?? check(variant.height, "prefetch.variants[\(index)].height")
        {
          return problem
        }
      }
    }
    for (index, pass) in maintenance.enumerated() {
      let field = "maintenance[\(index)]"
      if let problem = check(pass.filesRemoved, "\(field).filesRemoved")
        ?? check(pass.filesMoved, "\(field).filesMoved")
        ?? check(pass.bytesFreed, "\(field).bytesFreed")
      {
        return problem
      }
      for (number, action) in pass.actions.enumerated() {
        if let problem = check(action.bytes, "\(field).actions[\(number)].bytes") {
          return problem
        }
      }
    }
    for (index, shard) in (mergedFrom ?? []).enumerated() {
      let field = "mergedFrom[\(index)]"
      if let problem = check(shard.total, "\(field).total")
        ?? check(shard.downloaded, "\(field).downloaded") ?? check(shard.failed, "\(field).failed")
      {
        return problem
      }
    }
    return nil
  }

  /// Why a report of schema `version` is not read.
  public static func unknownSchemaMessage(_ version: Int) -> String {
    "\(version) is not a schema version this imagecache reads (it reads "
      + "\(knownSchemaVersions.map(String.init).joined(separator: ", ")))"
  }

  /// `a + b` for two figures of reports, `nil` when the sum passes ``largestCount``.
  public static func sum<T: FixedWidthInteger>(_ a: T, _ b: T) -> T? {
    let (total, overflow) = a.addingReportingOverflow(b)
    guard !overflow, total >= 0, total <= largestCount else { return nil }
    return total
  }
}
