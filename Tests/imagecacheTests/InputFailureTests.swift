import Core
import Foundation
import TestSupport
import XCTest

/// Issue 27 and SPEC section 11: a manifest or sitemap that fails as a whole is a failure the
/// exit code shows (1) and the report counts (`inputsFailed`, `inputFailures`), never a
/// "skipped" line of a run that exits 0. A bad line alone stays skipped and exits 0.
final class InputFailureTests: LoopbackTestCase {
  var location: CacheLocation!

  override var routes: [String: Route] {
    let index = """
      <?xml version="1.0" encoding="UTF-8"?>
      <sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
        <sitemap><loc>PLACEHOLDER/gone.xml</loc></sitemap>
      </sitemapindex>
      """
    // The index names a child on its own server: the port is known from the request.
    return [
      "/photo.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
      "/to-file.txt": { _ in .redirect(to: "file:///etc/hostname") },
      "/index.xml": { request in
        let host = request.header("Host") ?? ""
        return ServerResponse(
          headers: [("Content-Type", "application/xml")],
          body: Data(index.replacingOccurrences(of: "PLACEHOLDER", with: "http://\(host)").utf8))
      },
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  private func write(_ text: String, _ name: String) throws -> String {
    let path = temporary.appending(name)
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  /// Runs `prefetch` on `manifests` with a report; returns the result and the report.
  private func prefetch(_ manifests: [String]) throws -> (CommandResult, PrefetchReport) {
    let reportPath = temporary.appending("report.json")
    let result = try ImageCacheBinary.run(
      ["prefetch"] + manifests + ["--cache", location.directory, "--report", reportPath])
    let data = try XCTUnwrap(FileManager.default.contents(atPath: reportPath), result.stderr)
    let json = try JSONSerialization.jsonObject(with: data)
    XCTAssertEqual(SchemaValidator.validate(json, against: try SchemaValidator.reportSchema()), [])
    return (result, try XCTUnwrap(try RunReport.decode(data).prefetch))
  }

  func testAManifestURLThatCannotBeFetchedFailsTheRun() throws {
    let good = try write(server.url("/photo.jpg") + "\n", "urls.txt")
    let missing = server.url("/missing.txt")
    let redirected = server.url("/to-file.txt")
    let (result, report) = try prefetch([good, missing, redirected])
    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertEqual(report.downloaded, 1, "the other manifest still runs")
    XCTAssertEqual(report.inputsFailed, 2)
    XCTAssertEqual(report.skipped, 0, "an input is not a skipped line")
    guard report.inputFailures.count == 2 else {
      return XCTFail("\(report.inputFailures) \(report.lineErrors)")
    }
    XCTAssertTrue(report.inputFailures[0].hasPrefix(missing + ": "), report.inputFailures[0])
    XCTAssertTrue(report.inputFailures[0].contains("404"), report.inputFailures[0])
    XCTAssertTrue(report.inputFailures[1].hasPrefix(redirected + ": "), report.inputFailures[1])
    XCTAssertTrue(result.stderr.contains("failed input \(missing)"), result.stderr)
  }

  func testASitemapRefusedWholeFailsTheRun() throws {
    let doctype = try write(
      """
      <?xml version="1.0"?>
      <!DOCTYPE urlset [ <!ENTITY x "y"> ]>
      <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>&x;</loc></url></urlset>
      """, "doctype.xml")
    let (result, report) = try prefetch([doctype])
    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertEqual(report.inputsFailed, 1)
    let refused = try XCTUnwrap(report.inputFailures.first, "\(report.lineErrors)")
    XCTAssertTrue(refused.hasPrefix("\(doctype):2:"), refused)
    XCTAssertTrue(refused.contains("DOCTYPE"), refused)
  }

  func testAnIndexChildThatCannotBeFetchedFailsTheRun() throws {
    let (result, report) = try prefetch([server.url("/index.xml")])
    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertEqual(report.inputsFailed, 1)
    let child = try XCTUnwrap(report.inputFailures.first, "\(report.lineErrors)")
    XCTAssertTrue(
      child.hasPrefix(server.url("/index.xml") + ":3:"), "names the index and the line: \(child)")
    XCTAssertTrue(child.contains("gone.xml"), child)
  }

  func testABadLineAloneIsSkippedAndTheRunSucceeds() throws {
    let urls = try write(
      server.url("/photo.jpg") + "\n{\"url\": \"\(server.url("/photo.jpg"))\", \"bogus\": 1}\n",
      "urls.txt")
    let (result, report) = try prefetch([urls])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(report.skipped, 1)
    XCTAssertEqual(report.inputsFailed, 0)
    XCTAssertEqual(report.lineErrors.count, 1)
  }
}
