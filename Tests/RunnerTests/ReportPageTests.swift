import Core
import Foundation
import Runner
import TestSupport
import XCTest

/// `report html` (issue 26): URLs, hosts and messages come from manifests, sitemaps and servers
/// of other systems, and the page is opened by people. Whatever they hold shows as text; no
/// element or attribute on the page comes from them, and the page forbids script should one
/// ever slip through. The page is read by a real HTML parser (Python's `html.parser`).
final class ReportPageTests: TemporaryFolderTestCase {
  /// Every string of a report that reaches the page, each with markup of its own: behind a
  /// prepend character and before combining marks, joiners and variation selectors (which
  /// make one grapheme cluster with the `<` or quote), beside CR/LF and NUL, and the openers
  /// and closers of comments, CDATA and raw-text elements.
  static let hostile: [String: String] = [
    "job": "\u{0600}<img src=x onerror=alert(1)>",
    "report file": "<\u{0300}img src=x onerror=alert(2)>.json",
    "cache path": "/var/cache/\u{200D}<\u{200D}script>alert(3)<\u{200D}/script>",
    "namespace": "\"\u{FE0F} onmouseover=\"alert(4)\" x=\"",
    "error": "'\u{0301} onfocus='alert(5)' x='\r\n<svg onload=alert(6)>\r\n",
    "shard file": "\u{0}<\u{0}iframe srcdoc=x>\u{0}",
    "maintenance error": "</textarea><textarea autofocus onfocus=alert(7)>",
    "warning": "]]><![CDATA[<b>x</b>]]>",
    // `--run-id` and the engines' variables are the operator's, but a merged page shows them.
    "run ID": "night-1\u{0600}<script>alert(11)</script>",
    "failure URL": "https://example.invalid/a.jpg?\u{0600}<img src=x onerror=alert(8)>",
    "failure name": "\u{0600}<a href=\"javascript:alert(9)\">name",
    "failure message": "<!-- <a href=x> --> &amp;lt;&\u{0600}<p title='x'>",
    "failure source": "</code></td></tr></table><form action=x><input name=y>",
    "blacklisted URL": "https://example.invalid/b.png#\u{0600}\"\u{0600}><b class=n>",
    // A host percent-encodes what it may not hold; Foundation hands it back decoded.
    "host URL": "https://%3Cimg%20src%3Dx%20onerror%3Dalert(10)%3E.example/c.jpg",
    // A cache may hold any file name; a reason quotes the file's first bytes.
    "verified file": "a/\u{0600}<img src=x onerror=alert(12)>.jpg",
    "verify reason": "an HTML page, not an image (starts with \"<script>alert(13)\")",
    "verify error": "/c/<b>x</b>: Permission denied",
    // An origin's name from a URL, as the transfer thread reads it (IPv6 in brackets).
    "limit host": "[::1]:8443\u{0600}<img src=x onerror=alert(14)>",
    "backoff host": "\u{0600}<svg onload=alert(15)>.example",
  ]

  /// A report that carries `text(field)` in every field named in ``hostile``.
  private func report(_ text: (String) -> String) -> (name: String, report: RunReport) {
    let start = Date(timeIntervalSince1970: 1_700_000_000)
    var report = RunReport(
      job: text("job"),
      location: CacheLocation(directory: text("cache path"), namespace: text("namespace")),
      startedAt: start)
    report.status = .failed
    report.finishedAt = start + 60
    report.error = text("error")
    report.runID = text("run ID")
    var shard = RunReport(job: "shard", location: CacheLocation(directory: "/c"), startedAt: start)
    shard.status = .interrupted
    report.mergedFrom = [RunReport.MergedReport(file: text("shard file"), report: shard)]
    var pass = MaintenancePassReport(pass: .trim, dryRun: false)
    pass.errors = [text("maintenance error")]
    report.maintenance = [pass]
    report.warnings = [text("warning")]
    var prefetch = PrefetchReport()
    prefetch.total = 3
    prefetch.failed = 2
    prefetch.failures = [
      FailureReport(
        url: text("failure URL"), code: 1001, name: text("failure name"), httpStatus: 404,
        message: text("failure message"), attempts: 1, blacklisted: true,
        source: text("failure source")),
      FailureReport(
        url: text("host URL"), code: 1001, name: "badImageData", httpStatus: nil,
        message: "not an image", attempts: 2, blacklisted: false),
    ]
    prefetch.blacklistedURLs = [text("blacklisted URL")]
    prefetch.hostLimits = [
      HostLimit(
        host: text("limit host"), final: 6, min: 4, median: 6, max: 8, cuts: ["refused": 1],
        heldUnder: 9)
    ]
    prefetch.hostBackoffs = [HostBackoff(host: text("backoff host"), pauses: 2, seconds: 3)]
    report.prefetch = prefetch
    report.verify = VerifyReport(
      level: .structure, repair: .none, counts: VerifyCounts(),
      files: [
        VerifiedFile(
          name: text("verified file"), size: 10, modifiedAt: start, outcome: .bad,
          reason: text("verify reason"))
      ],
      errors: [text("verify error")])
    return (text("report file"), report)
  }

  private var hostilePage: String { ReportPage.render([report { Self.hostile[$0]! }]) }
  /// The same report with plain words: the page's own elements and attributes.
  private var plainPage: String { ReportPage.render([report { "plain \($0)" }]) }

  /// What Python's `html.parser` read in a page.
  struct ParsedPage: Decodable {
    struct StartTag: Decodable, Hashable {
      var tag: String
      var attributes: [[String]]
    }
    var tags: [StartTag]
    /// The text, character references resolved.
    var text: String
    /// Comments, declarations and processing instructions.
    var other: [String]
  }

  private func parse(_ page: String) throws -> ParsedPage {
    let file = temporary.appending("page.html")
    try Data(page.utf8).write(to: URL(fileURLWithPath: file))
    let script = """
      import html.parser, json, sys
      class Collector(html.parser.HTMLParser):
          def __init__(self):
              super().__init__(convert_charrefs=True)
              self.tags, self.text, self.other = [], [], []
          def handle_starttag(self, tag, attrs):
              attributes = [[name, "" if value is None else value] for name, value in attrs]
              self.tags.append({"tag": tag, "attributes": attributes})
          def handle_startendtag(self, tag, attrs):
              self.handle_starttag(tag, attrs)
          def handle_data(self, data):
              self.text.append(data)
          def handle_comment(self, data):
              self.other.append("comment " + data)
          def handle_decl(self, data):
              self.other.append("declaration " + data)
          def handle_pi(self, data):
              self.other.append("processing instruction " + data)
          def unknown_decl(self, data):
              self.other.append("unknown declaration " + data)
      collector = Collector()
      with open(sys.argv[1], encoding="utf-8", newline="") as page:
          collector.feed(page.read())
      collector.close()
      json.dump({"tags": collector.tags, "text": "".join(collector.text),
                 "other": collector.other}, sys.stdout)
      """
    let python = "/usr/bin/python3"
    guard FileManager.default.isExecutableFile(atPath: python) else {
      try requireOrSkip("no \(python), which reads the page as a browser would")
    }
    let result = try Command.run(python, ["-c", script, file])
    XCTAssertEqual(result.status, 0, result.stderr)
    return try JSONDecoder().decode(ParsedPage.self, from: Data(result.stdout.utf8))
  }

  /// Each start tag as (tag, attribute, value) triples; numbers (coordinates and widths in the
  /// charts, which depend on how URLs group) as `#`, since no number comes from text; a
  /// `title`'s value as `text`: it is a cell's whole text, shown on hover, so it holds input
  /// by design (as text: an attribute made from it would be a triple of its own).
  private func markup(_ page: ParsedPage) -> Set<[String]> {
    var triples: Set<[String]> = []
    for tag in page.tags {
      triples.insert([tag.tag])
      for attribute in tag.attributes {
        let value =
          attribute[0] == "title"
          ? "text" : attribute[1].allSatisfy(\.isNumber) ? "#" : attribute[1]
        triples.insert([tag.tag, attribute[0], value])
      }
    }
    return triples
  }

  func testNoElementOrAttributeOnThePageComesFromInput() throws {
    let hostile = try parse(hostilePage)
    let plain = try parse(plainPage)
    let injected = markup(hostile).subtracting(markup(plain))
    XCTAssertEqual(injected, [], "elements or attributes made from input")
    XCTAssertEqual(hostile.other, plain.other, "comments or declarations made from input")
  }

  func testEveryStringFromInputReadsBackAsTheSameText() throws {
    let text = try parse(hostilePage).text
    for (field, value) in Self.hostile {
      // A browser would drop a NUL; the page shows the replacement character.
      let shown = value.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}")
      XCTAssertTrue(text.contains(shown), "\(field) \(value.debugDescription) is not shown as text")
    }
    let host = try XCTUnwrap(URL(string: Self.hostile["host URL"]!)?.host)
    XCTAssertTrue(text.contains(host), "the chart's host \(host.debugDescription) as text")
  }

  func testThePageAllowsNoScriptByContentSecurityPolicy() throws {
    let page = try parse(hostilePage)
    let policies = page.tags.filter { tag in
      tag.tag == "meta"
        && tag.attributes.contains {
          $0[0] == "http-equiv" && $0[1].lowercased() == "content-security-policy"
        }
    }
    XCTAssertEqual(policies.count, 1)
    let policy = try XCTUnwrap(policies.first?.attributes.first { $0[0] == "content" }?[1])
    var directives: [String: [String]] = [:]
    for directive in policy.split(separator: ";") {
      let words = directive.split(separator: " ").map(String.init)
      guard let name = words.first else { continue }
      directives[name.lowercased()] = Array(words.dropFirst())
    }
    XCTAssertEqual(directives["default-src"], ["'none'"], policy)
    XCTAssertEqual(directives.keys.filter { $0.hasPrefix("script") }, [], policy)
    let position = try XCTUnwrap(page.tags.firstIndex(of: policies[0]))
    let firstStyleOrContent = page.tags.firstIndex { ["style", "body", "svg"].contains($0.tag) }
    XCTAssertLessThan(position, try XCTUnwrap(firstStyleOrContent), "it governs what follows it")
  }

  /// A report of `status` whose prefetch had `failed` of `total` URLs fail.
  private func run(
    _ status: RunReport.Status, failed: Int, of total: Int, failures: [FailureReport] = []
  ) -> RunReport {
    let start = Date(timeIntervalSince1970: 1_700_000_000)
    var report = RunReport(
      job: "nightly", location: CacheLocation(directory: "/c"), startedAt: start)
    report.status = status
    report.finishedAt = start + 60
    var prefetch = PrefetchReport()
    prefetch.total = total
    prefetch.downloaded = total - failed
    prefetch.failed = failed
    prefetch.failures = failures
    report.prefetch = prefetch
    return report
  }

  func testACompletedRunWithFailedURLsShowsTheShareThatFailedInTheWarningColour() throws {
    let failing = ReportPage.render([("r.json", run(.completed, failed: 7, of: 100))])
    XCTAssertTrue(
      failing.contains(#"<b class="warning">completed, 7% of URLs failed (7 of 100)</b>"#),
      failing)
    XCTAssertTrue(failing.contains(".warning{color:#9a6700}"), "amber, not green")
    let few = ReportPage.render([("r.json", run(.completed, failed: 1, of: 1000))])
    XCTAssertTrue(few.contains("completed, under 1% of URLs failed (1 of 1000)"), few)
    let clean = ReportPage.render([("r.json", run(.completed, failed: 0, of: 100))])
    XCTAssertTrue(clean.contains(#"<b class="completed">completed</b>"#), clean)
    let text = try parse(failing).text
    XCTAssertTrue(text.contains("completed, 7% of URLs failed (7 of 100)"), text)
  }

  /// Both exit 1, as failed URLs do (SPEC section 12): the page says so in amber, not green.
  func testARunTheBlacklistRefusedEntirelyOrThatLeftFilesItMeantToRemoveIsNotGreen() throws {
    var refused = run(.completed, failed: 0, of: 4)
    refused.prefetch?.downloaded = 0
    refused.prefetch?.blacklisted = 4
    let nothingTried = ReportPage.render([("r.json", refused)])
    XCTAssertTrue(
      nothingTried.contains(
        #"<b class="warning">completed, nothing tried: the blacklist refused every URL (4)</b>"#),
      nothingTried)
    var stuck = run(.completed, failed: 0, of: 4)
    var pass = MaintenancePassReport(pass: .expire, dryRun: false)
    pass.filesNotRemoved = 2
    stuck.maintenance = [pass]
    let notRemoved = ReportPage.render([("r.json", stuck)])
    XCTAssertTrue(
      notRemoved.contains(#"<b class="warning">completed, 2 files not removed</b>"#), notRemoved)
    var partlyRefused = run(.completed, failed: 0, of: 4)
    partlyRefused.prefetch?.blacklisted = 1
    partlyRefused.prefetch?.downloaded = 3
    let green = ReportPage.render([("r.json", partlyRefused)])
    XCTAssertTrue(green.contains(#"<b class="completed">completed</b>"#), green)
  }

  /// An export that came out empty, or a server's error page saved as the manifest: nothing
  /// failed, and nothing was done either. Not green; a shard, which may own none of a short
  /// list's URLs, is.
  func testARunWhoseManifestsListedNoURLIsNotGreen() throws {
    let empty = ReportPage.render([("r.json", run(.completed, failed: 0, of: 0))])
    XCTAssertTrue(
      empty.contains(
        #"<b class="warning">completed, nothing tried: the manifests listed no URL</b>"#),
      empty)
    var skipped = run(.completed, failed: 0, of: 3)
    skipped.prefetch?.downloaded = 0
    skipped.prefetch?.skipped = 3
    XCTAssertTrue(
      ReportPage.render([("r.json", skipped)]).contains(
        "nothing tried: the manifests listed no URL"))
    var shard = run(.completed, failed: 0, of: 0)
    shard.shard = RunReport.ShardIdentity(try XCTUnwrap(Shard(index: 1, count: 4)))
    let green = ReportPage.render([("r.json", shard)])
    XCTAssertTrue(green.contains(#"<b class="completed">completed</b>"#), green)
  }

  func testAnIncompleteMergeSaysWhyAndHowManyURLsFailed() throws {
    let page = ReportPage.render([("merged.json", run(.incomplete, failed: 3, of: 10))])
    XCTAssertTrue(
      page.contains(
        #"<b class="incomplete">incomplete: a partial merge (shards missing, repeated or from "#
          + #"other runs; see the warnings), 30% of URLs failed (3 of 10)</b>"#), page)
  }

  func testTheFailureTableIsGroupedByHostAndSortedByErrorWithAWideURLColumn() throws {
    func failure(_ url: String, _ name: String, _ status: Int? = nil) -> FailureReport {
      FailureReport(
        url: url, code: 1001, name: name, httpStatus: status, message: "m", attempts: 1,
        blacklisted: false)
    }
    let failures = [
      failure("https://b.example/1.jpg", "timedOut"),
      failure("https://a.example/z.jpg", "invalidDownloadStatusCode", 404),
      failure("https://b.example/2.jpg", "badImageData"),
      failure("https://a.example/y.jpg", "badImageData"),
      failure("https://a.example/x.jpg", "invalidDownloadStatusCode", 404),
    ]
    let page = ReportPage.render([("r.json", run(.completed, failed: 5, of: 5, failures: failures))]
    )
    let table = try XCTUnwrap(page.range(of: #"<table class="failures">"#)).upperBound
    func position(_ text: String) throws -> String.Index {
      try XCTUnwrap(page.range(of: text, range: table..<page.endIndex), text).lowerBound
    }
    let order = try [
      #"<th colspan="6">a.example: 3 failures</th>"#, "https://a.example/y.jpg",
      "https://a.example/x.jpg", "https://a.example/z.jpg",
      #"<th colspan="6">b.example: 2 failures</th>"#, "https://b.example/2.jpg",
      "https://b.example/1.jpg",
    ].map(position)
    XCTAssertEqual(order, order.sorted(), "by host, then by error, then by URL")
    XCTAssertTrue(page.contains("table.failures{table-layout:fixed;width:100%"))
    XCTAssertTrue(page.contains(#"<colgroup><col style="width:36%">"#), "the URL column")
  }

  func testTheHostsSectionsShowWhereEachLimitSettledTheMostCutFirstAndTheLongestHeld() throws {
    var report = run(.completed, failed: 0, of: 30)
    report.prefetch?.hostLimits = [
      HostLimit(host: "cdn.example", final: 256, min: 4, median: 256, max: 256, cuts: [:]),
      HostLimit(
        host: "busy.example", final: 15, min: 4, median: 15, max: 17, cuts: ["refused": 1],
        heldUnder: 17),
      HostLimit(
        host: "small.example", final: 8, min: 4, median: 8, max: 16,
        cuts: ["queue": 2, "timeout": 1]),
    ]
    report.prefetch?.hostBackoffs = [
      HostBackoff(host: "a.example", pauses: 1, seconds: 1),
      HostBackoff(host: "b.example", pauses: 3, seconds: 12.5),
    ]
    let page = ReportPage.render([("r.json", report)])
    let text = try parse(page).text
    XCTAssertTrue(text.contains("Per-host concurrency (adaptive, 3 hosts)"), text)
    let order = ["small.example", "busy.example", "cdn.example"].map {
      try? XCTUnwrap(text.range(of: $0)).lowerBound
    }
    XCTAssertEqual(order, order.sorted { ($0 ?? text.endIndex) < ($1 ?? text.endIndex) })
    XCTAssertFalse(order.contains(nil), text)
    XCTAssertTrue(
      page.contains(
        "<tr><td><code>small.example</code></td><td class=\"n\">8</td><td class=\"n\">4</td>"
          + "<td class=\"n\">8</td><td class=\"n\">16</td><td>queue 2, timeout 1</td>"
          + "<td class=\"n\"></td></tr>"), page)
    XCTAssertTrue(
      page.contains("<td>refused 1</td><td class=\"n\">17</td></tr>"), "held under: \(page)")
    XCTAssertTrue(text.contains("Hosts held back for Retry-After (2)"), text)
    let held = try XCTUnwrap(page.range(of: "b.example")).lowerBound
    XCTAssertLessThan(held, try XCTUnwrap(page.range(of: "a.example")).lowerBound, "longest first")
    XCTAssertTrue(page.contains("<td class=\"n\">3</td><td class=\"n\">12.5 s</td>"), page)
    // A run with fixed limits and no refusal says nothing of hosts.
    let plain = ReportPage.render([("r.json", run(.completed, failed: 0, of: 30))])
    XCTAssertFalse(plain.contains("Per-host"), plain)
    XCTAssertFalse(plain.contains("held back"), plain)
  }

  func testAnInterruptedRunIsRedAndSaysHowManyURLsWereNotTried() throws {
    var interrupted = run(.interrupted, failed: 0, of: 2484)
    interrupted.urlsListed = 5000
    let page = ReportPage.render([("r.json", interrupted)])
    XCTAssertTrue(
      page.contains(#"<b class="interrupted">interrupted: 2,516 of 5,000 URLs not tried</b>"#),
      page)
    XCTAssertTrue(page.contains(".interrupted,.failed{color:#b3261e}"), "red, as failed is")
    XCTAssertFalse(page.contains(".interrupted,.incomplete,.warning{color:#9a6700}"), "not amber")
  }

  func testFailureRowsStayOneLineWithTheWholeTextOnHover() throws {
    let url =
      "https://cdn.example/" + String(repeating: "very-long-path-segment/", count: 8) + "a.jpg"
    let message = "the server answered 404 Not Found " + String(repeating: "and more ", count: 20)
    var failure = FailureReport(
      url: url, code: 2001, name: "invalidDownloadStatusCode", httpStatus: 404,
      message: message, attempts: 1, blacklisted: false)
    failure.source = "/srv/manifests/" + String(repeating: "nightly-", count: 10) + "urls.txt:12"
    let page = ReportPage.render([
      ("r.json", run(.completed, failed: 1, of: 1, failures: [failure]))
    ])
    XCTAssertTrue(page.contains("table.failures td{white-space:nowrap;overflow:hidden;"), page)
    for text in [url, message, failure.source!] {
      XCTAssertTrue(page.contains("<td title=\"\(ReportPage.escape(text))\">"), text)
    }
  }

  func testFailureRowsSortNumbersInURLsByValue() throws {
    let failures = [10, 2, 1, 100].map {
      FailureReport(
        url: "https://a.example/img-\($0).jpg", code: 1001, name: "badImageData", httpStatus: nil,
        message: "m", attempts: 1, blacklisted: false)
    }
    let page = ReportPage.render([("r.json", run(.completed, failed: 4, of: 4, failures: failures))]
    )
    let positions = try [1, 2, 10, 100].map {
      try XCTUnwrap(page.range(of: "<code>https://a.example/img-\($0).jpg</code>")).lowerBound
    }
    XCTAssertEqual(positions, positions.sorted(), "img-1, img-2, img-10, img-100")
  }

  /// A verify section of `bad` bad files among `files`, with one noted file.
  private func verified(bad: Int, of files: Int) -> VerifyReport {
    var counts = VerifyCounts()
    for index in 0..<files { counts.count(index < bad ? .bad : index == bad ? .note : .ok) }
    let start = Date(timeIntervalSince1970: 1_700_000_000)
    let listed = (0...bad).map { index in
      index < bad
        ? VerifiedFile(
          name: String(format: "%032x.jpg", index + 1), size: UInt64(1000 * (index + 1)),
          modifiedAt: start, outcome: .bad,
          reason: "jpeg: truncated: scan data runs to the end without an EOI marker "
            + String(repeating: "and more ", count: index))
        : VerifiedFile(
          name: "notes.txt", size: 5, modifiedAt: start, outcome: .note, notes: ["foreign"])
    }
    return VerifyReport(
      level: .full, repair: .quarantine, dryRun: true, counts: counts, files: listed)
  }

  func testTheVerifySectionCountsTheFilesByOutcomeAndListsTheBadOnesWholeOnHover() throws {
    var report = run(.completed, failed: 0, of: 0)
    report.prefetch = nil  // an audit or maintenance alone prefetches nothing
    report.verify = verified(bad: 3, of: 20)

    let page = ReportPage.render([("verify.json", report)])

    let text = try parse(page).text
    for shown in [
      "Verify", "levelfull", "repairquarantine (dry run)", "files20", "ok16", "with notes1",
      "bad3", "not read0", "Bad files (3)", "filesizereason",
    ] {
      XCTAssertTrue(text.replacingOccurrences(of: "\n", with: "").contains(shown), shown)
    }
    XCTAssertTrue(page.contains(#"<tr><th>bad</th><td class="n failed">3</td></tr>"#), page)
    XCTAssertTrue(
      page.contains(#"<b class="warning">completed, 3 bad files</b>"#), "amber, as failed URLs")
    for file in report.verify!.files {
      let row = #"<tr><td title=""# + file.name + #""><code>"# + file.name + "</code></td>"
      XCTAssertEqual(page.contains(row), file.outcome == .bad, "\(file.name): \(page)")
      if let reason = file.reason {
        XCTAssertTrue(page.contains("<td title=\"\(reason)\">\(reason)</td></tr>"), reason)
      }
    }
    XCTAssertTrue(page.contains(#"<td class="n">3.0 KB</td>"#), "the size, as bytes are shown")
    XCTAssertTrue(page.contains(#"<table class="failures">"#), "one line a row, as the failures")
    XCTAssertFalse(page.contains("Not read"), "no entry went unread")

    report.verify = verified(bad: 0, of: 5)
    let clean = ReportPage.render([("verify.json", report)])
    XCTAssertTrue(clean.contains(#"<tr><th>bad</th><td class="n">0</td></tr>"#), clean)
    XCTAssertTrue(clean.contains(#"<b class="completed">completed</b>"#), clean)
    XCTAssertFalse(clean.contains("Bad files"), clean)
    XCTAssertFalse(
      ReportPage.render([("r.json", run(.completed, failed: 0, of: 1))]).contains("<h3>Verify"))
  }

  func testTheMaintenanceTableCountsARepairsRefetchesAndTheFailedOnesInRed() throws {
    var report = run(.completed, failed: 0, of: 0)
    report.prefetch = nil  // an audit or maintenance alone prefetches nothing
    report.verify = verified(bad: 3, of: 20)
    let expire = MaintenancePassReport(pass: .expire, dryRun: false)
    var repair = MaintenancePassReport(pass: .repair, dryRun: false)
    repair.recordRefetch(path: "a.jpg", url: "https://images.example/a.jpg", bytes: 100)
    repair.recordRefetch(path: "b.jpg", url: "https://images.example/b.jpg", bytes: 100)
    repair.recordNotRefetched(path: "c.jpg", url: "https://images.example/c.jpg", reason: "404")
    repair.recordMove(from: "c.jpg", to: ".imagecache/quarantine/c.jpg", bytes: 100)
    report.maintenance = [expire, repair]

    let page = ReportPage.render([("verify.json", report)])

    XCTAssertTrue(
      page.contains(
        #"<th class="n">files moved</th><th class="n">refetched</th><th class="n">not refetched</th>"#
      ), page)
    XCTAssertTrue(
      page.contains(
        #"<td class="n">0</td><td class="n">0</td><td class="n"></td><td class="n"></td>"#),
      "blank for expire, which refetches nothing: \(page)")
    XCTAssertTrue(
      page.contains(
        #"<td class="n">0</td><td class="n">1</td><td class="n">2</td><td class="n failed">1</td>"#
      ), "the repair: 1 moved (the failed refetch), 2 refetched, 1 not: \(page)")

    report.maintenance = [expire]
    XCTAssertFalse(
      ReportPage.render([("r.json", report)]).contains("refetched"), "no repair, no columns")
  }

  /// The page as a browser lays it out, at a desktop's 1280 px and a phone's 390 px: headless
  /// Chromium takes a screenshot of each into the test's folder (for a person to look at; the
  /// test checks that both were made). Skipped without Chromium, except where CI requires it.
  func testThePageRendersInChromiumAtDesktopAndPhoneWidths() throws {
    guard
      let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first(where: {
        FileManager.default.isExecutableFile(atPath: $0)
      })
    else { try requireOrSkip("chromium is not installed: apt-get install chromium") }
    let failures = (1...12).map { index in
      var failure = FailureReport(
        url: "https://cdn-\(index % 3).example/images/products/2026/\(index)/"
          + "a-rather-long-file-name-for-product-\(index)-front-view.jpg?w=1200&h=900",
        code: 2001, name: "invalidDownloadStatusCode", httpStatus: 404,
        message: "the server answered 404 Not Found for this URL after a redirect",
        attempts: 3, blacklisted: index % 4 == 0)
      failure.source = "/srv/manifests/nightly-products.txt:\(index * 17)"
      return failure
    }
    var report = run(.interrupted, failed: 12, of: 2484, failures: failures)
    report.urlsListed = 5000
    report.prefetch?.hostLimits = (0..<3).map { index in
      HostLimit(
        host: "cdn-\(index).example", final: 8 << index, min: 4, median: 8 << index,
        max: 16 << index, cuts: index == 0 ? ["queue": 2, "refused": 1] : [:],
        heldUnder: index == 0 ? 17 : nil)
    }
    report.prefetch?.hostBackoffs = [HostBackoff(host: "cdn-0.example", pauses: 2, seconds: 4)]
    report.verify = verified(bad: 6, of: 2484)
    let page = temporary.appending("report.html")
    try ReportPage.render([("nightly.json", report)]).write(
      toFile: page, atomically: true, encoding: .utf8)
    for (name, width) in [("desktop", 1280), ("phone", 390)] {
      let screenshot = temporary.appending("\(name).png")
      let result = try Command.run(
        chromium,
        [
          "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
          "--user-data-dir=" + temporary.appending("chromium-\(name)"),
          "--screenshot=" + screenshot, "--window-size=\(width),2000", "file://" + page,
        ])
      XCTAssertEqual(result.status, 0, result.stderr)
      let size = try XCTUnwrap(FileSystem.attributes(atPath: screenshot), result.stderr).size
      XCTAssertGreaterThan(size, 10_000, "a screenshot of the page at \(width) px")
    }
  }
}
