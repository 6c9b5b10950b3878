import Core
import Foundation
import NIOCore
import Runner
import TestSupport
import XCTest

/// End-to-end: `imagecache run JOB` against a loopback server, as cron would run it.
final class RunCommandTests: LoopbackTestCase {
  override var routes: [String: Route] {
    Self.images.merging([
      "/slow.jpg": { _ in ServerResponse(body: Fixtures.jpeg, headDelay: .seconds(5)) }
    ]) { $1 }
  }

  private func job(urls: [String], extra: String = "") throws -> String {
    try urls.joined(separator: "\n").write(
      toFile: temporary.appending("urls.txt"), atomically: true, encoding: .utf8)
    let path = temporary.appending("nightly.yaml")
    try """
    name: nightly
    cache:
      directory: cache
    manifests: [urls.txt]
    report: reports/{date}.json
    \(extra)
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  func testJobThenAllHitsThenMaintainWithASmallLimit() throws {
    let path = try job(urls: ["/a.jpg", "/b.png", "/c.gif"].map(server.url))
    let first = try ImageCacheBinary.run(["run", path, "--json"])
    XCTAssertEqual(first.status, 0, first.stderr)
    let report = try RunReport.decode(Data(first.stdout.utf8))
    XCTAssertEqual(report.job, "nightly")
    XCTAssertEqual(report.prefetch?.downloaded, 3)
    XCTAssertEqual(report.maintenance.map(\.pass), [], "the job lists no maintenance pass")
    let reports = try FileManager.default.contentsOfDirectory(
      atPath: temporary.appending("reports"))
    XCTAssertEqual(reports.count, 1, "the job's report file is written")

    let second = try ImageCacheBinary.run(["run", path, "--json"])
    XCTAssertEqual(second.status, 0, second.stderr)
    let hits = try XCTUnwrap(RunReport.decode(Data(second.stdout.utf8)).prefetch)
    XCTAssertEqual(hits.diskHits, 3)
    XCTAssertEqual(hits.downloaded, 0)
    XCTAssertEqual(server.requestCount("/a.jpg"), 1)

    let cache = temporary.appending("cache")
    let maintain = try ImageCacheBinary.run([
      "maintain", "--cache", cache, "--max-size", "1", "--json",
    ])
    XCTAssertEqual(maintain.status, 0, maintain.stderr)
    let passes = try RunReport.decode(Data(maintain.stdout.utf8)).maintenance
    XCTAssertEqual(passes.map(\.pass), [.trim], "--max-size alone only trims")
    XCTAssertEqual(passes.first?.filesRemoved, 3)
    XCTAssertEqual(try DiskCache(location: CacheLocation(directory: cache)).usage().fileCount, 0)
  }

  func testSecondRunWhileTheFirstHoldsTheLockExitsThree() throws {
    let path = try job(urls: [server.url("/slow.jpg")])
    let (first, out, err) = try ImageCacheBinary.start(["run", path])
    waitUntil(timeout: 10, "the first run's request") { server.requestCount("/slow.jpg") > 0 }
    let second = try ImageCacheBinary.run(["run", path])
    XCTAssertEqual(second.status, 3, second.stderr)
    XCTAssertTrue(second.stderr.contains("lock"), second.stderr)
    XCTAssertEqual(ImageCacheBinary.finish(first, out, err).status, 0)
  }

  func testMalformedJobFileExitsTwoNamingTheLine() throws {
    let path = try job(urls: [], extra: "prefetch:\n  concurrency: lots\n")
    let result = try ImageCacheBinary.run(["run", path])
    XCTAssertEqual(result.status, 2)
    XCTAssertTrue(result.stderr.contains("\(path):7: field 'prefetch.concurrency'"), result.stderr)
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: temporary.appending("cache")), "nothing ran")
  }

  func testSIGTERMDuringARunWritesAnInterruptedReport() throws {
    let path = try job(
      urls: (0..<8).map { server.url("/slow.jpg") + "?n=\($0)" },
      extra: "prefetch:\n  concurrency: 2\n")
    let (process, out, err) = try ImageCacheBinary.start(["run", path])
    waitUntil(timeout: 10, "two downloads under way") { server.requestCount("/slow.jpg") >= 2 }
    kill(process.processIdentifier, SIGTERM)
    let result = ImageCacheBinary.finish(process, out, err)
    XCTAssertEqual(result.status, 143, result.stderr)
    let reportDirectory = temporary.appending("reports")
    let name = try XCTUnwrap(FileManager.default.contentsOfDirectory(atPath: reportDirectory).first)
    let report = try RunReport.decode(
      XCTUnwrap(FileManager.default.contents(atPath: reportDirectory + "/" + name)))
    XCTAssertEqual(report.status, .interrupted)
    XCTAssertEqual(
      try DiskCache(location: CacheLocation(directory: temporary.appending("cache"))).usage()
        .fileCount, 0)
  }

  func testTheBundledExampleJobParses() throws {
    let example = URL(fileURLWithPath: Fixtures.directory).deletingLastPathComponent()
      .deletingLastPathComponent()
      .appendingPathComponent("jobs/example.yaml").path
    let job = try Job.load(path: example)
    XCTAssertEqual(job.manifests.count, 3)
    XCTAssertEqual(job.sitemap.order, .lastmod)
    for manifest in job.manifests {
      XCTAssertTrue(FileManager.default.fileExists(atPath: manifest), manifest)
    }
  }
}
