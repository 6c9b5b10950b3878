import Core
import Foundation
import NIOCore
import TestSupport
import XCTest

/// End-to-end: `imagecache prefetch` against a loopback server.
final class PrefetchCommandTests: LoopbackTestCase {
  var location: CacheLocation!
  /// What `/sitemap.xml.gz` serves.
  let sitemap = SitemapHolder()

  final class SitemapHolder: @unchecked Sendable {
    var data = Data()
  }

  /// Runs `imagecache prefetch ARGUMENTS --cache CACHE --json`, which must exit 0, and returns
  /// the prefetch part of the report it prints.
  private func prefetchJSON(
    _ arguments: String..., file: StaticString = #filePath, line: UInt = #line
  ) throws -> PrefetchReport {
    let result = try ImageCacheBinary.run(
      ["prefetch"] + arguments + ["--cache", location.directory, "--json"])
    XCTAssertEqual(result.status, 0, result.stderr, file: file, line: line)
    return try XCTUnwrap(
      try RunReport.decode(Data(result.stdout.utf8)).prefetch, file: file, line: line)
  }

  override var routes: [String: Route] {
    [
      "/sitemap.xml.gz": { [sitemap] _ in ServerResponse(body: sitemap.data) },
      "/slow-sitemap.xml": { _ in
        ServerResponse(body: Data("<urlset/>".utf8), headDelay: .seconds(20))
      },
      "/photo.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
      "/image.png": { _ in .image(Fixtures.png, type: "image/png") },
      "/page.jpg": { _ in .image(Data("<html></html>".utf8), type: "text/html") },
      "/drip.jpg": { _ in
        ServerResponse(body: Fixtures.jpeg, dripInterval: .milliseconds(200), dripChunk: 10)
      },
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  private func manifest(_ lines: [String]) throws -> String {
    let path = temporary.appending("urls-\(UUID().uuidString).txt")
    try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  func testASitemapURLIsAManifest() throws {
    sitemap.data = Fixtures.gzip(
      Data(
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
                xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
          <url>
            <loc>\(server.url("/photo.jpg"))</loc>
            <image:image><image:loc>\(server.url("/image.png"))</image:loc></image:image>
          </url>
        </urlset>
        """.utf8))
    let prefetch = try prefetchJSON(server.url("/sitemap.xml.gz"), "--sitemap-pages")
    XCTAssertEqual(
      Set(prefetch.downloads.map(\.url)), [server.url("/photo.jpg"), server.url("/image.png")])

    let wrong = try ImageCacheBinary.run([
      "prefetch", "https://", "--cache", location.directory, "--sitemap-order", "newest",
    ])
    XCTAssertEqual(wrong.status, 2)
  }

  func testCtrlCDuringASitemapFetchStopsAtOnce() throws {
    let started = Date()
    let (process, stdout, stderr) = try ImageCacheBinary.start([
      "prefetch", server.url("/slow-sitemap.xml"), "--cache", location.directory,
    ])
    // The sitemap is being fetched once its request has reached the server (held there 20 s).
    waitUntil(timeout: 10, "the sitemap's request") {
      server.requestCount("/slow-sitemap.xml") == 1
    }
    kill(process.processIdentifier, SIGINT)
    let result = ImageCacheBinary.finish(process, stdout, stderr)
    XCTAssertEqual(result.status, 130, result.stderr)
    XCTAssertLessThan(
      Date().timeIntervalSince(started), 10, "not after the server's 20 s, nor the 15 s timeout")
  }

  func testAFiftyThousandURLSitemapNeedsNoMoreMemoryThanATextManifest() throws {
    // Every URL a miss with fromCacheOnly: nothing is fetched, every line is read.
    var xml = """
      <?xml version="1.0" encoding="UTF-8"?>
      <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
              xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">

      """
    var lines: [String] = []
    let padding = String(repeating: "x", count: 600)
    for index in 0..<50_000 {
      let url = "https://example.invalid/i/\(index).jpg"
      lines.append(url)
      xml += "<url><loc>https://example.invalid/p/\(index)</loc><image:image>"
      xml += "<image:loc>\(url)</image:loc><image:caption>\(padding)</image:caption>"
      xml += "</image:image></url>\n"
    }
    xml += "</urlset>\n"
    let sitemapPath = temporary.appending("big.xml")
    try xml.write(toFile: sitemapPath, atomically: true, encoding: .utf8)
    XCTAssertGreaterThan(xml.utf8.count, 35_000_000)
    let textPath = try manifest(lines)
    xml = ""

    func peak(_ manifest: String) throws -> Int {
      let (status, kib) = try PeakMemory.run(
        ImageCacheBinary.path,
        ["prefetch", manifest, "--cache", location.directory, "--option", "fromCacheOnly"])
      XCTAssertEqual(status, 0)
      return kib
    }
    let text = try peak(textPath)
    let sitemap = try peak(sitemapPath)
    // libxml2 itself is a few MB of code and buffers; the document is never held.
    XCTAssertLessThan(sitemap, text + 8 * 1024, "sitemap \(sitemap) KiB, text \(text) KiB")
  }

  func testReportMatchesTheSchemaAndASecondRunIsAllHits() throws {
    let urls = try manifest([
      server.url("/photo.jpg"), server.url("/image.png"), server.url("/missing.png"),
      server.url("/page.jpg"),
      "{\"url\": \"\(server.url("/photo.jpg"))\", \"options\": [\"bogus\"]}",
    ])
    let reportPath = temporary.appending("report.json")
    let first = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", location.directory, "--report", reportPath, "--retries", "0",
    ])
    XCTAssertEqual(first.status, 1, "some URLs failed: \(first.stderr)")
    let data = try XCTUnwrap(FileManager.default.contents(atPath: reportPath))
    let json = try JSONSerialization.jsonObject(with: data)
    XCTAssertEqual(SchemaValidator.validate(json, against: try SchemaValidator.reportSchema()), [])

    let report = try RunReport.decode(data)
    let prefetch = try XCTUnwrap(report.prefetch)
    XCTAssertEqual(prefetch.total, 5)
    XCTAssertEqual(prefetch.downloaded, 2)
    XCTAssertEqual(prefetch.failed, 2)
    XCTAssertEqual(prefetch.skipped, 1)
    XCTAssertEqual(
      Set(prefetch.failures.map(\.name)), ["invalidDownloadStatusCode", "badImageData"])
    XCTAssertEqual(prefetch.blacklistedURLs, [server.url("/page.jpg")])
    XCTAssertEqual(prefetch.bytesDownloaded, UInt64(Fixtures.jpeg.count + Fixtures.png.count))
    let photo = try XCTUnwrap(prefetch.downloads.first { $0.url == server.url("/photo.jpg") })
    XCTAssertEqual(photo.format, .jpeg)
    XCTAssertEqual(photo.width, 64)
    XCTAssertEqual(photo.height, 48)
    XCTAssertEqual(photo.bytes, Fixtures.jpeg.count)

    let clean = try manifest([
      server.url("/photo.jpg"), server.url("/image.png"), server.url("/page.jpg"),
    ])
    let again = try prefetchJSON(clean)
    XCTAssertEqual(again.diskHits, 2)
    XCTAssertEqual(again.blacklisted, 1)
    XCTAssertEqual(again.downloaded, 0)
    XCTAssertEqual(server.requestCount("/photo.jpg"), 1)
  }

  func testSIGTERMDuringPrefetchLeavesNoPartialFileAndReportsInterrupted() throws {
    let urls = try manifest((0..<20).map { server.url("/drip.jpg") + "?n=\($0)" })
    let reportPath = temporary.appending("report.json")
    let (process, stdout, stderr) = try ImageCacheBinary.start([
      "prefetch", urls, "--cache", location.directory, "--report", reportPath, "--concurrency", "4",
    ])
    // Bodies mid-flight: four under way, with as many bytes sent as two 10-byte pieces each
    // (of the 135 a body takes, one every 200 ms).
    waitUntil(timeout: 10, "four bodies under way") {
      server.requestCount("/drip.jpg") >= 4 && server.bodyBytesSent("/drip.jpg") >= 4 * 2 * 10
    }
    kill(process.processIdentifier, SIGTERM)
    let result = ImageCacheBinary.finish(process, stdout, stderr)
    XCTAssertEqual(result.status, 143, result.stderr)
    let report = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: reportPath)))
    XCTAssertEqual(report.status, .interrupted)
    XCTAssertLessThan(report.prefetch?.downloaded ?? 99, 20)
    // Whatever is in the cache is whole: nothing partial under a cache name.
    for file in try CacheScanner(root: location.diskCachePath).files() {
      XCTAssertEqual(
        FileManager.default.contents(atPath: location.diskCachePath + "/" + file.relativePath),
        Fixtures.jpeg)
    }
    XCTAssertEqual(try DiskCache(location: location).usage().fileCount, report.prefetch?.downloaded)
  }

  /// Images on a server of their own that redirect to `elsewhere`, a server of another port:
  /// the job's headers reach it only where a line's context or `--trusted-origin` trusts it.
  func testJobHeadersFollowARedirectToAnotherOriginOnlyWhenItIsTrusted() throws {
    var images: [String: Route] = [:]
    var redirects: [String: Route] = [:]
    for name in ["a", "b", "c"] {
      images["/\(name).jpg"] = { _ in .image(Fixtures.jpeg, type: "image/jpeg") }
    }
    let elsewhere = try LoopbackServer(routes: images)
    defer { elsewhere.shutdown() }
    for name in ["a", "b", "c"] {
      let target = elsewhere.url("/\(name).jpg")
      redirects["/\(name)"] = { _ in .redirect(to: target) }
    }
    let redirector = try LoopbackServer(routes: redirects)
    defer { redirector.shutdown() }
    let jsonl = temporary.appending("urls.jsonl")
    try """
    {"url": "\(redirector.url("/a"))"}
    {"url": "\(redirector.url("/b"))", "context": {"trustedOrigins": ["\(elsewhere.baseURL)"]}}
    """.write(toFile: jsonl, atomically: true, encoding: .utf8)
    let header = ["--header", "X-Api-Key: key-123"]
    XCTAssertEqual(try prefetchJSON(jsonl, header[0], header[1]).counts.downloaded, 2)
    XCTAssertNil(elsewhere.requests("/a.jpg").first?.header("X-Api-Key"), "not trusted")
    XCTAssertEqual(elsewhere.requests("/b.jpg").first?.header("X-Api-Key"), "key-123")

    let flagged = try prefetchJSON(
      try manifest([redirector.url("/c")]), header[0], header[1], "--trusted-origin",
      elsewhere.baseURL)
    XCTAssertEqual(flagged.counts.downloaded, 1)
    XCTAssertEqual(elsewhere.requests("/c.jpg").first?.header("X-Api-Key"), "key-123")

    let wrong = try ImageCacheBinary.run([
      "prefetch", jsonl, "--cache", location.directory, "--trusted-origin",
      elsewhere.url("/images"),
    ])
    XCTAssertEqual(wrong.status, 2)
    XCTAssertTrue(wrong.stderr.contains("trustedOrigins"), wrong.stderr)
    XCTAssertTrue(wrong.stderr.contains("is not an origin"), wrong.stderr)
  }

  func testUnknownOptionOnTheCommandLineIsAUsageError() throws {
    let urls = try manifest([server.url("/photo.jpg")])
    let result = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", location.directory, "--option", "fastPlease",
    ])
    XCTAssertEqual(result.status, 2)
    XCTAssertTrue(result.stderr.contains("unknown option \"fastPlease\""), result.stderr)
    let missing = try ImageCacheBinary.run([
      "prefetch", temporary.appending("nope.txt"), "--cache", location.directory,
    ])
    XCTAssertEqual(missing.status, 2)
    XCTAssertTrue(missing.stderr.contains("nope.txt"), missing.stderr)
  }

  /// Issue 39, item 3: what a user who meant "fetch this image" is told.
  private func assertNotAManifest(
    _ result: CommandResult, saying what: String, file: StaticString = #filePath,
    line: UInt = #line
  ) throws {
    XCTAssertEqual(result.status, 2, result.stderr, file: file, line: line)
    for said in [what, "echo URL | imagecache prefetch -", "imagecache prefetch --url URL"] {
      XCTAssertTrue(
        result.stderr.contains(said), "\(said) in: \(result.stderr)", file: file, line: line)
    }
    XCTAssertFalse(result.stderr.contains("UTF-8"), result.stderr, file: file, line: line)
    let stored = (try? FileManager.default.contentsOfDirectory(atPath: location.diskCachePath))?
      .filter { !$0.hasPrefix(".") }
    XCTAssertEqual(stored ?? [], [], "nothing stored", file: file, line: line)
  }

  func testAnImageFileGivenAsTheManifestIsAUsageErrorSayingHowToFetchOneURL() throws {
    let image = temporary.appending("photo.jpg")
    try Fixtures.jpeg.write(to: URL(fileURLWithPath: image))
    let result = try ImageCacheBinary.run(["prefetch", image, "--cache", location.directory])
    try assertNotAManifest(result, saying: "\(image): this is an image (JPEG), not a manifest")
  }

  func testABinaryFileGivenAsTheManifestIsAUsageError() throws {
    let binary = temporary.appending("urls.db")
    try Data("SQLite format 3\u{0}\u{0}\u{1}https://x/a.jpg\n".utf8).write(
      to: URL(fileURLWithPath: binary))
    let result = try ImageCacheBinary.run(["prefetch", binary, "--cache", location.directory])
    try assertNotAManifest(result, saying: "\(binary): this is binary data")
  }

  func testURLsGivenWithURLArePrefetchedWithoutAManifest() throws {
    let prefetch = try prefetchJSON(
      "--url", server.url("/photo.jpg"), "--url", server.url("/image.png"), "--url",
      "cdn.example.com/a.jpg")
    XCTAssertEqual(
      Set(prefetch.downloads.map(\.url)), [server.url("/photo.jpg"), server.url("/image.png")])
    XCTAssertEqual(
      prefetch.lineErrors, ["--url:3: no scheme: did you mean https://cdn.example.com/a.jpg?"])
  }

  func testAManifestURLThatServesAnImageIsAUsageErrorAndFetchesNothingMore() throws {
    let result = try ImageCacheBinary.run([
      "prefetch", server.url("/image.png"), "--cache", location.directory,
    ])
    try assertNotAManifest(
      result, saying: "\(server.url("/image.png")): this is an image (PNG), not a manifest")
    XCTAssertEqual(server.requestCount("/image.png"), 1, "fetched once, as the manifest")
  }
}

final class SchemaValidatorTests: XCTestCase {
  func testTheValidatorCatchesAReportThatBreaksTheSchema() throws {
    let schema = try SchemaValidator.reportSchema()
    let broken: [String: Any] = [
      "schemaVersion": 2, "job": "x", "status": "done", "startedAt": "t", "finishedAt": "t",
      "cache": ["path": "/c"], "maintenance": [["pass": "expire"]], "extra": true,
    ]
    let problems = SchemaValidator.validate(broken, against: schema)
    for expected in [
      "$.schemaVersion", "$.status", "$.cache: missing required namespace",
      "$.maintenance[0]: missing required dryRun", "unexpected property extra",
    ] {
      XCTAssertTrue(problems.contains { $0.contains(expected) }, "\(expected) in \(problems)")
    }
  }
}

extension PrefetchCommandTests {
  func testThumbnailLinesReportTheirVariantsAndASecondRunIsAllHits() throws {
    let photo = server.url("/photo.jpg")
    let urls = try manifest([
      ##"{"url": "\##(photo)", "context": {"imageThumbnailPixelSize": [32, 32]}}"##,
      ##"{"url": "\##(server.url("/image.png"))", "context": {"imageTransformer": {"flipping": {"horizontal": true}}}}"##,
    ])
    let reportPath = temporary.appending("variants.json")
    let first = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", location.directory, "--report", reportPath,
    ])
    XCTAssertEqual(first.status, 0, first.stderr)
    XCTAssertTrue(first.stderr.contains("2 variants"), first.stderr)
    let data = try XCTUnwrap(FileManager.default.contents(atPath: reportPath))
    XCTAssertEqual(
      SchemaValidator.validate(
        try JSONSerialization.jsonObject(with: data), against: try SchemaValidator.reportSchema()),
      [])
    let prefetch = try XCTUnwrap(try RunReport.decode(data).prefetch)
    XCTAssertEqual(prefetch.downloaded, 2)
    XCTAssertEqual(prefetch.derived, 2)
    let thumbnail = try XCTUnwrap(prefetch.variants.first { $0.url == photo })
    XCTAssertEqual(thumbnail.key, DerivedKey.key(for: photo, thumbnail: (32, 32)))
    XCTAssertEqual([thumbnail.width, thumbnail.height], [32, 24])
    XCTAssertEqual(thumbnail.format, .jpeg)
    // `imagecache key` names the file the variant went to.
    let key = try ImageCacheBinary.run([
      "key", photo, "--thumbnail", "32x32", "--cache", location.directory,
    ])
    let file = try XCTUnwrap(
      key.stdout.split(separator: "\n").first { $0.hasPrefix("derived file:") }?
        .split(separator: " ").last.map(String.init))
    XCTAssertEqual(FileManager.default.contents(atPath: file)?.count, thumbnail.bytes)

    let again = try prefetchJSON(urls)
    XCTAssertEqual(again.diskHits, 2)
    XCTAssertEqual(again.derived, 0)
    XCTAssertEqual(server.requestCount("/photo.jpg"), 1)
  }
}
