import Core
import Foundation
import TestSupport
import XCTest

/// Trusting an internal certificate authority and going through a proxy (issue 29, item 5):
/// an HTTPS origin on 127.0.0.1 whose certificate a test CA signed, and a loopback forward
/// proxy that writes down what passes through it.
final class TLSAndProxyTests: LoopbackTestCase {
  var authority: TestCertificateAuthority!
  var origin: TLSLoopbackServer!
  var proxy: LoopbackProxy?

  /// The images, `/urls.txt`: a plain-text manifest naming this server's `/c.gif`, and
  /// `/moved?URL`: a redirect to URL.
  override var routes: [String: Route] {
    Self.images.merging([
      "/urls.txt": { request in
        ServerResponse(
          headers: [("Content-Type", "text/plain")],
          body: Data("http://\(request.header("Host") ?? "")/c.gif\n".utf8))
      },
      "/moved": { request in .redirect(to: request.query ?? "") },
    ]) { $1 }
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    authority = try TestCertificateAuthority(folder: temporary.appending("ca"))
    origin = try TLSLoopbackServer(
      files: ["photo.jpg": Fixtures.jpeg], root: temporary.appending("www"),
      certificates: authority.serverFolder)
  }

  override func tearDown() {
    origin?.shutdown()
    proxy?.shutdown()
    super.tearDown()
  }

  /// The variables through which curl and libcurl find CA certificates and proxies: none set
  /// but the test's own, whatever the machine's environment says.
  static let curlVariables = [
    "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "http_proxy", "HTTP_PROXY", "https_proxy",
    "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "NO_PROXY", "no_proxy",
  ]

  private var runs = 0

  /// Runs the binary with `arguments` and `environment` on a cache of its own; returns how
  /// it ended and its report.
  private func imagecache(_ arguments: [String], environment: [String: String] = [:]) throws
    -> (result: CommandResult, report: RunReport?)
  {
    runs += 1
    let reportFile = temporary.appending("report-\(runs).json")
    var base = ProcessInfo.processInfo.environment
    for name in Self.curlVariables { base[name] = nil }
    let result = try ImageCacheBinary.run(
      arguments + ["--report", reportFile], environment: base.merging(environment) { $1 })
    let report = FileManager.default.contents(atPath: reportFile).flatMap {
      try? RunReport.decode($0)
    }
    return (result, report)
  }

  /// `prefetch MANIFEST...` with `arguments`, into a new cache.
  private func prefetch(
    _ manifests: [String], _ arguments: [String] = [], environment: [String: String] = [:]
  ) throws -> (result: CommandResult, report: RunReport?) {
    try imagecache(
      ["prefetch"] + manifests + ["--cache", temporary.appending("cache-\(runs + 1)")]
        + ["--retries", "0"] + arguments, environment: environment)
  }

  private func manifest(_ name: String, _ urls: [String]) throws -> String {
    let path = temporary.appending(name)
    try urls.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  // MARK: Trust

  func testAnOriginSignedByAnUntrustedIssuerFailsSayingHowToTrustIt() throws {
    let (result, report) = try prefetch([try manifest("urls.txt", [origin.url("/photo.jpg")])])
    XCTAssertEqual(result.status, 1, result.stderr)
    let failure = try XCTUnwrap(report?.prefetch?.failures.first, result.stderr)
    XCTAssertEqual(failure.name, "serverCertificateUntrusted")
    for hint in ["--cacert FILE", "prefetch.caBundle", "SSL_CERT_FILE", "retryFailed"] {
      XCTAssertTrue(failure.message.contains(hint), "\(hint): \(failure.message)")
    }
    XCTAssertTrue(result.stderr.contains(failure.message), "said once on the console too")
  }

  func testACertificateThatFailsAfterARedirectNamesTheHopWhoseCertificateItWas() throws {
    let hop = origin.url("/photo.jpg")
    let (result, report) = try prefetch([
      try manifest("urls.txt", [server.url("/moved?\(hop)")])
    ])
    XCTAssertEqual(result.status, 1, result.stderr)
    let failure = try XCTUnwrap(report?.prefetch?.failures.first, result.stderr)
    XCTAssertEqual(failure.name, "serverCertificateUntrusted")
    XCTAssertTrue(failure.message.contains("at \(hop) (after 1 redirect): "), failure.message)
    XCTAssertTrue(result.stderr.contains(failure.message), "said once on the console too")
  }

  func testCacertTrustsTheIssuerForSitemapsAndTheirImages() throws {
    let photo = origin.url("/photo.jpg")
    try """
    <?xml version="1.0" encoding="UTF-8"?>
    <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
      xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
      <url><loc>\(origin.url("/"))</loc><image:image><image:loc>\(photo)</image:loc></image:image></url>
    </urlset>
    """.write(toFile: temporary.appending("www/sitemap.xml"), atomically: true, encoding: .utf8)
    for flag in ["--cacert", "--ca-bundle"] {
      let (result, report) = try prefetch(
        [origin.url("/sitemap.xml")], [flag, authority.certificate])
      XCTAssertEqual(result.status, 0, result.stderr)
      XCTAssertEqual(report?.prefetch?.downloaded, 1, flag)
    }
  }

  func testTheCACertificatesCurlTakesFromTheEnvironmentAreTrusted() throws {
    let urls = try manifest("urls.txt", [origin.url("/photo.jpg")])
    for (name, value) in [
      ("SSL_CERT_FILE", authority.certificate), ("CURL_CA_BUNDLE", authority.certificate),
      ("SSL_CERT_DIR", authority.hashedFolder),
    ] {
      let (result, report) = try prefetch([urls], environment: [name: value])
      XCTAssertEqual(result.status, 0, "\(name): \(result.stderr)")
      XCTAssertEqual(report?.prefetch?.downloaded, 1, name)
    }
    // --cacert wins over the environment, as in curl: here, a bundle that does not hold the CA.
    let (result, report) = try prefetch(
      [urls], ["--cacert", Fixtures.directory + "/tls/cert.pem"],
      environment: ["SSL_CERT_FILE": authority.certificate])
    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertEqual(report?.prefetch?.failures.first?.name, "serverCertificateUntrusted")
  }

  func testACABundleThatIsNotAReadableFileIsRefusedBeforeTheRunNamingIt() throws {
    let urls = try manifest("urls.txt", [origin.url("/photo.jpg")])
    let missing = temporary.appending("nope.pem")
    for path in [missing, temporary.path] {
      let (result, _) = try prefetch([urls], ["--cacert", path])
      XCTAssertEqual(result.status, 2, result.stderr)
      XCTAssertTrue(result.stderr.contains("--cacert"), result.stderr)
      XCTAssertTrue(result.stderr.contains(path), result.stderr)
    }
    let job = try writeJob(prefetch: "  caBundle: nope.pem\n", manifests: [urls])
    let (result, _) = try imagecache(["run", job])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains(job + ":7:"), result.stderr)
    XCTAssertTrue(result.stderr.contains("prefetch.caBundle"), result.stderr)
    XCTAssertTrue(result.stderr.contains(missing), result.stderr)
  }

  func testACABundleThatIsNotPEMIsRefusedBeforeTheRunNamingIt() throws {
    let urls = try manifest("urls.txt", [origin.url("/photo.jpg")])
    let der = temporary.appending("ca.der")
    try Data([0x30, 0x82, 0x01, 0x0A, 0x02, 0x82, 0x01, 0x01]).write(to: URL(fileURLWithPath: der))
    let (result, report) = try prefetch([urls], ["--cacert", der])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains("--cacert"), result.stderr)
    XCTAssertTrue(result.stderr.contains("\(der): not a PEM bundle"), result.stderr)
    XCTAssertNil(report, "refused before the run")
  }

  /// A CA variable that names no certificates would fail every https URL as untrusted, and
  /// blacklist it: it is refused before the run (exit 2, the report and metrics saying the run
  /// failed, as for any run that cannot start), naming the variable, and once it is mended the
  /// URL downloads.
  func testACAVariableNamingNothingUsableIsRefusedBeforeTheRunAndBlacklistsNothing() throws {
    let urls = try manifest("urls.txt", [origin.url("/photo.jpg")])
    let cache = temporary.appending("cache")
    let missing = temporary.appending("gone.pem")
    for (name, value) in [
      ("CURL_CA_BUNDLE", missing), ("SSL_CERT_FILE", missing),
      ("SSL_CERT_DIR", temporary.appending("gone")),
    ] {
      let (result, report) = try imagecache(
        ["prefetch", urls, "--cache", cache, "--retries", "0"], environment: [name: value])
      XCTAssertEqual(result.status, 2, "\(name): \(result.stderr)")
      XCTAssertTrue(result.stderr.contains("environment variable \(name)"), result.stderr)
      XCTAssertTrue(result.stderr.contains(value), result.stderr)
      // Refused before the run: its report says it failed, and no URL was tried.
      XCTAssertEqual(report?.status, .failed, "\(name)")
      XCTAssertTrue(report?.error?.contains(name) == true, "\(String(describing: report))")
      XCTAssertNil(report?.prefetch, "\(name): refused before the run")
    }
    let (result, report) = try imagecache(
      ["prefetch", urls, "--cache", cache, "--retries", "0"],
      environment: ["SSL_CERT_FILE": authority.certificate])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(report?.prefetch?.downloaded, 1)
  }

  /// A certificate that CA certificates the operator named do not verify is their
  /// configuration's fault as likely as the origin's: reported, never blacklisted, so that
  /// the run with the right bundle downloads it.
  func testAnUntrustedCertificateUnderTheOperatorsCAsIsNotBlacklisted() throws {
    let urls = try manifest("urls.txt", [origin.url("/photo.jpg")])
    let cache = temporary.appending("cache")
    let arguments = ["prefetch", urls, "--cache", cache, "--retries", "0", "--cacert"]
    let (wrong, failed) = try imagecache(arguments + [Fixtures.directory + "/tls/cert.pem"])
    XCTAssertEqual(wrong.status, 1, wrong.stderr)
    let failure = try XCTUnwrap(failed?.prefetch?.failures.first, wrong.stderr)
    XCTAssertEqual(failure.name, "serverCertificateUntrusted")
    XCTAssertFalse(failure.blacklisted)
    XCTAssertTrue(failure.message.contains("not blacklisted"), failure.message)
    XCTAssertEqual(failed?.prefetch?.blacklistedURLs, [])

    let (right, report) = try imagecache(arguments + [authority.certificate])
    XCTAssertEqual(right.status, 0, right.stderr)
    XCTAssertEqual(report?.prefetch?.downloaded, 1)
  }

  // MARK: Proxies

  private func startProxy() throws -> LoopbackProxy {
    let started = try LoopbackProxy(folder: temporary.appending("proxy"))
    proxy = started
    return started
  }

  func testWithProxyRequestsGoThroughItExceptToHostsInNoProxy() throws {
    let proxy = try startProxy()
    let direct = "http://localhost:\(server.port)/b.png"
    let urls = try manifest("urls.txt", [server.url("/a.jpg"), direct])
    let proxied = ["GET \(server.url("/a.jpg")) HTTP/1.1"]

    // NO_PROXY from the environment, as curl reads it.
    var (result, report) = try prefetch(
      [urls], ["--proxy", proxy.url], environment: ["NO_PROXY": "localhost"])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(report?.prefetch?.downloaded, 2)
    XCTAssertEqual(proxy.requestLines, proxied)
    XCTAssertEqual(server.requestCount("/b.png"), 1, "localhost was reached directly")

    // --no-proxy in its place.
    (result, report) = try prefetch([urls], ["--proxy", proxy.url, "--no-proxy", "localhost"])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(report?.prefetch?.downloaded, 2)
    XCTAssertEqual(proxy.requestLines, proxied + proxied)
    XCTAssertEqual(server.requestCount("/a.jpg"), 2)
    XCTAssertEqual(server.requestCount("/b.png"), 2)
  }

  func testAJobsProxyCarriesManifestFetchesAndHTTPSDownloadsToo() throws {
    let proxy = try startProxy()
    let local = try manifest(
      "https.txt", [origin.url("/photo.jpg"), "http://localhost:\(server.port)/b.png"])
    let job = try writeJob(
      prefetch: """
          proxy: \(proxy.url)
          noProxy: [localhost, example.invalid]
          caBundle: ca/ca.pem

        """, manifests: [server.url("/urls.txt"), local])
    let (result, report) = try imagecache(["run", job])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(report?.prefetch?.downloaded, 3, result.stderr)
    let lines = proxy.requestLines
    XCTAssertTrue(lines.contains("GET \(server.url("/urls.txt")) HTTP/1.1"), "\(lines)")
    XCTAssertTrue(lines.contains("GET \(server.url("/c.gif")) HTTP/1.1"), "\(lines)")
    XCTAssertTrue(lines.contains("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1"), "\(lines)")
    XCTAssertFalse(lines.contains { $0.contains("localhost") }, "\(lines)")
    XCTAssertEqual(server.requestCount("/b.png"), 1)
  }

  /// A port on 127.0.0.1 that refuses connections, held by the test: a socket bound to it
  /// that never listens, so that no other program takes the port meanwhile.
  private func refusingPort() throws -> (socket: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
      }
    }
    guard fd >= 0, bound else { try requireOrSkip("no socket on 127.0.0.1 (errno \(errno))") }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
  }

  func testADeadProxyIsNamedAsWhatCouldNotBeReachedWithoutItsPassword() throws {
    let (socket, port) = try refusingPort()
    defer { close(socket) }
    let urls = try manifest("urls.txt", [server.url("/a.jpg")])
    let proxy = "http://scraper:hunter2@127.0.0.1:\(port)"
    for (arguments, environment, setBy) in [
      (["--proxy", proxy], [:], "--proxy"),
      ([], ["http_proxy": proxy], "environment variable http_proxy"),
      ([], ["all_proxy": proxy], "environment variable all_proxy"),
    ] {
      let (result, report) = try prefetch([urls], arguments, environment: environment)
      XCTAssertEqual(result.status, 1, result.stderr)
      let failure = try XCTUnwrap(report?.prefetch?.failures.first, result.stderr)
      XCTAssertEqual(failure.name, "cannotConnectToHost")
      XCTAssertTrue(
        failure.message.contains("the proxy http://127.0.0.1:\(port) (\(setBy)"), failure.message)
      XCTAssertTrue(result.stderr.contains(failure.message), "said once on the console too")
      let written = try String(contentsOfFile: temporary.appending("report-\(runs).json"))
      XCTAssertFalse((written + result.stderr).contains("hunter2"), "no secret in the output")
    }
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
  }

  func testAProxyThatIsNotAURLIsRefusedBeforeTheRun() throws {
    let urls = try manifest("urls.txt", [server.url("/a.jpg")])
    for bad in ["ftp://proxy.example:21", "http://proxy example:3128", ""] {
      let (result, _) = try prefetch([urls], ["--proxy", bad])
      XCTAssertEqual(result.status, 2, "\(bad): \(result.stderr)")
      XCTAssertTrue(result.stderr.contains("--proxy"), result.stderr)
    }
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
  }

  /// A job file in the temporary folder (so that `ca/ca.pem` is relative to it) with the
  /// `prefetch:` lines given, from line 7 on.
  private func writeJob(prefetch: String, manifests: [String]) throws -> String {
    let path = temporary.appending("job-\(runs + 1).yaml")
    try """
    name: nightly
    cache:
      directory: \(temporary.appending("cache-job-\(runs + 1)"))
    manifests: [\(manifests.map { "\"\($0)\"" }.joined(separator: ", "))]
    prefetch:
      retries: 0
    \(prefetch)
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }
}
