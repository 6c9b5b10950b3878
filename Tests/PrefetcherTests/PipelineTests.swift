import Core
import Foundation
import HTTP
import NIOCore
import Pipeline
import Prefetcher
import TestSupport
import XCTest

/// SPEC section 2 against a real HTTP server on 127.0.0.1.
final class PipelineTests: DownloaderTestCase {
  var downloader: Downloader!

  /// What `/modified.png` says, and the only validator it sends (no ETag).
  static let lastModified = "Wed, 21 Oct 2015 07:28:00 GMT"

  static let truncatedJPEG = Fixtures.jpeg.prefix(Fixtures.jpeg.count - 200)

  override var routes: [String: Route] {
    let etag = "\"v1\""
    return [
      "/photo.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
      "/image.png": { _ in .image(Fixtures.png, type: "image/png") },
      "/anim.gif": { _ in .image(Fixtures.gif, type: "image/gif") },
      "/500": { _ in ServerResponse(status: 500, body: Data("oops".utf8)) },
      "/page.jpg": { _ in
        .image(Data("<!DOCTYPE html><html><body>hi</body></html>".utf8), type: "text/html")
      },
      "/empty.png": { _ in .image(Data(), type: "image/png") },
      "/truncated.jpg": { _ in .image(Data(Self.truncatedJPEG), type: "image/jpeg") },
      "/r1": { _ in .redirect(to: "/r2") },
      "/r2": { _ in .redirect(to: "/photo.jpg", status: 301) },
      "/loop": { _ in .redirect(to: "/loop") },
      "/to-file": { _ in .redirect(to: "file:///etc/passwd") },
      "/slow-head.jpg": { _ in
        ServerResponse(
          headers: [("Content-Type", "image/jpeg")], body: Fixtures.jpeg, headDelay: .seconds(3))
      },
      "/drip.jpg": { _ in
        ServerResponse(body: Fixtures.jpeg, dripInterval: .milliseconds(100), dripChunk: 20)
      },
      "/big.png": { _ in .image(Fixtures.png + Data(count: 4000), type: "image/png") },
      "/flaky.png": { request in
        request.attempt == 1
          ? ServerResponse(status: 503, headers: [("Retry-After", "0")])
          : .image(Fixtures.png, type: "image/png")
      },
      "/always-503.png": { _ in ServerResponse(status: 503) },
      "/etag-once.png": { request in
        request.attempt == 1
          ? ServerResponse(
            headers: [("ETag", "\"once\""), ("Content-Type", "image/png")], body: Fixtures.png)
          : .image(Fixtures.png, type: "image/png")
      },
      "/etag.png": { request in
        request.header("If-None-Match") == etag
          ? ServerResponse(status: 304, headers: [("ETag", etag)])
          : ServerResponse(
            headers: [("ETag", etag), ("Content-Type", "image/png")], body: Fixtures.png)
      },
      "/slow.jpg": { _ in ServerResponse(body: Fixtures.jpeg, headDelay: .milliseconds(300)) },
      "/r307": { _ in .redirect(to: "/photo.jpg", status: 307) },
      "/r308": { _ in .redirect(to: "/image.png", status: 308) },
      "/modified.png": { request in
        request.header("If-Modified-Since") == Self.lastModified
          ? ServerResponse(status: 304, headers: [("Last-Modified", Self.lastModified)])
          : ServerResponse(
            headers: [("Last-Modified", Self.lastModified), ("Content-Type", "image/png")],
            body: Fixtures.png)
      },
      "/echo.png": { _ in .image(Fixtures.png, type: "image/png") },
      "/long-etag.png": { _ in
        ServerResponse(
          headers: [
            ("ETag", "\"\(String(repeating: "e", count: 10_000))\""),
            ("Last-Modified", Self.lastModified), ("Content-Type", "image/png"),
          ], body: Fixtures.png)
      },
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    var configuration = PrefetchConfiguration()
    configuration.timeout = 1
    configuration.deadline = 2
    configuration.maxResponseSize = 2000
    downloader = makeDownloader(configuration.http)
  }

  /// The runs' state, in memory: the pipeline's tests need no database and no lock.
  private let namespaces = MemoryNamespaces()

  private func manager(_ configuration: PipelineConfiguration = PipelineConfiguration()) throws
    -> ImageManager
  {
    try ImageManager(location: location, configuration: configuration, namespaces: namespaces)
  }

  /// Loads through `manager` on the test's downloader, or on `downloader`.
  private func prefetcher(_ manager: ImageManager, on downloader: Downloader? = nil) -> Prefetcher {
    Prefetcher(manager: manager, downloader: downloader ?? self.downloader)
  }

  private func load(
    _ path: String, _ options: Set<ImageOption> = [], context: ImageContext = ImageContext(),
    manager: ImageManager? = nil
  ) async throws -> LoadOutcome {
    let manager = try manager ?? self.manager()
    return await prefetcher(manager).load(
      server.url(path), options: ImageOptions(options), context: context
    )
    .outcome
  }

  private var cacheFiles: [String] {
    get throws {
      try CacheScanner(root: location.diskCachePath).files().map(\.relativePath).sorted()
    }
  }

  private func assertFailure(
    _ outcome: LoadOutcome, name: String, blacklisted: Bool, file: StaticString = #filePath,
    line: UInt = #line
  ) throws {
    guard case .failed(let error, let wasBlacklisted) = outcome else {
      return XCTFail("expected \(name), got \(outcome)", file: file, line: line)
    }
    XCTAssertEqual(error.name, name, "\(error)", file: file, line: line)
    XCTAssertEqual(wasBlacklisted, blacklisted, "blacklisted", file: file, line: line)
    XCTAssertEqual(
      try cacheFiles, [], "a failure leaves nothing in the cache", file: file, line: line)
  }

  func testJPEGPNGAndGIFAreStoredUnderSDFileNames() async throws {
    let manager = try manager()
    for (path, size) in [
      ("/photo.jpg", Fixtures.jpeg.count), ("/image.png", Fixtures.png.count),
      ("/anim.gif", Fixtures.gif.count),
    ] {
      let outcome = try await load(path, manager: manager)
      guard case .downloaded(let bytes, let info) = outcome else {
        return XCTFail("\(path): \(outcome)")
      }
      XCTAssertEqual(bytes, size)
      XCTAssertNotNil(info.width)
      let stored = FileManager.default.contents(
        atPath: DiskCache(location: location).cachePath(forKey: server.url(path)))
      XCTAssertEqual(stored?.count, size, path)
    }
    XCTAssertTrue(try cacheFiles.contains(CacheFileName.fileName(forKey: server.url("/photo.jpg"))))
  }

  func testSecondLoadIsAHitWithoutARequest() async throws {
    let manager = try manager()
    _ = try await load("/photo.jpg", manager: manager)
    let outcome1 = try await load("/photo.jpg", manager: manager)
    XCTAssertEqual(outcome1, .memoryHit)
    let outcome2 = try await load("/photo.jpg", manager: try self.manager())
    XCTAssertEqual(outcome2, .diskHit)
    XCTAssertEqual(server.requestCount("/photo.jpg"), 1)
  }

  func testDefaultAndJobHeadersAreSent() async throws {
    var context = ImageContext()
    context.headers = ["Authorization": "Bearer t"]
    _ = try await load("/echo.png", context: context)
    let request = try XCTUnwrap(server.requests("/echo.png").first)
    XCTAssertEqual(request.header("Accept"), "image/*,*/*;q=0.8")
    XCTAssertEqual(request.header("User-Agent"), "imagecache/0.1.0")
    XCTAssertEqual(request.header("Authorization"), "Bearer t")
  }

  /// A header the job sets replaces SD's default of the same name, in any case: the request
  /// carries one `User-Agent` and one `Accept`, the job's.
  func testAJobsHeaderReplacesTheDefaultOfTheSameName() async throws {
    var context = ImageContext()
    context.headers = ["user-agent": "nightly-bot/2", "ACCEPT": "image/webp"]
    _ = try await load("/echo.png", context: context)
    let request = try XCTUnwrap(server.requests("/echo.png").first)
    func values(_ name: String) -> [String] {
      request.headers.filter { $0.0.lowercased() == name }.map(\.1)
    }
    XCTAssertEqual(values("user-agent"), ["nightly-bot/2"])
    XCTAssertEqual(values("accept"), ["image/webp"])
  }

  func testStatusFailuresAreNotBlacklisted() async throws {
    try assertFailure(
      try await load("/missing.png"), name: "invalidDownloadStatusCode", blacklisted: false)
    let outcome = try await load("/500")
    try assertFailure(outcome, name: "invalidDownloadStatusCode", blacklisted: false)
    if case .failed(let error, _) = outcome { XCTAssertEqual(error.httpStatus, 500) }
    XCTAssertEqual(try manager().blacklistedURLs(), [])
  }

  func testHTMLServedAsAnImageIsBadImageDataAndBlacklisted() async throws {
    try assertFailure(try await load("/page.jpg"), name: "badImageData", blacklisted: true)
    XCTAssertEqual(try manager().blacklistedURLs(), [server.url("/page.jpg")])
  }

  func testEmptyBodyAndTruncatedJPEGAreBadImageData() async throws {
    try assertFailure(try await load("/empty.png"), name: "badImageData", blacklisted: true)
    try assertFailure(try await load("/truncated.jpg"), name: "badImageData", blacklisted: true)
  }

  func testRedirectChainIsFollowedAndStoredUnderTheOriginalURL() async throws {
    guard case .downloaded = try await load("/r1") else { return XCTFail() }
    XCTAssertEqual(try cacheFiles, [CacheFileName.fileName(forKey: server.url("/r1"))])
  }

  func testRedirectLoopIsTooManyRedirects() async throws {
    try assertFailure(try await load("/loop"), name: "tooManyRedirects", blacklisted: true)
    XCTAssertEqual(server.requestCount("/loop"), 11, "the first request and 10 redirects")
  }

  func testRedirectToFileIsInvalidURL() async throws {
    try assertFailure(try await load("/to-file"), name: "invalidURL", blacklisted: true)
  }

  func testNonHTTPSchemesAndEmptyURLsAreInvalid() async throws {
    let manager = try manager()
    for url in [
      "ftp://example.com/a.png", "file:///etc/passwd", "data:image/png;base64,AAAA", "not a url",
      "",
    ] {
      let outcome = await prefetcher(manager).load(
        url, options: ImageOptions(), context: ImageContext()
      )
      .outcome
      guard case .failed(let error, _) = outcome else { return XCTFail("\(url): \(outcome)") }
      XCTAssertEqual(error.code, 1000, url)
    }
  }

  func testSlowHeadersHitTheIdleTimeout() async throws {
    try assertFailure(try await load("/slow-head.jpg"), name: "timedOut", blacklisted: false)
  }

  func testSlowDripBodyHitsTheTotalDeadline() async throws {
    // 1342 bytes, 20 every 100 ms: about 6.7 s, never idle for a second, over the 2 s deadline.
    let started = Date()
    try assertFailure(try await load("/drip.jpg"), name: "timedOut", blacklisted: false)
    XCTAssertLessThan(Date().timeIntervalSince(started), 6, "stopped by the deadline, not the end")
  }

  /// The response size limit is the run's own (SD has none): a body over it fails, and is
  /// not blacklisted, so the next run (with a higher limit, or the origin mended) asks again.
  func testOversizeBodyFailsAndIsNotBlacklisted() async throws {
    let manager = try manager()
    for _ in 1...2 {
      let outcome = try await load("/big.png", manager: manager)
      try assertFailure(outcome, name: "responseTooLarge", blacklisted: false)
      guard case .failed(let error, _) = outcome else { continue }
      XCTAssertTrue(
        error.message.contains(
          "(not blacklisted: the limit is the run's own, --max-response-size, "
            + "prefetch.maxResponseSize)"), error.message)
    }
    XCTAssertEqual(server.requestCount("/big.png"), 2, "asked again, not refused")
    XCTAssertNil(namespaces.store(location).blacklistEntry(url: server.url("/big.png")))
  }

  /// `maxPixels` is the run's own limit too: an image over it fails as SD's `badImageData`
  /// (1001), is not blacklisted, and a run with a higher limit stores it.
  func testAnImageOverTheRunsPixelLimitIsNotBlacklistedAndAHigherLimitStoresIt() async throws {
    var low = PipelineConfiguration()
    low.maxPixels = 64 * 48 - 1  // Fixtures.png is 64 x 48
    let outcome = try await load("/image.png", manager: try manager(low))
    try assertFailure(outcome, name: "badImageData", blacklisted: false)
    guard case .failed(let error, _) = outcome else { return }
    XCTAssertEqual(error.code, 1001)
    XCTAssertTrue(
      error.message.contains(
        "over the limit of 3071 pixels (maxPixels); not decoded (not blacklisted: the limit is "
          + "the run's own, --max-pixels, prefetch.maxPixels)"), error.message)
    XCTAssertNil(namespaces.store(location).blacklistEntry(url: server.url("/image.png")))
    guard case .downloaded = try await load("/image.png", manager: try manager()) else {
      return XCTFail("the default limit stores it")
    }
  }

  /// Issue 45: a stored download's file learns its URL (in the validators' batches, written
  /// by `flush`); a hit writes nothing.
  func testADownloadRecordsItsFilesURLAndAHitRecordsNothing() async throws {
    let manager = try manager()
    _ = try await load("/photo.jpg", manager: manager)
    try manager.flush()
    let name = CacheFileName.fileName(forKey: server.url("/photo.jpg"))
    let stored = try XCTUnwrap(namespaces.store(location).storedURL(forFileName: name))
    XCTAssertEqual(stored.url, server.url("/photo.jpg"))

    let again = try self.manager()
    let hit = try await load("/photo.jpg", manager: again)
    XCTAssertEqual(hit, .diskHit)
    try again.flush()
    XCTAssertEqual(namespaces.store(location).storedURL(forFileName: name), stored)
  }

  /// A refreshed download whose answer has no validators forgets the old ones: the next
  /// revalidation is unconditional, not one with a stale ETag.
  func testARefreshAnsweredWithoutValidatorsForgetsTheOldOnes() async throws {
    let manager = try manager()
    for options: Set<ImageOption> in [[], [.refreshCached], [.refreshCached]] {
      guard case .downloaded = try await load("/etag-once.png", options, manager: manager) else {
        return XCTFail()
      }
    }
    XCTAssertEqual(
      server.requests("/etag-once.png").map { $0.header("If-None-Match") }, [nil, "\"once\"", nil])
  }

  /// A URL blacklisted during a run is refused for the rest of it: a later line of it sends
  /// nothing.
  func testAURLBlacklistedInARunIsRefusedLaterInTheSameRun() async throws {
    let manager = try manager()
    try assertFailure(
      try await load("/page.jpg", manager: manager), name: "badImageData", blacklisted: true)
    let again = try await load("/page.jpg", manager: manager)
    XCTAssertEqual(again, .blacklisted)
    XCTAssertEqual(server.requestCount("/page.jpg"), 1)
  }

  func testRevalidationWith304KeepsTheFile() async throws {
    let manager = try manager()
    guard case .downloaded = try await load("/etag.png", manager: manager) else { return XCTFail() }
    let path = DiskCache(location: location).cachePath(forKey: server.url("/etag.png"))
    let old = Date(timeIntervalSince1970: 1_000_000_000)
    try FileSystem.setTimes(path: path, access: old, modification: old)
    let outcome3 = try await load("/etag.png", [.refreshCached], manager: manager)
    XCTAssertEqual(outcome3, .notModified)
    XCTAssertEqual(server.requests("/etag.png").last?.header("If-None-Match"), "\"v1\"")
    let attributes = try XCTUnwrap(try FileSystem.attributes(atPath: path))
    XCTAssertEqual(attributes.modificationDate, old, "the cached file is kept")
    XCTAssertGreaterThan(attributes.accessDate, old, "and counts as used")
    XCTAssertEqual(FileManager.default.contents(atPath: path), Fixtures.png)
  }

  /// SD asks with `If-Modified-Since` when the server gave only `Last-Modified`: a 304 keeps
  /// the file without its body being sent again.
  func testRevalidationByLastModifiedAloneSendsIfModifiedSince() async throws {
    let manager = try manager()
    guard case .downloaded = try await load("/modified.png", manager: manager) else {
      return XCTFail()
    }
    let outcome = try await load("/modified.png", [.refreshCached], manager: manager)
    XCTAssertEqual(outcome, .notModified)
    let second = try XCTUnwrap(server.requests("/modified.png").last)
    XCTAssertEqual(second.header("If-Modified-Since"), Self.lastModified)
    XCTAssertNil(second.header("If-None-Match"))
    XCTAssertEqual(server.bodyBytesSent("/modified.png"), Fixtures.png.count, "one body only")
  }

  /// NSURLSession follows 307 and 308 as it follows 301 and 302; the image is stored under the
  /// URL the manifest named.
  func testTemporaryAndPermanentRedirects307And308AreFollowed() async throws {
    for (path, target, size) in [
      ("/r307", "/photo.jpg", Fixtures.jpeg.count), ("/r308", "/image.png", Fixtures.png.count),
    ] {
      guard case .downloaded(let bytes, _) = try await load(path) else {
        return XCTFail(path)
      }
      XCTAssertEqual(bytes, size, path)
      XCTAssertEqual(server.requestCount(target), 1, path)
      let stored = DiskCache(location: location).cachePath(forKey: server.url(path))
      XCTAssertEqual(FileManager.default.contents(atPath: stored)?.count, size, path)
    }
  }

  func testBlacklistedURLIsRefusedNextRunAndFetchedWithRetryFailed() async throws {
    _ = try await load("/page.jpg")
    XCTAssertEqual(server.requestCount("/page.jpg"), 1)
    let outcome4 = try await load("/page.jpg", manager: try manager())
    XCTAssertEqual(outcome4, .blacklisted)
    XCTAssertEqual(server.requestCount("/page.jpg"), 1, "refused without a request")
    try assertFailure(
      try await load("/page.jpg", [.retryFailed]), name: "badImageData", blacklisted: true)
    XCTAssertEqual(server.requestCount("/page.jpg"), 2)
    let entry = try XCTUnwrap(
      namespaces.store(location).blacklistEntry(url: server.url("/page.jpg")))
    XCTAssertEqual(entry.failureCount, 2)
  }

  func testSuccessWithRetryFailedTakesTheURLOffTheBlacklist() async throws {
    let store = namespaces.store(location)
    store.recordFailure(
      url: server.url("/image.png"), code: 1001, name: "badImageData", reason: "r", at: Date())
    let outcome5 = try await load("/image.png")
    XCTAssertEqual(outcome5, .blacklisted)
    guard case .downloaded = try await load("/image.png", [.retryFailed]) else { return XCTFail() }
    XCTAssertNil(store.blacklistEntry(url: server.url("/image.png")))
  }

  /// A `retryFailed` success takes the URL off the blacklist for the rest of its run too: a
  /// later line of the run without the option loads it.
  func testAURLARetryTookOffTheBlacklistIsNotRefusedLaterInTheSameRun() async throws {
    namespaces.store(location).recordFailure(
      url: server.url("/image.png"), code: 1001, name: "badImageData", reason: "r", at: Date())
    let manager = try manager()
    guard case .downloaded = try await load("/image.png", [.retryFailed], manager: manager) else {
      return XCTFail()
    }
    let again = try await load("/image.png", manager: manager)
    XCTAssertEqual(again, .memoryHit)
  }

  /// A run holds a hash of each blacklisted URL, not the URL: a URL whose hash it holds is
  /// refused only once its entry is read, so a URL sharing a blacklisted URL's hash is loaded.
  func testAURLWithTheHashOfABlacklistedURLIsLoaded() async throws {
    final class Colliding: NamespaceProvider {
      let inner: MemoryNamespaces
      let url: String
      init(_ inner: MemoryNamespaces, url: String) {
        self.inner = inner
        self.url = url
      }
      func open(_ location: CacheLocation, timeToLive: TimeInterval?) throws -> OpenedNamespace {
        var opened = try inner.open(location, timeToLive: timeToLive)
        opened.blacklistHashes.insert(BlacklistRule.hash(ofURL: url))
        return opened
      }
      func close() {}
    }
    let manager = try ImageManager(
      location: location, namespaces: Colliding(namespaces, url: server.url("/image.png")))
    guard case .downloaded = try await load("/image.png", manager: manager) else {
      return XCTFail()
    }
  }

  func testBlacklistTimeToLiveLetsTheURLThroughAgain() async throws {
    let store = namespaces.store(location)
    store.recordFailure(
      url: server.url("/image.png"), code: 1001, name: "badImageData", reason: "r",
      at: Date().addingTimeInterval(-120))
    var configuration = PipelineConfiguration()
    configuration.blacklistTTL = 60
    let outcome = try await load("/image.png", manager: manager(configuration))
    guard case .downloaded = outcome else { return XCTFail("\(outcome)") }
  }

  func testFromCacheOnlyMissDownloadsNothing() async throws {
    let outcome6 = try await load("/photo.jpg", [.fromCacheOnly])
    XCTAssertEqual(outcome6, .cacheMiss)
    XCTAssertEqual(server.requestCount("/photo.jpg"), 0)
  }

  func testFromCacheOnlyNeverDownloadsEvenToRevalidate() async throws {
    let manager = try manager()
    _ = try await load("/etag.png", manager: manager)
    let outcome = try await load("/etag.png", [.fromCacheOnly, .refreshCached], manager: manager)
    XCTAssertEqual(outcome, .memoryHit)
    XCTAssertEqual(server.requestCount("/etag.png"), 1)
  }

  func testFromLoaderOnlySkipsTheCache() async throws {
    let manager = try manager()
    _ = try await load("/photo.jpg", manager: manager)
    guard case .downloaded = try await load("/photo.jpg", [.fromLoaderOnly], manager: manager)
    else { return XCTFail() }
    XCTAssertEqual(server.requestCount("/photo.jpg"), 2)
  }

  func testCacheKeyFilterAndStoreCacheType() async throws {
    var context = ImageContext()
    context.cacheKeyFilter = .stripQueryParameters(["token"])
    _ = await prefetcher(try manager()).load(
      server.url("/photo.jpg?token=abc&w=10"), options: ImageOptions(), context: context)
    XCTAssertEqual(try cacheFiles, [CacheFileName.fileName(forKey: server.url("/photo.jpg?w=10"))])

    context = ImageContext()
    context.storeCacheType = .memory
    _ = try await load("/image.png", context: context)
    XCTAssertFalse(try DiskCache(location: location).containsData(forKey: server.url("/image.png")))
  }
}

extension PipelineTests {
  func testValidatorsAreQueuedAndWrittenOnFlush() async throws {
    let manager = try manager()
    guard case .downloaded = try await load("/etag.png", manager: manager) else { return XCTFail() }
    try manager.flush()
    let validators = namespaces.store(location).validators(forKey: server.url("/etag.png"))
    XCTAssertEqual(validators?.etag, "\"v1\"")
  }
}

extension PipelineTests {
  /// A validator longer than real ones is not kept, the other one is: each is a row of the
  /// state file for every URL, which no size limit trims.
  func testAValidatorLongerThanRealOnesIsNotKept() async throws {
    let manager = try manager()
    guard case .downloaded = try await load("/long-etag.png", manager: manager) else {
      return XCTFail()
    }
    try manager.flush()
    let validators = namespaces.store(location).validators(forKey: server.url("/long-etag.png"))
    XCTAssertNil(validators?.etag)
    XCTAssertEqual(validators?.lastModified, Self.lastModified)
  }
}

extension PipelineTests {
  func testTheManagerKeepsItsStateInTheStoresItIsGivenAndTakesNoLock() async throws {
    let manager = try manager()
    try assertFailure(
      try await load("/page.jpg", manager: manager), name: "badImageData", blacklisted: true)
    guard case .downloaded = try await load("/etag.png", manager: manager) else {
      return XCTFail()
    }
    try manager.flush()
    let store = namespaces.store(location)
    XCTAssertEqual(store.validators(forKey: server.url("/etag.png"))?.etag, "\"v1\"")
    XCTAssertEqual(store.blacklistEntry(url: server.url("/page.jpg"))?.failureCount, 1)
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: location.stateDirectory),
      "no lock file and no database: the runner's provider keeps those")
  }

  func testNamespaceContextStoresInAnotherFolderOfTheSameDirectory() async throws {
    var context = ImageContext()
    context.namespace = "avatars"
    guard case .downloaded = try await load("/photo.jpg", context: context) else {
      return XCTFail()
    }
    let avatars = CacheLocation(directory: location.directory, namespace: "avatars")
    XCTAssertTrue(try DiskCache(location: avatars).containsData(forKey: server.url("/photo.jpg")))
    XCTAssertEqual(try cacheFiles, [], "nothing in the default namespace")
  }
}

extension PipelineTests {
  func testRefusedConnectionIsCannotConnectToHostAtOnceAndNotBlacklisted() async throws {
    let closed = try LoopbackServer(routes: [:])
    let url = closed.url("/gone.png")
    closed.shutdown()
    var configuration = PrefetchConfiguration()
    configuration.timeout = 20
    let patient = Downloader(configuration: configuration.http)
    let started = Date()
    let outcome = await prefetcher(try manager(), on: patient)
      .load(url, options: ImageOptions(), context: ImageContext()).outcome
    await patient.shutdown()
    guard case .failed(let error, let blacklisted) = outcome else { return XCTFail("\(outcome)") }
    XCTAssertEqual(error.name, "cannotConnectToHost")
    XCTAssertFalse(blacklisted)
    XCTAssertLessThan(
      Date().timeIntervalSince(started), 10, "not held until the 20 s connect timeout")
  }
}
