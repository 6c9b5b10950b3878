import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import TestSupport
import XCTest

/// Issue 38: `--timeout` is a true idle timeout. A server that sent bytes and then went silent
/// is given up on once it has been silent for the timeout, not after libcurl's low-speed check
/// (a 5-second average), which fired about 6 s after the last byte.
final class IdleTimeoutTests: LoopbackTestCase {
  override var routes: [String: Route] {
    [
      // 2,000 bytes of a 100,000-byte body over 2 s, then nothing on a live connection.
      "/stalls.jpg": { _ in
        ServerResponse(
          headers: [("Content-Length", "100000")], body: Data(repeating: 0xFF, count: 2000),
          dripInterval: .milliseconds(100), dripChunk: 100)
      }
    ]
  }

  /// How long a download of `url` with a 1 s idle timeout took to fail, which must be as
  /// timed out.
  private func timeToGiveUp(_ url: String) async throws -> Duration {
    var configuration = PrefetchConfiguration()
    configuration.timeout = 1
    configuration.deadline = 60
    let downloader = Downloader(configuration: configuration.http)
    var request = DownloadRequest(url: try XCTUnwrap(URL(string: url)))
    request.allowInvalidSSLCertificates = true
    let started = ContinuousClock.now
    do {
      _ = try await downloader.download(request)
      XCTFail("a body that stops short cannot succeed")
    } catch {
      XCTAssertEqual(error.error.name, "timedOut", "\(error.error)")
    }
    let elapsed = ContinuousClock.now - started
    await downloader.shutdown()
    return elapsed
  }

  func testATransferSilentForTheIdleTimeoutAfterBytesFlowedEndsWithinASecondOfIt() async throws {
    let elapsed = try await timeToGiveUp(server.url("/stalls.jpg"))
    XCTAssertEqual(server.bodyBytesSent("/stalls.jpg"), 2000)
    // The last byte leaves at about 2 s; the timeout is 1 s, and a second of slack.
    XCTAssertLessThan(elapsed, .seconds(4), "gave up after \(elapsed)")
  }

  func testAnHTTP2StreamSilentForTheIdleTimeoutEndsWithinASecondOfIt() async throws {
    let http2 = try HTTP2LoopbackServer(
      body: Fixtures.jpeg, delay: 0, root: temporary.appending("h2"), stalls: "/stalls.jpg")
    defer { http2.shutdown() }
    let elapsed = try await timeToGiveUp(http2.url("/stalls.jpg"))
    XCTAssertLessThan(elapsed, .seconds(4), "gave up after \(elapsed)")
  }
}
