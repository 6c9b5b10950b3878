import Core
import Foundation
import Runner
import TestSupport
import XCTest

/// A job file's fleet settings (issue 28): `allowURLFailures`, `prefetch.fleetPerHostConcurrency`
/// and `{shard}` in its paths.
final class FleetJobTests: TemporaryFolderTestCase {
  private func load(_ text: String) throws -> Job {
    let path = temporary.appending("nightly.yaml")
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return try Job.load(path: path)
  }

  func testFleetSettingsAreReadAndCheckedWithTheirField() throws {
    var job = try load(
      """
      cache: {directory: /srv/c}
      allowURLFailures: true
      prefetch: {fleetPerHostConcurrency: 12}
      report: r/{job}-{shard}-of-{shards}.json
      """)
    XCTAssertTrue(job.allowURLFailures)
    XCTAssertEqual(job.prefetch.fleetPerHostConcurrency, 12)
    XCTAssertEqual(
      job.reportPath(startedAt: Date()), temporary.appending("r/nightly-all-of-1.json"))
    job.shard = Shard(index: 2, count: 4)
    XCTAssertEqual(job.reportPath(startedAt: Date()), temporary.appending("r/nightly-2-of-4.json"))

    XCTAssertThrowsError(
      try load("cache: {directory: /srv/c}\nprefetch: {fleetPerHostConcurrency: 0}\n")
    ) { error in
      XCTAssertTrue(
        "\(error)".contains("nightly.yaml:2: field 'prefetch.fleetPerHostConcurrency'"), "\(error)")
    }
    XCTAssertThrowsError(try load("cache: {directory: /srv/c}\nallowURLFailures: sometimes\n")) {
      error in
      XCTAssertTrue(
        "\(error)".contains("field 'allowURLFailures': expected true or false"), "\(error)")
    }
  }
}
