import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import Runner
import TestSupport
import XCTest

/// Manifests read by the runner, prefetched: both formats, bad lines skipped and reported with
/// their file and line, options a cache warmer ignores said once.
final class ManifestPrefetchTests: LoopbackTestCase {
  override var routes: [String: Route] {
    [
      "/flaky.png": { request in
        request.attempt == 1
          ? ServerResponse(status: 503, headers: [("Retry-After", "0")])
          : .image(Fixtures.png, type: "image/png")
      },
      "/page.jpg": { _ in .image(Data("<html></html>".utf8), type: "text/html") },
      "/photo.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
    ]
  }

  /// A manifest whose first lines mention `<svg` (an inline SVG's `data:` URL) is still a
  /// manifest, read line by line: only an image or binary data given as the manifest is
  /// refused as none (exit 2).
  func testAManifestThatMentionsSVGIsStillAManifest() {
    let text = "data:image/svg+xml,<svg/>\nhttps://x/a.jpg\n"
    XCTAssertNil(ManifestItems.notAManifest(ArraySlice(Array(text.utf8))))
    let image = ManifestItems.notAManifest(ArraySlice(Array(Fixtures.png)))
    XCTAssertTrue(
      image?.hasPrefix("this is an image (PNG), not a manifest") ?? false, "\(image as Any)")
  }

  /// A manifest that names a UI-only option on every line keeps the first warnings, each
  /// with its line, and counts the rest in one: ten million lines must not hold (and say) ten
  /// million warnings.
  func testUIOnlyOptionsOnEveryLineKeepTheFirstWarningsAndCountTheRest() throws {
    let jsonl = temporary.appending("every-line.jsonl")
    let lines = (1...5_000).map {
      "{\"url\": \"https://cdn.example.com/\($0).jpg\", \"options\": [\"progressiveLoad\"]}"
    }
    try lines.joined(separator: "\n").write(toFile: jsonl, atomically: true, encoding: .utf8)
    let manifests = ManifestItems(paths: [jsonl])
    XCTAssertEqual(
      manifests.reduce(0) { count, item in count + ((try? item.get()) != nil ? 1 : 0) }, 5_000)
    let warnings = manifests.warnings
    XCTAssertEqual(warnings.count, 101)
    XCTAssertEqual(
      warnings[0].description,
      "\(jsonl):1: field 'options': option progressiveLoad only matters to a UI; ignored")
    XCTAssertEqual(warnings[99].line, 100)
    XCTAssertEqual(
      warnings[100].description,
      "\(jsonl):101: 4900 more warnings like these (UI-only options, ignored) from this line on, "
        + "not listed one by one: only the first 100 are")
  }

  func testManifestsInBothFormatsWithBadLinesSkippedAndReported() async throws {
    let text = temporary.appending("urls.txt")
    let jsonl = temporary.appending("urls.jsonl")
    try "# nightly\n\(server.url("/photo.jpg"))\n\n\(server.url("/page.jpg"))\n".write(
      toFile: text, atomically: true, encoding: .utf8)
    try """
    {"url": "\(server.url("/flaky.png"))", "options": ["retryFailed"]}
    {"url": "\(server.url("/photo.jpg"))", "options": ["noSuchOption"]}
    {"url": "\(server.url("/photo.jpg"))", "context": {"imageThumbnailPixelSize": "big"}}
    {"url": "\(server.url("/photo.jpg"))", "options": ["progressiveLoad"]}
    {not json
    """.write(toFile: jsonl, atomically: true, encoding: .utf8)
    let manifests = ManifestItems(paths: [text, jsonl])
    let report = try await Downloader.withDownloader { downloader in
      var configuration = PrefetchConfiguration()
      configuration.retryBaseDelay = 0.01
      return await try Prefetcher(
        location: CacheLocation(directory: temporary.appending("cache")),
        configuration: configuration, namespaces: MemoryNamespaces(), downloader: downloader
      ).run(manifests)
    }
    XCTAssertEqual(report.total, 7)
    XCTAssertEqual(report.downloaded, 2)
    XCTAssertEqual(report.failed, 1)
    XCTAssertEqual(report.skipped, 3)
    XCTAssertEqual(report.diskHits + report.memoryHits, 1)
    XCTAssertEqual(report.lineErrors.count, 3)
    XCTAssertTrue(
      report.lineErrors[0].hasPrefix("\(jsonl):2: field 'options': unknown option"),
      report.lineErrors[0])
    XCTAssertTrue(
      report.lineErrors[1].contains(
        "\(jsonl):3: field 'context.imageThumbnailPixelSize': expected [width, height]"),
      report.lineErrors[1])
    XCTAssertTrue(report.lineErrors[2].hasPrefix("\(jsonl):5:"), report.lineErrors[2])
    XCTAssertEqual(manifests.warnings.count, 1)
    XCTAssertTrue(manifests.warnings[0].message.contains("progressiveLoad"))
    XCTAssertEqual(report.failures.first?.source, "\(text):4")
  }
}
