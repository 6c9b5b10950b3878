import Foundation

/// The JSON report of one run, schema version 1 (SPEC section 6; `docs/report-schema.json`).
public struct RunReport: Sendable, Codable, Equatable {
  public enum Status: String, Sendable, Codable, CaseIterable {
    case completed
    case interrupted
    case failed
    /// A merge with `--partial` of a fleet run's reports that lacks shards, repeats one or
    /// disagrees on the run (`report merge`); never a run's own status.
    case incomplete
  }

  package struct Cache: Sendable, Codable, Equatable {
    package var path: String
    package var namespace: String
  }

  package var schemaVersion = 1
  package var job: String
  package var status: Status
  package var startedAt: Date
  package var finishedAt: Date
  package var cache: Cache
  package var prefetch: PrefetchReport?
  package var maintenance: [MaintenancePassReport] = []
  /// Warnings for people (a corrupt state file moved aside, ignored options...).
  package var warnings: [String] = []
  /// Metrics files (`--metrics`, `metrics:`) that could not be written, each named with the
  /// reason; also among `warnings`. Not a failure of the run.
  package var metricsErrors: [String]?
  /// What ended a `failed` run.
  package var error: String?
  /// A merged report (`report merge`): the shards' reports it was made of.
  package var mergedFrom: [MergedReport]?
  /// The fleet run the report is part of (`--run-id`, else the engine's job ID): the same in
  /// every shard's report of one run.
  package var runID: String?
  /// The job's prefetch settings that `run`'s flags gave for this run in place of the job
  /// file's values, by job file field (`prefetch.concurrency`: `1`); absent when none did.
  package var commandLineSettings: [String: String]?
  /// The run's exit policy: URLs that failed did not make its exit code 1
  /// (`--allow-url-failures`, `allowURLFailures: true`). `report merge` of reports that all say
  /// so exits as they did. Written only when true.
  package var allowURLFailures: Bool?
  /// A shard's report: which shard of how many it was.
  package var shard: ShardIdentity?
  /// A shard's report: the manifest entries it read, all of them and its own.
  package var manifestEntries: ManifestEntries?
  /// A dry run's prefetch plan, in place of `prefetch`.
  package var plan: PrefetchPlan?
  /// The URLs the run's manifests list (a shard's: its own share), counted at the end of a run
  /// that did not get through them (`interrupted`, `failed`): with `prefetch.total`, how many
  /// were not tried. Absent when they cannot be counted without fetching (sitemaps, manifests
  /// named by URL, standard input).
  package var urlsListed: Int?
  /// A shard's report: the earlier attempts of the same shard of the same run (its report at
  /// the same path, with the same `runID`), oldest first. Their traffic is the night's too;
  /// the URLs' outcomes are this attempt's.
  package var previousAttempts: [Attempt]?
  /// A merged report: the traffic of every attempt of every shard, reruns included (the
  /// counts in `prefetch` are each shard's last attempt's).
  package var night: Night?
  /// What `imagecache verify` found in the cache (absent from every other run's report).
  package var verify: VerifyReport?

  /// One attempt of a shard, in brief: what it fetched.
  public struct Attempt: Sendable, Codable, Equatable {
    package var status: Status
    package var startedAt: Date
    package var finishedAt: Date
    package var downloaded: Int
    package var bytesDownloaded: UInt64

    /// The attempt that wrote `report`.
    package init(of report: RunReport) {
      status = report.status
      startedAt = report.startedAt
      finishedAt = report.finishedAt
      downloaded = report.prefetch?.downloaded ?? 0
      bytesDownloaded = report.prefetch?.bytesDownloaded ?? 0
    }
  }

  /// Every attempt of a merged run's shards together.
  public struct Night: Sendable, Codable, Equatable {
    package var attempts = 0
    package var downloaded = 0
    package var bytesDownloaded: UInt64 = 0

    package init() {}
  }

  /// Every attempt this report counts: the earlier ones, then its own.
  package var attempts: [Attempt] { (previousAttempts ?? []) + [Attempt(of: self)] }

  /// Shard `index` (from 0) of `count`.
  package struct ShardIdentity: Sendable, Codable, Equatable {
    package var index: Int
    package var count: Int

    package init(_ shard: Shard) {
      index = shard.index
      count = shard.count
    }
  }

  /// The manifest entries a shard read: every shard reads every entry, so `total` is the same
  /// in each shard's report of one run; `ownShard` are the ones that hashed to it.
  package struct ManifestEntries: Sendable, Codable, Equatable {
    package var total: Int
    package var ownShard: Int

    package init(total: Int, ownShard: Int) {
      self.total = total
      self.ownShard = ownShard
    }
  }

  /// One report of a merged report's, in brief.
  public struct MergedReport: Sendable, Codable, Equatable {
    package var file: String
    package var status: Status
    package var startedAt: Date
    package var finishedAt: Date
    package var total: Int
    package var downloaded: Int
    package var failed: Int
    /// The shard's attempts: 1, or more after a rerun with the same run ID.
    package var attempts: Int?

    package init(file: String, report: RunReport) {
      self.file = file
      status = report.status
      startedAt = report.startedAt
      finishedAt = report.finishedAt
      total = report.prefetch?.total ?? 0
      downloaded = report.prefetch?.downloaded ?? 0
      failed = report.prefetch?.failed ?? 0
      attempts = report.attempts.count
    }
  }

  package init(job: String, location: CacheLocation, startedAt: Date) {
    self.job = job
    status = .completed
    self.startedAt = startedAt
    finishedAt = startedAt
    cache = Cache(path: location.directory, namespace: location.namespace)
  }

  package static func decode(_ data: Data) throws -> RunReport {
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
  package static let largestCount = 9_007_199_254_740_991
  /// The `durationSeconds` a report may hold: earlier imagecache versions measured it by the
  /// wall clock, and wrote it negative when the clock stepped back during the run.
  package static let durationRange = DurationRange(
    lower: -DurationRange.longest, upper: DurationRange.longest)
  /// The schema versions this imagecache reads.
  package static let knownSchemaVersions = 1...1

  /// The first figure of this report that no run writes (SPEC section 7: numbers from reports
  /// are range-checked): an unknown schema version, a negative count, a count past
  /// ``largestCount``, a negative or overlong duration. `nil` when every figure is in range.
  package func rangeProblem() -> (field: String, message: String)? {
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
      // Negative: an earlier imagecache's duration across a step of the wall clock.
      guard Self.durationRange.contains(counts.durationSeconds) else {
        return (
          "prefetch.durationSeconds",
          "\(counts.durationSeconds) is out of range: expected \(Self.durationRange)"
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
      for (index, limit) in counts.hostLimits.enumerated() {
        let field = "prefetch.hostLimits[\(index)]"
        let figures =
          [
            ("final", limit.final), ("min", limit.min), ("median", limit.median),
            ("max", limit.max),
          ]
          + limit.cuts.sorted { $0.key < $1.key }.map { ("cuts.\($0.key)", $0.value) }
        for (name, value) in figures {
          if let problem = check(value, "\(field).\(name)") { return problem }
        }
        if let problem = check(limit.heldUnder, "\(field).heldUnder") { return problem }
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
    for (index, attempt) in (previousAttempts ?? []).enumerated() {
      let field = "previousAttempts[\(index)]"
      if let problem = check(attempt.downloaded, "\(field).downloaded")
        ?? check(attempt.bytesDownloaded, "\(field).bytesDownloaded")
      {
        return problem
      }
    }
    if let night,
      let problem = check(night.attempts, "night.attempts")
        ?? check(night.downloaded, "night.downloaded")
        ?? check(night.bytesDownloaded, "night.bytesDownloaded")
    {
      return problem
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

  /// Undoes what a step of the wall clock wrote into a report (SPEC section 12: a clock step
  /// never makes a report invalid for our tools): a negative duration reads as 0, an end
  /// before the start as the start, each with a `clockStepped` warning.
  package mutating func absorbClockStep() {
    var stepped = false
    if finishedAt < startedAt {
      finishedAt = startedAt
      stepped = true
    }
    if let duration = prefetch?.counts.durationSeconds, duration < 0 {
      prefetch?.counts.durationSeconds = 0
      stepped = true
    }
    if stepped {
      warnings.append(
        "clockStepped: the system clock stepped back during the run; its negative duration "
          + "is read as 0 and its end as its start")
    }
  }

  /// Why a report of schema `version` is not read.
  package static func unknownSchemaMessage(_ version: Int) -> String {
    "\(version) is not a schema version this imagecache reads (it reads "
      + "\(knownSchemaVersions.map(String.init).joined(separator: ", ")))"
  }

  /// `a + b` for two figures of reports, `nil` when the sum passes ``largestCount``.
  package static func sum<T: FixedWidthInteger>(_ a: T, _ b: T) -> T? {
    let (total, overflow) = a.addingReportingOverflow(b)
    guard !overflow, total >= 0, total <= largestCount else { return nil }
    return total
  }
}
