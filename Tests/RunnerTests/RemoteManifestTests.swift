import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import Runner
import Synchronization
import TestSupport
import XCTest

/// Sitemaps and manifests named by URL (SPEC section 6) are fetched through the run's transfer
/// thread, off the prefetch loop (issue 32): a slow one holds up no download, and the limits
/// and the stop of image downloads apply to it.
final class RemoteManifestTests: LoopbackTestCase {
  /// The documents, each held until the test opens `gate`: a server of its own, whose one
  /// event-loop thread the held answer blocks while the images' server goes on.
  var documents: LoopbackServer!
  let gate = Gate()
  var location: CacheLocation!

  /// Held shut until opened; says when a request reached it.
  final class Gate: Sendable {
    private let opened = DispatchSemaphore(value: 0)
    private let reached = Atomic<Bool>(false)
    var wasReached: Bool { reached.load(ordering: .relaxed) }
    func pass() {
      reached.store(true, ordering: .relaxed)
      opened.wait()
      opened.signal()
    }
    func open() { opened.signal() }
  }

  /// The images are the server's (`LoopbackTestCase.images`).
  override func setUpWithError() throws {
    try super.setUpWithError()
    let urlset = Data(
      """
      <?xml version="1.0" encoding="UTF-8"?>
      <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
              xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
        <url><loc>\(server.url("/p"))</loc>
          <image:image><image:loc>\(server.url("/c.gif"))</image:loc></image:image></url>
      </urlset>
      """.utf8)
    let gate = gate
    documents = try LoopbackServer(routes: [
      "/held.xml": { _ in
        gate.pass()
        return ServerResponse(headers: [("Content-Type", "application/xml")], body: urlset)
      },
      "/big.txt": { _ in
        ServerResponse(body: Data(String(repeating: "https://x.invalid/a.jpg\n", count: 100).utf8))
      },
    ])
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  override func tearDown() {
    gate.open()
    documents?.shutdown()
    super.tearDown()
  }

  private func job(_ manifests: [String], _ configure: (inout Job) -> Void = { _ in }) -> Job {
    .manifestsOnly("remote", location: location, manifests, configure)
  }

  private func run(_ job: Job) async throws -> (RunOutcome, PrefetchReport) {
    try await Self.run(job, reports: temporary.appending("reports/{job}.json"))
  }

  private static func run(_ job: Job, reports: String) async throws -> (
    RunOutcome, PrefetchReport
  ) {
    var settings = RunSettings()
    settings.reportFiles = [reports]
    let outcome = try await JobRunner(job: job, settings: settings, console: RecordingConsole())
      .run()
    let data = try XCTUnwrap(FileManager.default.contents(atPath: outcome.reportFiles[0]))
    return (outcome, try XCTUnwrap(try RunReport.decode(data).prefetch))
  }

  private func stored(_ path: String) -> Bool {
    FileManager.default.fileExists(
      atPath: DiskCache(location: location).cachePath(forKey: server.url(path)))
  }

  func testDownloadsGoOnWhileARemoteSitemapIsStillBeingServed() async throws {
    let local = try temporary.manifest([server.url("/a.jpg"), server.url("/b.png")])
    let twoManifests = job([local, documents.url("/held.xml")])
    let reports = temporary.appending("reports/{job}.json")
    let running = Task { [twoManifests, reports] in
      try await RemoteManifestTests.run(twoManifests, reports: reports)
    }
    let storedMeanwhile = await waitUntil(timeout: 5, "the first manifest's images stored") {
      stored("/a.jpg") && stored("/b.png")
    }
    XCTAssertTrue(gate.wasReached, "the sitemap was still being served")
    gate.open()
    let (outcome, report) = try await running.value
    XCTAssertTrue(storedMeanwhile)
    XCTAssertEqual(outcome.failedURLs, 0)
    XCTAssertEqual(report.counts.downloaded, 3, "\(report.inputFailures)")
    XCTAssertTrue(stored("/c.gif"), "the sitemap's image, once it came")
  }

  func testAStopEndsARemoteSitemapFetchInProgress() async throws {
    let stop = StopFlag()
    let stopper = Task { [gate] in
      await waitUntil(timeout: 10, "the sitemap's request") { gate.wasReached }
      stop.stop()
    }
    var items = job([documents.url("/held.xml")]).manifestItems
    items.stop = stop
    let report = try await Downloader.withDownloader { downloader in
      items.downloader = downloader
      let prefetcher = try Prefetcher(
        location: location, configuration: PrefetchConfiguration(),
        namespaces: MemoryNamespaces(), downloader: downloader)
      return await prefetcher.run(items, stop: stop)
    }
    _ = await stopper.value
    XCTAssertEqual(report.total, 0, "nothing of the sitemap was read")
    XCTAssertFalse(stored("/c.gif"))
  }

  func testARemoteManifestOverTheSizeLimitFailsAsAWholeInputSayingSo() async throws {
    let (outcome, report) = try await run(
      job([documents.url("/big.txt")]) { $0.prefetch.maxResponseSize = 1_000 })
    XCTAssertEqual(outcome.failedInputs, 1, "\(report.counts) \(report.lineErrors)")
    let failure = try XCTUnwrap(report.inputFailures.first)
    XCTAssertTrue(failure.contains("cannot fetch: responseTooLarge"), failure)
    XCTAssertEqual(report.counts.total, 0)
  }
}

extension RemoteManifestTests {
  func testADryRunFetchesAnIndexAndItsSitemapsThroughOneDownloaderAndConnection() async throws {
    let base = Mutex("")
    @Sendable func urlset(_ image: String) -> ServerResponse {
      ServerResponse(
        headers: [("Content-Type", "application/xml")],
        body: Data(
          """
          <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
                  xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
            <url><loc>https://shop.invalid/p</loc>
              <image:image><image:loc>https://shop.invalid/\(image)</image:loc></image:image></url>
          </urlset>
          """.utf8))
    }
    let sitemaps = try LoopbackServer(routes: [
      "/index.xml": { _ in
        let base = base.withLock { $0 }
        return ServerResponse(
          headers: [("Content-Type", "application/xml")],
          body: Data(
            """
            <sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
              <sitemap><loc>\(base)/one.xml</loc></sitemap>
              <sitemap><loc>\(base)/two.xml</loc></sitemap>
            </sitemapindex>
            """.utf8))
      },
      "/one.xml": { _ in urlset("1.jpg") },
      "/two.xml": { _ in urlset("2.jpg") },
    ])
    defer { sitemaps.shutdown() }
    base.withLock { $0 = sitemaps.baseURL }

    var settings = RunSettings()
    settings.dryRun = true
    settings.reportFiles = [temporary.appending("plan.json")]
    let outcome = try await JobRunner(
      job: job([sitemaps.url("/index.xml")]), settings: settings, console: RecordingConsole()
    ).run()
    let data = try XCTUnwrap(FileManager.default.contents(atPath: outcome.reportFiles[0]))
    let plan = try XCTUnwrap(try RunReport.decode(data).plan)
    XCTAssertEqual(plan.counts.download, 2, "\(plan)")
    for path in ["/index.xml", "/one.xml", "/two.xml"] {
      XCTAssertEqual(sitemaps.requestCount(path), 1, path)
    }
    XCTAssertEqual(
      sitemaps.connectionCount, 1,
      "the plan's documents share one downloader, whose connection is reused")
  }
}

extension RemoteManifestTests {
  func testALibraryCallerWithoutADownloaderReadsARemoteManifestTimeAfterTime() throws {
    let lists = try LoopbackServer(routes: [
      "/urls.txt": { _ in ServerResponse(body: Data("https://a.invalid/1.jpg\n".utf8)) }
    ])
    defer { lists.shutdown() }
    // Each read makes a downloader of its own and returns once its transfer thread has ended:
    // twice in a row, the second finds nothing of the first in its way.
    for _ in 0..<2 {
      let urls = try ManifestItems(paths: [lists.url("/urls.txt")]).map { try $0.get().url }
      XCTAssertEqual(urls, ["https://a.invalid/1.jpg"])
    }
    XCTAssertEqual(lists.requestCount("/urls.txt"), 2)
  }
}
