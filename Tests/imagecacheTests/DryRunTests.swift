import Core
import Foundation
import State
import TestSupport
import XCTest

/// Issue 29 item 1: a dry run writes nothing a real run would (reports, metrics, state, lock)
/// and `prefetch --dry-run` prints the plan, without a request.
final class DryRunTests: LoopbackTestCase {
  var location: CacheLocation!

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
    try FileSystem.createDirectory(path: location.diskCachePath)
  }

  private func manifest(_ lines: [String], name: String = "urls.txt") throws -> String {
    let path = temporary.appending(name)
    try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  /// Every entry under `path` with its inode, size and modification time, and with
  /// `accessTimes` the access time of each cache file too (what SD's expiry reads; a folder
  /// listed or the state read have theirs set by the kernel). Taken with `lstat` alone:
  /// reading a file would set its access time.
  private func snapshot(_ path: String, accessTimes: Bool = true) -> [String: String] {
    var entries: [String: String] = [:]
    for relative in FileManager.default.enumerator(atPath: path)?.allObjects as? [String] ?? [] {
      var status = stat()
      XCTAssertEqual(lstat(path + "/" + relative, &status), 0, relative)
      entries[relative] =
        "\(status.st_ino) \(status.st_size) m\(status.st_mtim.tv_sec).\(status.st_mtim.tv_nsec)"
        + (accessTimes && !relative.hasPrefix(".") && status.st_mode & S_IFMT == S_IFREG
          ? " a\(status.st_atim.tv_sec).\(status.st_atim.tv_nsec)" : "")
    }
    return entries
  }

  private var requests: Int {
    ["/a.jpg", "/b.png", "/c.gif", "/new.jpg"].map(server.requestCount).reduce(0, +)
  }

  func testRunDryRunLeavesTheJobsReportMetricsStateAndLockAsTheyWere() throws {
    let urls = try manifest([server.url("/a.jpg")])
    let report = temporary.appending("nightly.json")
    let metrics = temporary.appending("nightly.prom")
    try #"{"status": "completed", "prefetch": {"failed": 16}}"#.write(
      toFile: report, atomically: true, encoding: .utf8)
    try "imagecache_last_run_urls{outcome=\"failed\"} 16\n".write(
      toFile: metrics, atomically: true, encoding: .utf8)
    let job = temporary.appending("nightly.yaml")
    try """
    name: nightly
    cache:
      directory: \(location.directory)
      maxDiskAge: 1d
    manifests: [\(urls)]
    maintenance: [expire]
    report: \(report)
    metrics: \(metrics)
    """.write(toFile: job, atomically: true, encoding: .utf8)
    let before = snapshot(temporary.path, accessTimes: false)

    let result = try ImageCacheBinary.run(["run", job, "--dry-run"])

    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(result.stdout, "download \(server.url("/a.jpg"))\n", "the job's plan")
    XCTAssertEqual(snapshot(temporary.path, accessTimes: false), before, result.stderr)
    XCTAssertEqual(
      try String(contentsOfFile: report, encoding: .utf8),
      #"{"status": "completed", "prefetch": {"failed": 16}}"#)
    XCTAssertEqual(
      try String(contentsOfFile: metrics, encoding: .utf8),
      "imagecache_last_run_urls{outcome=\"failed\"} 16\n")
    XCTAssertFalse(FileManager.default.fileExists(atPath: location.stateDirectory))
    XCTAssertEqual(requests, 0)
  }

  func testPrefetchDryRunPrintsEachURLsPlanWithoutARequestOrAWrite() throws {
    let now = Int64(Date().timeIntervalSince1970)
    let disk = DiskCache(location: location)
    // a.jpg under its current name, b.png under SD's legacy name without extension.
    try disk.store(Fixtures.jpeg, forKey: server.url("/a.jpg"))
    let legacy = disk.path + "/" + CacheFileName.md5Hex(server.url("/b.png"))
    try Fixtures.png.write(to: URL(fileURLWithPath: legacy))
    for path in [disk.cachePath(forKey: server.url("/a.jpg")), legacy] {
      try FileSystem.setTimes(
        path: path, accessTime: (now - 86400) * 1_000_000_000,
        modificationTime: (now - 86400) * 1_000_000_000)
    }
    do {
      // Closed before the dry run, as a finished run leaves it.
      let store = try StateStore(location: location)
      try store.recordFailure(
        url: server.url("/c.gif"), code: 1001, name: "badImageData", reason: "html", at: Date())
      // Failed long ago: past --blacklist-ttl, so a run would try it again.
      try store.recordFailure(
        url: server.url("/new.jpg"), code: 1001, name: "badImageData", reason: "html",
        at: Date(timeIntervalSinceNow: -7200))
    }
    let urls = try manifest([
      server.url("/a.jpg"), server.url("/b.png"), server.url("/c.gif"), server.url("/new.jpg"),
      "ftp://example.com/d.png", "# a comment", #"{"url": 3}"#,
    ])
    let before = snapshot(location.diskCachePath)

    let result = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", location.directory, "--dry-run", "--blacklist-ttl", "1h",
    ])

    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(
      result.stdout.split(separator: "\n").map(String.init),
      [
        "hit \(server.url("/a.jpg"))", "hit \(server.url("/b.png"))",
        "blacklisted \(server.url("/c.gif"))", "download \(server.url("/new.jpg"))",
        "invalid ftp://example.com/d.png: only http and https are fetched, not ftp",
      ])
    XCTAssertTrue(
      result.stderr.contains(
        "6 URLs: 2 hits, 1 would download, 0 would revalidate, 1 blacklisted, 1 invalid, "
          + "0 not in the cache (fromCacheOnly), 1 skipped"),
      result.stderr)
    XCTAssertTrue(result.stderr.contains("urls.txt:7: field 'url'"), result.stderr)
    XCTAssertEqual(requests, 0)
    XCTAssertEqual(
      snapshot(location.diskCachePath), before,
      "no access time set, no lock file, no state written")
  }

  func testPrefetchDryRunCreatesNoStateOrLockInACacheThatHasNone() throws {
    let urls = try manifest([server.url("/a.jpg")])
    let result = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", location.directory, "--dry-run",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(result.stdout, "download \(server.url("/a.jpg"))\n")
    XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: location.diskCachePath), [])
    XCTAssertEqual(requests, 0)
    // Like every dry run, it plans for a cache that exists: a typo is not a plan.
    let typo = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", temporary.appending("typo"), "--dry-run",
    ])
    XCTAssertEqual(typo.status, 2, typo.stderr)
    XCTAssertFalse(FileManager.default.fileExists(atPath: temporary.appending("typo")))
  }

  func testPrefetchDryRunWithJSONPrintsTheReportWithThePlan() throws {
    try DiskCache(location: location).store(Fixtures.jpeg, forKey: server.url("/a.jpg"))
    let urls = try manifest([server.url("/a.jpg"), server.url("/b.png"), "ftp://x/y.png"])

    let result = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", location.directory, "--dry-run", "--json",
    ])

    XCTAssertEqual(result.status, 0, result.stderr)
    let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
    XCTAssertEqual(SchemaValidator.validate(json, against: try SchemaValidator.reportSchema()), [])
    let report = try RunReport.decode(Data(result.stdout.utf8))
    XCTAssertNil(report.prefetch, "nothing was prefetched")
    let plan = try XCTUnwrap(report.plan)
    XCTAssertEqual(
      plan.urls.map { "\($0.action) \($0.url)" },
      ["hit \(server.url("/a.jpg"))", "download \(server.url("/b.png"))", "invalid ftp://x/y.png"])
    XCTAssertEqual(plan.urls.map(\.source), ["\(urls):1", "\(urls):2", "\(urls):3"])
    XCTAssertEqual([plan.counts.total, plan.counts.hit, plan.counts.download], [3, 1, 1])
    XCTAssertEqual(requests, 0)
  }

  func testPrefetchDryRunOnAShardPlansOnlyThatShardsURLs() throws {
    let all = (0..<40).map { server.url("/new.jpg?n=\($0)") }
    let urls = try manifest(all)
    var planned: [[String]] = []
    for shard in ["0/2", "1/2"] {
      let result = try ImageCacheBinary.run([
        "prefetch", urls, "--cache", location.directory, "--dry-run", "--shard", shard,
      ])
      XCTAssertEqual(result.status, 0, result.stderr)
      planned.append(result.stdout.split(separator: "\n").map { String($0.dropFirst(9)) })
    }
    XCTAssertFalse(planned[0].isEmpty)
    XCTAssertFalse(planned[1].isEmpty)
    XCTAssertEqual(Set(planned[0]).intersection(planned[1]), [])
    XCTAssertEqual(Set(planned[0] + planned[1]), Set(all))
    XCTAssertEqual(server.requestCount("/new.jpg"), 0)
  }
}
