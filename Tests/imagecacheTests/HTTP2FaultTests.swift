import Core
import Foundation
import TestSupport
import XCTest

/// Issue 38: a fault of one HTTP/2 stream stays with that stream. libcurl 7.88 fails the whole
/// nghttp2 session on a header block over its limit, and every stream beside it with it.
final class HTTP2FaultTests: TemporaryFolderTestCase {
  func testAnOversizedHeaderBlockFailsItsURLAloneAndNotRetried() throws {
    let server = try HTTP2LoopbackServer(
      body: Fixtures.jpeg, delay: 0.3, root: temporary.appending("h2"),
      oversizedHeaders: "/huge-headers.jpg")
    defer { server.shutdown() }
    let siblings = (0..<30).map { server.url("/img/\($0).jpg") }
    let culprit = server.url("/huge-headers.jpg")
    let result = try ImageCacheBinary.run(
      [
        "prefetch", try temporary.manifest(Array(siblings[..<10]) + [culprit] + siblings[10...]),
        "--cache", temporary.appending("cache"), "--cacert", Fixtures.directory + "/tls/cert.pem",
        "--json",
      ])
    XCTAssertEqual(result.status, 1, result.stderr)
    let prefetch = try XCTUnwrap(try RunReport.decode(Data(result.stdout.utf8)).prefetch)
    XCTAssertEqual(prefetch.downloaded, 30, "every sibling is fetched")
    XCTAssertEqual(prefetch.failures.map(\.url), [culprit])
    XCTAssertEqual(prefetch.failures.first?.name, "responseHeaderTooLarge")
    XCTAssertEqual(prefetch.failures.first?.attempts, 1, "not retried")
  }

  /// A server that refuses streams (RST_STREAM REFUSED_STREAM) gets no storm: libcurl 7.88
  /// resends a refused request five times at once on fresh connections, inside each of our
  /// attempts; here each refusal is one attempt, after a back-off: `retries + 1` requests.
  func testARefusedStreamIsOneAttemptRetriedAfterABackOff() throws {
    let server = try HTTP2LoopbackServer(
      body: Fixtures.jpeg, delay: 0, root: temporary.appending("h2"), refuses: "/busy.jpg")
    defer { server.shutdown() }
    let busy = server.url("/busy.jpg")
    let result = try ImageCacheBinary.run(
      [
        "prefetch", try temporary.manifest([busy]),
        "--cache", temporary.appending("cache"), "--cacert", Fixtures.directory + "/tls/cert.pem",
        "--retries", "2", "--json",
      ])
    XCTAssertEqual(result.status, 1, result.stderr)
    let prefetch = try XCTUnwrap(try RunReport.decode(Data(result.stdout.utf8)).prefetch)
    let failure = try XCTUnwrap(prefetch.failures.first, result.stderr)
    XCTAssertEqual(failure.url, busy)
    XCTAssertEqual(failure.attempts, 3)
    XCTAssertTrue(failure.message.contains("REFUSED_STREAM"), failure.message)
    XCTAssertEqual(try server.stats().paths["/busy.jpg"], 3, "one request per attempt")
  }

  /// A refused stream holds its host back a moment, as a 429 with `Retry-After` does: every
  /// refusal is a pause of the host in the report (SPEC section 5).
  func testEachRefusedStreamIsAPauseOfItsHost() throws {
    let server = try HTTP2LoopbackServer(
      body: Fixtures.jpeg, delay: 0, root: temporary.appending("h2"), refuses: "/busy.jpg")
    defer { server.shutdown() }
    let result = try ImageCacheBinary.run(
      [
        "prefetch", try temporary.manifest([server.url("/busy.jpg")]),
        "--cache", temporary.appending("cache"), "--cacert", Fixtures.directory + "/tls/cert.pem",
        "--retries", "2", "--per-host-concurrency", "1", "--json",
      ])
    XCTAssertEqual(result.status, 1, result.stderr)
    let prefetch = try XCTUnwrap(try RunReport.decode(Data(result.stdout.utf8)).prefetch)
    XCTAssertEqual(prefetch.failures.first?.attempts, 3, result.stderr)
    XCTAssertEqual(prefetch.hostBackoffs.map(\.host), ["127.0.0.1"])
    XCTAssertEqual(prefetch.hostBackoffs.map(\.pauses), [3], "one pause per refusal")
  }
}
