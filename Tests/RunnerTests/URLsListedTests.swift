import Core
import Foundation
import TestSupport
import XCTest

@testable import Runner

/// The URLs a run's manifests list (`urlsListed`: with `prefetch.total`, the URLs a run that
/// did not finish never tried, docs/reports.md). A shard counts its own share: the entries
/// whose key hashes to it, and the bad lines for shard 0 alone, which alone reports them, so
/// that `report merge`'s sum over the shards is the manifests' count.
final class URLsListedTests: TemporaryFolderTestCase {
  func testTheShardsCountsOfTheURLsListedAddUpToTheManifests() throws {
    let path = temporary.appending("urls.txt")
    let lines =
      (0..<40).map { "https://example.invalid/\($0).jpg" } + [
        "not a url", "\"https://example.invalid/quoted.jpg\"",
      ]
    try (lines.joined(separator: "\n") + "\n").write(
      toFile: path, atomically: true, encoding: .utf8)
    var job = Job(name: "nightly", location: CacheLocation(directory: temporary.appending("c")))
    job.manifests = [path]
    XCTAssertEqual(JobRunner.urlsListed(by: job), 42)
    var total = 0
    for index in 0..<3 {
      job.shard = Shard(index: index, count: 3)
      total += try XCTUnwrap(JobRunner.urlsListed(by: job))
    }
    XCTAssertEqual(total, 42)
  }
}
