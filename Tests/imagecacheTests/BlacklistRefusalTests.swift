import Core
import Foundation
import State
import TestSupport
import XCTest

/// Issue 39, item 2 (SPEC section 12): a run the blacklist refused URLs of says so, with how
/// many, how old the blacklist is and how to try them again; a run the blacklist refused
/// entirely is not a silent success; text that cannot be a URL never reaches the blacklist.
final class BlacklistRefusalTests: LoopbackTestCase {
  var location: CacheLocation!

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  /// Puts `paths` of the server on the blacklist, as a run three days ago would have (a
  /// certificate problem since fixed).
  private func blacklist(_ paths: [String]) throws {
    let store = try StateStore(location: location)
    for path in paths {
      try store.recordFailure(
        url: server.url(path), code: 1001, name: "badImageData", reason: "was broken",
        at: Date().addingTimeInterval(-3 * 86_400 - 60))
    }
  }

  private func prefetch(_ lines: [String], _ arguments: [String] = []) throws -> (
    CommandResult, RunReport?
  ) {
    let manifest = temporary.appending("urls.txt")
    try lines.joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
    let reportPath = temporary.appending("report.json")
    try? FileManager.default.removeItem(atPath: reportPath)
    let result = try ImageCacheBinary.run(
      ["prefetch", manifest, "--cache", location.directory, "--report", reportPath] + arguments)
    let report = FileManager.default.contents(atPath: reportPath).flatMap {
      try? RunReport.decode($0)
    }
    return (result, report)
  }

  func testTheSummaryAndReportSayHowManyTheBlacklistRefusedSinceWhenAndHowToRetry() throws {
    try blacklist(["/a.jpg"])
    // A later failure: the summary says the age of the oldest.
    try StateStore(location: location).recordFailure(
      url: server.url("/b.png"), code: 1001, name: "badImageData", reason: "was broken",
      at: Date().addingTimeInterval(-3600))
    let (result, report) = try prefetch(["/a.jpg", "/b.png", "/c.gif"].map(server.url))
    XCTAssertEqual(result.status, 0, "one URL was downloaded: \(result.stderr)")
    let summary = try XCTUnwrap(
      result.stderr.split(separator: "\n").first { $0.contains(" URLs: ") }, result.stderr)
    for said in [
      "2 URL(s) refused by the blacklist", "first failed 3 days ago", "--option retryFailed",
      "imagecache blacklist clear --cache \(location.directory)",
    ] {
      XCTAssertTrue(summary.contains(said), "\(said) in: \(summary)")
    }
    let warnings = try XCTUnwrap(report).warnings
    XCTAssertTrue(
      warnings.contains { $0.contains("2 URL(s) refused by the blacklist") }, "\(warnings)")
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
  }

  func testARunTheBlacklistRefusedEntirelyExitsOneUnlessURLFailuresAreAllowed() throws {
    try blacklist(["/a.jpg", "/b.png"])
    let urls = ["/a.jpg", "/b.png"].map(server.url)
    let (refused, report) = try prefetch(urls)
    XCTAssertEqual(refused.status, 1, refused.stderr)
    XCTAssertTrue(refused.stderr.contains("nothing was tried: 2 URL(s) refused"), refused.stderr)
    XCTAssertEqual(report?.prefetch?.blacklisted, 2)

    let (allowed, _) = try prefetch(urls, ["--allow-url-failures"])
    XCTAssertEqual(allowed.status, 0, allowed.stderr)

    let (retried, again) = try prefetch(urls, ["--option", "retryFailed"])
    XCTAssertEqual(retried.status, 0, retried.stderr)
    XCTAssertEqual(again?.prefetch?.downloaded, 2)
  }

  func testQuotedSpacedOrHostlessTextIsALineErrorAndNeverBlacklisted() throws {
    let lines = [
      "\"\(server.url("/a.jpg"))\"", "\(server.url("/a.jpg")) \(server.url("/b.png"))",
      "https://", "http:///b.png",
      // Unicode's white space past ASCII: a no-break space, an ideographic space.
      "\(server.url("/a.jpg"))\u{00A0}x", "\(server.url("/a.jpg"))\u{3000}\(server.url("/b.png"))",
    ]
    for run in 1...2 {
      let (result, report) = try prefetch(lines)
      let prefetched = try XCTUnwrap(report?.prefetch, result.stderr)
      XCTAssertEqual(prefetched.skipped, 6, "run \(run): \(result.stderr)")
      XCTAssertEqual(prefetched.blacklisted, 0, "run \(run)")
      XCTAssertEqual(prefetched.blacklistedURLs, [], "run \(run)")
      for said in [
        "urls.txt:1: not a URL: it is quoted", "urls.txt:2: not a URL: it holds a space",
        "urls.txt:3: not a URL: no host", "urls.txt:4: not a URL: no host",
        "urls.txt:5: not a URL: it holds a space", "urls.txt:6: not a URL: it holds a space",
      ] {
        XCTAssertTrue(result.stderr.contains(said), "run \(run): \(said) in: \(result.stderr)")
      }
    }
    XCTAssertEqual(server.requestCount("/a.jpg") + server.requestCount("/b.png"), 0)
  }
}
