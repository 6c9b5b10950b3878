import Core
import Foundation
import State
import TestSupport
import XCTest

/// Issue 29 item 8: the commonest slips get the answer that names them, and lose nothing: a
/// misspelt option, a job file given to `prefetch`, a URL without its scheme.
final class SlipTests: LoopbackTestCase {
  var location: CacheLocation!

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  private func write(_ text: String, to name: String) throws -> String {
    let path = temporary.appending(name)
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  func testAMisspeltOptionThatTakesAValueIsNamedWithASuggestion() throws {
    let urls = try write(server.url("/a.jpg") + "\n", to: "urls.txt")
    for arguments in [
      ["prefetch", urls, "--cache", location.directory, "--concurency", "8"],
      ["prefetch", "--concurency", "8", urls, "--cache", location.directory],
      ["prefetch", urls, "--cache", location.directory, "--concurency=8"],
    ] {
      let result = try ImageCacheBinary.run(arguments)
      XCTAssertEqual(result.status, 2, "\(arguments): \(result.stderr)")
      XCTAssertTrue(
        result.stderr.contains("unknown option '--concurency', did you mean '--concurrency'?"),
        result.stderr)
      XCTAssertFalse(result.stderr.contains("no such file"), result.stderr)
    }
    // Two edits from --retries is still a slip (up to a third of the name, at least 2); a
    // name further from every option gets no guess.
    for (option, said) in [
      ("--retrys", "unknown option '--retrys', did you mean '--retries'?"),
      ("--qqqqqqq", "unknown option '--qqqqqqq'\n"),
    ] {
      let result = try ImageCacheBinary.run([
        "prefetch", urls, "--cache", location.directory, option, "3",
      ])
      XCTAssertEqual(result.status, 2, result.stderr)
      XCTAssertTrue(result.stderr.contains(said), result.stderr)
    }
    let nested = try ImageCacheBinary.run(["blacklist", "list", "--cach", location.directory])
    XCTAssertEqual(nested.status, 2, nested.stderr)
    XCTAssertTrue(
      nested.stderr.contains("unknown option '--cach', did you mean '--cache'?"), nested.stderr)
    XCTAssertFalse(FileManager.default.fileExists(atPath: location.directory))
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
  }

  /// Issue 39, item 11: the short options of make, xargs and aria2 are named as unknown
  /// options, not taken for a manifest named by their value.
  func testAnUnknownShortOptionIsNamedAsAnUnknownOption() throws {
    let urls = try write(server.url("/a.jpg") + "\n", to: "urls.txt")
    for short in ["-c", "-j"] {
      let result = try ImageCacheBinary.run([
        "prefetch", urls, "--cache", location.directory, short, "8",
      ])
      XCTAssertEqual(result.status, 2, result.stderr)
      XCTAssertTrue(
        result.stderr.contains("unknown option '\(short)', did you mean '--concurrency'?"),
        result.stderr)
      XCTAssertFalse(result.stderr.contains("no such file"), result.stderr)
    }
    let cluster = try ImageCacheBinary.run(["maintain", "--cache", location.directory, "-vx"])
    XCTAssertEqual(cluster.status, 2, cluster.stderr)
    XCTAssertTrue(cluster.stderr.contains("unknown option '-x'"), cluster.stderr)
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
  }

  /// A negative number is a value, not a cluster of short options: `--max-age -1` and
  /// `--max-age -.5d` (negative: never expire) are taken as they are written.
  func testANegativeValueIsNoShortOption() throws {
    try FileManager.default.createDirectory(
      atPath: location.diskCachePath, withIntermediateDirectories: true)
    for age in ["-1", "-.5d"] {
      let result = try ImageCacheBinary.run([
        "maintain", "--cache", location.directory, "--max-age", age, "--dry-run",
      ])
      XCTAssertEqual(result.status, 0, "\(age): \(result.stderr)")
      let said = result.stdout + result.stderr
      XCTAssertTrue(said.contains("expire: off (negative max age)"), said)
    }
    // Beside a misspelt option, the misspelt option is named, not the negative value.
    let slip = try ImageCacheBinary.run([
      "maintain", "--cache", location.directory, "--max-age", "-.5d", "--dry-rn",
    ])
    XCTAssertEqual(slip.status, 2, slip.stderr)
    XCTAssertTrue(
      slip.stderr.contains("unknown option '--dry-rn', did you mean '--dry-run'?"), slip.stderr)
  }

  func testLimitRateIsMaxBandwidthUnderCurlsAndWgetsName() throws {
    let urls = try write(server.url("/a.jpg") + "\n", to: "urls.txt")
    let result = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", location.directory, "--limit-rate", "500KiB/s", "--json",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(try RunReport.decode(Data(result.stdout.utf8)).prefetch?.downloaded, 1)
    let tooSlow = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", location.directory, "--limit-rate", "10",
    ])
    XCTAssertEqual(tooSlow.status, 2, "checked as --max-bandwidth is: \(tooSlow.stderr)")
  }

  func testAJobFileGivenToPrefetchIsRecognisedAndNothingIsBlacklisted() throws {
    let yaml = try write(
      """
      # nightly warm-up
      name: nightly
      cache:
        directory: \(location.directory)
      manifests: [\(server.url("/a.jpg"))]
      """, to: "nightly.yaml")
    let json = try write(
      """
      {
        "cache": {"directory": "\(location.directory)"},
        "manifests": ["urls.txt"]
      }
      """, to: "nightly.json")
    for job in [yaml, json] {
      let result = try ImageCacheBinary.run(["prefetch", job, "--cache", location.directory])
      XCTAssertEqual(result.status, 2, result.stderr)
      XCTAssertTrue(
        result.stderr.contains("\(job): this is a job file: use `imagecache run \(job)`"),
        result.stderr)
    }
    XCTAssertFalse(FileManager.default.fileExists(atPath: location.directory), "no state, no cache")
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
  }

  func testManifestsOfURLsAndJSONLinesAreNotTakenForJobFiles() throws {
    let plain = try write("# cache: warm these\n\(server.url("/a.jpg"))\n", to: "urls.txt")
    let lines = try write(#"{"url": "\#(server.url("/b.png"))"}"# + "\n", to: "urls.jsonl")
    let result = try ImageCacheBinary.run(["prefetch", plain, lines, "--cache", location.directory])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(server.requestCount("/a.jpg") + server.requestCount("/b.png"), 2)
  }

  func testALineWithoutASchemeIsALineErrorNotADownloadOrABlacklisting() throws {
    let port = URL(string: server.url("/"))!.port!
    let urls = try write(
      """
      cdn.example.com/a.jpg
      127.0.0.1:\(port)/a.jpg
      //cdn.example.com/b.png
      {"url": "cdn.example.com/c.gif"}
      \(server.url("/b.png"))
      """, to: "urls.txt")
    let report = temporary.appending("report.json")

    let result = try ImageCacheBinary.run([
      "prefetch", urls, "--cache", location.directory, "--report", report,
    ])

    XCTAssertEqual(result.status, 0, "skipped lines alone are not failures: \(result.stderr)")
    for (line, meant) in [
      (1, "https://cdn.example.com/a.jpg"), (2, "https://127.0.0.1:\(port)/a.jpg"),
      (3, "https://cdn.example.com/b.png"),
    ] {
      XCTAssertTrue(
        result.stderr.contains("\(urls):\(line): no scheme: did you mean \(meant)?"), result.stderr)
    }
    XCTAssertTrue(
      result.stderr.contains(
        "\(urls):4: field 'url': no scheme: did you mean https://cdn.example.com/c.gif?"),
      result.stderr)
    let prefetch = try XCTUnwrap(
      try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: report))).prefetch)
    XCTAssertEqual(prefetch.lineErrors.count, 4)
    XCTAssertEqual(prefetch.failures.map(\.url), [])
    XCTAssertEqual(prefetch.downloaded, 1)
    XCTAssertEqual(try StateStore(location: location).blacklist().map(\.url), [])
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
  }
}
