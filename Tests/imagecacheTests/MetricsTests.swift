import Core
import Foundation
import TestSupport
import XCTest

/// `--metrics FILE` (SPEC section 6): Prometheus text format that a real parser reads, with the
/// report's numbers.
final class MetricsTests: LoopbackTestCase {
  override var routes: [String: Route] {
    var routes = Self.images
    routes["/held.jpg"] = { _ in
      ServerResponse(
        headers: [("Content-Type", "image/jpeg")], body: Fixtures.jpeg, headDelay: .seconds(30))
    }
    return routes
  }

  /// The samples of a metrics file as `name{label="value",...}` -> value, read by the Python
  /// prometheus-client's parser (Debian's python3-prometheus-client, which CI installs).
  private func parse(_ path: String) throws -> [String: Double] {
    let python = "/usr/bin/python3"
    guard FileManager.default.isExecutableFile(atPath: python),
      let check = try? Command.run(python, ["-c", "import prometheus_client"])
    else { try requireOrSkip("no /usr/bin/python3") }
    guard check.status == 0 else {
      try requireOrSkip("python3-prometheus-client is not installed")
    }
    let script = """
      import json, sys
      from prometheus_client.parser import text_string_to_metric_families
      samples = {}
      for family in text_string_to_metric_families(open(sys.argv[1]).read()):
          for s in family.samples:
              labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
              samples[f"{s.name}{{{labels}}}"] = s.value
      print(json.dumps(samples))
      """
    let parsed = try Command.run(python, ["-c", script, path])
    XCTAssertEqual(parsed.status, 0, "the parser refused the file: \(parsed.stderr)")
    return try XCTUnwrap(
      try JSONSerialization.jsonObject(with: Data(parsed.stdout.utf8)) as? [String: Double])
  }

  /// A shard's `imagecache_cache_files` and `imagecache_cache_bytes` count the files it owns
  /// (by their digest; shard 0 also those of no digest), so that summed across the fleet
  /// (`sum by (imagecache_job)`) they are the cache's, as an unsharded run counts it; each
  /// shard counting the whole cache made the sum N times the cache.
  func testTheShardsCacheFiguresSumToTheWholeCache() throws {
    let cache = temporary.appending("cache")
    let builder = CacheBuilder(root: cache + "/default")
    let now = Int64(Date().timeIntervalSince1970)
    for index in 0..<30 {
      try builder.file(
        CacheFileName.fileName(forKey: "https://example.com/\(index).jpg"), size: 1000 + index,
        accessTime: now)
    }
    try builder.file("notes.txt", size: 5000, accessTime: now)
    /// The unlabelled-by-outcome sample `name` of a metrics file, read as text.
    func figure(_ name: String, in path: String) throws -> Double {
      let text = try String(contentsOfFile: path, encoding: .utf8)
      let line = try XCTUnwrap(
        text.split(separator: "\n").first { $0.hasPrefix(name + "{") }, "\(name) in \(path)")
      return try XCTUnwrap(Double(line.split(separator: " ").last ?? ""), String(line))
    }
    func figures(_ arguments: [String], _ file: String) throws -> (files: Double, bytes: Double) {
      let metrics = temporary.appending(file)
      let result = try ImageCacheBinary.run(
        ["maintain", "--cache", cache, "--max-age", "3650d", "--metrics", metrics] + arguments)
      XCTAssertEqual(result.status, 0, result.stderr)
      return (
        try figure("imagecache_cache_files", in: metrics),
        try figure("imagecache_cache_bytes", in: metrics)
      )
    }
    let whole = try figures([], "whole.prom")
    XCTAssertEqual(whole.files, 31)
    let shards = try (0..<3).map { try figures(["--shard", "\($0)/3"], "shard-\($0).prom") }
    XCTAssertEqual(shards.map(\.files).reduce(0, +), whole.files, "\(shards)")
    XCTAssertEqual(shards.map(\.bytes).reduce(0, +), whole.bytes, "\(shards)")
    for shard in shards { XCTAssertLessThan(shard.files, whole.files, "\(shards)") }
  }

  func testTheMetricsFileParsesAndMatchesTheReport() throws {
    let manifest = temporary.appending("urls.txt")
    try [server.url("/a.jpg"), server.url("/b.png"), server.url("/gone.jpg"), "not a url"]
      .joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
    let cache = temporary.appending("cache")
    let metricsFile = temporary.appending("imagecache.prom")
    let reportFile = temporary.appending("report.json")
    let result = try ImageCacheBinary.run([
      "prefetch", manifest, "--cache", cache, "--retries", "0", "--metrics", metricsFile,
      "--report", reportFile, "--shard", "0/1",
    ])
    XCTAssertEqual(result.status, 1, result.stderr)
    let report = try RunReport.decode(
      try XCTUnwrap(FileManager.default.contents(atPath: reportFile)))
    let prefetch = try XCTUnwrap(report.prefetch)
    let samples = try parse(metricsFile)
    let labels = "imagecache_job=\"prefetch\",namespace=\"default\",shard=\"0/1\""
    func value(_ name: String, _ extra: String? = nil) -> Double? {
      let all = ([extra].compactMap { $0 } + [labels]).joined(separator: ",")
      // The parser sorts labels by name.
      let sorted = all.split(separator: ",").sorted().joined(separator: ",")
      return samples["\(name){\(sorted)}"]
    }
    for (outcome, count) in [
      ("downloaded", prefetch.downloaded), ("failed", prefetch.failed),
      ("skipped", prefetch.skipped), ("disk_hit", prefetch.diskHits),
      ("blacklisted", prefetch.blacklisted),
    ] {
      XCTAssertEqual(
        value("imagecache_last_run_urls", "outcome=\"\(outcome)\""), Double(count), outcome)
    }
    XCTAssertEqual(prefetch.downloaded, 2)
    XCTAssertEqual(
      value("imagecache_last_run_downloaded_bytes"), Double(prefetch.bytesDownloaded))
    XCTAssertEqual(value("imagecache_last_run_status", "status=\"completed\""), 1)
    XCTAssertEqual(value("imagecache_last_run_status", "status=\"failed\""), 0)
    XCTAssertEqual(value("imagecache_cache_files"), 2)
    let finished = report.finishedAt.timeIntervalSince1970
    XCTAssertEqual(
      try XCTUnwrap(value("imagecache_last_run_timestamp_seconds")), finished, accuracy: 1)
    XCTAssertEqual(
      try XCTUnwrap(value("imagecache_last_success_timestamp_seconds")), finished, accuracy: 1)

    // A run that fails keeps the last success time of the file it replaces: here one that
    // cannot open the cache lock for writing, the lock file the first run left made immutable
    // (on any file system that takes chattr +i; root writes anywhere else).
    let state = cache + "/default/.imagecache/lock"
    try fileSystems.makeImmutable(state)
    let maintain = try ImageCacheBinary.run([
      "maintain", "--cache", cache, "--metrics", metricsFile, "--max-age", "1s",
    ])
    XCTAssertEqual(maintain.status, 4, maintain.stderr)
    let after = try parse(metricsFile)
    let maintainLabels = "imagecache_job=\"maintain\",namespace=\"default\""
    XCTAssertEqual(after["imagecache_last_run_status{\(maintainLabels),status=\"failed\"}"], 1)
    // The very number the first run wrote: the failed run ended within the same second.
    XCTAssertEqual(
      after["imagecache_last_success_timestamp_seconds{\(maintainLabels)}"],
      value("imagecache_last_success_timestamp_seconds"))
  }

  /// Issue 39, item 5: by Prometheus' conventions. The last run's values are gauges named
  /// `imagecache_last_run_*` with their unit, labelled `imagecache_job`, never `job`, which
  /// the scrape's own label would overwrite; no series is a counter that resets every run.
  /// The missing-success alert reads `imagecache_last_success_timestamp_seconds`: only a run
  /// that completed moves it. One stopped by its time limit (`interrupted`, as a signal stops
  /// it) keeps the time of the last one that completed, and says it was interrupted.
  func testAnInterruptedRunKeepsTheLastSuccessTime() throws {
    let cache = temporary.appending("cache")
    let metricsFile = temporary.appending("imagecache.prom")
    let good = temporary.appending("good.txt")
    try server.url("/a.jpg").write(toFile: good, atomically: true, encoding: .utf8)
    let first = try ImageCacheBinary.run([
      "prefetch", good, "--cache", cache, "--metrics", metricsFile,
    ])
    XCTAssertEqual(first.status, 0, first.stderr)
    let labels = "imagecache_job=\"prefetch\",namespace=\"default\""
    let succeeded = try XCTUnwrap(
      try parse(metricsFile)["imagecache_last_success_timestamp_seconds{\(labels)}"])

    let held = temporary.appending("held.txt")
    try server.url("/held.jpg").write(toFile: held, atomically: true, encoding: .utf8)
    let stopped = try ImageCacheBinary.run([
      "prefetch", held, "--cache", cache, "--metrics", metricsFile, "--max-run-time", "1s",
    ])
    XCTAssertNotEqual(stopped.status, 0, stopped.stderr)
    let after = try parse(metricsFile)
    XCTAssertEqual(after["imagecache_last_run_status{\(labels),status=\"interrupted\"}"], 1)
    XCTAssertEqual(after["imagecache_last_success_timestamp_seconds{\(labels)}"], succeeded)
    XCTAssertGreaterThan(
      try XCTUnwrap(after["imagecache_last_run_timestamp_seconds{\(labels)}"]), succeeded)
  }

  /// A job file that cannot be read (exit 2) says the run failed in `--metrics`'s file, under
  /// the labels of the series the file holds (the job's name and namespace are in the broken
  /// file), the last success kept. A `{job}` path guessed from the file's name is written only
  /// over an earlier run's file: a new one under a wrong name would fail forever.
  func testABrokenJobFileWritesAFailedRunUnderTheLabelsTheMetricsFileHolds() throws {
    let manifest = temporary.appending("urls.txt")
    try server.url("/a.jpg").write(toFile: manifest, atomically: true, encoding: .utf8)
    let job = temporary.appending("eu.yaml")
    let text = """
      name: europe
      cache:
        directory: \(temporary.appending("cache"))
        namespace: shop
      manifests: [\(manifest)]
      """
    try text.write(toFile: job, atomically: true, encoding: .utf8)
    let metricsFile = temporary.appending("imagecache.prom")
    let good = try ImageCacheBinary.run(["run", job, "--metrics", metricsFile])
    XCTAssertEqual(good.status, 0, good.stderr)
    let labels = "imagecache_job=\"europe\",namespace=\"shop\""
    let succeeded = try XCTUnwrap(
      try parse(metricsFile)["imagecache_last_success_timestamp_seconds{\(labels)}"])

    // An edit that left a list open.
    try text.replacingOccurrences(of: "]", with: "").write(
      toFile: job, atomically: true, encoding: .utf8)
    let broken = try ImageCacheBinary.run(["run", job, "--metrics", metricsFile])
    XCTAssertEqual(broken.status, 2, broken.stderr)
    XCTAssertTrue(broken.stderr.contains("\(job):"), broken.stderr)
    let after = try parse(metricsFile)
    XCTAssertEqual(after["imagecache_last_run_status{\(labels),status=\"failed\"}"], 1, "\(after)")
    XCTAssertEqual(after["imagecache_last_run_status{\(labels),status=\"completed\"}"], 0)
    XCTAssertEqual(after["imagecache_last_success_timestamp_seconds{\(labels)}"], succeeded)
    XCTAssertEqual(Set(after.keys.filter { $0.contains("imagecache_job=\"eu\"") }), [])

    let guessed = temporary.appending("imagecache-eu.prom")
    let unknown = try ImageCacheBinary.run([
      "run", job, "--metrics", temporary.appending("imagecache-{job}.prom"),
    ])
    XCTAssertEqual(unknown.status, 2, unknown.stderr)
    XCTAssertTrue(
      unknown.stderr.contains("warning: metrics not written to \(guessed): its {job}"),
      unknown.stderr)
    XCTAssertFalse(FileManager.default.fileExists(atPath: guessed))

    // A metrics file named only in the broken file: said, not written.
    let own = temporary.appending("own.prom")
    try (text.replacingOccurrences(of: "]", with: "") + "\nmetrics: \(own)\n").write(
      toFile: job, atomically: true, encoding: .utf8)
    let inFile = try ImageCacheBinary.run(["run", job])
    XCTAssertEqual(inFile.status, 2, inFile.stderr)
    XCTAssertTrue(
      inFile.stderr.contains(
        "warning: metrics not written: the job's own metrics: file is named in \(job)"),
      inFile.stderr)
    XCTAssertFalse(FileManager.default.fileExists(atPath: own))
    XCTAssertEqual(server.requestCount("/a.jpg"), 1)
  }

  /// A `{job}` path is guessed from a broken job file's name, but one that names the job
  /// otherwise is not that job: `eu/nightly.yaml` named `europe`, broken, must not write its
  /// failure over `us/nightly.yaml`'s metrics (a job named `nightly` by its file), which would
  /// page for the wrong job.
  func testABrokenJobFileNamedOtherwiseLeavesTheMetricsOfTheJobItsFileNameGuesses() throws {
    let metrics = temporary.appending("imagecache-nightly.prom")
    let others =
      "imagecache_last_run_status{imagecache_job=\"nightly\",namespace=\"default\","
      + "status=\"completed\"} 1.0\n"
    try others.write(toFile: metrics, atomically: true, encoding: .utf8)
    try FileSystem.createDirectory(path: temporary.appending("eu"))
    let job = temporary.appending("eu/nightly.yaml")
    try "name: europe\nmanifests: [urls.txt\n".write(toFile: job, atomically: true, encoding: .utf8)
    let broken = try ImageCacheBinary.run([
      "run", job, "--metrics", temporary.appending("imagecache-{job}.prom"),
    ])
    XCTAssertEqual(broken.status, 2, broken.stderr)
    XCTAssertTrue(
      broken.stderr.contains("warning: metrics not written to \(metrics): its {job}"),
      broken.stderr)
    XCTAssertEqual(try String(contentsOfFile: metrics, encoding: .utf8), others)
  }

  /// A night whose manifest could not be fetched exits 1 with no URL in any outcome: the
  /// metrics say the input failed, and an alert reads it (the failure ratio has no URL to count).
  func testAManifestThatFailedAsAWholeIsCountedInTheMetrics() throws {
    let metricsFile = temporary.appending("imagecache.prom")
    let result = try ImageCacheBinary.run([
      "prefetch", server.url("/gone.txt"), "--cache", temporary.appending("cache"),
      "--metrics", metricsFile,
    ])
    XCTAssertEqual(result.status, 1, result.stderr)
    let labels = "imagecache_job=\"prefetch\",namespace=\"default\""
    XCTAssertEqual(try parse(metricsFile)["imagecache_last_run_failed_inputs{\(labels)}"], 1)
  }

  /// A dry run removes nothing, and its metrics say so: 0 files removed and 0 bytes freed (the
  /// plan is in its report), where a dashboard would otherwise count a plan as space freed.
  func testADryRunsMetricsCountNothingRemovedOrFreed() throws {
    let folder = temporary.appending("cache/default")
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    for name in ["a", "b"] {
      XCTAssertTrue(
        FileManager.default.createFile(atPath: folder + "/" + name, contents: Data(count: 5000)))
    }
    let metricsFile = temporary.appending("imagecache.prom")
    func expired(_ extra: [String]) throws -> (files: Double?, bytes: Double?) {
      let result = try ImageCacheBinary.run(
        ["maintain", "--cache", temporary.appending("cache"), "--max-age", "0"]
          + ["--metrics", metricsFile] + extra)
      XCTAssertEqual(result.status, 0, result.stderr)
      let samples = try parse(metricsFile)
      func value(_ name: String) -> Double? {
        samples.first { $0.key.hasPrefix(name + "{") && $0.key.contains("pass=\"expire\"") }?
          .value
      }
      return (value("imagecache_last_run_removed_files"), value("imagecache_last_run_freed_bytes"))
    }
    let planned = try expired(["--dry-run"])
    XCTAssertEqual(planned.files, 0)
    XCTAssertEqual(planned.bytes, 0)
    XCTAssertTrue(FileManager.default.fileExists(atPath: folder + "/a"), "a dry run removed a file")
    let done = try expired([])
    XCTAssertEqual(done.files, 2)
    XCTAssertGreaterThan(done.bytes ?? 0, 0)
  }

  func testTheLastRunsValuesAreGaugesLabelledWithOurOwnJobLabel() throws {
    let manifest = temporary.appending("urls.txt")
    try server.url("/a.jpg").write(toFile: manifest, atomically: true, encoding: .utf8)
    let metricsFile = temporary.appending("imagecache.prom")
    let result = try ImageCacheBinary.run([
      "prefetch", manifest, "--cache", temporary.appending("cache"), "--metrics", metricsFile,
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let text = try String(contentsOfFile: metricsFile, encoding: .utf8)
    let types = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }
    XCTAssertFalse(types.isEmpty, text)
    for type in types { XCTAssertTrue(type.hasSuffix(" gauge"), String(type)) }
    let samples = try parse(metricsFile)
    XCTAssertFalse(samples.isEmpty)
    for name in samples.keys {
      XCTAssertTrue(name.contains("imagecache_job=\"prefetch\""), name)
      XCTAssertFalse(name.contains("{job=") || name.contains(",job="), name)
    }
    XCTAssertEqual(
      samples[
        "imagecache_last_run_urls{imagecache_job=\"prefetch\",namespace=\"default\","
          + "outcome=\"downloaded\"}"], 1)
    XCTAssertNotNil(
      samples[
        "imagecache_last_run_duration_seconds{imagecache_job=\"prefetch\","
          + "namespace=\"default\"}"])
  }

  /// The alerting rules load, pass their unit tests (`cron/imagecache.rules.test.yml`, series
  /// as a scrape stores them) and read only metrics that a run writes: a prefetch, a
  /// maintenance pass or an audit, whose files `promtool check metrics` passes.
  func testTheAlertRulesPassTheirUnitTestsAndReadWhatARunWrites() throws {
    let promtool = "/usr/bin/promtool"
    guard FileManager.default.isExecutableFile(atPath: promtool) else {
      try requireOrSkip("promtool is not installed (Debian: prometheus)")
    }
    let cron = CronWrapperTests.repository.appendingPathComponent("cron").path
    let check = try Command.run(
      promtool, ["check", "rules", "imagecache.rules.yml"], directory: cron)
    XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
    let tests = try Command.run(
      promtool, ["test", "rules", "imagecache.rules.test.yml"], directory: cron)
    XCTAssertEqual(tests.status, 0, tests.stdout + tests.stderr)

    let manifest = temporary.appending("urls.txt")
    try server.url("/a.jpg").write(toFile: manifest, atomically: true, encoding: .utf8)
    let metricsFile = temporary.appending("imagecache.prom")
    _ = try ImageCacheBinary.run([
      "prefetch", manifest, "--cache", temporary.appending("cache"), "--metrics", metricsFile,
    ])
    let maintained = temporary.appending("maintain.prom")
    let maintain = try ImageCacheBinary.run([
      "maintain", "--cache", temporary.appending("cache"), "--max-age", "7d", "--metrics",
      maintained,
    ])
    XCTAssertEqual(maintain.status, 0, maintain.stderr)
    let audited = temporary.appending("verify.prom")
    let verify = try ImageCacheBinary.run([
      "verify", "--cache", temporary.appending("cache"), "--metrics", audited,
    ])
    XCTAssertEqual(verify.status, 0, verify.stderr)
    // What node_exporter's textfile collector will read: Prometheus' own linter finds nothing.
    for file in [metricsFile, maintained, audited] {
      let lint = try Command.run(
        "/bin/sh", ["-c", "\"$0\" check metrics < \"$1\"", promtool, file])
      XCTAssertEqual(lint.status, 0, "\(file): \(lint.stdout)\(lint.stderr)")
      XCTAssertEqual(lint.stdout + lint.stderr, "", file)
    }
    let written =
      try String(contentsOfFile: metricsFile, encoding: .utf8)
      + String(contentsOfFile: maintained, encoding: .utf8)
      + String(contentsOfFile: audited, encoding: .utf8)
    let rules = try String(contentsOfFile: cron + "/imagecache.rules.yml", encoding: .utf8)
    let read = Set(
      rules.matches(of: /imagecache_[a-z_]+/).map { String($0.output) }
        .filter { !$0.hasPrefix("imagecache_job") })
    XCTAssertFalse(read.isEmpty)
    for name in read {
      XCTAssertTrue(written.contains("\n\(name){"), "\(name) is read by a rule: \(written)")
    }
    // And every label value a rule matches (`outcome="failed"`, `status=~"failed|..."`): a
    // value the binary never writes is an alert that can never fire.
    let matchers = rules.matches(of: /([a-z_]+)(=|=~|!=|!~)"([^"]*)"/)
    XCTAssertFalse(matchers.isEmpty)
    for matcher in matchers {
      for value in matcher.output.3.split(separator: "|") {
        let label = "\(matcher.output.1)=\"\(value)\""
        XCTAssertTrue(written.contains(label), "\(label) is matched by a rule: \(written)")
      }
    }
  }

  func testMetricsThatCannotBeWrittenAreAWarningAndTheRunKeepsItsWorkAndExitStatus() throws {
    let manifest = temporary.appending("urls.txt")
    try [server.url("/a.jpg"), server.url("/b.png")].joined(separator: "\n")
      .write(toFile: manifest, atomically: true, encoding: .utf8)
    // Folders the run's user cannot write: one that exists, one whose parent it cannot write
    // into to create it (node_exporter's folder on a host without node_exporter).
    let locked = temporary.appending("textfile_collector")
    try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: true)
    XCTAssertEqual(chmod(locked, 0o555), 0)
    let unwritable = locked + "/imagecache.prom"
    let uncreatable = locked + "/missing/imagecache.prom"
    let writable = temporary.appending("metrics/imagecache.prom")
    let reportFile = temporary.appending("report.json")

    let result = try runUnprivileged([
      "prefetch", manifest, "--cache", temporary.appending("cache"), "--report", reportFile,
      "--metrics", unwritable,
    ])
    XCTAssertEqual(result.status, 0, "the URLs all downloaded: \(result.stderr)")
    XCTAssertEqual(server.requestCount("/a.jpg"), 1)
    XCTAssertTrue(
      result.stderr.contains("warning: metrics not written to \(unwritable)"), result.stderr)
    let report = try RunReport.decode(
      try XCTUnwrap(FileManager.default.contents(atPath: reportFile)))
    XCTAssertEqual(report.status, .completed)
    XCTAssertEqual(report.prefetch?.downloaded, 2)
    let errors = try XCTUnwrap(report.metricsErrors, "the report says the metrics are missing")
    XCTAssertEqual(errors.count, 1)
    XCTAssertTrue(errors[0].contains(unwritable), errors[0])
    XCTAssertTrue(report.warnings.contains(errors[0]))
    XCTAssertFalse(FileManager.default.fileExists(atPath: unwritable))

    // The same from a job's metrics: beside --metrics, which is still written; and a URL
    // that fails makes the exit code 1, as without metrics.
    try [server.url("/c.gif"), server.url("/gone.jpg")].joined(separator: "\n")
      .write(toFile: manifest, atomically: true, encoding: .utf8)
    let job = temporary.appending("nightly.yaml")
    try """
    name: nightly
    cache:
      directory: \(temporary.appending("cache"))
    manifests: [\(manifest)]
    prefetch:
      retries: 0
    metrics: \(uncreatable)
    """.write(toFile: job, atomically: true, encoding: .utf8)
    let run = try runUnprivileged(["run", job, "--report", reportFile, "--metrics", writable])
    XCTAssertEqual(run.status, 1, run.stderr)
    let runReport = try RunReport.decode(
      try XCTUnwrap(FileManager.default.contents(atPath: reportFile)))
    XCTAssertEqual(runReport.status, .completed)
    XCTAssertEqual(runReport.metricsErrors?.count, 1)
    XCTAssertTrue(runReport.metricsErrors?.first?.contains(uncreatable) == true)
    XCTAssertTrue(
      try String(contentsOfFile: writable, encoding: .utf8).contains("imagecache_last_run_urls"))
  }

  func testTheHTMLPageEscapesHostileURLs() throws {
    let hostile = server.url("/x.jpg") + "?q=<script>alert(1)</script>&t=\"'onload='x"
    let manifest = temporary.appending("urls.txt")
    try [server.url("/a.jpg"), hostile, server.url("/<img src=x onerror=alert(2)>.jpg")]
      .joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
    let reportFile = temporary.appending("report.json")
    let run = try ImageCacheBinary.run([
      "prefetch", manifest, "--cache", temporary.appending("cache"), "--retries", "0",
      "--report", reportFile,
    ])
    XCTAssertEqual(run.status, 1, run.stderr)
    let page = temporary.appending("report.html")
    let render = try ImageCacheBinary.run(["report", "html", reportFile, "--output", page])
    XCTAssertEqual(render.status, 0, render.stderr)
    let html = try String(contentsOfFile: page, encoding: .utf8)
    XCTAssertFalse(html.contains("<script"), "no script at all, hostile or not")
    XCTAssertFalse(html.contains("<img"))
    XCTAssertFalse(html.contains("'onload='"))
    XCTAssertTrue(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), html)
    XCTAssertTrue(html.contains("&quot;&#39;onload=&#39;x"))
    XCTAssertTrue(html.contains("<svg"), "the failures as bar charts")
    XCTAssertTrue(html.contains("invalidDownloadStatusCode 404"))
    XCTAssertFalse(html.contains("http://") && html.contains("src=\"http"), "nothing fetched")
  }
}
