import Core
import Foundation
import State
import TestSupport
import XCTest

/// Issue 26, item 4 (SPEC section 11): a URL's password and the job's header values never
/// leave the tool: not in the report, `--json`, the console, the HTML page, the metrics or the
/// state's blacklist. The request itself still carries them.
final class SecretsTests: LoopbackTestCase {
  static let password = "hunter2-PASSWORD"
  static let headerValue = "Bearer TOKEN-VALUE-77"

  override var routes: [String: Route] {
    [
      "/a.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
      "/bad.jpg": { _ in .image(Data("not an image".utf8), type: "image/jpeg") },
      "/gone.jpg": { _ in ServerResponse(status: 404, body: Data()) },
    ]
  }

  private func secretURL(_ path: String) -> String {
    server.url(path).replacingOccurrences(of: "http://", with: "http://bob:\(Self.password)@")
  }

  func testAURLPasswordIsUsedForTheRequestAndMaskedEverywhereItIsShownOrKept() throws {
    let manifest = temporary.appending("urls.txt")
    try [secretURL("/a.jpg"), secretURL("/bad.jpg"), secretURL("/gone.jpg")]
      .joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
    let cache = temporary.appending("cache")
    let report = temporary.appending("run.json")
    let metrics = temporary.appending("run.prom")
    let result = try ImageCacheBinary.run([
      "prefetch", manifest, "--cache", cache, "--report", report, "--metrics", metrics, "--json",
      "--verbose",
    ])
    XCTAssertEqual(result.status, 1, result.stderr)
    // The request was made with the credentials.
    let authorization = try XCTUnwrap(server.requests("/a.jpg").first?.header("Authorization"))
    XCTAssertEqual(
      authorization, "Basic " + Data("bob:\(Self.password)".utf8).base64EncodedString())

    let page = try ImageCacheBinary.run(["report", "html", report])
    let state = try XCTUnwrap(
      try StateStore.openForReading(location: CacheLocation(directory: cache)))
    let blacklist = try state.blacklist()
    XCTAssertEqual(blacklist.count, 1)
    let shown: [(String, String)] = [
      ("stderr", result.stderr), ("--json", result.stdout),
      ("report", try String(contentsOfFile: report, encoding: .utf8)),
      ("metrics", try String(contentsOfFile: metrics, encoding: .utf8)),
      ("HTML page", page.stdout),
      ("blacklist", blacklist.map { "\($0.url) \($0.reason)" }.joined(separator: "\n")),
    ]
    for (place, text) in shown {
      XCTAssertFalse(text.contains(Self.password), "the password is in the \(place): \(text)")
    }
    XCTAssertTrue(result.stdout.contains("bob:***@127.0.0.1"), result.stdout)
    XCTAssertTrue(blacklist[0].url.hasPrefix("http://bob:***@127.0.0.1"), blacklist[0].url)
    // The blacklist is found again by the URL as the manifest gives it.
    let again = try ImageCacheBinary.run(["prefetch", manifest, "--cache", cache])
    XCTAssertTrue(again.stderr.contains("1 blacklisted"), again.stderr)
  }

  func testADuplicateKeyInAJobFileNamesItsLineAndKeyButPrintsNoValue() throws {
    let job = temporary.appending("job.yaml")
    try """
    cache:
      directory: \(temporary.appending("cache"))
    context:
      headers:
        Authorization: "\(Self.headerValue)"
        Cookie: session=\(Self.headerValue)
        Authorization: other
    """.write(toFile: job, atomically: true, encoding: .utf8)
    let result = try ImageCacheBinary.run(["run", job])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains("'Authorization'"), result.stderr)
    XCTAssertTrue(result.stderr.contains("job.yaml:"), result.stderr)
    XCTAssertFalse(result.stderr.contains("TOKEN-VALUE"), result.stderr)
  }

  func testAJobFileThatIsNotYAMLPrintsNoLineOfIt() throws {
    let job = temporary.appending("job.yaml")
    try "cache:\n  directory: x\ncontext:\n  headers:\n    X-Api-Key: \"\(Self.headerValue)\n"
      .write(toFile: job, atomically: true, encoding: .utf8)
    let result = try ImageCacheBinary.run(["run", job])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains("line"), result.stderr)
    XCTAssertFalse(result.stderr.contains("TOKEN-VALUE"), result.stderr)
  }

  func testAMalformedHeaderFlagIsRefusedWithoutEchoingIt() throws {
    let manifest = temporary.appending("urls.txt")
    try server.url("/a.jpg").write(toFile: manifest, atomically: true, encoding: .utf8)
    let result = try ImageCacheBinary.run([
      "prefetch", manifest, "--cache", temporary.appending("cache"),
      "--header", "Authorization \(Self.headerValue)",
    ])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains("--header"), result.stderr)
    XCTAssertFalse(result.stderr.contains("TOKEN-VALUE"), result.stderr)
  }
}
