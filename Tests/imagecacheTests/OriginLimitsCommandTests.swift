import Core
import Foundation
import TestSupport
import XCTest

/// Issue 29, item 4, from the command line and job files: `--rate` / `prefetch.rate`,
/// `--max-bandwidth` / `prefetch.maxBandwidth` hold within 10% (the measured figures are
/// printed), mistakes in them are usage errors naming the flag or the file, line and field, and
/// a host's `Retry-After` is in the report and among the warnings.
final class OriginLimitsCommandTests: LoopbackTestCase {
  var cache: String!

  static let quarterMegabyte = Fixtures.paddedJPEG(count: 250_000)

  override var routes: [String: Route] {
    [
      "/image.png": { _ in .image(Fixtures.png, type: "image/png") },
      "/large.jpg": { _ in .image(Self.quarterMegabyte, type: "image/jpeg") },
      "/busy.png": { request in
        request.attempt == 1
          ? ServerResponse(status: 503, headers: [("Retry-After", "1")])
          : .image(Fixtures.png, type: "image/png")
      },
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    cache = temporary.appending("cache")
  }

  private func job(_ prefetch: String, manifest: String? = nil) throws -> String {
    let manifest = try manifest ?? temporary.manifest([])
    let path = temporary.appending("job.yaml")
    try "cache:\n  directory: \(cache!)\nmanifests: [\(manifest)]\nprefetch:\n\(prefetch)"
      .write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  /// Requests a second from the first to the last arrival.
  private func measuredRate(_ requests: [ServerRequest]) -> Double {
    guard let first = requests.first, let last = requests.last, requests.count > 1 else { return 0 }
    let (seconds, attoseconds) = (last.arrivedAt - first.arrivedAt).components
    return Double(requests.count - 1) / (Double(seconds) + Double(attoseconds) / 1e18)
  }

  func testRatesAndBandwidthsThatAreWrongOrOutOfRangeAreUsageErrorsNamingTheFlag() throws {
    let prefetch = [
      "prefetch", try temporary.manifest([server.url("/image.png")]), "--cache", cache!,
    ]
    let cases: [([String], String, String)] = [
      (["--rate", "0/s"], "--rate", "from 1/h to 10000/s"),
      (["--rate", "20000/s"], "--rate", "from 1/h to 10000/s"),
      (["--rate=-1/s"], "--rate", "from 1/h to 10000/s"),
      (["--rate", "fast"], "--rate", "a rate such as 20/s, 300/m or 0.5/s"),
      (["--rate", "20/d"], "--rate", "a rate such as 20/s"),
      (["--max-bandwidth", "100B/s"], "--max-bandwidth", "from 1KB/s"),
      (["--max-bandwidth", "1e30GB/s"], "--max-bandwidth", "from 1KB/s"),
      (["--max-bandwidth", "quick"], "--max-bandwidth", "a bandwidth such as 10MB/s"),
    ]
    for (flags, flag, expected) in cases {
      let result = try ImageCacheBinary.run(prefetch + flags)
      XCTAssertEqual(result.status, 2, "\(flags): \(result.stderr)")
      XCTAssertTrue(result.stderr.contains(flag), "\(flags): \(result.stderr)")
      XCTAssertTrue(result.stderr.contains(expected), "\(flags): \(result.stderr)")
    }
    XCTAssertEqual(server.requestCount("/image.png"), 0)
  }

  func testJobRatesAndBandwidthsThatAreWrongNameTheFileLineAndField() throws {
    let cases: [(String, String, String)] = [
      ("  rate: 0/s\n", "prefetch.rate", "from 1/h to 10000/s"),
      ("  concurrency: 4\n  rate: often\n", "prefetch.rate", "a rate such as 20/s"),
      ("  maxBandwidth: 10B/s\n", "prefetch.maxBandwidth", "from 1KB/s"),
      ("  maxBandwidth: [1]\n", "prefetch.maxBandwidth", "a bandwidth such as 10MB/s"),
      ("  hostBackoff: sometimes\n", "prefetch.hostBackoff", "true or false"),
    ]
    for (settings, field, expected) in cases {
      let path = try job(settings)
      let line = 4 + settings.split(separator: "\n").count
      let result = try ImageCacheBinary.run(["run", path])
      XCTAssertEqual(result.status, 2, "\(settings): \(result.stderr)")
      XCTAssertTrue(
        result.stderr.contains("\(path):\(line): field '\(field)'"), "\(settings): \(result.stderr)"
      )
      XCTAssertTrue(result.stderr.contains(expected), "\(settings): \(result.stderr)")
    }
  }

  func testTheRateFlagAndTheJobsRateHoldWithinTenPercent() throws {
    let flagURLs = (0..<8).map { server.url("/image.png?flag=\($0)") }
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(flagURLs), "--cache", cache!, "--rate", "10/s",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let byFlag = measuredRate(server.allRequests)

    let jobURLs = (0..<8).map { server.url("/image.png?job=\($0)") }
    let path = try job("  rate: 600/m\n", manifest: try temporary.manifest(jobURLs))
    let fromJob = try ImageCacheBinary.run(["run", path])
    XCTAssertEqual(fromJob.status, 0, fromJob.stderr)
    let byJob = measuredRate(server.allRequests.filter { $0.query?.hasPrefix("job=") == true })
    print(
      String(
        format: "measured rates: --rate 10/s %.2f requests/s, prefetch.rate 600/m %.2f requests/s",
        byFlag, byJob))
    XCTAssertEqual(byFlag, 10, accuracy: 1)
    XCTAssertEqual(byJob, 10, accuracy: 1)
  }

  func testTheBandwidthFlagHoldsWithinTenPercent() throws {
    let urls = (0..<6).map { server.url("/large.jpg?n=\($0)") }
    let report = temporary.appending("report.json")
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(urls), "--cache", cache!, "--validate", "none",
      "--max-bandwidth", "1MB/s", "--report", report,
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let json = try XCTUnwrap(
      JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report)))
        as? [String: Any])
    let prefetch = try XCTUnwrap(json["prefetch"] as? [String: Any])
    let bytes = try XCTUnwrap(prefetch["bytesDownloaded"] as? Int)
    let seconds = try XCTUnwrap(prefetch["durationSeconds"] as? Double)
    XCTAssertEqual(bytes, 1_500_000)
    let throughput = Double(bytes) / seconds
    print(
      String(
        format: "measured bandwidth: --max-bandwidth 1MB/s, 1.5 MB in %.3f s: %.0f bytes/s",
        seconds, throughput))
    XCTAssertEqual(throughput, 1_000_000, accuracy: 100_000)
  }

  func testAHostsRetryAfterIsInTheReportAndTheWarnings() throws {
    let urls = [server.url("/busy.png")] + (0..<3).map { server.url("/image.png?n=\($0)") }
    let report = temporary.appending("report.json")
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(urls), "--cache", cache!, "--per-host-concurrency", "1",
      "--report", report,
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertTrue(
      result.stderr.contains("warning: 127.0.0.1 asked to wait (429 or 503 with Retry-After) 1"),
      result.stderr)
    let data = try Data(contentsOf: URL(fileURLWithPath: report))
    let json = try JSONSerialization.jsonObject(with: data)
    XCTAssertEqual(SchemaValidator.validate(json, against: try SchemaValidator.reportSchema()), [])
    let decoded = try RunReport.decode(data)
    let backoff = try XCTUnwrap(decoded.prefetch?.hostBackoffs.first)
    XCTAssertEqual(backoff.host, "127.0.0.1")
    XCTAssertEqual(backoff.pauses, 1)
    XCTAssertEqual(backoff.seconds, 1, accuracy: 0.1)
    XCTAssertTrue(
      decoded.warnings.contains { $0.contains("held back 1.0 s in all") }, "\(decoded.warnings)")
    let refused = try XCTUnwrap(server.requests("/busy.png").first?.arrivedAt)
    let firstOther = try XCTUnwrap(server.requests("/image.png").map(\.arrivedAt).min())
    XCTAssertGreaterThanOrEqual(firstOther, refused + .seconds(1))
  }
}
