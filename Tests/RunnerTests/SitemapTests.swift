import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import TestSupport
import XCTest

@testable import Runner

/// Sitemap manifests (SPEC section 6, issue 14): image sitemaps, indexes, gzip, local files and
/// URLs, and the hostile ones, through the runner against a loopback server.
final class SitemapTests: LoopbackTestCase {
  var location: CacheLocation!
  /// Sitemap bodies served by path, set by each test before it runs.
  let documents = DocumentTable()

  final class DocumentTable: @unchecked Sendable {
    private var bodies: [String: Data] = [:]
    private let lock = NSLock()
    subscript(path: String) -> Data? {
      get { lock.withLock { bodies[path] } }
      set { lock.withLock { bodies[path] = newValue } }
    }
  }

  override var routes: [String: Route] {
    let documents = documents
    var routes = Self.images
    routes["/d.jpg"] = { _ in .image(Fixtures.jpeg, type: "image/jpeg") }
    routes["/photo.jpg"] = { _ in .image(Fixtures.jpeg, type: "image/jpeg") }
    for name in [
      "/sitemap.xml", "/sitemap.xml.gz", "/index.xml", "/one.xml", "/two.xml.gz", "/self.xml",
      "/deep1.xml", "/deep2.xml", "/deep3.xml",
    ] {
      routes[name] = { _ in
        documents[name].map {
          ServerResponse(headers: [("Content-Type", "application/xml")], body: $0)
        }
          ?? ServerResponse(status: 404)
      }
    }
    return routes
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  // MARK: Documents

  static let header = """
    <?xml version="1.0" encoding="UTF-8"?>
    <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
            xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
    """

  /// A urlset: each page with its images (paths on the loopback server) and lastmod.
  func urlset(_ pages: [(page: String, images: [String], lastmod: String?)]) -> Data {
    var xml = Self.header + "\n"
    for page in pages {
      xml += "  <url>\n    <loc>\(server.url(page.page))</loc>\n"
      if let lastmod = page.lastmod { xml += "    <lastmod>\(lastmod)</lastmod>\n" }
      for image in page.images {
        xml += "    <image:image>\n      <image:loc>\(server.url(image))</image:loc>\n"
        xml += "      <image:caption>a caption &amp; more</image:caption>\n    </image:image>\n"
      }
      xml += "  </url>\n"
    }
    return Data((xml + "</urlset>\n").utf8)
  }

  func index(_ children: [(loc: String, lastmod: String?)]) -> Data {
    var xml = """
      <?xml version="1.0" encoding="UTF-8"?>
      <sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">

      """
    for child in children {
      xml += "  <sitemap>\n    <loc>\(child.loc)</loc>\n"
      if let lastmod = child.lastmod { xml += "    <lastmod>\(lastmod)</lastmod>\n" }
      xml += "  </sitemap>\n"
    }
    return Data((xml + "</sitemapindex>\n").utf8)
  }

  private func write(_ data: Data, _ name: String) throws -> String {
    let path = temporary.appending(name)
    try data.write(to: URL(fileURLWithPath: path))
    return path
  }

  private func run(_ job: Job) async throws -> (RunOutcome, PrefetchReport) {
    var settings = RunSettings()
    settings.reportFiles = [temporary.appending("reports/{job}.json")]
    let outcome = try await JobRunner(job: job, settings: settings, console: RecordingConsole())
      .run()
    let data = try XCTUnwrap(FileManager.default.contents(atPath: outcome.reportFiles[0]))
    return (outcome, try XCTUnwrap(try RunReport.decode(data).prefetch))
  }

  private func job(_ manifests: [String], _ configure: (inout Job) -> Void = { _ in }) -> Job {
    .manifestsOnly("sitemap", location: location, manifests, configure)
  }

  private func stored(_ path: String) -> Bool {
    FileManager.default.fileExists(
      atPath: DiskCache(location: location).cachePath(forKey: server.url(path)))
  }

  // MARK: Tests

  func testAGzipImageSitemapByURLPrefetchesItsImagesAndNotItsPages() async throws {
    documents["/sitemap.xml.gz"] = Fixtures.gzip(
      urlset([
        (page: "/products/1", images: ["/a.jpg", "/b.png"], lastmod: nil),
        (page: "/photo.jpg", images: ["/c.gif"], lastmod: nil),
      ]))
    let (outcome, report) = try await run(
      job([server.url("/sitemap.xml.gz")]) {
        $0.context = try! ImageContext().applying(
          ["headers": .object(["X-Job": .string("nightly")])], source: "test")
      })
    XCTAssertEqual(outcome.failedURLs, 0)
    XCTAssertEqual(
      server.requests("/a.jpg").first?.header("X-Job"), "nightly",
      "the job's context applies to a sitemap's URLs")
    XCTAssertEqual(
      server.requests("/sitemap.xml.gz").first?.header("X-Job"), "nightly",
      "and its headers to the sitemap's own request")
    XCTAssertEqual(report.counts.downloaded, 3, "\(report.lineErrors)")
    XCTAssertTrue(stored("/a.jpg") && stored("/b.png") && stored("/c.gif"))
    XCTAssertFalse(stored("/photo.jpg"), "a page's own <loc> is taken only with pages: true")
    XCTAssertEqual(server.requestCount("/products/1"), 0)
    XCTAssertTrue(report.lineErrors.isEmpty, "\(report.lineErrors)")
  }

  func testPagesTakesAPageLocThatNamesAnImage() async throws {
    let path = try write(
      Fixtures.gzip(
        urlset([
          (page: "/products/1", images: ["/a.jpg"], lastmod: nil),
          (page: "/photo.jpg", images: [], lastmod: nil),
        ])), "local.xml.gz")
    let (_, report) = try await run(job([path]) { $0.sitemap.pages = true })
    XCTAssertEqual(report.counts.downloaded, 2, "\(report.lineErrors)")
    XCTAssertTrue(stored("/photo.jpg"))
    XCTAssertEqual(server.requestCount("/products/1"), 0, "a page that is not an image is left")
  }

  func testAnIndexReadsEachChildOnceAndReportsTheMissingOneWithItsLine() async throws {
    documents["/one.xml"] = urlset([(page: "/p1", images: ["/a.jpg"], lastmod: nil)])
    documents["/two.xml.gz"] = Fixtures.gzip(
      urlset([(page: "/p2", images: ["/b.png", "/c.gif"], lastmod: nil)]))
    documents["/index.xml"] = index([
      (loc: server.url("/one.xml"), lastmod: nil),
      (loc: server.url("/missing.xml"), lastmod: nil),
      (loc: server.url("/two.xml.gz"), lastmod: nil),
      (loc: server.url("/one.xml"), lastmod: nil),
    ])
    let (outcome, report) = try await run(job([server.url("/index.xml")]))
    XCTAssertEqual(report.counts.downloaded, 3)
    XCTAssertEqual(outcome.failedURLs, 0)
    XCTAssertEqual(outcome.failedInputs, 1, "a child that cannot be fetched fails the run")
    XCTAssertEqual(server.requestCount("/one.xml"), 1, "each child is fetched once")
    let missing = try XCTUnwrap(report.inputFailures.first { $0.contains("missing.xml") })
    // The index: two lines of header, then three lines a child, <loc> the second of them.
    XCTAssertTrue(missing.hasPrefix(server.url("/index.xml") + ":7:"), missing)
    XCTAssertTrue(missing.contains("404"), missing)
    XCTAssertTrue(
      report.lineErrors.contains { $0.contains("already read") && $0.contains(":13:") },
      "\(report.lineErrors)")
  }

  func testAnIndexThatNamesItselfIsReadOnce() async throws {
    documents["/self.xml"] = index([
      (loc: server.url("/self.xml"), lastmod: nil), (loc: server.url("/one.xml"), lastmod: nil),
    ])
    documents["/one.xml"] = urlset([(page: "/p1", images: ["/a.jpg"], lastmod: nil)])
    let (_, report) = try await run(job([server.url("/self.xml")]))
    XCTAssertEqual(server.requestCount("/self.xml"), 1)
    XCTAssertEqual(report.counts.downloaded, 1)
    XCTAssertEqual(report.lineErrors.count, 1)
    XCTAssertTrue(report.lineErrors[0].contains("already read"), report.lineErrors[0])
  }

  func testIndexesNestOnlyToTheDepthLimit() async throws {
    documents["/deep1.xml"] = index([(loc: server.url("/deep2.xml"), lastmod: nil)])
    documents["/deep2.xml"] = index([(loc: server.url("/deep3.xml"), lastmod: nil)])
    documents["/deep3.xml"] = index([(loc: server.url("/one.xml"), lastmod: nil)])
    documents["/one.xml"] = urlset([(page: "/p1", images: ["/a.jpg"], lastmod: nil)])
    let (_, report) = try await run(job([server.url("/deep1.xml")]))
    XCTAssertEqual(server.requestCount("/deep3.xml"), 1)
    XCTAssertEqual(server.requestCount("/one.xml"), 0, "a fourth level is not fetched")
    XCTAssertTrue(report.lineErrors.contains { $0.contains("nest deeper") }, "\(report.lineErrors)")
  }

  /// An index is read as its children are, never held whole (900,000 children, a 190 KB gzip,
  /// took 180 MB): a child's URLs come before a problem further down the index (past a comment
  /// longer than what libxml2 reads ahead).
  func testAnIndexIsReadAsItsChildrenAreNotWhole() throws {
    documents["/one.xml"] = urlset([(page: "/p1", images: ["/a.jpg"], lastmod: nil)])
    let index = String(
      decoding: index([(loc: server.url("/one.xml"), lastmod: nil)]), as: UTF8.self)
    let further = "<!-- \(String(repeating: "x", count: 200_000)) --><sitemap>\n</sitemapindex>"
    let path = try write(
      Data(index.replacingOccurrences(of: "</sitemapindex>", with: further).utf8), "broken.xml")
    let read = ManifestItems(paths: [path]).map { item in
      (try? item.get().url) ?? "a problem"
    }
    XCTAssertEqual(read, [server.url("/a.jpg"), "a problem"])
  }

  /// An index read whole to be sorted is then read child after child at a cost per child:
  /// 200,000 children (four times the protocol's limit, which nothing enforces) took about ten
  /// minutes when each child read copied the rest of the list. Its children here are refused
  /// without a fetch (not http).
  func testAnIndexOfTwoHundredThousandChildrenIsReadToItsEnd() throws {
    let children = 200_000
    let path = try write(
      index(Array(repeating: (loc: "ftp://example.invalid/s.xml", lastmod: nil), count: children)),
      "huge.xml")
    let read = LockedValue(0)
    let done = DispatchSemaphore(value: 0)
    Thread {
      for _ in ManifestItems(paths: [path], sitemap: SitemapSettings(order: .lastmod)) {
        read.set(read.value + 1)
      }
      done.signal()
    }.start()
    XCTAssertEqual(
      done.wait(timeout: .now() + 60), .success, "read \(read.value) children in 60 s")
    XCTAssertEqual(read.value, children)
  }

  func testAChildOnAnotherSchemeIsAnErrorAndTheRunGoesOn() async throws {
    let path = try write(
      index([
        (loc: "file:///etc/passwd", lastmod: nil), (loc: server.url("/one.xml"), lastmod: nil),
      ]), "index.xml")
    documents["/one.xml"] = urlset([(page: "/p1", images: ["/a.jpg"], lastmod: nil)])
    let (_, report) = try await run(job([path]))
    XCTAssertEqual(report.counts.downloaded, 1)
    XCTAssertEqual(report.lineErrors.count, 1)
    XCTAssertTrue(report.lineErrors[0].hasPrefix("\(path):4:"), report.lineErrors[0])
    XCTAssertTrue(report.lineErrors[0].contains("not file"), report.lineErrors[0])
  }

  /// Fetches a sitemap URL on a server of its own that redirects to this test's server, with
  /// job headers and `trustedOrigins`; returns the request the redirect's target saw.
  private func fetchSitemapThroughARedirect(trusting trustedOrigins: Set<Origin>) async throws
    -> ServerRequest
  {
    documents["/sitemap.xml"] = urlset([(page: "/p1", images: ["/a.jpg"], lastmod: nil)])
    let target = server.url("/sitemap.xml")
    let redirector = try LoopbackServer(routes: ["/moved.xml": { _ in .redirect(to: target) }])
    defer { redirector.shutdown() }
    let headers = ["Authorization": "Bearer secret", "X-Api-Key": "key-123"]
    let (_, report) = try await run(
      job([redirector.url("/moved.xml")]) {
        $0.context.headers = headers
        $0.context.trustedOrigins = trustedOrigins
      })
    XCTAssertEqual(report.counts.downloaded, 1, "the sitemap was read through the redirect")
    let first = try XCTUnwrap(redirector.requests("/moved.xml").first)
    for (name, value) in headers { XCTAssertEqual(first.header(name), value, name) }
    return try XCTUnwrap(server.requests("/sitemap.xml").first)
  }

  func testNoHeaderTheJobSetIsSentToAnotherOriginWhenASitemapURLRedirects() async throws {
    let elsewhere = try await fetchSitemapThroughARedirect(trusting: [])
    XCTAssertNil(elsewhere.header("Authorization"))
    XCTAssertNil(elsewhere.header("X-Api-Key"))
    XCTAssertNotNil(elsewhere.header("User-Agent"), "the tool's own headers still go")
  }

  func testEveryHeaderTheJobSetIsSentToATrustedOriginWhenASitemapURLRedirects() async throws {
    let elsewhere = try await fetchSitemapThroughARedirect(trusting: [
      try XCTUnwrap(Origin(parsing: server.baseURL))
    ])
    XCTAssertEqual(elsewhere.header("Authorization"), "Bearer secret")
    XCTAssertEqual(elsewhere.header("X-Api-Key"), "key-123")
  }

  func testExternalEntitiesAreNeverRead() async throws {
    let secret = try write(Data("\(server.url("/d.jpg"))\n".utf8), "secret.txt")
    let xxe = try write(
      Data(
        """
        <?xml version="1.0"?>
        <!DOCTYPE urlset [ <!ENTITY xxe SYSTEM "file://\(secret)"> ]>
        <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
                xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
          <url><loc>&xxe;</loc><image:image><image:loc>&xxe;</image:loc></image:image></url>
        </urlset>
        """.utf8), "xxe.xml")
    let after = try write(urlset([(page: "/p", images: ["/a.jpg"], lastmod: nil)]), "after.xml")
    let (_, report) = try await run(job([xxe, after]) { $0.sitemap.pages = true })
    XCTAssertEqual(server.requestCount("/d.jpg"), 0, "the entity's file was never read")
    XCTAssertEqual(report.counts.downloaded, 1, "the next manifest still runs")
    XCTAssertEqual(report.inputFailures.count, 1, "\(report.inputFailures)")
    let refused = try XCTUnwrap(report.inputFailures.first, "\(report.lineErrors)")
    XCTAssertTrue(refused.hasPrefix("\(xxe):2:"), refused)
    XCTAssertTrue(refused.contains("DOCTYPE"), refused)
  }

  func testAnEntityBombIsRefusedQuickly() async throws {
    var doctype = "<!DOCTYPE urlset [\n  <!ENTITY lol \"lol\">\n"
    var previous = "lol"
    for level in 1...9 {
      doctype +=
        "  <!ENTITY lol\(level) \"" + String(repeating: "&\(previous);", count: 10) + "\">\n"
      previous = "lol\(level)"
    }
    let bomb = try write(
      Data(
        ("<?xml version=\"1.0\"?>\n" + doctype + "]>\n"
          + "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"><url><loc>&lol9;</loc></url></urlset>\n")
          .utf8), "bomb.xml")
    let (_, report) = try await run(job([bomb]))
    XCTAssertEqual(report.inputFailures.count, 1, "\(report.inputFailures)")
    let refused = try XCTUnwrap(report.inputFailures.first, "\(report.lineErrors)")
    XCTAssertTrue(refused.hasPrefix("\(bomb):2:"), refused)
  }

  func testAGzipBombStopsAtTheSizeLimit() async throws {
    // 8 MB of one repeated URL element compresses to a few KB; the limit here is 1 MB.
    let element = "<url><loc>\(server.url("/p"))</loc></url>\n"
    var xml = Self.header + "\n"
    xml += String(repeating: element, count: 8_000_000 / element.utf8.count)
    xml += "</urlset>\n"
    let path = try write(Fixtures.gzip(Data(xml.utf8)), "bomb.xml.gz")
    XCTAssertLessThan(try FileSystem.attributes(atPath: path)!.size, 1_000_000)
    let (_, report) = try await run(job([path]) { $0.prefetch.maxResponseSize = 1_000_000 })
    XCTAssertEqual(report.inputFailures.count, 1, "\(report.inputFailures)")
    let refused = try XCTUnwrap(report.inputFailures.first, "\(report.lineErrors)")
    XCTAssertTrue(refused.contains("gzip bomb"), refused)
  }

  func testNotASitemapAndBrokenXMLNameTheFileAndLine() async throws {
    let rss = try write(Data("<?xml version=\"1.0\"?>\n<rss><channel/></rss>\n".utf8), "feed.xml")
    let broken = try write(
      Data((Self.header + "\n<url><loc>\(server.url("/a.jpg"))</loc>\n</urlset>\n").utf8),
      "broken.xml")
    let (outcome, report) = try await run(job([rss, broken]))
    XCTAssertEqual(outcome.failedInputs, 2)
    guard report.inputFailures.count == 2 else {
      return XCTFail("\(report.inputFailures) \(report.lineErrors)")
    }
    XCTAssertTrue(report.inputFailures[0].hasPrefix("\(rss):2:"), report.inputFailures[0])
    XCTAssertTrue(report.inputFailures[0].contains("<rss>"), report.inputFailures[0])
    XCTAssertTrue(report.inputFailures[1].hasPrefix("\(broken):"), report.inputFailures[1])
  }

  func testFailuresNameTheSitemapAndLine() async throws {
    let path = try write(
      urlset([(page: "/p", images: ["/a.jpg", "/gone.jpg"], lastmod: nil)]), "map.xml")
    let (outcome, report) = try await run(job([path]))
    XCTAssertEqual(outcome.failedURLs, 1)
    // Lines 1-3 the header, 4 <url>, 5 <loc>, then 4 lines an image (<image:image>,
    // <image:loc>, <image:caption>, </image:image>): the second <image:loc> is on line 11.
    XCTAssertEqual(report.failures.map(\.source), ["\(path):11"])
  }

  func testOrderLastmodTakesTheNewestFirst() async throws {
    let path = try write(
      urlset([
        (page: "/p1", images: ["/a.jpg"], lastmod: "2024-01-01"),
        (page: "/p2", images: ["/b.png"], lastmod: nil),
        (page: "/p3", images: ["/c.gif"], lastmod: "2025-06-01T10:00:00+02:00"),
        (page: "/p4", images: ["/d.jpg"], lastmod: "2025-06-01T09:00:00Z"),
      ]), "dated.xml")
    let (_, report) = try await run(
      job([path]) {
        $0.sitemap.order = .lastmod
        $0.prefetch.concurrency = 1
      })
    // 10:00+02:00 is 08:00Z: older than 09:00Z.
    XCTAssertEqual(
      report.downloads.map(\.url), ["/d.jpg", "/c.gif", "/a.jpg", "/b.png"].map(server.url))
  }

  /// W3C Datetime: `-05:00` is five hours behind UTC, so 05:00-05:00 is 10:00Z, newer than
  /// 09:00Z.
  func testOrderLastmodReadsAZoneBehindUTCAsLater() async throws {
    let path = try write(
      urlset([
        (page: "/p1", images: ["/b.png"], lastmod: "2025-06-01T09:00:00Z"),
        (page: "/p2", images: ["/a.jpg"], lastmod: "2025-06-01T05:00:00-05:00"),
      ]), "zoned.xml")
    let (_, report) = try await run(
      job([path]) {
        $0.sitemap.order = .lastmod
        $0.prefetch.concurrency = 1
      })
    XCTAssertEqual(report.downloads.map(\.url), ["/a.jpg", "/b.png"].map(server.url))
  }

  /// `<lastmod>` as W3C Datetime: a zone's minutes count (`+05:30`, India's); a day or month
  /// no calendar has, or text after the date, is no date (the entry has no lastmod), not a
  /// day of the next month or the date before the text.
  func testALastmodZonesMinutesCountAndAnImpossibleDayIsNoDate() {
    let newYear = Date(timeIntervalSince1970: 1_735_689_600)  // 2025-01-01T00:00:00Z
    XCTAssertEqual(W3CDate.parse("2025-01-01T05:30+05:30"), newYear)
    XCTAssertEqual(W3CDate.parse("2024-12-31T23:15:00-00:45"), newYear)
    XCTAssertEqual(W3CDate.parse("2025-01-31"), newYear.addingTimeInterval(30 * 86_400))
    for impossible in [
      "2025-01-32", "2025-01-00", "2025-13-01", "2025-00-10", "2025-01-01x", "2025-01-01T00:00Z+",
    ] {
      XCTAssertNil(W3CDate.parse(impossible), impossible)
    }
  }

  func testAFiftyThousandURLSitemapIsStreamed() throws {
    // Read through the manifest iterator: memory is measured by Benchmarks/sitemap.sh; here,
    // every entry arrives, in order, with its line.
    var xml = Self.header + "\n"
    for index in 0..<50_000 {
      xml += "<url><loc>https://example.invalid/p/\(index)</loc>"
      xml +=
        "<image:image><image:loc>https://example.invalid/i/\(index).jpg</image:loc></image:image></url>\n"
    }
    xml += "</urlset>\n"
    let path = try write(Fixtures.gzip(Data(xml.utf8)), "big.xml.gz")
    var count = 0
    for item in ManifestItems(paths: [path]) {
      let value = try item.get()
      XCTAssertEqual(value.url, "https://example.invalid/i/\(count).jpg")
      XCTAssertEqual(value.source, "\(path):\(count + 4)")
      count += 1
    }
    XCTAssertEqual(count, 50_000)
  }

  /// `--sitemap-order lastmod` holds at most the protocol's 50,000 URLs of a sitemap to sort
  /// them: a 50 MB sitemap of short entries (two million URLs, from a gzip of a few hundred KB)
  /// held each of them, 340 bytes a URL. Past the limit the next URLs are sorted as a block of
  /// their own, after the first: the newest URL, last of 50,001, comes last, and none is lost.
  func testOrderLastmodSortsAtMostTheProtocolsLimitOfURLsAtATime() throws {
    var xml = Self.header + "\n"
    for index in 0..<SitemapManifest.maxSorted {
      xml += "<url><lastmod>2020-01-01</lastmod><image:image><image:loc>"
      xml += "https://example.invalid/i/\(index).jpg</image:loc></image:image></url>\n"
    }
    xml += "<url><lastmod>2025-01-01</lastmod><image:image><image:loc>"
    xml += "https://example.invalid/newest.jpg</image:loc></image:image></url>\n</urlset>\n"
    let path = try write(Fixtures.gzip(Data(xml.utf8)), "over-the-limit.xml.gz")
    let urls = try ManifestItems(paths: [path], sitemap: SitemapSettings(order: .lastmod)).map {
      try $0.get().url
    }
    XCTAssertEqual(urls.count, SitemapManifest.maxSorted + 1)
    XCTAssertEqual(urls.first, "https://example.invalid/i/0.jpg")
    XCTAssertEqual(urls.last, "https://example.invalid/newest.jpg")
  }

  /// A `<url>` may name any number of images: they are handed on a batch at a time as they are
  /// read, never held whole, and every one arrives in order, after its page.
  func testTheImagesOfOneURLAreHandedOnABatchAtATime() throws {
    let images = (0..<SitemapDocument.imagesPerEvent * 5 / 2).map { "/i/\($0).jpg" }
    let path = try write(urlset([(page: "/p.jpg", images: images, lastmod: nil)]), "many.xml")
    let document = try SitemapDocument(
      descriptor: open(path, O_RDONLY | O_CLOEXEC), name: path, limit: .max)
    var read: [String] = []
    while let event = document.next() {
      guard case .url(_, _, let batch) = try event.get() else { return XCTFail("\(event)") }
      XCTAssertLessThanOrEqual(batch.count, SitemapDocument.imagesPerEvent)
      read += batch.map(\.text)
    }
    XCTAssertEqual(read, images.map(server.url))
    let entries = try ManifestItems(paths: [path], sitemap: SitemapSettings(pages: true)).map {
      try $0.get().url
    }
    XCTAssertEqual(entries, ["/p.jpg"].map(server.url) + images.map(server.url))
  }

  func testTheProgressTotalCountsTextManifestsOnly() throws {
    let text = try write(
      Data("https://example.invalid/a.jpg\n# note\nhttps://example.invalid/b.jpg\n".utf8),
      "urls.txt")
    let map = try write(urlset([(page: "/p", images: ["/a.jpg"], lastmod: nil)]), "map.xml")
    XCTAssertEqual(ManifestItems.lineCount(of: [text]), 2)
    XCTAssertNil(ManifestItems.lineCount(of: [text, map]), "a sitemap is not read twice")
    XCTAssertNil(ManifestItems.lineCount(of: [server.url("/sitemap.xml")]))
  }

  func testTheProgressTotalNeverReadsAFIFOOrStandardInput() throws {
    let fifo = temporary.appending("urls.fifo")
    XCTAssertEqual(mkfifo(fifo, 0o600), 0)
    // Held open for reading and writing: the lines wait in the FIFO for whoever reads it.
    let holder = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC)
    XCTAssertGreaterThanOrEqual(holder, 0)
    defer { close(holder) }
    let lines = Array("https://example.invalid/a.jpg\nhttps://example.invalid/b.jpg\n".utf8)
    XCTAssertEqual(Glibc.write(holder, lines, lines.count), lines.count)

    let counted = LockedValue<Int??>(nil)
    let done = DispatchSemaphore(value: 0)
    Thread {
      counted.set(ManifestItems.lineCount(of: [fifo, ManifestItems.standardInput]))
      done.signal()
    }.start()
    XCTAssertEqual(done.wait(timeout: .now() + 5), .success, "counting waited on the FIFO")
    XCTAssertEqual(counted.value, .some(nil), "no total")
    var left = [UInt8](repeating: 0, count: 4096)
    XCTAssertEqual(
      Glibc.read(holder, &left, left.count), lines.count, "the run's lines are all there")
  }
}

/// A value set by one thread and read by another.
private final class LockedValue<Value>: @unchecked Sendable {
  private let lock = NSLock()
  private var stored: Value
  init(_ value: Value) { stored = value }
  func set(_ value: Value) { lock.withLock { stored = value } }
  var value: Value { lock.withLock { stored } }
}
