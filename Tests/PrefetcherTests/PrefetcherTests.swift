import Core
import Foundation
import HTTP
import NIOCore
import Pipeline
import Prefetcher
import Synchronization
import TestSupport
import XCTest

/// SPEC section 5: bounded concurrency, priorities, retries, coalescing, manifests, report.
final class PrefetcherTests: DownloaderTestCase {
  override var routes: [String: Route] {
    [
      "/slow.jpg": { _ in ServerResponse(body: Fixtures.jpeg, headDelay: .milliseconds(300)) },
      "/flaky.png": { request in
        request.attempt == 1
          ? ServerResponse(status: 503, headers: [("Retry-After", "0")])
          : .image(Fixtures.png, type: "image/png")
      },
      "/always-503.png": { _ in ServerResponse(status: 503) },
      "/page.jpg": { _ in .image(Data("<html></html>".utf8), type: "text/html") },
      "/photo.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
      "/gauge.png": { _ in ServerResponse(body: Fixtures.png, headDelay: .milliseconds(100)) },
      "/ten-years.png": { _ in ServerResponse(status: 429, headers: [("Retry-After", "315360000")])
      },
      "/five-seconds.png": { _ in ServerResponse(status: 503, headers: [("Retry-After", "5")]) },
      "/two-seconds.png": { request in Self.busyOnce(request, retryAfter: "2") },
      "/429-once.png": { request in Self.failOnce(request, status: 429) },
      "/502-once.png": { request in Self.failOnce(request, status: 502) },
      "/503-once.png": { request in Self.failOnce(request, status: 503) },
      "/504-once.png": { request in Self.failOnce(request, status: 504) },
      "/500-once.png": { request in Self.failOnce(request, status: 500) },
      "/one-second.png": { request in Self.busyOnce(request, retryAfter: "1") },
      // An HTTP date 3 s ahead, written in whole seconds: a wait of 2 to 3 s.
      "/until-a-date.png": { request in
        Self.busyOnce(request, retryAfter: Self.httpDate(Date().addingTimeInterval(3)))
      },
      // 1 MB of zeros, about 1 KB on the wire.
      "/gzip-bomb.png": { _ in
        ServerResponse(
          headers: [("Content-Type", "image/png"), ("Content-Encoding", "gzip")],
          body: Fixtures.gzip(Data(count: 1_000_000)))
      },
      // Error pages past the 64 KiB of an error's body that is read.
      "/big-503-once.png": { request in
        request.attempt == 1
          ? ServerResponse(status: 503, body: Data(repeating: 0x20, count: 200_000))
          : .image(Fixtures.png, type: "image/png")
      },
      "/always-304.png": { _ in ServerResponse(status: 304) },
      "/hang.jpg": { _ in ServerResponse(body: Fixtures.jpeg, headDelay: .seconds(10)) },
      "/slow-page.jpg": { _ in
        ServerResponse(
          headers: [("Content-Type", "text/html")], body: Data("<html></html>".utf8),
          headDelay: .milliseconds(300))
      },
      "/big-404.png": { _ in
        ServerResponse(status: 404, body: Data(repeating: 0x20, count: 200_000))
      },
    ]
  }

  private func prefetcher(_ configure: (inout PrefetchConfiguration) -> Void = { _ in }) throws
    -> Prefetcher
  {
    var configuration = PrefetchConfiguration()
    configuration.retryBaseDelay = 0.01
    configure(&configuration)
    return try makePrefetcher(configuration)
  }

  private func items(_ urls: [String], options: Set<ImageOption> = []) -> [Result<
    PrefetchItem, ConfigurationError
  >] {
    urls.map { .success(PrefetchItem(url: $0, options: ImageOptions(options))) }
  }

  /// 503 with `Retry-After: retryAfter` at the first request, the image after.
  private static func busyOnce(_ request: ServerRequest, retryAfter: String) -> ServerResponse {
    request.attempt == 1
      ? ServerResponse(status: 503, headers: [("Retry-After", retryAfter)])
      : .image(Fixtures.png, type: "image/png")
  }

  /// `status` at the first request, the image after.
  private static func failOnce(_ request: ServerRequest, status: Int) -> ServerResponse {
    request.attempt == 1 ? ServerResponse(status: status) : .image(Fixtures.png, type: "image/png")
  }

  /// SPEC section 5: 429 and 502 to 504 are transient, retried; any other status is not.
  func testTooManyRequestsAndGatewayErrorsAreRetriedAndA500IsNot() async throws {
    let retried = ["/429-once.png", "/502-once.png", "/503-once.png", "/504-once.png"]
    let report = try await prefetcher { $0.hostBackoff = false }.run(
      items((retried + ["/500-once.png"]).map { server.url($0) }))
    for path in retried { XCTAssertEqual(server.requestCount(path), 2, path) }
    XCTAssertEqual(report.downloaded, 4)
    XCTAssertEqual(server.requestCount("/500-once.png"), 1)
    XCTAssertEqual(report.failures.map(\.httpStatus), [500])
  }

  /// SPEC section 5: a body of exactly the maximum response size is kept; one byte over the
  /// limit fails as responseTooLarge and nothing is stored.
  func testABodyOfExactlyTheMaximumSizeIsKeptAndOneByteMoreIsNot() async throws {
    let size = UInt64(Fixtures.jpeg.count)
    let exact = try await prefetcher { $0.maxResponseSize = size }.run(
      items([server.url("/photo.jpg")]))
    XCTAssertEqual(exact.downloaded, 1, "\(exact.failures)")
    let over = try await prefetcher { $0.maxResponseSize = size - 1 }.run(
      items([server.url("/photo.jpg") + "?again"]))
    XCTAssertEqual(over.failures.map(\.name), ["responseTooLarge"])
    XCTAssertEqual(try DiskCache(location: location).usage().fileCount, 1, "only the first")
  }

  /// SPEC section 5: the limit counts the body as decoded: a gzip body far under it on the
  /// wire that decodes past it fails as responseTooLarge (not as bytes after a compressed
  /// body), not blacklisted as no body over the run's own limit is, and nothing is stored.
  func testACompressedBodyIsHeldToTheLimitOnceDecoded() async throws {
    let report = try await prefetcher { $0.maxResponseSize = 100_000 }.run(
      items([server.url("/gzip-bomb.png")]))
    XCTAssertEqual(report.failures.map(\.name), ["responseTooLarge"])
    XCTAssertEqual(report.failures.map(\.blacklisted), [false])
    XCTAssertEqual(try DiskCache(location: location).usage().fileCount, 0)
  }

  /// `Retry-After: 0` asks for no wait: the host is not held back, and the report lists no
  /// pause of it.
  func testARetryAfterOfZeroIsNoPauseOfTheHost() async throws {
    let report = try await prefetcher().run(items([server.url("/flaky.png")]))
    XCTAssertEqual(server.requestCount("/flaky.png"), 2)
    XCTAssertEqual(report.downloaded, 1)
    XCTAssertEqual(report.hostBackoffs, [])
  }

  /// A 304 answers a conditional request only: to one that sent no validators (nothing was
  /// cached) it is a failed status, never "not modified" with nothing stored.
  func testA304ToARequestWithoutValidatorsFails() async throws {
    let report = try await prefetcher().run(items([server.url("/always-304.png")]))
    XCTAssertEqual(report.notModified, 0)
    XCTAssertEqual(report.failures.map(\.httpStatus), [304])
  }

  /// An error's body is read up to 64 KiB, to keep the connection, and dropped past it: the
  /// answer is still its status's. A 503 with a large page is retried and then stored; a 404
  /// with one fails as the 404 it is.
  func testAnErrorWithALargeBodyIsJudgedByItsStatus() async throws {
    let report = try await prefetcher { $0.hostBackoff = false }.run(
      items([server.url("/big-503-once.png"), server.url("/big-404.png")]))
    XCTAssertEqual(server.requestCount("/big-503-once.png"), 2)
    XCTAssertEqual(report.downloaded, 1, "\(report.failures)")
    XCTAssertEqual(report.failures.map(\.httpStatus), [404])
  }

  /// `date` as an HTTP date (RFC 9110's IMF-fixdate): `Sun, 06 Nov 1994 08:49:37 GMT`.
  private static func httpDate(_ date: Date) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter.string(from: date)
  }

  /// How long after the first request to `path` the second came (zero, and a failure, unless
  /// there were exactly two).
  private func gapBetweenRequests(
    _ path: String, file: StaticString = #filePath, line: UInt = #line
  ) -> Duration {
    let requests = server.requests(path)
    XCTAssertEqual(requests.count, 2, "requests to \(path)", file: file, line: line)
    guard requests.count == 2 else { return .zero }
    return requests[1].arrivedAt - requests[0].arrivedAt
  }

  /// SPEC section 5: retries honour `Retry-After`. The retry of a 503 that asked for 2 s comes
  /// 2 s later, not after the 10 ms backoff (the host-wide back-off is off: this is the URL's
  /// own retry).
  func testARetryComesNoSoonerThanRetryAfterSaysInSeconds() async throws {
    let report = try await prefetcher { $0.hostBackoff = false }.run(
      items([server.url("/two-seconds.png")]))
    XCTAssertEqual(report.downloaded, 1)
    XCTAssertGreaterThanOrEqual(gapBetweenRequests("/two-seconds.png"), .milliseconds(1950))
  }

  /// SPEC section 5: retries back off exponentially: the n-th waits `retryBaseDelay x 2^(n-1)`
  /// with a jitter of +-50%, so with a base of 0.4 s the third waits at least 0.8 s, more than
  /// any first wait can be.
  func testEachRetryWaitsTwiceAsLongAsTheOneBefore() async throws {
    let report = try await prefetcher {
      $0.hostBackoff = false
      $0.retries = 3
      $0.retryBaseDelay = 0.4
    }.run(items([server.url("/always-503.png")]))
    XCTAssertEqual(report.failures.map(\.attempts), [4])
    let arrivals = server.requests("/always-503.png").map(\.arrivedAt)
    XCTAssertEqual(arrivals.count, 4)
    guard arrivals.count == 4 else { return }
    XCTAssertGreaterThanOrEqual(arrivals[2] - arrivals[1], .milliseconds(400))
    XCTAssertGreaterThanOrEqual(arrivals[3] - arrivals[2], .milliseconds(800))
  }

  func testARetryComesNoSoonerThanARetryAfterDate() async throws {
    let report = try await prefetcher { $0.hostBackoff = false }.run(
      items([server.url("/until-a-date.png")]))
    XCTAssertEqual(report.downloaded, 1)
    XCTAssertGreaterThanOrEqual(gapBetweenRequests("/until-a-date.png"), .milliseconds(1900))
  }

  /// The cap on a wait (`maxRetryDelay`): a `Retry-After` equal to it is waited for in full;
  /// one over it is not shortened to it, the URL fails at once.
  func testARetryAfterAtTheCapIsWaitedAndOneOverItIsNotRetried() async throws {
    let report = try await prefetcher {
      $0.hostBackoff = false
      $0.maxRetryDelay = 1
    }.run(items([server.url("/one-second.png"), server.url("/two-seconds.png")]))
    XCTAssertEqual(report.downloaded, 1)
    XCTAssertGreaterThanOrEqual(gapBetweenRequests("/one-second.png"), .milliseconds(950))
    XCTAssertEqual(server.requestCount("/two-seconds.png"), 1, "not asked again sooner than 2 s")
    let failure = try XCTUnwrap(report.failures.first)
    XCTAssertEqual(failure.url, server.url("/two-seconds.png"))
    XCTAssertTrue(failure.message.contains("2 s (Retry-After)"), failure.message)
  }

  func testTheSameURLManyTimesAtOnceMakesOneRequest() async throws {
    let report = try await prefetcher().run(
      items(Array(repeating: server.url("/slow.jpg"), count: 20)))
    XCTAssertEqual(server.requestCount("/slow.jpg"), 1)
    XCTAssertEqual(report.total, 20)
    XCTAssertEqual(report.downloaded, 1)
    XCTAssertEqual(report.diskHits + report.memoryHits, 19)
    XCTAssertEqual(report.failed, 0)
  }

  /// Lines of one URL that fails share its one download's failure: each is a failure of its
  /// own in the report, with its one attempt (the report's schema wants at least one).
  func testTheSameFailingURLManyTimesAtOnceIsAFailureOfEachLine() async throws {
    let report = try await prefetcher().run(
      items(Array(repeating: server.url("/slow-page.jpg"), count: 3)))
    XCTAssertEqual(server.requestCount("/slow-page.jpg"), 1)
    XCTAssertEqual(report.failed, 3)
    XCTAssertEqual(report.failures.map(\.attempts), [1, 1, 1])
  }

  /// Issue 32, item 1: loads are one download only when everything that changes what is sent
  /// or stored is the same; another header or another store is another download.
  func testTheSameURLWithOtherHeadersOrAnotherStoreIsNotCoalesced() async throws {
    let url = server.url("/slow.jpg")
    var token = ImageContext()
    token.headers = ["Authorization": "Bearer a"]
    var otherToken = ImageContext()
    otherToken.headers = ["Authorization": "Bearer b"]
    var memoryOnly = ImageContext()
    memoryOnly.storeCacheType = .memory
    let contexts = [token, token, otherToken, memoryOnly, ImageContext(), ImageContext()]
    let report = try await prefetcher().run(
      contexts.map { .success(PrefetchItem(url: url, context: $0)) })
    XCTAssertEqual(report.total, 6)
    XCTAssertEqual(report.failed, 0)
    XCTAssertEqual(
      server.requestCount("/slow.jpg"), 4,
      "one per distinct load: token a (twice: one request), token b, memory only, no header")
    XCTAssertEqual(
      server.requests("/slow.jpg").compactMap { $0.header("Authorization") }.sorted(),
      ["Bearer a", "Bearer b"])
  }

  /// Issue 27, item 6: a `Retry-After` over the cap on a wait is not shortened to the cap and
  /// retried: the URL fails at once, saying so.
  func testARetryAfterOverTheCapFailsAtOnceSayingSo() async throws {
    let started = Date()
    let report = try await prefetcher().run(items([server.url("/ten-years.png")]))
    XCTAssertLessThan(Date().timeIntervalSince(started), 30, "it waited for the cap")
    XCTAssertEqual(server.requestCount("/ten-years.png"), 1)
    let failure = try XCTUnwrap(report.failures.first)
    XCTAssertEqual(failure.httpStatus, 429)
    XCTAssertEqual(failure.attempts, 1)
    XCTAssertTrue(failure.message.contains("315360000 s (Retry-After)"), failure.message)
    XCTAssertTrue(failure.message.contains("60 s"), failure.message)
  }

  /// Issue 27, item 6: no attempt starts after the URL's deadline, however the server asks.
  func testNoRetryStartsPastTheDeadline() async throws {
    let report = try await prefetcher { $0.deadline = 1 }.run(
      items([server.url("/five-seconds.png")]))
    XCTAssertEqual(server.requestCount("/five-seconds.png"), 1)
    let failure = try XCTUnwrap(report.failures.first)
    XCTAssertTrue(failure.message.contains("deadline"), failure.message)
  }

  /// A signal during a back-off ends the wait at once: the run does not sit out the server's
  /// `Retry-After`, and the URL's last failure is its result.
  /// A download cancelled with the run (a signal) was not tried to its end: it counts as
  /// skipped, not failed, and the counts add up to the URLs.
  func testADownloadCancelledWithTheRunIsSkippedNotFailed() async throws {
    let prefetcher = try prefetcher()
    let urls = items([server.url("/hang.jpg")])
    let run = Task { await prefetcher.run(urls) }
    _ = await waitUntil(timeout: 10, "the download to be under way") { () async in
      server.requestCount("/hang.jpg") > 0
    }
    run.cancel()
    let report = await run.value
    XCTAssertEqual(report.total, 1)
    XCTAssertEqual(report.skipped, 1)
    XCTAssertEqual(report.failed, 0)
  }

  func testCancellingTheRunEndsABackOffAtOnceWithTheLastFailure() async throws {
    // One download at a time: the second URL is asked for only once the 503 has come back (and
    // at once: the host is not held back as a whole).
    let prefetcher = try prefetcher {
      $0.concurrency = 1
      $0.hostBackoff = false
    }
    let urls = items([server.url("/five-seconds.png"), server.url("/photo.jpg")])
    let started = Date()
    let run = Task { await prefetcher.run(urls) }
    _ = await waitUntil(timeout: 10, "the second URL to be asked for") { () async in
      server.requestCount("/photo.jpg") > 0
    }
    run.cancel()
    let report = await run.value
    XCTAssertLessThan(Date().timeIntervalSince(started), 4, "it sat out the 5 s Retry-After")
    XCTAssertEqual(server.requestCount("/five-seconds.png"), 1)
    XCTAssertEqual(report.failures.map(\.httpStatus), [503])
    XCTAssertEqual(report.failures.first?.attempts, 1)
  }

  func testTransient503IsRetriedAndSucceeds() async throws {
    let report = try await prefetcher().run(items([server.url("/flaky.png")]))
    XCTAssertEqual(report.downloaded, 1)
    XCTAssertEqual(report.failed, 0)
    XCTAssertEqual(server.requestCount("/flaky.png"), 2)
  }

  func testRetriesStopAfterTheConfiguredCountAndReportAttempts() async throws {
    let report = try await prefetcher { $0.retries = 2 }.run(items([server.url("/always-503.png")]))
    XCTAssertEqual(server.requestCount("/always-503.png"), 3)
    XCTAssertEqual(report.failures.first?.attempts, 3)
    XCTAssertEqual(report.failures.first?.httpStatus, 503)
    XCTAssertEqual(report.failures.first?.blacklisted, false)
  }

  func testNonTransientFailuresAreNotRetried() async throws {
    let report = try await prefetcher().run(items([server.url("/page.jpg")]))
    XCTAssertEqual(server.requestCount("/page.jpg"), 1)
    XCTAssertEqual(report.failures.map(\.name), ["badImageData"])
  }

  func testTotalAndPerHostConcurrencyAreBounded() async throws {
    let urls = (0..<24).map { server.url("/gauge.png") + "?n=\($0)" }
    let report = try await prefetcher {
      $0.concurrency = 8
      $0.perHostConcurrency = 3
    }.run(items(urls))
    XCTAssertEqual(report.downloaded, 24)
    XCTAssertLessThanOrEqual(server.peakConcurrency, 3, "one host, at most 3 at once")
    XCTAssertGreaterThanOrEqual(server.peakConcurrency, 2, "but more than one at once")
  }

  func testHighPriorityStartsFirstAndLowPriorityLast() async throws {
    var list: [Result<PrefetchItem, ConfigurationError>] = []
    for i in 0..<4 {
      list.append(
        .success(
          PrefetchItem(
            url: server.url("/gauge.png?low=\(i)"), options: ImageOptions([.lowPriority]))))
    }
    for i in 0..<4 {
      list.append(.success(PrefetchItem(url: server.url("/gauge.png?normal=\(i)"))))
    }
    for i in 0..<4 {
      list.append(
        .success(
          PrefetchItem(
            url: server.url("/gauge.png?high=\(i)"), options: ImageOptions([.highPriority]))))
    }
    _ = try await prefetcher { $0.concurrency = 1 }.run(list)
    let order = server.requests("/gauge.png").map { $0.query ?? "" }
    XCTAssertEqual(
      order.map { String($0.prefix(while: { $0 != "=" })) },
      Array(repeating: "high", count: 4) + Array(repeating: "normal", count: 4)
        + Array(repeating: "low", count: 4))
  }

  /// A stop during the run: the download under way finishes and is reported; the ones queued
  /// behind it (waiting on the transfer thread for room) are never sent nor reported.
  func testAStopDuringTheRunLetsTheDownloadUnderWayFinishAndSendsNothingMore() async throws {
    let stop = StopFlag()
    let urls = (0..<4).map { server.url("/slow.jpg") + "?n=\($0)" }
    let watcher = Task { [server = server!] in
      await waitUntil(timeout: 10, "the first download") { () async in
        server.requestCount("/slow.jpg") > 0
      }
      stop.stop()
    }
    let report = try await prefetcher { $0.concurrency = 1 }.run(items(urls), stop: stop)
    _ = await watcher.result
    XCTAssertEqual(report.downloaded, 1)
    XCTAssertEqual(report.total, 1, "nothing queued behind it is reported")
    XCTAssertEqual(server.requests("/slow.jpg").map(\.query), ["n=0"])
  }

  func testStopFlagStopsStartingNewWork() async throws {
    let stop = StopFlag()
    stop.stop()
    let report = try await prefetcher().run(items([server.url("/photo.jpg")]), stop: stop)
    XCTAssertEqual(report.total, 0)
    XCTAssertEqual(server.requestCount("/photo.jpg"), 0)
  }
}
