import Core
import Foundation
import XCTest

@testable import HTTP

/// The one home of what is per host: its limit by protocol, its rate and its back-off, kept
/// together, each origin apart.
final class HostTableTests: XCTestCase {
  private let cdn = Origin(URL(string: "https://cdn.example/a.jpg")!)
  private let small = Origin(URL(string: "http://small.example:8080/a.jpg")!)

  private func table(_ configure: (inout DownloaderConfiguration) -> Void = { _ in }) -> HostTable {
    var configuration = DownloaderConfiguration()
    configuration.concurrency = 64
    configuration.perHostConcurrency = 6
    configure(&configuration)
    return HostTable(configuration: configuration)
  }

  /// Starts transfers to `origin` while the table allows; returns how many started.
  private func fill(_ table: inout HostTable, _ origin: Origin, at now: UInt64 = 0) -> Int {
    var started = 0
    var wake = UInt64.max
    while table.allows(origin, gated: !table.isOpen, at: now, wake: &wake), started < 1000 {
      table.started(origin, at: now)
      started += 1
    }
    return started
  }

  func testTheLimitFollowsWhatEachHostSpeaks() {
    var hosts = table { $0.perHostStreams = 32 }
    XCTAssertEqual(fill(&hosts, cdn), 6, "before its first answer: the lower of the two")
    hosts.learned(cdn, multiplexes: true)
    XCTAssertEqual(fill(&hosts, cdn), 26, "over HTTP/2: streams, up to 32 in all")
    hosts.learned(small, multiplexes: false)
    XCTAssertEqual(fill(&hosts, small), 6, "over HTTP/1.1: one a connection")
    hosts.ended(small)
    XCTAssertEqual(fill(&hosts, small), 1, "an end makes room for one more, on that host only")
    XCTAssertEqual(
      HostTable.mostPerHost(DownloaderConfiguration()), 256, "a CDN over HTTP/2: 256 streams")
  }

  func testTheReportNamesAnOriginByItsPortOnlyWhereItsHostHasOthers() {
    func limit(_ final: Int) -> HostLimit {
      HostLimit(host: "", final: final, min: 1, median: 1, max: final, cuts: [:])
    }
    let origins = [
      "https://cdn.example/a.jpg", "http://small.example:8080/a.jpg",
      "https://small.example/a.jpg", "http://[::1]:8080/a.jpg", "https://[::1]:8080/a.jpg",
    ].map { Origin(URL(string: $0)!) }
    var limits: [Origin: HostLimit] = [:]
    for (index, origin) in origins.enumerated() {
      var named = limit(index + 1)
      named.host = origin.host
      limits[origin] = named
    }
    XCTAssertEqual(
      HostTable.report(limits).map { "\($0.host) \($0.final)" },
      [
        "cdn.example 1", "http://[::1]:8080 4", "https://[::1]:8080 5", "small.example:443 3",
        "small.example:8080 2",
      ])
  }

  func testByDefaultAHostOverHTTP1AdaptsAndOneOverHTTP2KeepsItsStreams() {
    var hosts = HostTable(configuration: DownloaderConfiguration())
    XCTAssertEqual(hosts.connectionsPerHost, 256, "connections may reach the adaptive ceiling")
    XCTAssertEqual(fill(&hosts, cdn), 4, "before its first answer: the adaptive limit's start")
    hosts.learned(cdn, multiplexes: true)
    XCTAssertNil(hosts.hostLimit(cdn), "over HTTP/2: no adaptive limit, no line in the report")
    XCTAssertEqual(fill(&hosts, cdn), 252, "over HTTP/2: its 256 streams")
    XCTAssertEqual(fill(&hosts, small), 4)
    hosts.learned(small, multiplexes: false)
    XCTAssertEqual(hosts.hostLimit(small)?.final, 4, "over HTTP/1.1: adaptive, and reported")
    XCTAssertEqual(fill(&hosts, small), 0, "still 4 until its answers raise it")
    hosts.learned(cdn, multiplexes: false)
    XCTAssertEqual(hosts.hostLimit(cdn)?.final, 4, "a host that turns to HTTP/1.1 adapts anew")

    var streams = DownloaderConfiguration()
    streams.adaptiveStreams = true
    var both = HostTable(configuration: streams)
    XCTAssertEqual(both.streamsPerHost, 256)
    XCTAssertEqual(fill(&both, cdn), 4)
    both.learned(cdn, multiplexes: true)
    XCTAssertNotNil(both.hostLimit(cdn), "--per-host-streams auto: adaptive over HTTP/2 too")
    XCTAssertEqual(fill(&both, cdn), 0)

    streams.perHostConcurrency = 6
    var fixedConnections = HostTable(configuration: streams)
    XCTAssertEqual(fixedConnections.connectionsPerHost, 6)
    XCTAssertEqual(fill(&fixedConnections, small), 4, "before an answer: the lower, adaptive 4")
    fixedConnections.learned(small, multiplexes: false)
    XCTAssertNil(fixedConnections.hostLimit(small), "over HTTP/1.1: the fixed 6")
    XCTAssertEqual(fill(&fixedConnections, small), 2)
  }

  func testLibcurlsConnectionCapFollowsWhatHostsOverHTTP1UseAndNoStreams() {
    var hosts = HostTable(configuration: DownloaderConfiguration())
    XCTAssertEqual(hosts.connectionCap, 6, "SD's 6 to start with")
    _ = fill(&hosts, cdn)
    hosts.learned(cdn, multiplexes: true)
    XCTAssertEqual(fill(&hosts, cdn), 252)
    XCTAssertEqual(hosts.connectionCap, 6, "streams need no connection each")
    hosts.learned(small, multiplexes: false)
    for _ in 0..<200 { _ = hosts.answered(small, after: 20_000_000) }
    let limit = hosts.limit(for: small)
    XCTAssertGreaterThan(limit, 6)
    XCTAssertEqual(fill(&hosts, small), limit)
    XCTAssertEqual(hosts.connectionCap, limit, "over HTTP/1.1 each transfer needs a connection")
    for _ in 0..<limit { hosts.ended(small) }
    XCTAssertEqual(hosts.connectionCap, limit, "it only grows")
    XCTAssertEqual(table().connectionCap, 6, "a fixed limit: that number")
    XCTAssertEqual(table { $0.perHostConcurrency = 40 }.connectionCap, 40)
  }

  func testAHostThatTurnsBackToHTTP1AdaptsAnewUnmovedByWhatWasSentBefore() {
    var hosts = HostTable(configuration: DownloaderConfiguration())
    let underTheDroppedLimit = hosts.started(small, at: 0)
    hosts.learned(small, multiplexes: true)
    let overHTTP2 = hosts.started(small, at: 0)
    hosts.learned(small, multiplexes: false)
    XCTAssertFalse(
      hosts.cut(small, .refused, sentIn: underTheDroppedLimit, inFlight: 2),
      "a refusal of what was sent under the limit it dropped is no cut of the new one")
    XCTAssertFalse(
      hosts.cut(small, .timeout, sentIn: overHTTP2), "nor a timeout of what went over HTTP/2")
    XCTAssertEqual(hosts.hostLimit(small)?.final, 4)
    XCTAssertEqual(hosts.hostLimit(small)?.cuts, [:])
    let underTheNewLimit = hosts.started(small, at: 0)
    XCTAssertTrue(hosts.cut(small, .refused, sentIn: underTheNewLimit), "its own transfers count")
    XCTAssertEqual(hosts.hostLimit(small)?.final, 3)
  }

  func testTheRateSpacesStartsToOneHostAndWakesTheLoopWhenDue() {
    var hosts = table { $0.requestsPerSecondPerHost = 10 }
    XCTAssertFalse(hosts.isOpen)
    var wake = UInt64.max
    XCTAssertTrue(hosts.allows(cdn, gated: true, at: 1_000, wake: &wake))
    hosts.started(cdn, at: 1_000)
    XCTAssertFalse(hosts.allows(cdn, gated: true, at: 50_000_000, wake: &wake))
    XCTAssertEqual(wake, 100_001_000, "a tenth of a second after the last start")
    XCTAssertTrue(hosts.allows(small, gated: true, at: 50_000_000, wake: &wake), "another host")
    XCTAssertTrue(hosts.allows(cdn, gated: true, at: 100_001_000, wake: &wake))
  }

  /// Ten million URLs on as many hosts (one origin's wildcard subdomains) must not keep as
  /// many hosts' state to the run's end: past ``HostTable/idleHostsKept`` origins, the idle
  /// ones are forgotten, while one with a transfer under way or held back by its `Retry-After`
  /// keeps its own.
  func testIdleHostsAreForgottenPastTheBoundAndBusyOrHeldOnesKept() {
    var hosts = table()
    var log: [String: HostTable.Record] = [:]
    hosts.started(cdn, at: 1_000)
    let failure = DownloadFailure(.invalidDownloadStatusCode(503), retryAfter: 60)
    hosts.answered(small, failure, at: 1_000, log: &log)
    for index in 0..<(HostTable.idleHostsKept * 3) {
      let origin = Origin(URL(string: "http://h\(index).example/a.jpg")!)
      hosts.started(origin, at: 2_000)
      hosts.ended(origin)
    }
    XCTAssertLessThanOrEqual(hosts.count, HostTable.idleHostsKept)
    XCTAssertEqual(hosts.running(cdn), 1, "under way: kept")
    var wake = UInt64.max
    XCTAssertFalse(hosts.allows(small, gated: true, at: 3_000, wake: &wake), "held: kept")
    XCTAssertEqual(wake, 60_000_001_000)
  }

  /// An origin that refused in this run keeps its cut limit when the idle ones are forgotten:
  /// made anew, its limit climbed past the knee it refused at again, hammering it, and the
  /// refusal the next run starts under was dropped at the new limit's first raise.
  func testAnIdleHostWhoseLimitWasCutIsNotForgotten() {
    var hosts = HostTable(configuration: DownloaderConfiguration())
    let sent = hosts.started(small, at: 0)
    XCTAssertTrue(hosts.cut(small, .refused, sentIn: sent, inFlight: 4))
    hosts.ended(small)
    let cut = hosts.limit(for: small)
    XCTAssertLessThan(cut, 4, "cut from its start")
    for index in 0..<(HostTable.idleHostsKept * 3) {
      let origin = Origin(URL(string: "http://h\(index).example/a.jpg")!)
      hosts.started(origin, at: 0)
      hosts.ended(origin)
    }
    XCTAssertLessThanOrEqual(hosts.count, HostTable.idleHostsKept, "the others forgotten")
    XCTAssertEqual(hosts.limit(for: small), cut, "its cut limit kept, not its start again")
    XCTAssertEqual(hosts.hostLimit(small)?.cuts, ["refused": 1])
  }

  func testABackoffHoldsItsHostUntilRetryAfterAndThenOpens() {
    var hosts = table()
    XCTAssertTrue(hosts.isOpen, "no rate and no back-off: no clock is read")
    var log: [String: HostTable.Record] = [:]
    var failure = DownloadFailure(.invalidDownloadStatusCode(503), retryAfter: 2)
    hosts.answered(cdn, failure, at: 0, log: &log)
    XCTAssertFalse(hosts.isOpen)
    var wake = UInt64.max
    XCTAssertFalse(hosts.allows(cdn, gated: true, at: 1_000_000_000, wake: &wake))
    XCTAssertEqual(wake, 2_000_000_000)
    XCTAssertTrue(hosts.allows(small, gated: true, at: 1_000_000_000, wake: &wake))
    hosts.prune(at: 2_000_000_000)
    XCTAssertTrue(hosts.isOpen, "over: the table is open again")
    XCTAssertEqual(log[cdn.host]?.pauses, 1)
    // A 404 with Retry-After holds nothing back.
    failure = DownloadFailure(.invalidDownloadStatusCode(404), retryAfter: 2)
    hosts.answered(small, failure, at: 0, log: &log)
    XCTAssertTrue(hosts.isOpen)
  }

  /// Waits that overlap hold the host once: a shorter wait inside one under way adds nothing,
  /// a longer one what it adds past it. Every answer that asked is a pause, and a wait not
  /// over when the run ends counts up to the end only.
  func testOverlappingBackoffsCountTheTimeHeldOnce() {
    var hosts = table { $0.maxRetryDelay = 60 }
    var log: [String: HostTable.Record] = [:]
    let second: UInt64 = 1_000_000_000
    func refused(wait: TimeInterval, at now: UInt64) {
      let failure = DownloadFailure(.invalidDownloadStatusCode(429), retryAfter: wait)
      hosts.answered(cdn, failure, at: now, log: &log)
    }
    refused(wait: 10, at: 0)  // held until 10 s
    refused(wait: 3, at: 2 * second)  // until 5 s: inside the first
    refused(wait: 10, at: 4 * second)  // until 14 s: 4 s more
    var wake = UInt64.max
    XCTAssertFalse(hosts.allows(cdn, gated: true, at: 13 * second, wake: &wake))
    XCTAssertEqual(wake, 14 * second)
    XCTAssertEqual(
      HostTable.report(log, at: 20 * second),
      [HostBackoff(host: "cdn.example", pauses: 3, seconds: 14)])
    XCTAssertEqual(HostTable.report(log, at: 12 * second).map(\.seconds), [12])
  }
}
