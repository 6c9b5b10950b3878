import Core
import Foundation
import Prometheus

/// The run's figures for node_exporter's textfile collector (SPEC section 6): Prometheus text
/// format, written atomically with swift-prometheus' encoder. Every series is labelled with
/// `job`, `namespace` and, when sharded, `shard`.
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
  public var cache: DiskUsage?

  /// The text exposition of these figures. `lastSuccess` is the previous successful run's
  /// time, kept when this run did not succeed.
  public func exposition(lastSuccess: Date?) -> String {
    let registry = PrometheusCollectorRegistry()
    var labels = [("job", job), ("namespace", namespace)]
    if let shard { labels.append(("shard", shard.description)) }
    func with(_ extra: (String, String)) -> [(String, String)] { labels + [extra] }
    // The full name as the metric's base name and no unit: the names stay as documented.
    func descriptor(_ name: String, _ help: String) -> MetricNameDescriptor {
      MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }
    func counter(name: String, labels: [(String, String)], help: String) -> Counter {
      registry.makeCounter(descriptor: descriptor(name, help), labels: labels)
    }
    func gauge(name: String, labels: [(String, String)], help: String) -> Gauge {
      registry.makeGauge(descriptor: descriptor(name, help), labels: labels)
    }

    let counts = prefetch ?? PrefetchCounts()
    let outcomes: [(String, Int)] = [
      ("memory_hit", counts.memoryHits), ("disk_hit", counts.diskHits),
      ("downloaded", counts.downloaded), ("not_modified", counts.notModified),
      ("failed", counts.failed), ("blacklisted", counts.blacklisted),
      ("skipped", counts.skipped),
    ]
    for (outcome, value) in outcomes {
      counter(
        name: "imagecache_urls_total", labels: with(("outcome", outcome)),
        help: "URLs of the last run, by outcome"
      ).increment(by: Int64(value))
    }
    counter(
      name: "imagecache_bytes_downloaded_total", labels: labels,
      help: "Bytes downloaded by the last run"
    ).increment(by: Int64(clamping: counts.bytesDownloaded))
    gauge(
      name: "imagecache_run_duration_seconds", labels: labels, help: "Length of the last run"
    ).set(durationSeconds)
    gauge(
      name: "imagecache_last_run_timestamp_seconds", labels: labels,
      help: "When the last run ended (Unix time)"
    ).set(finishedAt.timeIntervalSince1970)
    let success = status == .completed ? finishedAt : lastSuccess
    gauge(
      name: "imagecache_last_success_timestamp_seconds", labels: labels,
      help: "When the last run that completed ended (Unix time; 0: none yet)"
    ).set(success?.timeIntervalSince1970 ?? 0)
    for candidate in [RunReport.Status.completed, .interrupted, .failed, .incomplete] {
      gauge(
        name: "imagecache_run_status", labels: with(("status", candidate.rawValue)),
        help: "1 for the last run's status"
      ).set(candidate == status ? 1.0 : 0.0)
    }
    for pass in passes {
      counter(
        name: "imagecache_maintenance_files_removed_total",
        labels: with(("pass", pass.pass.rawValue)),
        help: "Files a maintenance pass of the last run removed"
      ).increment(by: Int64(pass.dryRun ? 0 : pass.filesRemoved))
      counter(
        name: "imagecache_maintenance_bytes_freed_total",
        labels: with(("pass", pass.pass.rawValue)),
        help: "Bytes a maintenance pass of the last run freed"
      ).increment(by: Int64(clamping: pass.dryRun ? 0 : pass.bytesFreed))
      counter(
        name: "imagecache_maintenance_files_not_removed_total",
        labels: with(("pass", pass.pass.rawValue)),
        help: "Files a maintenance pass of the last run could not remove (EPERM, immutable...)"
      ).increment(by: Int64(pass.dryRun ? 0 : pass.filesNotRemoved))
    }
    if let cache {
      gauge(
        name: "imagecache_cache_files", labels: labels, help: "Files in the cache after the run"
      ).set(Double(cache.fileCount))
      gauge(
        name: "imagecache_cache_bytes", labels: labels,
        help: "Allocated bytes of the cache after the run"
      ).set(Double(cache.allocatedBytes))
    }
    var buffer: [UInt8] = []
    registry.emit(into: &buffer)
    return String(decoding: buffer, as: UTF8.self)
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
