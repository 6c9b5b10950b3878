import Core
import Foundation
import TestSupport
import XCTest

@testable import HTTP
@testable import Pipeline
@testable import Prefetcher

/// Address rules (issue 38, docs/security.md): the address a connection is opened to, after
/// the name resolves, is checked for images, documents and every redirect hop. Refusals are
/// shown on loopback alone: 127.0.0.1 and 127.0.0.2 are two addresses of one machine.
final class AddressRulesTests: DownloaderTestCase {
  /// 127.0.0.2, where `/away` redirects.
  var second: LoopbackServer!

  override var routes: [String: Route] {
    let second = second!
    return [
      "/img.png": { _ in .image(Fixtures.png, type: "image/png") },
      "/away": { _ in .redirect(to: second.url("/img.png")) },
      "/sitemap.xml": { _ in
        ServerResponse(headers: [("Content-Type", "application/xml")], body: Data("<urlset/>".utf8))
      },
    ]
  }

  override func setUpWithError() throws {
    second = try LoopbackServer(
      routes: ["/img.png": { _ in .image(Fixtures.png, type: "image/png") }], host: "127.0.0.2")
    try super.setUpWithError()
  }

  override func tearDown() {
    second?.shutdown()
    super.tearDown()
  }

  private func configuration(denying rules: [String]) throws -> PrefetchConfiguration {
    var configuration = PrefetchConfiguration()
    configuration.timeout = 2
    configuration.deadline = 5
    configuration.connection.addressRules.denied = try AddressRules.parse(rules).get()
    return configuration
  }

  private func load(_ url: String, denying rules: [String]) async throws -> LoadOutcome {
    let prefetcher = try makePrefetcher(try configuration(denying: rules))
    return await prefetcher.load(url, options: ImageOptions(), context: ImageContext()).outcome
  }

  private func assertDenied(
    _ outcome: LoadOutcome, address: String, rule: String, file: StaticString = #filePath,
    line: UInt = #line
  ) {
    guard case .failed(let error, let blacklisted) = outcome else {
      return XCTFail("expected addressDenied, got \(outcome)", file: file, line: line)
    }
    XCTAssertEqual(error.name, "addressDenied", error.message, file: file, line: line)
    XCTAssertFalse(blacklisted, "the run's rule, not the URL's fault", file: file, line: line)
    XCTAssertFalse(error.isTransient, "not retried", file: file, line: line)
    XCTAssertTrue(error.message.contains(address), error.message, file: file, line: line)
    XCTAssertTrue(error.message.contains(rule), error.message, file: file, line: line)
  }

  func testADeniedBlockRefusesTheURLBeforeAnyRequest() async throws {
    let outcome = try await load(server.url("/img.png"), denying: ["127.0.0.0/8"])
    assertDenied(outcome, address: "127.0.0.1", rule: "127.0.0.0/8")
    XCTAssertEqual(server.connectionCount, 0, "no connection reached the server")
    XCTAssertEqual(server.requestCount("/img.png"), 0)
  }

  func testTheLoopbackRuleRefusesLoopback() async throws {
    let outcome = try await load(server.url("/img.png"), denying: ["private", "loopback"])
    assertDenied(outcome, address: "127.0.0.1", rule: "loopback")
    XCTAssertEqual(server.requestCount("/img.png"), 0)
  }

  func testARedirectToADeniedAddressIsRefusedAtTheHop() async throws {
    let outcome = try await load(server.url("/away"), denying: ["127.0.0.2/32"])
    assertDenied(outcome, address: "127.0.0.2", rule: "127.0.0.2/32")
    XCTAssertEqual(server.requestCount("/away"), 1, "the allowed origin was asked")
    XCTAssertEqual(second.connectionCount, 0, "the redirect's target was never reached")
  }

  func testAnAllowedRedirectStillLeadsToTheImage() async throws {
    let outcome = try await load(server.url("/away"), denying: ["10.0.0.0/8"])
    guard case .downloaded = outcome else { return XCTFail("\(outcome)") }
    XCTAssertEqual(second.requestCount("/img.png"), 1)
  }

  func testADocumentAtADeniedAddressIsNotFetched() throws {
    let downloader = makeDownloader(try configuration(denying: ["loopback"]).http)
    XCTAssertThrowsError(
      try DocumentFetcher.fetch(
        URL(string: server.url("/sitemap.xml"))!, through: downloader,
        configuration: downloader.configuration)
    ) { error in
      XCTAssertEqual((error as? ImageCacheError)?.name, "addressDenied", "\(error)")
    }
    XCTAssertEqual(server.requestCount("/sitemap.xml"), 0)
  }

  func testLinkLocalIsRefusedByDefaultAndAllowedOnRequest() throws {
    var rules = AddressRules()
    for address in ["169.254.169.254", "fe80::1", "::ffff:169.254.169.254"] {
      let bytes = try XCTUnwrap(AddressRange.bytes(of: address))
      XCTAssertEqual(rules.rule(refusing: bytes), "link-local", address)
    }
    let loopback = try XCTUnwrap(AddressRange.bytes(of: "127.0.0.1"))
    XCTAssertNil(rules.rule(refusing: loopback), "loopback is allowed unless denied")
    rules.allowLinkLocal = true
    XCTAssertNil(rules.rule(refusing: try XCTUnwrap(AddressRange.bytes(of: "169.254.169.254"))))
  }

  func testTheNamedRangesHoldWhatTheDocsSay() throws {
    var rules = AddressRules()
    rules.denied = try AddressRules.parse(["private"]).get()
    for address in ["10.1.2.3", "172.31.0.1", "192.168.1.1", "100.64.0.1", "fd00::1"] {
      XCTAssertEqual(
        rules.rule(refusing: try XCTUnwrap(AddressRange.bytes(of: address))), "private", address)
    }
    // A block is of one family: 0a00::1 begins as 10.0.0.0/8 does, 252.0.0.1 as fc00::/7.
    for address in ["172.32.0.1", "100.128.0.1", "8.8.8.8", "2001:db8::1", "a00::1", "252.0.0.1"] {
      XCTAssertNil(rules.rule(refusing: try XCTUnwrap(AddressRange.bytes(of: address))), address)
    }
    XCTAssertThrowsError(try AddressRules.parse(["10.0.0.0/33"]).get())
    XCTAssertThrowsError(try AddressRules.parse(["intranet"]).get())
  }
}
