import Core
import Foundation
import Synchronization
import TestSupport
import XCTest

/// `--per-host-concurrency auto` / `prefetch.perHostConcurrency: auto` from the command line
/// and job files (issue 44): a real run keeps to `--max-per-host-concurrency` at the origin, the
/// report says where the host's limit settled, and mistakes are usage errors naming the flag or
/// the file, line and field.
final class AdaptiveConcurrencyCommandTests: LoopbackTestCase {
  var cache: String!

  /// Past this many requests at once, `/busy.png` answers 503 with `Retry-After: 1`.
  private static let busyLimit = 6
  private static let taken = Mutex<[ContinuousClock.Instant]>([])

  override var routes: [String: Route] {
    [
      "/slow.png": { _ in ServerResponse(body: Fixtures.png, headDelay: .milliseconds(20)) },
      "/steady.png": { _ in ServerResponse(body: Fixtures.png, headDelay: .milliseconds(200)) },
      "/busy.png": { _ in
        // Held: the requests taken in the last service time (the server's own count of what
        // it answers also holds answers on their way out).
        let now = ContinuousClock.now
        let taken = Self.taken.withLock { taken in
          taken.removeAll { now - $0 >= .milliseconds(20) }
          guard taken.count < Self.busyLimit else { return false }
          taken.append(now)
          return true
        }
        guard taken else { return ServerResponse(status: 503, headers: [("Retry-After", "1")]) }
        return ServerResponse(body: Fixtures.png, headDelay: .milliseconds(20))
      },
      // One stray 503, to the fourth request: an outage of a moment, not a knee.
      "/flaky.png": { request in
        // Past the 40th, one in five refused whatever is under way: at random, as the
        // origin sees it.
        let n = request.query.flatMap { Int($0.drop { $0 != "=" }.dropFirst()) } ?? 0
        guard n < 40 || n % 5 != 0 else { return ServerResponse(status: 503) }
        return ServerResponse(body: Fixtures.png, headDelay: .milliseconds(20))
      },
      "/hiccup.png": { request in
        guard request.attempt != 4 else { return ServerResponse(status: 503) }
        return ServerResponse(body: Fixtures.png)
      },
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    cache = temporary.appending("cache")
  }

  private func urls(_ count: Int, _ tag: String) -> [String] {
    (0..<count).map { server.url("/slow.png?\(tag)=\($0)") }
  }

  private func report(_ path: String) throws -> RunReport {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    let json = try JSONSerialization.jsonObject(with: data)
    XCTAssertEqual(SchemaValidator.validate(json, against: try SchemaValidator.reportSchema()), [])
    return try RunReport.decode(data)
  }

  func testAnAdaptiveRunKeepsToItsCeilingAtTheOriginAndReportsWhereTheHostSettled() throws {
    let path = temporary.appending("auto.json")
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(urls(60, "auto")), "--cache", cache!,
      "--per-host-concurrency", "auto", "--max-per-host-concurrency", "3", "--report", path,
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertLessThanOrEqual(server.peakConcurrency, 3, "the ceiling holds at the origin")
    let decoded = try report(path)
    XCTAssertEqual(decoded.prefetch?.downloaded, 60)
    let limit = try XCTUnwrap(decoded.prefetch?.hostLimits.first)
    XCTAssertEqual(limit.host, "127.0.0.1")
    XCTAssertEqual(limit.max, 3, "from 4, capped: it starts at the ceiling")
    XCTAssertTrue((1...3).contains(limit.final), "\(limit)")

    let fixed = temporary.appending("fixed.json")
    let fixedRun = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(urls(5, "fixed")), "--cache", cache!,
      "--per-host-concurrency", "2", "--report", fixed,
    ])
    XCTAssertEqual(fixedRun.status, 0, fixedRun.stderr)
    XCTAssertEqual(try report(fixed).prefetch?.hostLimits, [], "fixed limits report none")
  }

  func testAnswersAClientTooBusyToReadThemWaitedForAreNoQueueOfTheOrigin() throws {
    // An origin that answers every request in 200 ms, however many come. The client runs for
    // 250 ms, then is stopped for 350 ms, as a busy machine leaves a process unscheduled: the
    // answers that come meanwhile wait in its sockets, and libcurl's times to first byte of
    // every other batch grow by up to 350 ms, past the tolerance. That is the client's lag,
    // which the kernel's idle time of each connection shows, not a queue.
    let path = temporary.appending("stopped.json")
    // (Under 16 at once: the test's own server slows past that, and a real queue is cut.)
    let urls = (0..<120).map { server.url("/steady.png?n=\($0)") }
    let (process, stdout, stderr) = try ImageCacheBinary.start(
      [
        "prefetch", try temporary.manifest(urls), "--cache", cache!, "--report", path,
        "--max-per-host-concurrency", "16",
      ])
    let errors = PipeReader(stderr)
    waitUntil(timeout: 30, "the first request") {
      !server.requests("/steady.png").isEmpty || !process.isRunning
    }
    var stops = 0
    while process.isRunning {
      usleep(250_000)
      kill(process.processIdentifier, SIGSTOP)
      usleep(350_000)
      kill(process.processIdentifier, SIGCONT)
      stops += 1
    }
    let result = ImageCacheBinary.finish(process, stdout, errors)
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertGreaterThanOrEqual(stops, 3, "the run was stopped while it ran")
    let prefetch = try XCTUnwrap(try report(path).prefetch)
    XCTAssertEqual(prefetch.downloaded, 120)
    let limit = try XCTUnwrap(prefetch.hostLimits.first)
    XCTAssertEqual(limit.cuts, [:], "the client's own lag cut the origin's limit: \(limit)")
    XCTAssertEqual(limit.final, 16, "slow start went on to the ceiling: \(limit)")
  }

  func testAnOriginThatRefusesPastItsKneeCostsAProbeNotAHoldAndVerboseAndMetricsSayWhereItSettled()
    throws
  {
    let path = temporary.appending("busy.json")
    let metrics = temporary.appending("busy.prom")
    let urls = (0..<150).map { server.url("/busy.png?n=\($0)") }
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(urls), "--cache", cache!, "--per-host-concurrency",
      "auto", "--report", path, "--metrics", metrics, "--verbose",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let refusals = server.requests("/busy.png").count - 150
    let prefetch = try XCTUnwrap(try report(path).prefetch)
    XCTAssertEqual(prefetch.downloaded, 150, "each refused one again after its Retry-After")
    // The slow start's step past the knee is one request more, then another as each answer
    // comes: a refusal or few, not a burst; and a probe's refusal is the cut's to answer, not
    // a second's hold of the whole host.
    XCTAssertLessThanOrEqual(refusals, 5)
    XCTAssertEqual(prefetch.hostBackoffs, [], "a probe's refusal holds no host")
    let limit = try XCTUnwrap(prefetch.hostLimits.first)
    XCTAssertGreaterThanOrEqual(limit.cuts["refused"] ?? 0, refusals > 0 ? 1 : 0)
    XCTAssertLessThanOrEqual(limit.final, Self.busyLimit)
    // Where it settled, for an operator who would rather fix it.
    XCTAssertTrue(
      (result.stdout + result.stderr).contains(
        "127.0.0.1: per-host concurrency settled at \(limit.final) (least \(limit.min), "
          + "median \(limit.median), most \(limit.max)"), result.stdout)
    XCTAssertTrue(
      result.stderr.contains("to fix it: --per-host-concurrency \(limit.median)"), result.stderr)
    let exposition = try String(contentsOfFile: metrics, encoding: .utf8)
    XCTAssertTrue(
      exposition.contains(
        #"imagecache_last_run_host_concurrency{imagecache_job="prefetch",namespace="default",host="127.0.0.1",stat="final"} \#(limit.final)"#
      ), exposition)
    XCTAssertTrue(
      exposition.contains(
        #"imagecache_last_run_host_concurrency_cuts{imagecache_job="prefetch",namespace="default",cause="refused"} \#(limit.cuts["refused"] ?? 0)"#
      ), exposition)
  }

  func testARefusalOfTheRunsOwnProbeFailsNoURLEvenWithoutRetries() throws {
    // The adaptive default asks the busy origin past its knee once, as it must to find it: the
    // refused URL is asked again, once, though the operator asked for no retries, and the
    // night exits 0 with every image stored.
    let path = temporary.appending("probe.json")
    let urls = (0..<150).map { server.url("/busy.png?p=\($0)") }
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(urls), "--cache", cache!, "--retries", "0",
      "--report", path,
    ])
    let refusals = server.requests("/busy.png").count - 150
    XCTAssertGreaterThan(refusals, 0, "the knee, met")
    XCTAssertEqual(result.status, 0, result.stderr)
    let prefetch = try XCTUnwrap(try report(path).prefetch)
    XCTAssertEqual(prefetch.downloaded, 150)
    XCTAssertEqual(prefetch.failures.map(\.url), [])
  }

  func testTheNextRunKeepsUnderWhereTheOriginRefusedAProbeAndSaysSo() throws {
    // The first run meets the busy origin's knee as it must: no sign before a refusal.
    let first = temporary.appending("first.json")
    let firstRun = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest((0..<150).map { server.url("/busy.png?a=\($0)") }),
      "--cache", cache!, "--per-host-concurrency", "auto", "--report", first,
    ])
    XCTAssertEqual(firstRun.status, 0, firstRun.stderr)
    let refusedFirst = server.requests("/busy.png").count - 150
    XCTAssertGreaterThan(refusedFirst, 0, "the knee, met")
    XCTAssertNil(try report(first).prefetch?.hostLimits.first?.heldUnder)
    // The next one is told: it keeps under the refusal, draws none, and says why.
    let next = temporary.appending("next.json")
    let nextRun = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest((0..<150).map { server.url("/busy.png?b=\($0)") }),
      "--cache", cache!, "--per-host-concurrency", "auto", "--report", next, "--verbose",
    ])
    XCTAssertEqual(nextRun.status, 0, nextRun.stderr)
    XCTAssertEqual(server.requests("/busy.png").count - 300, refusedFirst, "none more")
    let limit = try XCTUnwrap(try report(next).prefetch?.hostLimits.first)
    let heldUnder = try XCTUnwrap(limit.heldUnder, "\(limit)")
    XCTAssertNil(limit.cuts["refused"], "\(limit)")
    XCTAssertLessThan(limit.max, heldUnder)
    let nextRequests = server.requests("/busy.png").filter { $0.query?.hasPrefix("b=") == true }
    XCTAssertLessThan(nextRequests.map(\.inFlight).max() ?? 0, heldUnder, "at the origin too")
    XCTAssertTrue(
      nextRun.stderr.contains("held under \(heldUnder), where it refused an earlier run"),
      nextRun.stderr)
    // A fixed limit asks as it is told, remembered refusal or not.
    let fixedRun = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest((0..<30).map { server.url("/slow.png?c=\($0)") }),
      "--cache", cache!, "--per-host-concurrency", "\(heldUnder + 2)",
    ])
    XCTAssertEqual(fixedRun.status, 0, fixedRun.stderr)
    XCTAssertEqual(server.requests("/slow.png").map(\.inFlight).max(), heldUnder + 2)
  }

  /// A first run, which meets the busy origin's knee as it must (no sign comes before a
  /// refusal); the state keeps it for a week. `tag` keeps its URLs apart from other runs'.
  private func meetTheBusyOriginsKnee(_ tag: String) throws {
    let run = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest((0..<150).map { server.url("/busy.png?\(tag)=\($0)") }),
      "--cache", cache!,
    ])
    XCTAssertEqual(run.status, 0, run.stderr)
  }

  func testAnOperatorListsAndForgetsARefusalAndTheNextRunAsksPastItAgain() throws {
    try meetTheBusyOriginsKnee("a")
    let origin = server.url("")
    let listed = try ImageCacheBinary.run(["refusals", "list", "--cache", cache!])
    XCTAssertEqual(listed.status, 0, listed.stderr)
    let line = try XCTUnwrap(listed.stdout.split(separator: "\n").first, listed.stderr)
    let fields = line.split(separator: "\t").map(String.init)
    XCTAssertEqual(fields.count, 4, "\(line)")
    XCTAssertEqual(fields.first, origin, "the origin with its port")
    XCTAssertTrue(listed.stderr.contains("1 origins held under a refusal"), listed.stderr)
    let json = try ImageCacheBinary.run(["refusals", "list", "--cache", cache!, "--json"])
    let entries = try XCTUnwrap(
      JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
    let heldUnder = try XCTUnwrap(entries.first?["heldUnder"] as? Int, json.stdout)
    XCTAssertEqual(fields[1], "held under \(heldUnder)")
    // What the next run would be held under, as its report says.
    let held = temporary.appending("held.json")
    let heldRun = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(urls(20, "held")), "--cache", cache!, "--report", held,
    ])
    XCTAssertEqual(heldRun.status, 0, heldRun.stderr)
    XCTAssertEqual(try report(held).prefetch?.hostLimits.first?.heldUnder, heldUnder)
    // Forgotten by any URL of the origin: the next run is held under nothing.
    let removed = try ImageCacheBinary.run([
      "refusals", "remove", server.url("/busy.png?a=1"), "--cache", cache!,
    ])
    XCTAssertEqual(removed.status, 0, removed.stderr)
    XCTAssertTrue(removed.stderr.contains("forgot the refusal of \(origin)"), removed.stderr)
    let empty = try ImageCacheBinary.run(["refusals", "list", "--cache", cache!])
    XCTAssertEqual(empty.stdout, "")
    XCTAssertTrue(empty.stderr.contains("0 origins held under a refusal"), empty.stderr)
    let after = temporary.appending("after.json")
    let afterRun = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(urls(20, "after")), "--cache", cache!, "--report", after,
    ])
    XCTAssertEqual(afterRun.status, 0, afterRun.stderr)
    XCTAssertNil(try report(after).prefetch?.hostLimits.first?.heldUnder)
    // Nothing left to forget is exit 1, as `blacklist remove`; what is no origin, a usage error.
    let again = try ImageCacheBinary.run(["refusals", "remove", origin, "--cache", cache!])
    XCTAssertEqual(again.status, 1, again.stderr)
    XCTAssertTrue(again.stderr.contains("no refusal remembered for \(origin)"), again.stderr)
    let wrong = try ImageCacheBinary.run(["refusals", "remove", "ftp://x", "--cache", cache!])
    XCTAssertEqual(wrong.status, 2, wrong.stderr)
    XCTAssertTrue(wrong.stderr.contains("\"ftp://x\" is not an http or https origin"), wrong.stderr)
    // `clear` forgets every origin's.
    try meetTheBusyOriginsKnee("b")
    let cleared = try ImageCacheBinary.run(["refusals", "clear", "--cache", cache!])
    XCTAssertEqual(cleared.status, 0, cleared.stderr)
    XCTAssertTrue(cleared.stderr.contains("forgot the refusals of 1 origins"), cleared.stderr)
    XCTAssertEqual(try ImageCacheBinary.run(["refusals", "list", "--cache", cache!]).stdout, "")
  }

  func testAnOriginThatRefusesAtRandomForgetsTheKneeAnEarlierRunKept() throws {
    try meetTheBusyOriginsKnee("a")
    // The next run, held under it, finds the same origin refusing at random: with fewer under
    // way than it served. Nothing of it is a knee, the earlier run's refusal included.
    let flaky = temporary.appending("flaky.json")
    let flakyRun = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest((0..<160).map { server.url("/flaky.png?f=\($0)") }),
      "--cache", cache!, "--retries", "0", "--report", flaky, "--verbose",
    ])
    XCTAssertEqual(flakyRun.status, 1, "its refused URLs failed: \(flakyRun.stderr)")
    let limit = try XCTUnwrap(try report(flaky).prefetch?.hostLimits.first)
    XCTAssertNotNil(limit.heldUnder, "held under the earlier run's refusal: \(limit)")
    XCTAssertGreaterThanOrEqual(limit.cuts["refused"] ?? 0, 3, "\(limit)")
    // The run after is held under nothing.
    let after = temporary.appending("after.json")
    let afterRun = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(urls(30, "after")), "--cache", cache!, "--report",
      after, "--verbose",
    ])
    XCTAssertEqual(afterRun.status, 0, afterRun.stderr)
    XCTAssertNil(try report(after).prefetch?.hostLimits.first?.heldUnder)
    XCTAssertFalse(afterRun.stderr.contains("held under"), afterRun.stderr)
  }

  func testAStray503WithOneUnderWayIsNotRememberedAsTheOriginsKnee() throws {
    // At 1 at a time (its ceiling), the origin served one cleanly, then refused one.
    let first = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest((0..<8).map { server.url("/hiccup.png?a=\($0)") }),
      "--cache", cache!, "--max-per-host-concurrency", "1",
    ])
    XCTAssertEqual(first.status, 0, first.stderr)
    XCTAssertEqual(server.requests("/hiccup.png").count, 9, "the refused one again")
    // No limit is under 1: the next night is not held at 1 for it.
    let next = temporary.appending("next.json")
    let nextRun = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest((0..<40).map { server.url("/hiccup.png?b=\($0)") }),
      "--cache", cache!, "--report", next, "--verbose",
    ])
    XCTAssertEqual(nextRun.status, 0, nextRun.stderr)
    let limit = try XCTUnwrap(try report(next).prefetch?.hostLimits.first)
    XCTAssertNil(limit.heldUnder, "\(limit)")
    XCTAssertGreaterThan(limit.max, 1, "\(limit)")
    XCTAssertFalse(nextRun.stderr.contains("held under"), nextRun.stderr)
  }

  func testEachOriginOfAHostHasItsOwnLineAndItsCutsCount() throws {
    let refusing = try LoopbackServer(routes: ["/no.png": { _ in ServerResponse(status: 503) }])
    defer { refusing.shutdown() }
    let path = temporary.appending("origins.json")
    let metrics = temporary.appending("origins.prom")
    let urls =
      (0..<6).map { refusing.url("/no.png?\($0)") } + (0..<30).map { server.url("/slow.png?\($0)") }
    let result = try ImageCacheBinary.run([
      "prefetch", try temporary.manifest(urls), "--cache", cache!, "--retries", "0",
      "--report", path, "--metrics", metrics, "--verbose",
    ])
    XCTAssertEqual(result.status, 1, "the refused URLs failed: \(result.stderr)")
    // Both on 127.0.0.1: one line each, named by port, neither hiding the other's figures.
    let limits = try XCTUnwrap(try report(path).prefetch?.hostLimits)
    let names = [refusing, server].map { "127.0.0.1:\($0.port)" }
    XCTAssertEqual(Set(limits.map(\.host)), Set(names), "\(limits)")
    let refused = try XCTUnwrap(limits.first { $0.host == names[0] }?.cuts["refused"])
    XCTAssertGreaterThan(refused, 0)
    XCTAssertNil(limits.first { $0.host == names[1] }?.cuts["refused"])
    XCTAssertTrue(result.stderr.contains("\(names[0]): per-host concurrency"), result.stderr)
    let exposition = try String(contentsOfFile: metrics, encoding: .utf8)
    XCTAssertTrue(
      exposition.contains(
        #"imagecache_last_run_host_concurrency_cuts{imagecache_job="prefetch",namespace="default",cause="refused"} \#(refused)"#
      ), exposition)
  }

  func testAJobFilesAutoRunsAndItsMistakesNameTheFileLineAndField() throws {
    let manifest = try temporary.manifest(urls(8, "job"))
    func job(_ prefetch: String) throws -> String {
      let path = temporary.appending("job.yaml")
      try "cache:\n  directory: \(cache!)\nmanifests: [\(manifest)]\nprefetch:\n\(prefetch)"
        .write(toFile: path, atomically: true, encoding: .utf8)
      return path
    }
    let reportPath = temporary.appending("job.json")
    let path = try job("  perHostConcurrency: auto\n  maxPerHostConcurrency: 2\n")
    let result = try ImageCacheBinary.run(["run", path, "--report", reportPath])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertLessThanOrEqual(server.peakConcurrency, 2)
    XCTAssertEqual(try report(reportPath).prefetch?.hostLimits.first?.max, 2)

    let cases: [(String, String, String)] = [
      ("  perHostConcurrency: sometimes\n", "prefetch.perHostConcurrency", "whole number"),
      ("  maxPerHostConcurrency: 0\n", "prefetch.maxPerHostConcurrency", "1 to 10000"),
      ("  perHostStreams: sometimes\n", "prefetch.perHostStreams", "whole number"),
    ]
    for (settings, field, expected) in cases {
      let wrong = try job(settings)
      let failed = try ImageCacheBinary.run(["run", wrong])
      XCTAssertEqual(failed.status, 2, "\(settings): \(failed.stderr)")
      XCTAssertTrue(
        failed.stderr.contains("\(wrong):5: field '\(field)'"), "\(settings): \(failed.stderr)")
      XCTAssertTrue(failed.stderr.contains(expected), "\(settings): \(failed.stderr)")
    }
    for flags in [
      ["--per-host-concurrency", "fast"], ["--max-per-host-concurrency", "0"],
      ["--per-host-streams", "fast"],
    ] {
      let failed = try ImageCacheBinary.run(
        ["prefetch", manifest, "--cache", cache!] + flags)
      XCTAssertEqual(failed.status, 2, "\(flags): \(failed.stderr)")
      XCTAssertTrue(failed.stderr.contains(flags[0]), "\(flags): \(failed.stderr)")
    }
  }
}
