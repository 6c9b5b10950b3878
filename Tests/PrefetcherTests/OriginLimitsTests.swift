import Core
import Foundation
import HTTP
import NIOCore
import Pipeline
import Prefetcher
import TestSupport
import XCTest

/// Issue 29, item 4: gentle with origins. A per-host request rate, a bandwidth cap for the
/// run, and a `Retry-After` that holds back every download of its host, measured against the
/// arrival times the loopback server logs (each within 10%). The measured figures are printed.
final class OriginLimitsTests: DownloaderTestCase {
  /// 250,000 bytes: a JPEG's start, padded (validation is off where it is served).
  static let quarterMegabyte = Fixtures.paddedJPEG(count: 250_000)

  override var routes: [String: Route] {
    [
      "/image.png": { _ in .image(Fixtures.png, type: "image/png") },
      "/large.jpg": { _ in .image(Self.quarterMegabyte, type: "image/jpeg") },
      "/busy.png": { request in
        request.attempt == 1
          ? ServerResponse(status: 429, headers: [("Retry-After", "1")])
          : .image(Fixtures.png, type: "image/png")
      },
      // 60,000 bytes in six pieces, 50 ms apart: several reads, each waiting for the budget.
      "/dripped.jpg": { _ in
        ServerResponse(
          headers: [("Content-Type", "image/jpeg")], body: Fixtures.paddedJPEG(count: 60_000),
          dripInterval: .milliseconds(50), dripChunk: 10_000)
      },
      "/gone-for-an-hour.png": { _ in
        ServerResponse(status: 503, headers: [("Retry-After", "3600")])
      },
    ]
  }

  private func run(
    _ urls: [String], _ configure: (inout PrefetchConfiguration) -> Void
  ) async throws -> PrefetchReport {
    var configuration = PrefetchConfiguration()
    configuration.retryBaseDelay = 0.01
    configure(&configuration)
    // A deadline of the test's own: a host held for the hour a server asked (a cap that does
    // not hold) stops the run and fails the test's counts, instead of hanging the suite.
    let prefetcher = try makePrefetcher(configuration)
    let run = Task { await prefetcher.run(urls.map { .success(PrefetchItem(url: $0)) }) }
    let deadline = Task {
      try await Task.sleep(for: .seconds(60))
      XCTFail("the run was still going after 60 s: cancelled")
      run.cancel()
    }
    defer { deadline.cancel() }
    return await run.value
  }

  /// Requests a second between the first and the last arrival of `requests`.
  private func measuredRate(_ requests: [ServerRequest]) throws -> Double {
    let first = try XCTUnwrap(requests.first?.arrivedAt)
    let last = try XCTUnwrap(requests.last?.arrivedAt)
    return Double(requests.count - 1) / (last - first).seconds
  }

  func testDownloadsOfOneHostArriveNoFasterThanTheRate() async throws {
    let urls = (0..<30).map { server.url("/image.png?n=\($0)") }
    let report = try await run(urls) { $0.requestsPerSecondPerHost = 20 }
    XCTAssertEqual(report.downloaded, 30)
    let arrivals = server.allRequests
    XCTAssertEqual(arrivals.count, 30)
    let rate = try measuredRate(arrivals)
    let span = (arrivals.last!.arrivedAt - arrivals.first!.arrivedAt).seconds
    print(
      "measured rate: 30 requests at --rate 20/s, first to last arrival "
        + String(format: "%.3f s: %.2f requests/s", span, rate))
    XCTAssertEqual(rate, 20, accuracy: 2, "not within 10% of 20/s")
    // No burst either: each start waits its turn after the one before.
    let gaps = zip(arrivals, arrivals.dropFirst()).map { ($1.arrivedAt - $0.arrivedAt).seconds }
    XCTAssertGreaterThan(try XCTUnwrap(gaps.min()), 0.025, "two requests came together")
  }

  func testEachHostHasARateOfItsOwn() async throws {
    // 127.0.0.1 and localhost: two hosts on the one server.
    let local = "http://localhost:\(server.port)"
    let urls = (0..<10).flatMap {
      [server.url("/image.png?a=\($0)"), local + "/image.png?b=\($0)"]
    }
    let report = try await run(urls) { $0.requestsPerSecondPerHost = 10 }
    XCTAssertEqual(report.downloaded, 20)
    let arrivals = server.allRequests
    let byName = try measuredRate(arrivals.filter { $0.query?.hasPrefix("a=") == true })
    let byLocalhost = try measuredRate(arrivals.filter { $0.query?.hasPrefix("b=") == true })
    let together = try measuredRate(arrivals)
    print(
      String(
        format: "measured rates at --rate 10/s: 127.0.0.1 %.2f/s, localhost %.2f/s, both %.2f/s",
        byName, byLocalhost, together))
    XCTAssertEqual(byName, 10, accuracy: 1)
    XCTAssertEqual(byLocalhost, 10, accuracy: 1)
    XCTAssertGreaterThan(together, 15, "one host's rate held the other back")
  }

  func testTheRunsDownloadsTogetherKeepToTheBandwidthCap() async throws {
    // 8 x 250 kB = 2 MB at 1 MB/s, over 4 connections at once: about 2 s in all.
    let urls = (0..<8).map { server.url("/large.jpg?n=\($0)") }
    let started = ContinuousClock.now
    let report = try await run(urls) {
      $0.maxBytesPerSecond = 1_000_000
      $0.validation = .none
      $0.perHostConcurrency = 4
    }
    let elapsed = (ContinuousClock.now - started).seconds
    XCTAssertEqual(report.downloaded, 8)
    XCTAssertEqual(report.bytesDownloaded, 2_000_000)
    let throughput = Double(report.bytesDownloaded) / elapsed
    print(
      "measured bandwidth: 2 MB at --max-bandwidth 1MB/s in "
        + String(format: "%.3f s: %.0f bytes/s", elapsed, throughput))
    XCTAssertEqual(throughput, 1_000_000, accuracy: 100_000, "not within 10% of 1 MB/s")
  }

  /// A download paused by the bandwidth cap waits for the run's budget, not for its server:
  /// the idle timeout does not count the pause. At 20 kB/s, each read of a body sent in
  /// 10 kB pieces waits a quarter second or more for the budget, past a 0.3 s idle timeout
  /// once in debt, and the download still arrives.
  func testAPauseForTheBandwidthCapIsNoIdleTimeout() async throws {
    let report = try await run([server.url("/dripped.jpg")]) {
      $0.maxBytesPerSecond = 20_000
      $0.timeout = 0.3
      $0.retries = 0
      $0.validation = .none
    }
    XCTAssertEqual(report.failures.map(\.name), [])
    XCTAssertEqual(report.downloaded, 1)
  }

  func testA429WithRetryAfterHoldsBackEveryURLOfItsHost() async throws {
    // One connection to the host: the others are queued when the 429 comes.
    let urls = [server.url("/busy.png")] + (0..<5).map { server.url("/image.png?n=\($0)") }
    let report = try await run(urls) { $0.perHostConcurrency = 1 }
    XCTAssertEqual(report.downloaded, 6)
    XCTAssertEqual(report.failed, 0)
    let refused = try XCTUnwrap(server.requests("/busy.png").first?.arrivedAt)
    let others = server.requests("/image.png")
    XCTAssertEqual(others.count, 5)
    let firstOther = try XCTUnwrap(others.map(\.arrivedAt).min())
    let waited = (firstOther - refused).seconds
    print(String(format: "the host's other URLs waited %.3f s after Retry-After: 1", waited))
    XCTAssertGreaterThanOrEqual(waited, 1, "a URL of the host was sent before the Retry-After")
    XCTAssertLessThan(waited, 2, "the host was held back longer than asked")
    let backoff = try XCTUnwrap(report.hostBackoffs.first)
    XCTAssertEqual(report.hostBackoffs.count, 1)
    XCTAssertEqual(backoff.host, "127.0.0.1")
    XCTAssertEqual(backoff.pauses, 1)
    XCTAssertEqual(backoff.seconds, 1, accuracy: 0.05)
  }

  /// The host that asked to wait is the one held back and reported: a redirect's target's 429
  /// holds the target, not the host whose URL led there.
  func testARedirectTargetThatAsksToWaitIsTheHostHeldBack() async throws {
    let target = try LoopbackServer(routes: [
      "/busy.png": { request in
        request.attempt == 1
          ? ServerResponse(status: 429, headers: [("Retry-After", "1")])
          : .image(Fixtures.png, type: "image/png")
      }
    ])
    defer { target.shutdown() }
    let start = try LoopbackServer(routes: [
      "/moved.png": { _ in .redirect(to: "http://127.0.0.1:\(target.port)/busy.png") }
    ])
    defer { start.shutdown() }
    let report = try await run(["http://localhost:\(start.port)/moved.png"]) { _ in }
    XCTAssertEqual(report.downloaded, 1, "\(report.failures)")
    XCTAssertEqual(report.hostBackoffs.map(\.host), ["127.0.0.1"])
  }

  /// A redirect's target is limited as itself, as NSURLSession's per-host limit holds for every
  /// host a load reaches: two origins (127.0.0.1 and localhost) that send every image to one
  /// host open no more than that host's 2 to it, not 2 each.
  func testOriginsThatRedirectToOneHostOpenNoMoreThanItsLimitToIt() async throws {
    let (target, start) = try redirectingPair(imageDelay: .milliseconds(50))
    let urls = (0..<12).flatMap {
      [
        "http://127.0.0.1:\(start.port)/moved.png?a=\($0)",
        "http://localhost:\(start.port)/moved.png?b=\($0)",
      ]
    }
    let report = try await run(urls) { $0.perHostConcurrency = 2 }
    XCTAssertEqual(report.downloaded, 24, "\(report.failures)")
    XCTAssertEqual(target.requestCount("/img.png"), 24)
    XCTAssertEqual(target.peakConcurrency, 2, "the target's own limit, not 2 for each origin")
  }

  /// A redirect's next hop waits for its turn first in line: a download under way goes on
  /// before those not started, which a full run would otherwise make it wait behind (within
  /// its deadline). One download at a time, so the servers see each download whole.
  func testARedirectsNextHopGoesBeforeTheDownloadsNotStarted() async throws {
    let (target, start) = try redirectingPair()
    let urls = (0..<4).map { "http://127.0.0.1:\(start.port)/moved.png?\($0)" }
    let report = try await run(urls) { $0.concurrency = 1 }
    XCTAssertEqual(report.downloaded, 4, "\(report.failures)")
    let arrivals = (start.allRequests + target.allRequests).sorted { $0.arrivedAt < $1.arrivedAt }
    XCTAssertEqual(
      arrivals.map { "\($0.path)?\($0.query ?? "")" },
      (0..<4).flatMap { ["/moved.png?\($0)", "/img.png?\($0)"] })
  }

  /// The deadline is the whole download's, redirects and their waits for a turn included:
  /// two hops of 0.6 s each are over a deadline of 1 s.
  func testTheDeadlineCountsEveryHopOfARedirect() async throws {
    let (_, start) = try redirectingPair(
      imageDelay: .milliseconds(600), redirectDelay: .milliseconds(600))
    let report = try await run(["http://127.0.0.1:\(start.port)/moved.png"]) {
      $0.deadline = 1
      $0.retries = 0
    }
    XCTAssertEqual(report.downloaded, 0)
    XCTAssertEqual(report.failures.map(\.name), ["timedOut"])
  }

  /// Redirects' next hops waiting for one target go to it in the order their redirects came:
  /// the first to wait is the first sent, not passed by each hop that came after it (which
  /// held the first ones until their deadline while the redirects kept coming).
  func testRedirectsNextHopsWaitingForOneTargetGoInTheOrderTheyCame() async throws {
    let (target, start) = try redirectingPair(imageDelay: .milliseconds(100))
    let urls = (0..<8).map { "http://localhost:\(start.port)/moved.png?\($0)" }
    let report = try await run(urls) { $0.perHostConcurrency = 1 }
    XCTAssertEqual(report.downloaded, 8, "\(report.failures)")
    XCTAssertEqual(
      target.requests("/img.png").map(\.query), start.requests("/moved.png").map(\.query))
  }

  /// A redirect's next hop that waits for its target, held back by a `Retry-After`, ends at
  /// the download's deadline, as a timeout of the download: not when the target opens again,
  /// and no timeout of the target, which was never asked (its adaptive limit was halved for
  /// each such hop, one after another, for the loop's own queue).
  func testARedirectsHopThatWaitsPastItsDeadlineEndsThenAndIsNoTimeoutOfItsTarget()
    async throws
  {
    let (target, start) = try redirectingPair(image: { request in
      request.attempt == 1
        ? ServerResponse(status: 429, headers: [("Retry-After", "4")])
        : .image(Fixtures.png, type: "image/png")
    })
    let urls = (0..<8).map { "http://localhost:\(start.port)/moved.png?\($0)" }
    let report = try await run(urls) {
      $0.deadline = 1
      $0.retries = 0
    }
    XCTAssertGreaterThan(report.failed, 1, "\(report.failures)")
    XCTAssertEqual(Set(report.failures.map(\.name)), ["timedOut", "invalidDownloadStatusCode"])
    XCTAssertEqual(target.requestCount("/img.png"), 8 - report.failed + 1)
    let limit = try XCTUnwrap(report.hostLimits.first { $0.host == "127.0.0.1" })
    XCTAssertNil(limit.cuts["timeout"], "the hops that waited are no timeouts of it: \(limit)")
    // The run ended with the hops' deadline, while the target was still held (for 4 s).
    let backoff = try XCTUnwrap(report.hostBackoffs.first)
    XCTAssertLessThan(backoff.seconds, 3, "the hops waited past their 1 s deadline")
  }

  /// A redirect's next hop that waited for its turn and then ran out of the download's
  /// deadline at its target is no timeout of the target: what was left of the deadline was
  /// spent in the loop's queue, not waiting on the target, which answers each in 0.6 s (its
  /// limit was halved for each, and the next hops waited longer still).
  func testADeadlineSpentWaitingForATargetIsNoTimeoutOfIt() async throws {
    let (_, start) = try redirectingPair(imageDelay: .milliseconds(600))
    // The target takes its first 4 at once; the next 4 wait 0.6 s for them, and are sent with
    // 0.4 s of their 1 s left.
    let urls = (0..<8).map { "http://localhost:\(start.port)/moved.png?\($0)" }
    let report = try await run(urls) {
      $0.deadline = 1
      $0.retries = 0
    }
    XCTAssertGreaterThanOrEqual(report.downloaded, 4, "\(report.failures)")
    XCTAssertEqual(Set(report.failures.map(\.name)).subtracting(["timedOut"]), [])
    let limit = try XCTUnwrap(report.hostLimits.first { $0.host == "127.0.0.1" })
    XCTAssertNil(limit.cuts["timeout"], "its answers all came in 0.6 s: \(limit)")
  }

  /// An origin whose every answer is a redirect (`http://` to `https://`, to a CDN) has its
  /// own adaptive limit, sampled from its own answers: it grows past the first 4 while they
  /// come in time, where it stayed at 4 all night when only images were samples.
  func testAnOriginThatOnlyRedirectsGrowsItsAdaptiveLimitOnItsOwnAnswers() async throws {
    let (_, start) = try redirectingPair(redirectDelay: .milliseconds(20))
    let urls = (0..<200).map { "http://127.0.0.1:\(start.port)/moved.png?\($0)" }
    let report = try await run(urls) { $0.concurrency = 64 }
    XCTAssertEqual(report.downloaded, 200, "\(report.failures)")
    XCTAssertGreaterThan(start.peakConcurrency, 4, "grown on its redirects' times")
    let limit = report.hostLimits.first { $0.host.hasSuffix(":\(start.port)") }
    XCTAssertGreaterThan(limit?.max ?? 0, 4, "reported: \(report.hostLimits)")
  }

  func testARetryAfterOverTheCapHoldsTheHostBackForTheCapOnly() async throws {
    let urls =
      [server.url("/gone-for-an-hour.png")]
      + (0..<3).map {
        server.url("/image.png?n=\($0)")
      }
    let report = try await run(urls) {
      $0.perHostConcurrency = 1
      $0.maxRetryDelay = 1
    }
    // The URL that asked for an hour fails at once; the host's others wait the cap.
    XCTAssertEqual(report.failed, 1)
    XCTAssertEqual(report.downloaded, 3)
    let refused = try XCTUnwrap(server.requests("/gone-for-an-hour.png").first?.arrivedAt)
    let firstOther = try XCTUnwrap(server.requests("/image.png").map(\.arrivedAt).min())
    XCTAssertEqual((firstOther - refused).seconds, 1, accuracy: 0.5)
    XCTAssertEqual(report.hostBackoffs.first?.seconds ?? 0, 1, accuracy: 0.05)
  }

  func testWithoutHostBackoffOnlyTheRefusedURLWaits() async throws {
    let urls = [server.url("/busy.png")] + (0..<3).map { server.url("/image.png?n=\($0)") }
    let report = try await run(urls) {
      $0.perHostConcurrency = 1
      $0.hostBackoff = false
    }
    XCTAssertEqual(report.downloaded, 4)
    let refused = try XCTUnwrap(server.requests("/busy.png").first?.arrivedAt)
    let firstOther = try XCTUnwrap(server.requests("/image.png").map(\.arrivedAt).min())
    XCTAssertLessThan((firstOther - refused).seconds, 0.5)
    XCTAssertEqual(report.hostBackoffs, [])
  }
}

extension Duration {
  fileprivate var seconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
