import Foundation

/// A run's report as `run --json` writes it, with the figures a test sets, for the tests of
/// what reads reports (`report merge`, `report html`).
public enum ReportFixture {
  /// The counts of a report's `prefetch` object, all 0 unless set.
  public static let countNames = [
    "total", "memoryHits", "diskHits", "downloaded", "notModified", "failed", "blacklisted",
    "skipped", "derived", "bytesDownloaded",
  ]

  /// The report's JSON: `prefetch` holds `counts` over zeros and `durationSeconds` 1;
  /// `maintenance`, when given, is one expire pass with these figures over zeros.
  public static func json(
    schemaVersion: Any = 1, status: String = "completed", counts: [String: Any] = [:],
    maintenance: [String: Any]? = nil, cache: String = "/srv/cache",
    startedAt: String = "2026-01-01T00:00:00.000Z", finishedAt: String = "2026-01-01T00:01:00.000Z"
  ) throws -> Data {
    var prefetch: [String: Any] = Dictionary(uniqueKeysWithValues: countNames.map { ($0, 0) })
    prefetch["durationSeconds"] = 1.0
    prefetch.merge(counts) { $1 }
    for list in ["failures", "downloads", "variants", "blacklistedURLs", "lineErrors"] {
      prefetch[list] = [Any]()
    }
    var report: [String: Any] = [
      "schemaVersion": schemaVersion, "job": "nightly", "status": status,
      "startedAt": startedAt, "finishedAt": finishedAt,
      "cache": ["path": cache, "namespace": "default"], "prefetch": prefetch,
      "maintenance": [Any](), "warnings": [Any](),
    ]
    if let maintenance {
      var pass: [String: Any] = [
        "pass": "expire", "dryRun": false, "filesRemoved": 0, "filesMoved": 0, "bytesFreed": 0,
        "errors": [Any](), "actions": [Any](),
      ]
      pass.merge(maintenance) { $1 }
      report["maintenance"] = [pass]
    }
    return try JSONSerialization.data(withJSONObject: report, options: [.sortedKeys])
  }
}
