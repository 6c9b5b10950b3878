import Core
import Foundation
import TestSupport
import XCTest

/// Issue 31, item 1: out of the box, one host that answers over HTTP/2 gets as many downloads
/// at once as the total allows (streams on one connection), while a host that answers over
/// HTTP/1.1 gets what its adaptive limit finds (issue 44), or SD's 6 connections when asked;
/// `--per-host-streams` / `prefetch.perHostStreams` bound the streams, or with `auto` adapt them.
final class PerHostStreamsTests: TemporaryFolderTestCase {
  private func http2Server() throws -> HTTP2LoopbackServer {
    try HTTP2LoopbackServer(body: Fixtures.jpeg, delay: 0.3, root: temporary.appending("h2"))
  }

  private func prefetch(_ urls: [String], _ flags: [String]) throws -> CommandResult {
    try ImageCacheBinary.run(
      [
        "prefetch", try temporary.manifest(urls), "--cache", temporary.appending("cache"),
        "--cacert", Fixtures.directory + "/tls/cert.pem",
      ] + flags)
  }

  private func report(_ path: String) throws -> RunReport {
    try RunReport.decode(Data(contentsOf: URL(fileURLWithPath: path)))
  }

  func testOneHTTP2HostGetsManyStreamsOnOneConnectionByDefault() throws {
    let server = try http2Server()
    defer { server.shutdown() }
    let urls = (0..<40).map { server.url("/img/\($0).jpg") }
    let path = temporary.appending("report.json")
    let result = try prefetch(urls, ["--report", path])
    XCTAssertEqual(result.status, 0, result.stderr)
    let stats = try server.stats()
    XCTAssertEqual(stats.requests, 40)
    // The first answer shows the host speaks HTTP/2; from then on the rest go at once, not
    // as the adaptive limit of a host over HTTP/1.1 would have them, from 4.
    XCTAssertGreaterThan(stats.mostOpen, 16, "\(stats)")
    XCTAssertLessThanOrEqual(stats.connections, 6, "\(stats)")
    XCTAssertEqual(
      try report(path).prefetch?.hostLimits, [], "a host over HTTP/2 keeps no adaptive limit")
  }

  func testAServerThatCapsItsStreamsGetsAFewConnectionsNotOneAStreamPastTheCap() throws {
    // libcurl 7.88 does not wait for a connection being opened to a host whose connections
    // are full: each transfer past the cap opens one more, up to the per-host connection cap
    // (here 51 connections before the cap followed what hosts over HTTP/1.1 use).
    let server = try HTTP2LoopbackServer(
      body: Fixtures.jpeg, delay: 0.5, root: temporary.appending("h2"), maxStreams: 100)
    defer { server.shutdown() }
    let urls = (0..<150).map { server.url("/img/\($0).jpg") }
    let result = try prefetch(urls, [])
    XCTAssertEqual(result.status, 0, result.stderr)
    let stats = try server.stats()
    XCTAssertEqual(stats.requests, 150, result.stderr)
    XCTAssertGreaterThan(stats.mostOpen, 100, "more streams than one connection carries: \(stats)")
    XCTAssertLessThanOrEqual(stats.connections, 6, "SD's 6 connections at most: \(stats)")
  }

  func testPerHostStreamsAutoAdaptsTheStreamsOfAnHTTP2Host() throws {
    let server = try http2Server()
    defer { server.shutdown() }
    let urls = (0..<40).map { server.url("/img/\($0).jpg") }
    let path = temporary.appending("report.json")
    let result = try prefetch(urls, ["--per-host-streams", "auto", "--report", path])
    XCTAssertEqual(result.status, 0, result.stderr)
    let stats = try server.stats()
    XCTAssertEqual(stats.requests, 40)
    // From 4, doubling as its answers come in time: the 40 never all go at once.
    XCTAssertLessThanOrEqual(stats.mostOpen, 32, "\(stats)")
    let limit = try XCTUnwrap(try report(path).prefetch?.hostLimits.first, "its limit is reported")
    XCTAssertEqual(limit.host, "127.0.0.1")
    XCTAssertGreaterThanOrEqual(limit.max, 4, "\(limit)")
  }

  func testPerHostStreamsBoundsTheStreamsToOneHost() throws {
    let server = try http2Server()
    defer { server.shutdown() }
    let urls = (0..<20).map { server.url("/img/\($0).jpg") }
    let result = try prefetch(urls, ["--per-host-streams", "3"])
    XCTAssertEqual(result.status, 0, result.stderr)
    let stats = try server.stats()
    XCTAssertEqual(stats.requests, 20)
    XCTAssertLessThanOrEqual(stats.mostOpen, 3, "\(stats)")
  }

  func testAJobFilesPerHostStreamsBoundsTheStreams() throws {
    let server = try http2Server()
    defer { server.shutdown() }
    let urls = try temporary.manifest((0..<20).map { server.url("/img/\($0).jpg") })
    let job = temporary.appending("job.yaml")
    try """
    cache:
      directory: \(temporary.appending("cache"))
    manifests: [\(urls)]
    prefetch:
      perHostStreams: 2
      caBundle: \(Fixtures.directory)/tls/cert.pem
    """.write(toFile: job, atomically: true, encoding: .utf8)
    let result = try ImageCacheBinary.run(["run", job])
    XCTAssertEqual(result.status, 0, result.stderr)
    let stats = try server.stats()
    XCTAssertEqual(stats.requests, 20)
    XCTAssertLessThanOrEqual(stats.mostOpen, 2, "\(stats)")
  }

  func testAnHTTP1HostsLimitIsFoundByDefaultAndIsSDsSixWhenAskedFor() throws {
    let server = try LoopbackServer(routes: [
      "/img.jpg": { _ in
        var response = ServerResponse.image(Fixtures.jpeg, type: "image/jpeg")
        response.headDelay = .milliseconds(200)
        return response
      }
    ])
    defer { server.shutdown() }
    let urls = (0..<30).map { server.url("/img.jpg?n=\($0)") }
    let path = temporary.appending("report.json")
    let result = try prefetch(urls, ["--report", path, "-v"])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(server.requestCount("/img.jpg"), 30)
    // An origin that answers every request in the same time is asked for more than SD's 6:
    // from 4, doubling while its answers come in time.
    XCTAssertGreaterThan(server.peakConcurrency, 6)
    let limit = try XCTUnwrap(try report(path).prefetch?.hostLimits.first, "its limit is reported")
    XCTAssertEqual(limit.host, "127.0.0.1")
    XCTAssertGreaterThanOrEqual(limit.max, server.peakConcurrency, "\(limit)")
    XCTAssertTrue(
      result.stderr.contains("127.0.0.1: per-host concurrency settled at"), result.stderr)

    let fixed = temporary.appending("fixed.json")
    let sixes = (0..<30).map { server.url("/img.jpg?six=\($0)") }
    let asked = try prefetch(sixes, ["--per-host-concurrency", "6", "--report", fixed])
    XCTAssertEqual(asked.status, 0, asked.stderr)
    XCTAssertEqual(server.requestCount("/img.jpg"), 60)
    let sixAtOnce = server.requests("/img.jpg").filter { $0.query?.hasPrefix("six=") == true }
      .map(\.inFlight).max()
    XCTAssertEqual(sixAtOnce, 6, "SD's 6, and no more, when asked for")
    XCTAssertEqual(try report(fixed).prefetch?.hostLimits, [], "a fixed limit reports none")
  }

  func testAnHTTP1HostThatRedirectsToAnHTTP2HostKeepsItsOwnLimit() throws {
    let cdn = try http2Server()
    defer { cdn.shutdown() }
    let origin = try LoopbackServer(routes: [
      "/moved": { request in
        var response = ServerResponse.redirect(to: cdn.url("/img/\(request.query ?? "").jpg"))
        response.headDelay = .milliseconds(100)
        return response
      }
    ])
    defer { origin.shutdown() }
    let urls = (0..<40).map { origin.url("/moved?\($0)") }
    let path = temporary.appending("report.json")
    let result = try prefetch(urls, ["--report", path])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(try cdn.stats().requests, 40)
    XCTAssertEqual(origin.requestCount("/moved"), 40)
    // The CDN's HTTP/2 is its own: the origin answered over HTTP/1.1 and keeps its adaptive
    // limit, grown on its own redirects by slow start (4, 8, 16, then a step a round), not the
    // CDN's 256 streams as connections to it (the 36 after its first 4 at once).
    XCTAssertLessThanOrEqual(origin.peakConcurrency, 20)
    // And the CDN's is the CDN's: its HTTP/2 learned from its own answers, it gets its streams,
    // and no adaptive limit of a host over HTTP/1.1 (nor a line in the report for one).
    let limits = try XCTUnwrap(report(path).prefetch?.hostLimits)
    XCTAssertEqual(limits.count, 1, "the origin's alone: \(limits)")
    XCTAssertGreaterThan(limits.first?.max ?? 0, 4, "grown on its redirects: \(limits)")
  }

  func testPerHostStreamsOutOfRangeIsAUsageError() throws {
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(["http://127.0.0.1:1/a.jpg"]), "--cache",
      temporary.appending("cache"), "--per-host-streams", "0",
    ])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains("--per-host-streams"), result.stderr)
    XCTAssertTrue(result.stderr.contains("1 to 10000"), result.stderr)
  }
}
