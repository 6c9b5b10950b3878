import CCurl
import Core
import Foundation
import NIOCore
import Synchronization
import TestSupport
import XCTest

@testable import HTTP
@testable import Pipeline
@testable import Prefetcher

/// The libcurl downloader (SPEC section 2): credentials and redirects, how each way a transfer
/// can fail is named, decompression and the cookie engine, against real servers on 127.0.0.1.
final class DownloaderTests: DownloaderTestCase {
  /// Another origin, where `/away` redirects.
  var other: LoopbackServer!

  override var routes: [String: Route] {
    let other = other!
    let half = Fixtures.jpeg.prefix(400)
    return [
      "/away": { _ in .redirect(to: other.url("/img.png")) },
      "/here": { _ in .redirect(to: "/img.png") },
      "/img.png": { _ in .image(Fixtures.png, type: "image/png") },
      "/short.jpg": { _ in
        ServerResponse(
          headers: [("Content-Length", "\(Fixtures.jpeg.count)")], body: Data(half), ending: .close)
      },
      "/reset.jpg": { _ in
        ServerResponse(
          headers: [("Content-Length", "\(Fixtures.jpeg.count)")], body: Data(half), ending: .reset)
      },
      "/gzip.png": { _ in
        ServerResponse(
          headers: [("Content-Type", "image/png"), ("Content-Encoding", "gzip")],
          body: Fixtures.gzip(Fixtures.png))
      },
      "/not-gzip.png": { _ in
        ServerResponse(
          headers: [("Content-Type", "image/png"), ("Content-Encoding", "gzip")], body: Fixtures.png
        )
      },
      "/login.png": { _ in
        ServerResponse(
          headers: [("Content-Type", "image/png"), ("Set-Cookie", "session=abc; Path=/")],
          body: Fixtures.png)
      },
      "/after.png": { _ in .image(Fixtures.png, type: "image/png") },
    ]
  }

  override func setUpWithError() throws {
    other = try LoopbackServer(routes: [
      "/img.png": { _ in .image(Fixtures.png, type: "image/png") }
    ])
    try super.setUpWithError()
  }

  override func tearDown() {
    other?.shutdown()
    super.tearDown()
  }

  private func manager(_ configure: (inout PrefetchConfiguration) -> Void = { _ in }) throws
    -> Prefetcher
  {
    var configuration = PrefetchConfiguration()
    configuration.timeout = 2
    configuration.deadline = 5
    configuration.retryBaseDelay = 0.01
    configure(&configuration)
    return try makePrefetcher(configuration)
  }

  private func failure(_ outcome: LoadOutcome, file: StaticString = #filePath, line: UInt = #line)
    -> (name: String, blacklisted: Bool)?
  {
    guard case .failed(let error, let blacklisted) = outcome else {
      XCTFail("expected a failure, got \(outcome)", file: file, line: line)
      return nil
    }
    return (error.name, blacklisted)
  }

  /// Every header the job or the line set, credentials or not (an API key, a signed token).
  static let jobHeaders = [
    "Authorization": "Bearer secret", "Proxy-Authorization": "Basic c2VjcmV0",
    "Cookie": "sid=secret", "X-Api-Key": "key-123",
  ]

  private func loadAway(trusting trustedOrigins: Set<Origin> = []) async throws -> ServerRequest {
    var context = ImageContext()
    context.headers = Self.jobHeaders
    context.trustedOrigins = trustedOrigins
    let away = try await manager().load(
      server.url("/away"), options: ImageOptions(), context: context
    ).outcome
    if case .downloaded = away {} else { XCTFail("\(away)") }
    let first = try XCTUnwrap(server.requests("/away").first)
    for (name, value) in Self.jobHeaders {
      XCTAssertEqual(first.header(name), value, "\(name) on the first hop")
    }
    return try XCTUnwrap(other.requests("/img.png").first)
  }

  func testNoHeaderTheJobSetIsSentToAnotherOriginAfterARedirect() async throws {
    let elsewhere = try await loadAway()
    for name in Self.jobHeaders.keys {
      XCTAssertNil(elsewhere.header(name), "\(name) sent to another port")
    }
    XCTAssertEqual(elsewhere.header("Accept"), "image/*,*/*;q=0.8", "the tool's own still go")
    XCTAssertEqual(elsewhere.header("User-Agent"), PrefetchConfiguration().userAgent)
  }

  func testEveryHeaderTheJobSetIsSentToATrustedOriginAfterARedirect() async throws {
    let elsewhere = try await loadAway(trusting: [try XCTUnwrap(Origin(parsing: other.baseURL))])
    for (name, value) in Self.jobHeaders {
      XCTAssertEqual(elsewhere.header(name), value, "\(name) to the trusted origin")
    }
  }

  func testEveryHeaderTheJobSetFollowsARedirectWithinItsOrigin() async throws {
    var context = ImageContext()
    context.headers = Self.jobHeaders
    let here = try await manager().load(
      server.url("/here"), options: ImageOptions(), context: context
    ).outcome
    guard case .downloaded = here else { return XCTFail("\(here)") }
    let sameOrigin = try XCTUnwrap(server.requests("/img.png").first)
    for (name, value) in Self.jobHeaders {
      XCTAssertEqual(sameOrigin.header(name), value, "\(name) within the origin")
    }
  }

  /// The transfer thread sleeps in `curl_multi_poll` when it has nothing to do, and is woken
  /// only when it does. Here it would sleep for an hour: a start that failed to wake it (a
  /// single download after a pause, or the prefetcher's slots taken again one by one) would
  /// never finish, and the test would time out instead of passing.
  func testWorkQueuedWhileTheTransferThreadSleepsWakesIt() async throws {
    var configuration = PrefetchConfiguration()
    configuration.concurrency = 3
    configuration.perHostConcurrency = 3
    let downloader = Downloader(
      configuration: configuration.http, idleWaitMilliseconds: 3_600_000)
    downloaders.append(downloader)
    let manager = try makePrefetcher(configuration, on: downloader)
    let finished = expectation(description: "every download ends")
    let singles = (0..<3).map { server.url("/img.png?round=\($0)") }
    let batch = (0..<40).map { server.url("/after.png?n=\($0)") }
    let task = Task {
      for (round, url) in singles.enumerated() {
        // The first download starts the thread; each next one finds it asleep in its poll.
        if round > 0 {
          await waitUntil(timeout: 10, "the transfer thread asleep in poll(2)") {
            threadsAsleepInPoll() > 0
          }
        }
        let outcome = await manager.load(url, options: ImageOptions(), context: ImageContext())
          .outcome
        guard case .downloaded(let bytes, _) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertEqual(bytes, Fixtures.png.count)
      }
      let report = await manager.run(
        batch.map { .success(PrefetchItem(url: $0)) })
      XCTAssertEqual(report.downloaded, 40)
      finished.fulfill()
    }
    await fulfillment(of: [finished], timeout: 30)
    task.cancel()
  }

  func testABodyCutShortOrResetIsConnectionLostRetriedAndNeverBlacklisted() async throws {
    let prefetcher = try manager { $0.retries = 1 }
    let report = await prefetcher.run(
      ["/short.jpg", "/reset.jpg"].map { .success(PrefetchItem(url: server.url($0))) })
    XCTAssertEqual(report.failed, 2)
    for failure in report.failures {
      XCTAssertEqual(failure.name, "networkConnectionLost", failure.message)
      XCTAssertEqual(failure.attempts, 2, "transient: retried")
      XCTAssertFalse(failure.blacklisted)
    }
    XCTAssertEqual(server.requestCount("/short.jpg"), 2)
    XCTAssertEqual(server.requestCount("/reset.jpg"), 2)
    XCTAssertEqual(try prefetcher.manager.blacklistedURLs(), [])
    XCTAssertEqual(try CacheScanner(root: location.diskCachePath).files().count, 0)
  }

  func testServersThatDoNotAnswerHTTPAreNamedAsSDNamesThem() async throws {
    let garbage = try RawLoopbackServer(reply: Data("SSH-2.0-OpenSSH_9.2\r\n\r\n".utf8))
    let silent = try RawLoopbackServer(reply: Data())
    defer {
      garbage.shutdown()
      silent.shutdown()
    }
    let manager = try manager()
    let https = "https://127.0.0.1:\(server.port)/img.png"
    for (url, name, blacklisted) in [
      (garbage.url("/a.png"), "badServerResponse", true),
      (silent.url("/a.png"), "networkConnectionLost", false),
      (https, "secureConnectionFailed", true),
    ] {
      let outcome = await manager.load(
        url, options: ImageOptions([.retryFailed]), context: ImageContext())
      let failure = failure(outcome.outcome)
      XCTAssertEqual(failure?.name, name, url)
      XCTAssertEqual(failure?.blacklisted, blacklisted, url)
    }
  }

  /// Issue 27, item 6: a handshake the server ended (reset, EOF) is a lost connection, as the
  /// same reset over plain HTTP is: retried, never blacklisted. A refused handshake stays
  /// `secureConnectionFailed` (see the test above).
  func testAConnectionLostDuringTheTLSHandshakeIsTransient() async throws {
    let hangsUp = try RawLoopbackServer(reply: Data())
    defer { hangsUp.shutdown() }
    let url = "https://127.0.0.1:\(hangsUp.port)/a.png"
    let outcome = await try manager().load(url, options: ImageOptions(), context: ImageContext())
    XCTAssertEqual(failure(outcome.outcome)?.name, "networkConnectionLost", "\(outcome.outcome)")
    XCTAssertEqual(failure(outcome.outcome)?.blacklisted, false)
    for message in [
      "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to a:443",
      "Recv failure: Connection reset by peer",
      "error:0A000126:SSL routines::unexpected eof while reading",
    ] {
      XCTAssertEqual(
        CurlFailure.error(for: CURLE_SSL_CONNECT_ERROR, detail: message).name,
        "networkConnectionLost", message)
    }
    XCTAssertEqual(
      CurlFailure.error(
        for: CURLE_SSL_CONNECT_ERROR, detail: "error:0A00010B:SSL routines::wrong version number"
      ).name, "secureConnectionFailed")
  }

  /// Issue 27, item 6: the failures that were `other` ("Out of memory", "Failed writing
  /// received data") get names that say what the server did.
  func testAHugeHeaderAndBytesAfterAGzipBodyAreNamedForWhatTheyAre() async throws {
    let hugeHeader = try RawLoopbackServer(
      reply: Data(
        ("HTTP/1.1 200 OK\r\nX-Big: " + String(repeating: "a", count: 1 << 20)
          + "\r\nContent-Length: 2\r\n\r\nok").utf8))
    let gzip = Fixtures.gzip(Fixtures.png) + Data("TRAILING".utf8)
    let trailing = try RawLoopbackServer(
      reply: Data(
        ("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Encoding: gzip\r\n"
          + "Content-Length: \(gzip.count)\r\nConnection: close\r\n\r\n").utf8) + gzip)
    defer {
      hugeHeader.shutdown()
      trailing.shutdown()
    }
    let manager = try manager()
    let header = await manager.load(
      hugeHeader.url("/a.png"), options: ImageOptions(), context: ImageContext())
    XCTAssertEqual(failure(header.outcome)?.name, "responseHeaderTooLarge", "\(header.outcome)")
    let compressed = await manager.load(
      trailing.url("/b.png"), options: ImageOptions(), context: ImageContext())
    XCTAssertEqual(
      failure(compressed.outcome)?.name, "trailingDataAfterCompressedBody", "\(compressed.outcome)")
    XCTAssertEqual(failure(compressed.outcome)?.blacklisted, false, "not the image's fault")
    XCTAssertEqual(try manager.manager.blacklistedURLs(), [hugeHeader.url("/a.png")])
  }

  func testACompressedBodyIsStoredDecodedAndABadEncodingIsCannotDecode() async throws {
    let manager = try manager()
    let outcome = await manager.load(
      server.url("/gzip.png"), options: ImageOptions(), context: ImageContext())
    guard case .downloaded(let bytes, _) = outcome.outcome else {
      return XCTFail("\(outcome.outcome)")
    }
    XCTAssertEqual(bytes, Fixtures.png.count)
    let path = DiskCache(location: location).cachePath(forKey: server.url("/gzip.png"))
    XCTAssertEqual(FileManager.default.contents(atPath: path), Fixtures.png)
    XCTAssertNotNil(server.requests("/gzip.png").first?.header("Accept-Encoding"))

    let bad = await manager.load(
      server.url("/not-gzip.png"), options: ImageOptions(), context: ImageContext())
    XCTAssertEqual(failure(bad.outcome)?.name, "cannotDecodeContentData")
  }

  func testCookiesAreKeptForTheRunOnlyWithHandleCookies() async throws {
    let manager = try manager()
    for path in ["/login.png", "/after.png"] {
      _ = await manager.load(
        server.url(path), options: ImageOptions([.handleCookies]), context: ImageContext())
    }
    XCTAssertEqual(server.requests("/after.png").last?.header("Cookie"), "session=abc")
    _ = await manager.load(
      server.url("/after.png"), options: ImageOptions([.fromLoaderOnly]), context: ImageContext())
    XCTAssertEqual(server.requestCount("/after.png"), 2)
    XCTAssertNil(server.requests("/after.png").last?.header("Cookie"), "not without the option")
  }

  /// Starts `urls` at once on `downloader`, each with `startsIf`; returns the results in the
  /// order of `urls`, once every one has ended.
  private func startAll(
    _ urls: [String], on downloader: Downloader, startsIf: (@Sendable () -> Bool)? = nil,
    whileWaiting: ([Downloader.Handle?]) async throws -> Void = { _ in }
  ) async throws -> [Result<DownloadResponse, DownloadFailure>] {
    let results = Mutex<[Int: Result<DownloadResponse, DownloadFailure>]>([:])
    let ended = expectation(description: "every download ends")
    ended.expectedFulfillmentCount = urls.count
    let handles = urls.enumerated().map { index, url in
      downloader.start(DownloadRequest(url: URL(string: url)!), startsIf: startsIf) { result in
        results.withLock { $0[index] = result }
        ended.fulfill()
      }
    }
    try await whileWaiting(handles)
    await fulfillment(of: [ended], timeout: 30)
    return results.withLock { results in urls.indices.map { results[$0]! } }
  }

  /// A server that answers `/slow.png` after `delay`, and a downloader with `configure`'s
  /// settings (shut down after the test); the caller shuts the server down.
  private func slowServer(
    answeringAfter delay: TimeAmount, _ configure: (inout PrefetchConfiguration) -> Void
  ) throws -> (LoopbackServer, Downloader) {
    let slow = try LoopbackServer(routes: [
      "/slow.png": { _ in ServerResponse(body: Fixtures.png, headDelay: delay) }
    ])
    var configuration = PrefetchConfiguration()
    configure(&configuration)
    return (slow, makeDownloader(configuration.http))
  }

  /// The transfer thread keeps the limits itself: downloads queued beyond them wait on it, in
  /// order, and each starts as one under way ends. A waiting download whose host is full lets
  /// one of another host go first (the same server, as 127.0.0.1 and as localhost).
  func testDownloadsBeyondTheLimitsWaitInOrderAndStartAsOthersEnd() async throws {
    let (slow, downloader) = try slowServer(answeringAfter: .milliseconds(150)) {
      $0.concurrency = 3
      $0.perHostConcurrency = 2
    }
    defer { slow.shutdown() }
    let urls =
      (0..<5).map { "http://127.0.0.1:\(slow.port)/slow.png?ip=\($0)" }
      + (0..<2).map { "http://localhost:\(slow.port)/slow.png?name=\($0)" }
    let results = try await startAll(urls, on: downloader)
    for (url, result) in zip(urls, results) {
      XCTAssertEqual(try? result.get().body, Fixtures.png, url)
    }
    XCTAssertEqual(slow.peakConcurrency, 3, "never more than the limit, and the limit is used")
    let arrivals = slow.requests("/slow.png").map { $0.query ?? "" }
    XCTAssertEqual(Set(arrivals.prefix(3)), ["ip=0", "ip=1", "name=0"], "\(arrivals)")
    // Two at a time to 127.0.0.1, in the order they came (the two of a pair race to the server).
    let byAddress = arrivals.filter { $0.hasPrefix("ip=") }
    XCTAssertEqual(byAddress.count, 5)
    XCTAssertEqual(Set(byAddress.prefix(2)), ["ip=0", "ip=1"], "\(arrivals)")
    XCTAssertEqual(Set(byAddress.dropFirst(2).prefix(2)), ["ip=2", "ip=3"], "\(arrivals)")
    XCTAssertEqual(byAddress.last, "ip=4", "\(arrivals)")
  }

  /// A download waiting for room is sent the moment one under way ends, and a redirect's next
  /// hop the moment its answer comes, however long the transfer thread would sleep: here an
  /// hour, so that one left for the thread's next round would never be sent.
  func testAWaitingDownloadAndARedirectHopAreSentAtOnceByTheSleepingThread() async throws {
    let slow = try LoopbackServer(routes: [
      "/slow.png": { _ in ServerResponse(body: Fixtures.png, headDelay: .milliseconds(50)) },
      "/moved": { _ in ServerResponse(status: 302, headers: [("Location", "/slow.png?moved")]) },
    ])
    defer { slow.shutdown() }
    var configuration = PrefetchConfiguration()
    configuration.concurrency = 1
    let downloader = Downloader(configuration: configuration.http, idleWaitMilliseconds: 3_600_000)
    downloaders.append(downloader)
    let urls = (0..<4).map { slow.url("/slow.png?n=\($0)") } + [slow.url("/moved")]
    let started = Date()
    let results = try await startAll(urls, on: downloader)
    for (url, result) in zip(urls, results) {
      XCTAssertEqual(try? result.get().body, Fixtures.png, url)
    }
    XCTAssertLessThan(Date().timeIntervalSince(started), 10, "one after the other, at once")
    XCTAssertEqual(slow.requestCount("/slow.png"), 5)
  }

  /// The connections a burst of downloads opened stay open through a lull for the next burst:
  /// libcurl's default cache (4 connections a transfer in the handle) shrank with the transfers
  /// under way, and each single download in a lull closed one.
  func testTheConnectionsOfABurstOutlastALull() async throws {
    let (slow, downloader) = try slowServer(answeringAfter: .milliseconds(100)) {
      $0.concurrency = 8
      $0.perHostConcurrency = 8
    }
    defer { slow.shutdown() }
    let burst = { (round: Int) in (0..<8).map { slow.url("/slow.png?round=\(round)&n=\($0)") } }
    _ = try await startAll(burst(0), on: downloader)
    XCTAssertEqual(slow.connectionCount, 8)
    for single in 0..<3 {
      _ = try await startAll([slow.url("/slow.png?single=\(single)")], on: downloader)
    }
    _ = try await startAll(burst(1), on: downloader)
    XCTAssertEqual(slow.connectionCount, 8, "the first burst's connections, every one reused")
  }

  /// Among downloads waiting for room, a `highPriority` one starts first and a `lowPriority` one
  /// last, as SD's operation queue orders them, whatever the order they were queued in.
  func testWaitingDownloadsStartByPriorityThenInOrder() async throws {
    let (slow, downloader) = try slowServer(answeringAfter: .milliseconds(100)) {
      $0.concurrency = 1
    }
    defer { slow.shutdown() }
    let queued: [(name: String, priority: DownloadPriority)] = [
      ("first", .normal), ("low", .low), ("normal-1", .normal), ("high", .high),
      ("normal-2", .normal),
    ]
    let ended = expectation(description: "every download ends")
    ended.expectedFulfillmentCount = queued.count
    for (name, priority) in queued {
      var request = DownloadRequest(url: URL(string: slow.url("/slow.png?\(name)"))!)
      request.priority = priority
      _ = downloader.start(request) { _ in ended.fulfill() }
      // The first is under way before the others are queued behind it.
      await waitUntil(timeout: 10, "the first download") { slow.requestCount("/slow.png") > 0 }
    }
    await fulfillment(of: [ended], timeout: 30)
    XCTAssertEqual(
      slow.requests("/slow.png").map(\.query), ["first", "high", "normal-1", "normal-2", "low"])
  }

  /// A redirect's next hop goes before every download not yet started, whatever their
  /// priority: a `lowPriority` download under way is not held behind the normal ones queued
  /// since (they kept the run full until its deadline failed it), as SD's queue's priority
  /// orders only the starts and NSURLSession follows a redirect at once.
  func testARedirectsNextHopGoesBeforeDownloadsOfABetterPriorityNotYetStarted() async throws {
    let (slow, downloader) = try slowServer(answeringAfter: .milliseconds(100)) {
      $0.concurrency = 1
    }
    defer { slow.shutdown() }
    let start = try LoopbackServer(routes: [
      "/moved.png": { _ in
        var response = ServerResponse.redirect(to: slow.url("/slow.png?low"))
        response.headDelay = .milliseconds(300)
        return response
      }
    ])
    defer { start.shutdown() }
    let ended = expectation(description: "every download ends")
    ended.expectedFulfillmentCount = 4
    var low = DownloadRequest(url: URL(string: start.url("/moved.png"))!)
    low.priority = .low
    _ = downloader.start(low) { _ in ended.fulfill() }
    // Under way (its redirect comes in 0.3 s) before the others are queued behind it.
    await waitUntil(timeout: 10, "the low download") { start.requestCount("/moved.png") > 0 }
    for n in 0..<3 {
      let request = DownloadRequest(url: URL(string: slow.url("/slow.png?n=\(n)"))!)
      _ = downloader.start(request) { _ in ended.fulfill() }
    }
    await fulfillment(of: [ended], timeout: 30)
    XCTAssertEqual(slow.requests("/slow.png").map(\.query), ["low", "n=0", "n=1", "n=2"])
  }

  /// A redirect's next hop waiting for its target (held back by a `Retry-After`) was sent: a
  /// cancel ends it as cancelled under way, not `notStarted` (which the scheduler drops as if
  /// never tried), and so does the loop's stop for those still waiting; none is sent.
  func testARedirectsHopCancelledOrStoppedWhileItWaitsEndsAsCancelledUnderWay() async throws {
    let (target, start) = try redirectingPair(image: { request in
      request.attempt == 1
        ? ServerResponse(status: 429, headers: [("Retry-After", "30")])
        : .image(Fixtures.png, type: "image/png")
    })
    var configuration = PrefetchConfiguration()
    configuration.maxRetryDelay = 60
    let downloader = makeDownloader(configuration.http)
    _ = try await startAll([target.url("/img.png?first")], on: downloader)
    let urls = (0..<3).map { start.url("/moved.png?\($0)") }
    let results = Mutex<[Int: Result<DownloadResponse, DownloadFailure>]>([:])
    let ended = expectation(description: "every download ends")
    ended.expectedFulfillmentCount = urls.count
    let handles = urls.enumerated().map { index, url in
      downloader.start(DownloadRequest(url: URL(string: url)!)) { result in
        results.withLock { $0[index] = result }
        ended.fulfill()
      }
    }
    await waitUntil(timeout: 10, "the redirects") { start.requestCount("/moved.png") == 3 }
    downloader.cancel(try XCTUnwrap(handles[0]))
    await waitUntil(timeout: 10, "the cancel") { results.withLock { $0[0] != nil } }
    await downloader.shutdown()
    await fulfillment(of: [ended], timeout: 10)
    for index in urls.indices {
      guard case .failure(let failure)? = results.withLock({ $0[index] }) else {
        return XCTFail("\(index): \(String(describing: results.withLock { $0[index] }))")
      }
      XCTAssertEqual(failure.error.name, "cancelled", "\(index)")
      XCTAssertFalse(failure.notStarted, "\(index)")
    }
    XCTAssertEqual(target.requestCount("/img.png"), 1, "only the first, which asked to wait")
  }

  /// A download that waits for room is never sent once its start condition says no (the run
  /// stopped), nor once it is cancelled: it ends as cancelled, `notStarted`. The one under way
  /// finishes.
  func testAWaitingDownloadThatMayNoLongerStartOrIsCancelledIsNeverSent() async throws {
    let (slow, downloader) = try slowServer(answeringAfter: .milliseconds(300)) {
      $0.concurrency = 1
    }
    defer { slow.shutdown() }
    let mayStart = Atomic<Bool>(true)
    let urls = (0..<4).map { slow.url("/slow.png?n=\($0)") }
    let results = try await startAll(
      urls, on: downloader, startsIf: { mayStart.load(ordering: .relaxed) },
      whileWaiting: { handles in
        await waitUntil(timeout: 10, "the first download") { slow.requestCount("/slow.png") > 0 }
        downloader.cancel(try XCTUnwrap(handles[3]))
        mayStart.store(false, ordering: .relaxed)
      })
    XCTAssertEqual(try? results[0].get().body, Fixtures.png)
    for result in results.dropFirst() {
      guard case .failure(let failure) = result else { return XCTFail("\(result)") }
      XCTAssertEqual(failure.error.name, "cancelled")
      XCTAssertTrue(failure.notStarted)
    }
    XCTAssertEqual(slow.requests("/slow.png").map(\.query), ["n=0"])
  }

  /// The 60 s deadline (here 2 s) counts from the first request, not from the queuing: a
  /// download that waited for room longer than the deadline still has all of it.
  func testTheDeadlineCountsFromTheStartNotFromTheWait() async throws {
    let (slow, downloader) = try slowServer(answeringAfter: .milliseconds(1200)) {
      $0.concurrency = 1
      $0.deadline = 2
    }
    defer { slow.shutdown() }
    let started = Date()
    let results = try await startAll(
      [slow.url("/slow.png?n=0"), slow.url("/slow.png?n=1")], on: downloader)
    XCTAssertGreaterThan(Date().timeIntervalSince(started), 2.4, "one after the other")
    for result in results { XCTAssertEqual(try? result.get().body, Fixtures.png) }
  }

  /// The same under the total limit (`concurrency`): a download to another host waits for
  /// room, its deadline not started, while the first is served.
  func testTheDeadlineCountsFromTheStartUnderTheTotalLimitToo() async throws {
    let (slow, downloader) = try slowServer(answeringAfter: .milliseconds(1200)) {
      $0.concurrency = 1
      $0.deadline = 2
    }
    defer { slow.shutdown() }
    let urls = [
      "http://127.0.0.1:\(slow.port)/slow.png?n=0", "http://localhost:\(slow.port)/slow.png?n=1",
    ]
    let results = try await startAll(urls, on: downloader)
    for (url, result) in zip(urls, results) {
      XCTAssertEqual(try? result.get().body, Fixtures.png, url)
    }
    XCTAssertEqual(slow.peakConcurrency, 1)
  }

  func testAStartAfterShutdownFailsAsCancelled() async throws {
    let downloader = Downloader()
    await downloader.shutdown()
    do {
      _ = try await downloader.download(DownloadRequest(url: URL(string: server.url("/img.png"))!))
      XCTFail("downloaded after shutdown")
    } catch {
      XCTAssertEqual(error.error.name, "cancelled")
    }
    XCTAssertEqual(server.requestCount("/img.png"), 0)
  }

  /// What a run does once its prefetch is over: the transfer thread is told to stop at once,
  /// without waiting; what is still in flight is cancelled and nothing more is sent.
  func testBeginningTheShutdownCancelsWhatIsInFlightAndRefusesMore() async throws {
    let slow = try LoopbackServer(routes: [
      "/slow.png": { _ in ServerResponse(body: Fixtures.png, headDelay: .seconds(5)) }
    ])
    defer { slow.shutdown() }
    let downloader = Downloader()
    let started = Date()
    let inFlight = Task {
      try await downloader.download(DownloadRequest(url: URL(string: slow.url("/slow.png"))!))
    }
    await waitUntil(timeout: 10, "the request to reach the server") {
      slow.requestCount("/slow.png") == 1
    }
    downloader.beginShutdown()
    guard case .failure(let failure as DownloadFailure) = await inFlight.result else {
      return XCTFail("answered after the shutdown began")
    }
    XCTAssertEqual(failure.error.name, "cancelled")
    XCTAssertLessThan(Date().timeIntervalSince(started), 3, "cancelled, not waited for")
    do {
      _ = try await downloader.download(DownloadRequest(url: URL(string: server.url("/img.png"))!))
      XCTFail("downloaded after the shutdown began")
    } catch {
      XCTAssertEqual(error.error.name, "cancelled")
    }
    await downloader.shutdown()
    XCTAssertEqual(server.requestCount("/img.png"), 0)
  }

  func testCancellingTheTaskCancelsTheTransfer() async throws {
    let slow = try LoopbackServer(routes: [
      "/slow.png": { _ in ServerResponse(body: Fixtures.png, headDelay: .seconds(5)) }
    ])
    defer { slow.shutdown() }
    let downloader = makeDownloader()
    let started = Date()
    let task = Task {
      try await downloader.download(DownloadRequest(url: URL(string: slow.url("/slow.png"))!))
    }
    // Cancelled once the transfer is under way, not before it began.
    await waitUntil(timeout: 10, "the request to reach the server") {
      slow.requestCount("/slow.png") == 1
    }
    task.cancel()
    let result = await task.result
    XCTAssertLessThan(Date().timeIntervalSince(started), 3, "not held until the answer")
    guard case .failure(let failure as DownloadFailure) = result else {
      return XCTFail("\(result)")
    }
    XCTAssertEqual(failure.error.name, "cancelled")
  }

  /// The table from `CURLcode` to SD's names, class by class, including those a loopback server
  /// cannot produce (a name that does not resolve, an untrusted certificate).
  func testEveryCurlResultClassMapsToItsSDName() {
    let expected: [(CURLcode, String)] = [
      (CURLE_URL_MALFORMAT, "invalidURL"),
      (CURLE_ABORTED_BY_CALLBACK, "cancelled"),
      (CURLE_COULDNT_RESOLVE_HOST, "cannotFindHost"),
      (CURLE_COULDNT_CONNECT, "cannotConnectToHost"),
      (CURLE_OPERATION_TIMEDOUT, "timedOut"),
      (CURLE_PARTIAL_FILE, "networkConnectionLost"),
      (CURLE_RECV_ERROR, "networkConnectionLost"),
      (CURLE_SEND_ERROR, "networkConnectionLost"),
      (CURLE_GOT_NOTHING, "networkConnectionLost"),
      (CURLE_HTTP2_STREAM, "networkConnectionLost"),
      (CURLE_PEER_FAILED_VERIFICATION, "serverCertificateUntrusted"),
      (CURLE_SSL_CONNECT_ERROR, "secureConnectionFailed"),
      (CURLE_TOO_MANY_REDIRECTS, "tooManyRedirects"),
      (CURLE_FILESIZE_EXCEEDED, "responseTooLarge"),
      (CURLE_BAD_CONTENT_ENCODING, "cannotDecodeContentData"),
      (CURLE_WEIRD_SERVER_REPLY, "badServerResponse"),
      (CURLE_UNSUPPORTED_PROTOCOL, "badServerResponse"),
      (CURLE_OUT_OF_MEMORY, "responseHeaderTooLarge"),
      (CURLE_WRITE_ERROR, "trailingDataAfterCompressedBody"),
    ]
    for (code, name) in expected {
      let error = CurlFailure.error(for: code, detail: "")
      XCTAssertEqual(error.name, name, "CURLcode \(code.rawValue)")
      XCTAssertFalse(error.message.isEmpty, "curl's own message is kept")
      let transient = [
        "cannotFindHost", "cannotConnectToHost", "timedOut", "networkConnectionLost",
      ]
      XCTAssertEqual(error.isTransient, transient.contains(name), name)
      XCTAssertEqual(
        error.blacklistsURL,
        !transient.contains(name) && name != "cancelled"
          && name != "trailingDataAfterCompressedBody" && name != "responseTooLarge",
        "SD 5's rule, but for ours alone and the run's own size limit: \(name)")
    }
  }
}

extension DownloaderTests {
  func testAnUntrustedCertificateFailsUnlessAllowInvalidSSLCertificates() async throws {
    let tls = try TLSLoopbackServer(
      files: ["photo.jpg": Fixtures.jpeg], root: temporary.appending("www"))
    defer { tls.shutdown() }
    let manager = try manager()
    let refused = await manager.load(
      tls.url("/photo.jpg"), options: ImageOptions(), context: ImageContext())
    let failure = failure(refused.outcome)
    XCTAssertEqual(failure?.name, "serverCertificateUntrusted")
    XCTAssertEqual(failure?.blacklisted, true, "SD 5 blacklists it: not a transient error")

    let allowed = await manager.load(
      tls.url("/photo.jpg"), options: ImageOptions([.allowInvalidSSLCertificates, .retryFailed]),
      context: ImageContext())
    guard case .downloaded(let bytes, _) = allowed.outcome else {
      return XCTFail("\(allowed.outcome)")
    }
    XCTAssertEqual(bytes, Fixtures.jpeg.count)
  }
}

/// How many threads of this process, the main thread aside, are asleep in poll(2), as Linux
/// shows it (`/proc/self/task/*/wchan`): the transfer thread waits there when it has nothing to
/// do. NIO's and Dispatch's threads wait in epoll instead, the main thread's run loop in poll.
private func threadsAsleepInPoll() -> Int {
  let tasks = "/proc/self/task"
  let threads = (try? FileManager.default.contentsOfDirectory(atPath: tasks)) ?? []
  return threads.filter { thread in
    guard thread != String(getpid()) else { return false }
    let wchan = (try? String(contentsOfFile: "\(tasks)/\(thread)/wchan", encoding: .utf8)) ?? ""
    return wchan.contains("poll") && !wchan.contains("epoll") && !wchan.hasPrefix("ep_")
  }.count
}

extension DownloaderTests {
  func testTheTransferThreadCarriesItsNameForTopAndPs() async throws {
    let downloader = makeDownloader()
    _ = try await downloader.download(DownloadRequest(url: URL(string: server.url("/img.png"))!))
    let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
    let names = tasks.compactMap {
      try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)
    }
    XCTAssertTrue(names.contains("ic-transfers\n"), "\(names)")
  }
}
