import Core
import Foundation
import TestSupport
import XCTest

/// Issue 38, end to end: `--deny-addresses` and `prefetch.denyAddresses` keep a run off the
/// addresses they name, for image URLs and sitemaps alike; a refusal is `addressDenied`, tried
/// once and never blacklisted. Shown on loopback by denying loopback itself.
final class AddressRulesCommandTests: LoopbackTestCase {
  private func report(_ result: CommandResult) throws -> PrefetchReport {
    try XCTUnwrap(try RunReport.decode(Data(result.stdout.utf8)).prefetch, result.stderr)
  }

  func testADeniedAddressFailsItsURLOnceWithoutBlacklisting() throws {
    let photo = server.url("/a.jpg")
    let cache = temporary.appending("cache")
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest([photo]), "--cache", cache, "--json",
      "--deny-addresses", "10.0.0.0/8,127.0.0.0/8",
    ])
    XCTAssertEqual(result.status, 1, result.stderr)
    let failure = try XCTUnwrap(try report(result).failures.first, result.stderr)
    XCTAssertEqual(failure.name, "addressDenied")
    XCTAssertEqual(failure.code, -1022)
    XCTAssertEqual(failure.attempts, 1, "not retried")
    XCTAssertFalse(failure.blacklisted)
    XCTAssertTrue(failure.message.contains("127.0.0.1"), failure.message)
    XCTAssertTrue(failure.message.contains("127.0.0.0/8"), failure.message)
    XCTAssertEqual(server.allRequests.count, 0, "nothing reached the server")
    let blacklist = try ImageCacheBinary.run(["blacklist", "list", "--cache", cache])
    XCTAssertFalse(blacklist.stdout.contains(photo), blacklist.stdout)
  }

  func testASitemapAtADeniedAddressFailsAsAWholeInput() throws {
    let sitemap = server.url("/sitemap.xml")
    let path = temporary.appending("job.yaml")
    try """
    name: partner
    cache:
      directory: cache
    manifests: ["\(sitemap)"]
    prefetch:
      denyAddresses: [loopback]
    """.write(toFile: path, atomically: true, encoding: .utf8)
    let result = try ImageCacheBinary.run(["run", path, "--json"])
    XCTAssertEqual(result.status, 1, result.stderr)
    let prefetch = try report(result)
    XCTAssertEqual(prefetch.inputsFailed, 1, result.stderr)
    XCTAssertTrue(
      prefetch.inputFailures.first?.contains("addressDenied") == true
        || prefetch.inputFailures.first?.contains("address rule loopback") == true,
      "\(prefetch.inputFailures)")
    XCTAssertEqual(server.allRequests.count, 0, "nothing reached the server")
  }

  func testThroughAProxyTheProxysAddressIsChecked() throws {
    let proxy = try LoopbackProxy(folder: temporary.appending("proxy"))
    defer { proxy.shutdown() }
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest([server.url("/a.jpg")]), "--cache",
      temporary.appending("cache"), "--json", "--proxy", proxy.url, "--deny-addresses",
      "127.0.0.1",
    ])
    XCTAssertEqual(result.status, 1, result.stderr)
    let failure = try XCTUnwrap(try report(result).failures.first, result.stderr)
    XCTAssertEqual(failure.name, "addressDenied")
    XCTAssertEqual(proxy.requestLines, [], "nothing reached the proxy")
    XCTAssertEqual(server.allRequests.count, 0)
  }

  func testAnUnknownRuleIsAUsageError() throws {
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest([server.url("/a.jpg")]), "--cache",
      temporary.appending("cache"), "--deny-addresses", "intranet",
    ])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains("intranet"), result.stderr)
  }
}
