import Core
import Foundation

/// `imagecache report html` (issue 11): a report as one self-contained page a person reads in
/// the morning. No script, no stylesheet or font fetched, charts as inline SVG; every string
/// that came from a manifest, a URL or a server is escaped.
public enum ReportPage {
  /// The most failure rows and blacklisted URLs listed; the JSON report has them all.
  public static let maxRows = 1000
  /// Bars in a chart: the largest groups.
  public static let maxBars = 15
  /// What the page may load and run: its own inline `<style>`, nothing else.
  public static let contentSecurityPolicy =
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

  /// One page for `reports` (each named by its file), one section each.
  public static func render(_ reports: [(name: String, report: RunReport)]) -> String {
    // The Content-Security-Policy comes first in the head, since it only governs what follows
    // it: no script, no fetch of any kind, only the inline style below (the charts are inline
    // SVG, which fetches nothing), so that markup that ever slipped past `escape` could still
    // run nothing, load nothing and send nothing.
    var html = """
      <!DOCTYPE html>
      <html lang="en"><head><meta charset="utf-8">
      <meta http-equiv="Content-Security-Policy" content="\(contentSecurityPolicy)">
      <meta name="viewport" content="width=device-width, initial-scale=1">
      <title>imagecache report</title>
      <style>
      body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
      h1,h2,h3{font-weight:600} table{border-collapse:collapse;margin:.5em 0}
      td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
      td.n,th.n{text-align:right} code{word-break:break-all}
      .completed{color:#17692b}.incomplete,.warning{color:#9a6700}
      .interrupted,.failed{color:#b3261e}
      .wide{overflow-x:auto;max-width:100%}
      svg{max-width:100%;height:auto}
      table.failures{table-layout:fixed;width:100%;min-width:60em}
      table.failures td{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
      table.failures tr.host th{background:#f3f3f3;font-weight:600}
      table.hosts td,table.hosts th{white-space:nowrap} table.hosts code{word-break:normal}
      @media (max-width:600px){body{margin:.5em}}
      </style></head><body>
      <h1>imagecache report</h1>

      """
    for (name, report) in reports { html += section(name: name, report) }
    return html + "</body></html>\n"
  }

  static func section(name: String, _ report: RunReport) -> String {
    var html = "<section>\n<h2>\(escape(report.job)) <small>(\(escape(name)))</small></h2>\n"
    html += "<table>\n"
    // Class names, like every unescaped word on the page, come from enums and numbers, never
    // from a report's strings.
    let status = status(of: report)
    html += row("status", "<b class=\"\(status.style)\">\(escape(status.text))</b>")
    html += row(
      "cache", "<code>\(escape(report.cache.path))</code> (\(escape(report.cache.namespace)))")
    html += row("started", escape(report.startedAt.formatted(.iso8601)))
    html += row("finished", escape(report.finishedAt.formatted(.iso8601)))
    if let runID = report.runID { html += row("run ID", "<code>\(escape(runID))</code>") }
    if let shard = report.shard {
      html += row(
        "shard",
        "\(shard.index) of \(shard.count)"
          + (report.manifestEntries.map { ", its \($0.ownShard) of \($0.total) manifest entries" }
            ?? ""))
    }
    if let error = report.error { html += row("error", escape(error)) }
    html += "</table>\n"
    if let shards = report.mergedFrom {
      html += "<h3>Shards (\(shards.count))</h3>\n<div class=\"wide\"><table>\n"
      html += "<tr><th>report</th><th>status</th>"
      html +=
        "<th>started</th><th>finished</th><th>URLs</th><th>downloaded</th><th>failed</th></tr>\n"
      for shard in shards.sorted(by: { precedes([$0.file], [$1.file]) }) {
        html += "<tr><td><code>\(escape(shard.file))</code></td>"
        html += "<td class=\"\(shard.status.rawValue)\">\(shard.status.rawValue)</td>"
        html += "<td>\(escape(shard.startedAt.formatted(.iso8601)))</td>"
        html += "<td>\(escape(shard.finishedAt.formatted(.iso8601)))</td>"
        html += "<td class=\"n\">\(shard.total)</td><td class=\"n\">\(shard.downloaded)</td>"
        html += "<td class=\"n\">\(shard.failed)</td></tr>\n"
      }
      html += "</table></div>\n"
    }
    if let prefetch = report.prefetch { html += self.prefetch(prefetch) }
    if !report.maintenance.isEmpty { html += maintenance(report.maintenance) }
    if let verify = report.verify { html += self.verify(verify) }
    if !report.warnings.isEmpty {
      html += "<h3>Warnings</h3>\n<ul>\n"
      for warning in report.warnings.prefix(maxRows) { html += "<li>\(escape(warning))</li>\n" }
      html += "</ul>\n"
    }
    return html + "</section>\n"
  }

  static func prefetch(_ prefetch: PrefetchReport) -> String {
    let counts = prefetch.counts
    var html = "<h3>Prefetch</h3>\n<table>\n"
    for (label, value) in [
      ("URLs", counts.total), ("downloaded", counts.downloaded),
      ("hits", counts.memoryHits + counts.diskHits), ("not modified", counts.notModified),
      ("failed", counts.failed), ("blacklisted (refused)", counts.blacklisted),
      ("skipped", counts.skipped), ("variants (derived keys)", counts.derived),
    ] {
      html += "<tr><th>\(label)</th><td class=\"n\">\(value)</td></tr>\n"
    }
    html += row("downloaded bytes", escape(formatBytes(counts.bytesDownloaded)))
    html += row("duration", String(format: "%.1f s", counts.durationSeconds))
    html += "</table>\n"
    html += hosts(prefetch)
    guard !prefetch.failures.isEmpty else { return html + blacklist(prefetch) }

    let byHost = Dictionary(grouping: prefetch.failures, by: host).mapValues(\.count)
    let byError = Dictionary(grouping: prefetch.failures, by: error).mapValues(\.count)
    html += "<h3>Failures by host</h3>\n" + chart(byHost)
    html += "<h3>Failures by error</h3>\n" + chart(byError)
    html += failureTable(prefetch.failures)
    html += moreInTheJSON(than: prefetch.failures.count)
    return html + blacklist(prefetch)
  }

  /// The run's status as a person should read it, coloured by severity: `completed` is green
  /// only when nothing failed; with failed URLs it says what share failed, in amber, since a
  /// job that lost 7% of its URLs every night needs looking at; `interrupted` and `failed` are
  /// red, a night's work not done, with the URLs not tried when the report lets them be
  /// counted.
  static func status(of report: RunReport) -> (text: String, style: String) {
    var text = report.status.rawValue
    let style = report.status.rawValue
    if let notTried = notTried(report) {
      text += ": \(grouped(notTried)) of \(grouped(notTried + (report.prefetch?.total ?? 0)))"
      text += " URLs not tried"
    }
    if report.status == .incomplete {
      text += ": a partial merge (shards missing, repeated or from other runs; see the warnings)"
    }
    let counts = report.prefetch?.counts ?? PrefetchCounts()
    if counts.failed > 0 {
      text += ", \(percentage(counts.failed, of: counts.total)) of URLs failed "
      text += "(\(counts.failed) of \(counts.total))"
    }
    if counts.inputsFailed > 0 {
      text += ", \(counts.inputsFailed) manifest\(counts.inputsFailed == 1 ? "" : "s") failed"
    }
    // Bad files, a blacklist that refused every URL and files a pass could not remove exit 1
    // as failed URLs do: a run that met them is not green either.
    let bad = report.verify?.counts.bad ?? 0
    if bad > 0 { text += ", \(bad) bad file\(bad == 1 ? "" : "s")" }
    let refusedEverything = BlacklistRefusal.refusedEverything(counts)
    if refusedEverything {
      text += ", nothing tried: the blacklist refused every URL (\(counts.blacklisted))"
    }
    // Manifests that listed nothing to try (an export that came out empty): nothing failed,
    // and nothing was done either. A shard may own none of a short list's URLs.
    let nothingListed =
      report.prefetch != nil && counts.listedNothing && report.shard == nil
      && report.mergedFrom == nil
    if nothingListed { text += ", nothing tried: the manifests listed no URL" }
    let notRemoved = report.maintenance.reduce(0) { $0 + ($1.dryRun ? 0 : $1.filesNotRemoved ?? 0) }
    if notRemoved > 0 { text += ", \(notRemoved) file\(notRemoved == 1 ? "" : "s") not removed" }
    if report.status == .completed
      && (counts.failed > 0 || counts.inputsFailed > 0 || bad > 0 || refusedEverything
        || notRemoved > 0 || nothingListed)
    {
      return (text, "warning")
    }
    return (text, style)
  }

  /// The URLs a run that did not finish never tried: those its manifests list (``RunReport/urlsListed``,
  /// counted when it stopped) less those it got to; `nil` when they could not be counted.
  static func notTried(_ report: RunReport) -> Int? {
    guard report.status == .interrupted || report.status == .failed,
      let listed = report.urlsListed
    else { return nil }
    let done = report.prefetch?.total ?? 0
    return listed > done ? listed - done : nil
  }

  /// `5,000`: a count as people read it, grouped by thousands whatever the locale.
  static func grouped(_ number: Int) -> String {
    let digits = String(number.magnitude)
    var text = ""
    for (index, digit) in digits.enumerated() {
      if index > 0 && (digits.count - index) % 3 == 0 { text += "," }
      text.append(digit)
    }
    return (number < 0 ? "-" : "") + text
  }

  /// Orders text as people do, numbers within it by value (`img-2` before `img-10`): the page
  /// has no script to sort a table, so its rows are written in this order.
  static func precedes(_ left: [String], _ right: [String]) -> Bool {
    for (a, b) in zip(left, right) {
      switch a.compare(b, options: [.numeric]) {
      case .orderedAscending: return true
      case .orderedDescending: return false
      case .orderedSame: continue
      }
    }
    return left.count < right.count
  }
  /// `part` of `whole` as a whole percentage, rounded down so that a run is never shown as
  /// 100% failed with a URL that succeeded; `under 1%` rather than 0% for a failure.
  static func percentage(_ part: Int, of whole: Int) -> String {
    guard whole > 0 else { return "100%" }
    let percent = part * 100 / whole
    return percent == 0 ? "under 1%" : "\(percent)%"
  }

  /// The failed URLs grouped by host (a heading row each, with its count), then by error
  /// within a host: the page allows no script to sort a table, so it comes sorted, numbers in
  /// names by value. Each row is one line: a long URL, source or message is cut short with an
  /// ellipsis and shows whole on hover (`title`), never wrapped into a tower of short lines;
  /// on a narrow screen the table scrolls sideways.
  static func failureTable(_ failures: [FailureReport]) -> String {
    let keyed = failures.map { (host: host($0), error: error($0), failure: $0) }
    let perHost = Dictionary(grouping: keyed, by: \.host).mapValues(\.count)
    let sorted = keyed.sorted {
      precedes([$0.host, $0.error, $0.failure.url], [$1.host, $1.error, $1.failure.url])
    }
    var html = "<h3>Failures (\(failures.count)), by host and error</h3>\n<div class=\"wide\">\n"
    // The URL takes the most room; the narrow columns just fit their headings at 1280 px.
    html += "<table class=\"failures\">\n<colgroup><col style=\"width:36%\">"
    html += "<col style=\"width:19%\"><col style=\"width:7%\"><col style=\"width:8%\">"
    html += "<col style=\"width:12%\"><col style=\"width:18%\"></colgroup>\n"
    html += "<tr><th>URL</th><th>error</th><th class=\"n\">attempts</th><th>blacklisted</th>"
    html += "<th>source</th><th>message</th></tr>\n"
    var currentHost: String?
    for entry in sorted.prefix(maxRows) {
      if entry.host != currentHost {
        currentHost = entry.host
        let count = perHost[entry.host] ?? 0
        html += "<tr class=\"host\"><th colspan=\"6\">\(escape(entry.host)): \(count) "
        html += "failure\(count == 1 ? "" : "s")</th></tr>\n"
      }
      let failure = entry.failure
      html += "<tr>\(cell(failure.url, code: true))\(cell(entry.error))"
      html += "<td class=\"n\">\(failure.attempts)</td><td>\(failure.blacklisted ? "yes" : "")</td>"
      html += "\(cell(failure.source ?? "", code: true))\(cell(failure.message))</tr>\n"
    }
    return html + "</table>\n</div>\n"
  }

  /// A one-line cell whose whole text is its `title`, shown on hover when the cell cuts it.
  static func cell(_ text: String, code: Bool = false) -> String {
    let content = code ? "<code>\(escape(text))</code>" : escape(text)
    return "<td title=\"\(escape(text))\">\(content)</td>"
  }

  /// The host a failure is grouped under.
  static func host(_ failure: FailureReport) -> String {
    URL(string: failure.url)?.host ?? "(no host)"
  }

  /// The error a failure is grouped under: its name, and its HTTP status when there is one.
  static func error(_ failure: FailureReport) -> String {
    failure.name + (failure.httpStatus.map { " \($0)" } ?? "")
  }

  /// `verify`'s audit: how it looked, the files by outcome, and the bad files, each one line
  /// as the failures are, whole on hover. What a repair did is the maintenance table's.
  static func verify(_ verify: VerifyReport) -> String {
    let counts = verify.counts
    var html = "<h3>Verify</h3>\n<table>\n"
    html += row("level", verify.level.rawValue)
    html += row("repair", verify.repair.rawValue + (verify.dryRun ? " (dry run)" : ""))
    for (label, value, style) in [
      ("files", counts.files, ""), ("ok", counts.ok, ""), ("with notes", counts.note, ""),
      ("bad", counts.bad, counts.bad > 0 ? "failed" : ""),
      ("not read", counts.errors, counts.errors > 0 ? "failed" : ""),
    ] {
      let styled = style.isEmpty ? "" : " \(style)"
      html += "<tr><th>\(label)</th><td class=\"n\(styled)\">\(value)</td></tr>\n"
    }
    html += "</table>\n"
    let bad = verify.files.filter { $0.outcome == .bad }
    if !bad.isEmpty {
      html += "<h3>Bad files (\(bad.count))</h3>\n<div class=\"wide\">\n"
      html += "<table class=\"failures\">\n<colgroup><col style=\"width:40%\">"
      html += "<col style=\"width:10%\"><col style=\"width:50%\"></colgroup>\n"
      html += "<tr><th>file</th><th class=\"n\">size</th><th>reason</th></tr>\n"
      for file in bad.prefix(maxRows) {
        html += "<tr>\(cell(file.name, code: true))"
        html += "<td class=\"n\">\(escape(formatBytes(file.size)))</td>"
        let url = file.url.map { "; from \($0.maskingURLPasswords)" } ?? ""
        html += "\(cell((file.reason ?? "") + url))</tr>\n"
      }
      html += "</table>\n</div>\n"
      html += moreInTheJSON(than: bad.count)
    }
    if !verify.errors.isEmpty {
      html += "<h3>Not read (\(verify.errors.count))</h3>\n<ul>\n"
      for error in verify.errors.prefix(maxRows) { html += "<li>\(escape(error))</li>\n" }
      html += "</ul>\n"
    }
    return html
  }

  /// The passes, each with the limits it ran with and the cache's size before and after it;
  /// with a `verify` repair among them, the files it refetched and those whose refetch failed
  /// (quarantined instead, so among the files moved too), blank for the other passes.
  static func maintenance(_ passes: [MaintenancePassReport]) -> String {
    let repairs = passes.contains { $0.pass == .repair }
    var html =
      "<h3>Maintenance</h3>\n<div class=\"wide\"><table>\n<tr><th>pass</th><th>dry run</th><th>limits</th>"
    html += "<th class=\"n\">cache before</th><th class=\"n\">cache after</th>"
    html += "<th class=\"n\">files removed</th><th class=\"n\">files moved</th>"
    if repairs { html += "<th class=\"n\">refetched</th><th class=\"n\">not refetched</th>" }
    html += "<th class=\"n\">bytes freed</th><th>errors</th></tr>\n"
    func size(_ bytes: UInt64?) -> String { bytes.map { escape(formatBytes($0)) } ?? "" }
    for pass in passes {
      html += "<tr><td>\(pass.pass.rawValue)</td><td>\(pass.dryRun ? "yes" : "no")</td>"
      html += "<td>\(escape(limits(of: pass)))</td>"
      html += "<td class=\"n\">\(size(pass.cacheBytesBefore))</td>"
      html += "<td class=\"n\">\(size(pass.cacheBytesAfter))</td>"
      html += "<td class=\"n\">\(pass.filesRemoved)</td><td class=\"n\">\(pass.filesMoved)</td>"
      if repairs {
        let refetched = pass.pass == .repair ? pass.filesRefetched ?? 0 : nil
        let notRefetched = pass.pass == .repair ? pass.filesNotRefetched ?? 0 : nil
        html += "<td class=\"n\">\(refetched.map(String.init) ?? "")</td>"
        let failed = (notRefetched ?? 0) > 0 ? " failed" : ""
        html += "<td class=\"n\(failed)\">\(notRefetched.map(String.init) ?? "")</td>"
      }
      html += "<td class=\"n\">\(escape(formatBytes(pass.bytesFreed)))</td>"
      html += "<td>\(pass.errors.prefix(20).map(escape).joined(separator: "<br>"))</td></tr>\n"
    }
    return html + "</table></div>\n"
  }

  /// What a pass's limits meant, in words: `files whose accessDate is more than 7d old`.
  static func limits(of pass: MaintenancePassReport) -> String {
    guard let limits = pass.limits else { return "" }
    switch pass.pass {
    case .migrate, .repair:
      return ""
    case .expire:
      return limits.maxDiskAge < 0
        ? "off"
        : "files whose \(limits.expireType.rawValue) is more than "
          + "\(formatDuration(limits.maxDiskAge)) old"
    case .trim:
      let size = limits.maxDiskSize
      return size == 0
        ? "off (no max size)"
        : "when over \(formatBytes(size)), oldest \(limits.expireType.rawValue) first to below "
          + formatBytes(size / 2)
    }
  }

  /// How the run treated its origins: where each adaptive per-host limit settled and why it
  /// was cut (the hosts cut most first, so that the morning's reader sees the origins that
  /// queued, refused or timed out before those that settled clean), and the hosts held back
  /// for a `Retry-After`, the longest held first.
  static func hosts(_ prefetch: PrefetchReport) -> String {
    var html = ""
    if !prefetch.hostLimits.isEmpty {
      func cuts(_ limit: HostLimit) -> Int { limit.cuts.values.reduce(0, &+) }
      let limits = prefetch.hostLimits.sorted {
        cuts($0) != cuts($1) ? cuts($0) > cuts($1) : precedes([$0.host], [$1.host])
      }
      html += "<h3>Per-host concurrency (adaptive, \(limits.count) hosts)</h3>\n"
      html +=
        "<div class=\"wide\"><table class=\"hosts\">\n<tr><th>host</th><th class=\"n\">settled at</th>"
      html += "<th class=\"n\">least</th><th class=\"n\">median</th><th class=\"n\">most</th>"
      html += "<th>cuts</th><th class=\"n\">held under</th></tr>\n"
      for limit in limits.prefix(maxRows) {
        let causes = limit.cuts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        html += "<tr><td><code>\(escape(limit.host))</code></td>"
        html += "<td class=\"n\">\(limit.final)</td><td class=\"n\">\(limit.min)</td>"
        html += "<td class=\"n\">\(limit.median)</td><td class=\"n\">\(limit.max)</td>"
        html += "<td>\(escape(causes.joined(separator: ", ")))</td>"
        html += "<td class=\"n\">\(limit.heldUnder.map(String.init) ?? "")</td></tr>\n"
      }
      html += "</table></div>\n"
      html += moreInTheJSON(than: limits.count)
    }
    if !prefetch.hostBackoffs.isEmpty {
      let held = prefetch.hostBackoffs.sorted {
        $0.seconds != $1.seconds ? $0.seconds > $1.seconds : precedes([$0.host], [$1.host])
      }
      html += "<h3>Hosts held back for Retry-After (\(held.count))</h3>\n"
      html +=
        "<div class=\"wide\"><table class=\"hosts\">\n<tr><th>host</th><th class=\"n\">waits asked</th>"
      html += "<th class=\"n\">held</th></tr>\n"
      for backoff in held.prefix(maxRows) {
        html += "<tr><td><code>\(escape(backoff.host))</code></td>"
        html += "<td class=\"n\">\(backoff.pauses)</td>"
        html += "<td class=\"n\">\(String(format: "%.1f s", backoff.seconds))</td></tr>\n"
      }
      html += "</table></div>\n"
      html += moreInTheJSON(than: held.count)
    }
    return html
  }

  /// What a list of `count` rows cut at ``maxRows`` leaves out, and where it is.
  static func moreInTheJSON(than count: Int) -> String {
    count > maxRows ? "<p>and \(count - maxRows) more, in the JSON report.</p>\n" : ""
  }

  static func blacklist(_ prefetch: PrefetchReport) -> String {
    guard !prefetch.blacklistedURLs.isEmpty else { return "" }
    var html = "<h3>Blacklisted URLs (\(prefetch.blacklistedURLs.count))</h3>\n<ul>\n"
    for url in prefetch.blacklistedURLs.prefix(maxRows) {
      html += "<li><code>\(escape(url))</code></li>\n"
    }
    return html + "</ul>\n"
  }

  /// Horizontal bars, largest first, as inline SVG.
  static func chart(_ groups: [String: Int]) -> String {
    let bars = groups.sorted {
      $0.value != $1.value ? $0.value > $1.value : precedes([$0.key], [$1.key])
    }
    .prefix(maxBars)
    let largest = max(1, bars.first?.value ?? 1)
    let height = 22
    var svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"\(bars.count * height + 4)\" "
      + "viewBox=\"0 0 720 \(bars.count * height + 4)\" "
      + "role=\"img\" font-family=\"sans-serif\" font-size=\"12\">\n"
    for (index, bar) in bars.enumerated() {
      let y = index * height + 2
      let width = max(1, 380 * bar.value / largest)
      let label = bar.key.count > 48 ? String(bar.key.prefix(47)) + "…" : bar.key
      svg += "<text x=\"0\" y=\"\(y + 15)\">\(escape(label))</text>"
      svg += "<rect x=\"300\" y=\"\(y + 3)\" width=\"\(width)\" height=\"16\" fill=\"#b3261e\"/>"
      svg += "<text x=\"\(306 + width)\" y=\"\(y + 15)\">\(bar.value)</text>\n"
    }
    return svg + "</svg>\n"
  }

  static func row(_ label: String, _ value: String) -> String {
    "<tr><th>\(label)</th><td>\(value)</td></tr>\n"
  }

  /// Text as HTML, for element content and quoted attribute values alike: `&`, `<`, `>`, `"`
  /// and `'` as entities, so that nothing from a URL or a server can open or close an element
  /// or an attribute; NUL as U+FFFD, which shows that something was there where a browser
  /// would drop it (and keeps the file text to `grep`).
  ///
  /// By UTF-8 byte, not by `Character`: a grapheme cluster can hold a `<` behind a prepend
  /// character (U+0600) or before a combining mark (U+0300) and then compares unequal to "<",
  /// while a browser, which reads code points, still sees a tag. The five are ASCII and no byte
  /// of a multi-byte sequence is, so each byte decides alone. That is all swift-mustache or
  /// Plot would do for this page; one function spares the tool a dependency whose start-up
  /// time and binary size would count.
  public static func escape(_ text: String) -> String {
    var escaped: [UInt8] = []
    escaped.reserveCapacity(text.utf8.count)
    // Reports this tool wrote mask URL passwords already; one from elsewhere may not.
    for byte in text.maskingURLPasswords.utf8 {
      switch byte {
      case UInt8(ascii: "&"): escaped += "&amp;".utf8
      case UInt8(ascii: "<"): escaped += "&lt;".utf8
      case UInt8(ascii: ">"): escaped += "&gt;".utf8
      case UInt8(ascii: "\""): escaped += "&quot;".utf8
      case UInt8(ascii: "'"): escaped += "&#39;".utf8
      case 0: escaped += "\u{FFFD}".utf8
      default: escaped.append(byte)
      }
    }
    return String(decoding: escaped, as: UTF8.self)
  }
}
