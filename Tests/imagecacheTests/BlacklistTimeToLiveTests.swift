import Core
import Foundation
import State
import TestSupport
import XCTest

/// SPEC section 2: `--blacklist-ttl` counts from a URL's last failure, not its first. A URL
/// that first failed two hours ago and failed again ten minutes ago is still refused under a
/// time-to-live of an hour, by a run and by a dry run alike; one whose last failure is two hours
/// old is tried again.
final class BlacklistTimeToLiveTests: LoopbackTestCase {
  var location: CacheLocation!

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
    try FileSystem.createDirectory(path: location.diskCachePath)
    let store = try StateStore(location: location)
    let now = Date()
    for (url, first, last) in [
      (server.url("/a.jpg"), now.addingTimeInterval(-7200), now.addingTimeInterval(-600)),
      (server.url("/b.png"), now.addingTimeInterval(-7300), now.addingTimeInterval(-7200)),
    ] {
      try store.recordFailure(url: url, code: 1001, name: "badImageData", reason: "html", at: first)
      try store.recordFailure(url: url, code: 1001, name: "badImageData", reason: "html", at: last)
    }
  }

  private func manifest() throws -> String {
    let path = temporary.appending("urls.txt")
    try [server.url("/a.jpg"), server.url("/b.png")].joined(separator: "\n").write(
      toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  func testADryRunCountsTheTimeToLiveFromTheLastFailure() throws {
    let result = try ImageCacheBinary.run([
      "prefetch", try manifest(), "--cache", location.directory, "--dry-run",
      "--blacklist-ttl", "1h",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(
      result.stdout, "blacklisted \(server.url("/a.jpg"))\ndownload \(server.url("/b.png"))\n")
  }

  func testARunCountsTheTimeToLiveFromTheLastFailure() throws {
    let result = try ImageCacheBinary.run([
      "prefetch", try manifest(), "--cache", location.directory, "--blacklist-ttl", "1h",
      "--allow-url-failures",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(server.requestCount("/a.jpg"), 0, "failed ten minutes ago: still refused")
    XCTAssertEqual(server.requestCount("/b.png"), 1, "failed two hours ago: tried again")
  }
}
