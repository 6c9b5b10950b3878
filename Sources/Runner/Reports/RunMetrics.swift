import Core
import Foundation
import Prometheus

/// The run's figures for node_exporter's textfile collector (SPEC sections 6 and 12): Prometheus
/// text format, written atomically with swift-prometheus' encoder, by Prometheus' naming
/// conventions. The file holds the last run's values, rewritten by each run, so every series is
/// a gauge named `imagecache_last_run_*` (a counter that starts again at each run would read as
/// a reset to `rate()` and `increase()`), with its unit as a suffix (`_seconds`, `_bytes`).
/// Every series is labelled with `imagecache_job` (a scrape's own `job` label would overwrite
/// or rename a `job` of ours), `namespace` and, when sharded, `shard`.
public struct RunMetrics: Sendable {
  public var job: String
  public var namespace: String
  public var shard: Shard?
  public var status: RunReport.Status
  public var finishedAt: Date
  /// How long the run took, by the monotonic clock (``RunClock``).
  public var durationSeconds: TimeInterval
  public var prefetch: PrefetchCounts?
  public var passes: [PassSummary]
  /// The cache's files after the run; a shard's: those it owns (``Shard/ownsFile(named:)``).
  public var cache: DiskUsage?
  /// The files `imagecache verify` looked at, by outcome.
  public var verify: VerifyCounts?

  /// The text exposition of these figures. `lastSuccess` is the previous successful run's
  /// time, kept when this run did not succeed.
  public func exposition(lastSuccess: Date?) -> String {
    let registry = PrometheusCollectorRegistry()
    var labels = [("imagecache_job", job), ("namespace", namespace)]
    if let shard { labels.append(("shard", shard.description)) }
    func with(_ extra: (String, String)) -> [(String, String)] { labels + [extra] }
    func gauge(_ name: String, _ labels: [(String, String)], _ help: String, _ value: Double) {
      // The full name as the metric's base name and no unit: the names stay as documented.
      registry.makeGauge(
        descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help),
        labels: labels
      ).set(value)
    }

    let counts = prefetch ?? PrefetchCounts()
    let outcomes: [(String, Int)] = [
      ("memory_hit", counts.memoryHits), ("disk_hit", counts.diskHits),
      ("downloaded", counts.downloaded), ("not_modified", counts.notModified),
      ("failed", counts.failed), ("blacklisted", counts.blacklisted),
      ("skipped", counts.skipped),
    ]
    for (outcome, value) in outcomes {
      gauge(
        "imagecache_last_run_urls", with(("outcome", outcome)),
        "URLs of the last run, by outcome", Double(value))
    }
    gauge(
      "imagecache_last_run_downloaded_bytes", labels, "Bytes the last run downloaded",
      Double(counts.bytesDownloaded))
    // Not URLs, so in no outcome: a night whose only manifest could not be fetched has none.
    gauge(
      "imagecache_last_run_failed_inputs", labels,
      "Manifests and sitemaps of the last run that failed as a whole (not fetched, not "
        + "readable, refused)", Double(counts.inputsFailed))
    writeHostLimits(counts.hostLimits, labels: labels, gauge: gauge)
    gauge(
      "imagecache_last_run_duration_seconds", labels, "How long the last run took",
      durationSeconds)
    gauge(
      "imagecache_last_run_timestamp_seconds", labels, "When the last run ended (Unix time)",
      finishedAt.timeIntervalSince1970)
    let success = status == .completed ? finishedAt : lastSuccess
    gauge(
      "imagecache_last_success_timestamp_seconds", labels,
      "When the last run that completed ended (Unix time; 0: none yet)",
      success?.timeIntervalSince1970 ?? 0)
    for candidate in [RunReport.Status.completed, .interrupted, .failed, .incomplete] {
      gauge(
        "imagecache_last_run_status", with(("status", candidate.rawValue)),
        "1 for the last run's status, 0 for the others", candidate == status ? 1 : 0)
    }
    for pass in passes {
      let labels = with(("pass", pass.pass.rawValue))
      gauge(
        "imagecache_last_run_removed_files", labels,
        "Files a maintenance pass of the last run removed",
        Double(pass.dryRun ? 0 : pass.filesRemoved))
      gauge(
        "imagecache_last_run_freed_bytes", labels,
        "Bytes a maintenance pass of the last run freed",
        Double(pass.dryRun ? 0 : pass.bytesFreed))
      gauge(
        "imagecache_last_run_not_removed_files", labels,
        "Files a maintenance pass of the last run could not remove (EPERM, immutable...)",
        Double(pass.dryRun ? 0 : pass.filesNotRemoved))
    }
    for pass in passes where pass.pass == .repair {
      let repaired: [(String, Int)] = [
        ("quarantine", pass.filesMoved), ("delete", pass.filesRemoved),
        ("refetch", pass.filesRefetched), ("refetch_failed", pass.filesNotRefetched),
      ]
      for (action, files) in repaired {
        gauge(
          "imagecache_verify_repaired_files", with(("action", action)),
          "Bad files the last verify's repair quarantined, deleted, refetched, or failed to "
            + "refetch (then quarantined: also among quarantine)",
          Double(pass.dryRun ? 0 : files))
      }
    }
    if let verify {
      for outcome in VerifyOutcome.allCases {
        gauge(
          "imagecache_verify_files", with(("outcome", outcome.rawValue)),
          "Files the last verify looked at, by outcome", Double(verify[outcome]))
      }
    }
    if let cache {
      gauge(
        "imagecache_cache_files", labels,
        "Files in the cache after the run (a shard's own: the shards' sum is the cache)",
        Double(cache.fileCount))
      gauge(
        "imagecache_cache_bytes", labels,
        "Allocated bytes of the cache after the run (a shard's own: the shards' sum is the cache)",
        Double(cache.allocatedBytes))
    }
    var buffer: [UInt8] = []
    registry.emit(into: &buffer)
    return String(decoding: buffer, as: UTF8.self)
  }

  /// The most hosts whose adaptive limit gets series of its own: a manifest of many hosts
  /// would otherwise make as many series (Prometheus' advice on label values); the report
  /// lists them all.
  static let hostLimitSeries = 20

  /// The adaptive per-host limits (`--per-host-concurrency auto`): where each host settled and
  /// its least, median and most (the hosts cut most often first, then by name, at most
  /// ``hostLimitSeries``), and the cuts of every host by cause. Nothing when no host had one.
  private func writeHostLimits(
    _ limits: [HostLimit], labels: [(String, String)],
    gauge: (String, [(String, String)], String, Double) -> Void
  ) {
    guard !limits.isEmpty else { return }
    func cuts(_ limit: HostLimit) -> Int { limit.cuts.values.reduce(0, +) }
    let shown = limits.sorted {
      (cuts($0), $1.host) > (cuts($1), $0.host)
    }.prefix(Self.hostLimitSeries)
    for limit in shown {
      for (stat, value) in [
        ("final", limit.final), ("min", limit.min), ("median", limit.median), ("max", limit.max),
      ] {
        gauge(
          "imagecache_last_run_host_concurrency", labels + [("host", limit.host), ("stat", stat)],
          "The last run's adaptive per-host concurrency limit: where it ended (final) and its "
            + "least, median and most, for the hosts cut most often", Double(value))
      }
    }
    for cause in ["queue", "refused", "timeout"] {
      gauge(
        "imagecache_last_run_host_concurrency_cuts", labels + [("cause", cause)],
        "Cuts of the last run's adaptive per-host limits, all hosts, by cause",
        Double(limits.reduce(0) { $0 + ($1.cuts[cause] ?? 0) }))
    }
  }

  /// Writes the metrics file atomically, keeping the last success time of the file it replaces
  /// when this run did not complete.
  /// A device, FIFO or descriptor (`/dev/null`) is written in place and never read.
  public func write(to path: String) throws {
    try stage(to: OutputFile(path: path)).commit()
  }

  /// Writes the metrics for `output` without putting them in place: for a file, into its
  /// temporary file, which ``OutputWriter/commit()`` renames over it. Lets a run learn that the
  /// file cannot be written before its report is finished, and say so in it.
  public func stage(to output: OutputFile) throws(FileSystemError) -> OutputWriter {
    let previous = output.previousContents().flatMap(Self.lastSuccess)
    let writer = try output.open()
    try writer.write(Array(exposition(lastSuccess: previous).utf8))
    return writer
  }

  /// `imagecache_last_success_timestamp_seconds` from an earlier metrics file, when not 0.
  static func lastSuccess(in text: String) -> Date? {
    for line in text.split(separator: "\n")
    where line.hasPrefix("imagecache_last_success_timestamp_seconds") {
      if let value = line.split(separator: " ").last.flatMap({ Double($0) }), value > 0 {
        return Date(timeIntervalSince1970: value)
      }
    }
    return nil
  }
}
