import Core
import Foundation
import NIOCore
import TestSupport
import XCTest

/// Issue 38: the per-host limits are kept by origin (scheme, host and port), as libcurl and
/// NSURLSession key their connections: a port of a host that stalls does not hold back another
/// port of the same host.
final class PerOriginLimitsTests: LoopbackTestCase {
  func testAStallingPortOfAHostDoesNotStarveAnotherPort() throws {
    let stalling = try LoopbackServer(routes: [
      "/slow.jpg": { _ in
        ServerResponse(
          headers: [("Content-Type", "image/jpeg")], body: Fixtures.jpeg, headDelay: .seconds(30))
      }
    ])
    defer { stalling.shutdown() }
    // Both on 127.0.0.1: the stalling port's URLs first, enough to fill every per-host limit.
    let urls =
      (0..<12).map { stalling.url("/slow.jpg?\($0)") }
      + ["/a.jpg", "/b.png", "/c.gif"].map {
        server.url($0)
      }
    let (process, stdout, stderr) = try ImageCacheBinary.start([
      "prefetch", try temporary.manifest(urls), "--cache", temporary.appending("cache"),
      "--per-host-concurrency", "2", "--timeout", "60s",
    ])
    defer {
      process.terminate()
      _ = ImageCacheBinary.finish(process, stdout, stderr)
    }
    // (The stalling port's second request may reach its server after the other port's last
    // answer: both are waited for.)
    waitUntil(timeout: 10, "the other port's three images, and the stalling port's two") {
      ["/a.jpg", "/b.png", "/c.gif"].allSatisfy { server.requestCount($0) == 1 }
        && stalling.requestCount("/slow.jpg") >= 2
    }
    XCTAssertEqual(stalling.requestCount("/slow.jpg"), 2, "the stalling port keeps its limit")
  }
}
