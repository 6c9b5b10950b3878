import Core
import Foundation
import TestSupport
import XCTest

/// Issue 31, item 1: out of the box, one host that answers over HTTP/2 gets as many downloads
/// at once as the total allows (streams on one connection), while a host that answers over
/// HTTP/1.1 still gets SD's 6 connections; `--per-host-streams` / `prefetch.perHostStreams`
/// bound the streams.
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

  func testOneHTTP2HostGetsManyStreamsOnOneConnectionByDefault() throws {
    let server = try http2Server()
    defer { server.shutdown() }
    let urls = (0..<40).map { server.url("/img/\($0).jpg") }
    let result = try prefetch(urls, [])
    XCTAssertEqual(result.status, 0, result.stderr)
    let stats = try server.stats()
    XCTAssertEqual(stats.requests, 40)
    // The first answer shows the host speaks HTTP/2; from then on the rest go at once, not
    // 6 at a time as over HTTP/1.1.
    XCTAssertGreaterThan(stats.mostOpen, 6, "\(stats)")
    XCTAssertLessThanOrEqual(stats.connections, 6, "\(stats)")
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

  func testAnHTTP1HostStillGetsSixConnectionsByDefault() throws {
    let server = try LoopbackServer(routes: [
      "/img.jpg": { _ in
        var response = ServerResponse.image(Fixtures.jpeg, type: "image/jpeg")
        response.headDelay = .milliseconds(200)
        return response
      }
    ])
    defer { server.shutdown() }
    let urls = (0..<30).map { server.url("/img.jpg?n=\($0)") }
    let result = try prefetch(urls, [])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(server.requestCount("/img.jpg"), 30)
    XCTAssertEqual(server.peakConcurrency, 6)
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
