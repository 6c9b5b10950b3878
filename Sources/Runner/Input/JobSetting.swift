import Core
import Foundation
import HTTP
import Maintenance
import Pipeline
import Prefetcher

/// The settings of a job file's `cache:` and `prefetch:` sections, which flags take too (SPEC
/// section 7), each declared once here: its field in a job file, its flag,
/// what values it takes, its default and its help. The job parser reads and checks a value as
/// its declaration says, the flags take their names, range checks and `--help` text from here,
/// and `SettingsTableTests` holds docs/jobs.md's tables and the man pages to it.
public enum JobSetting: String, Sendable, CaseIterable {
  case maxDiskAge = "cache.maxDiskAge"
  case maxDiskSize = "cache.maxDiskSize"
  case expireType = "cache.expireType"
  case maxDelete = "cache.maxDelete"
  case concurrency = "prefetch.concurrency"
  case perHostConcurrency = "prefetch.perHostConcurrency"
  case perHostStreams = "prefetch.perHostStreams"
  case maxPerHostConcurrency = "prefetch.maxPerHostConcurrency"
  case fleetPerHostConcurrency = "prefetch.fleetPerHostConcurrency"
  case timeout = "prefetch.timeout"
  case deadline = "prefetch.deadline"
  case maxResponseSize = "prefetch.maxResponseSize"
  case retries = "prefetch.retries"
  case validate = "prefetch.validate"
  case maxPixels = "prefetch.maxPixels"
  case blacklistTTL = "prefetch.blacklistTTL"
  case maxRunTime = "prefetch.maxRunTime"
  case rate = "prefetch.rate"
  case maxBandwidth = "prefetch.maxBandwidth"
  case hostBackoff = "prefetch.hostBackoff"
  case caBundle = "prefetch.caBundle"
  case proxy = "prefetch.proxy"
  case noProxy = "prefetch.noProxy"
  case denyAddresses = "prefetch.denyAddresses"
  case allowLinkLocal = "prefetch.allowLinkLocal"

  /// What values a setting takes.
  public enum Kind: Sendable, Equatable {
    /// A whole number in the range.
    case count(ClosedRange<Int>)
    case duration(DurationRange)
    /// Bytes: 0 to 2^63-1.
    case size
    /// Requests a second: 1/h to 10000/s.
    case rate
    /// Bytes a second, from 1KB/s.
    case bandwidth
    /// One of these words.
    case choice([String])
    /// On or off: `true` or `false` in a job file, a flag (and its `--no-` form) on the
    /// command line.
    case onOff
    /// Text: a file, a URL, a list of hosts or rules.
    case text
  }

  /// A setting's value when neither the job file nor the command line gives one.
  public enum Default: Sendable, Equatable {
    /// A value, as a job file would write it (`50`, `15s`, `structure`).
    case value(String)
    /// No value, in these words (`no limit`).
    case unset(String)
    /// Another setting's value.
    case setting(JobSetting)
    /// The first of these environment variables that is set.
    case environment([String])
    /// Said in docs/jobs.md in these words; the help's summary or discussion says it in its
    /// own, or it goes without saying (none).
    case described(String)
  }

  /// The whole declaration of one setting.
  public struct Declaration: Sendable {
    /// Its long flag (`--per-host-concurrency`); the first name when it has several.
    public var flag: String
    /// Its other long flags (`--limit-rate`, curl's name for `--max-bandwidth`).
    public var aliases: [String] = []
    public var kind: Kind
    public var defaultValue: Default
    /// The first sentence of its help, without its final full stop.
    public var summary: String
    /// What the help says in brackets before the range (`exit 1`).
    public var notes: [String] = []
    /// Whether the help names the job file's field.
    public var namesField = false
    /// Sentences after the summary.
    public var more: String?
    /// The help's discussion paragraph.
    public var discussion = ""
    /// The help's name for the value (`duration`).
    public var valueName: String?
  }

  /// Its field in a job file (`prefetch.concurrency`).
  public var field: String { rawValue }

  /// Its name within its section (`concurrency`).
  public var name: String { String(rawValue[rawValue.index(after: section.endIndex)...]) }

  /// The section of a job file that holds it (`prefetch`).
  public var section: Substring { rawValue.prefix { $0 != "." } }

  /// The settings of a job file's `cache:` section that a flag takes too, in the order the docs
  /// list them.
  public static var cache: [JobSetting] { allCases.filter { $0.section == "cache" } }

  /// The settings of a job file's `prefetch:` section, in the order the docs list them.
  public static var prefetch: [JobSetting] { allCases.filter { $0.section == "prefetch" } }

  public var flag: String { declaration.flag }
  public var kind: Kind { declaration.kind }

  /// What values it takes, as the help and docs/jobs.md say it (`1 to 10000`); `nil` for
  /// choices (the summary names them), switches and text.
  public var rangeText: String? {
    switch kind {
    case .count(let range):
      "\(Self.countText(range.lowerBound)) to \(Self.countText(range.upperBound))"
    case .duration(let range): "\(formatDuration(range.lower)) to \(formatDuration(range.upper))"
    case .size: "0 to 2^63-1 bytes"
    case .rate: "1/h to 10000/s"
    case .bandwidth: "from \(smallestBandwidth / 1000)KB/s"
    case .choice, .onOff, .text: nil
    }
  }

  /// `10^12` for a power of ten past a million, which is easier to read than its digits.
  private static func countText(_ value: Int) -> String {
    var power = 0
    var rest = value
    while rest >= 10, rest % 10 == 0 {
      rest /= 10
      power += 1
    }
    return rest == 1 && power > 6 ? "10^\(power)" : "\(value)"
  }

  /// The default as `--help` says it; `nil` when the summary does not.
  public var defaultHelpText: String? {
    switch declaration.defaultValue {
    case .value(let value) where kind == .onOff: value == "true" ? "on" : "off"
    case .value(let value), .unset(let value): value
    case .setting(let other): other.flag
    case .environment(let names): names.map { "$" + $0 }.joined(separator: ", ")
    case .described: nil
    }
  }

  /// The default as docs/jobs.md's settings table begins its default column.
  public var defaultDocsText: String {
    switch declaration.defaultValue {
    case .value(let value): "`\(value)`"
    case .unset(let words), .described(let words): words
    case .setting(let other): "`\(other.field)`"
    case .environment(let names): names.map { "`\($0)`" }.joined(separator: ", ")
    }
  }

  /// Its `--help` text: the summary, then in brackets the notes, the range, the field and the
  /// default, then any further sentences.
  public var help: String {
    let declaration = declaration
    let bracket =
      declaration.notes + [rangeText].compactMap { $0 }
      + (declaration.namesField ? ["job: \(field)"] : [])
      + [defaultHelpText.map { "default: \($0)" }].compactMap { $0 }
    let brackets = bracket.isEmpty ? "" : " (\(bracket.joined(separator: "; ")))"
    return declaration.summary + brackets + "." + (declaration.more.map { " " + $0 } ?? "")
  }

  /// The one declaration of each setting.
  public var declaration: Declaration {
    let defaults = PrefetchConfiguration()
    let count = Kind.count(DownloaderConfiguration.concurrencyRange)
    switch self {
    case .maxDiskAge:
      // A job's default is SD's; `maintain` expires nothing unless the flag is given.
      let sdDefault = formatDuration(CleanupConfiguration().maxDiskAge)
      return Declaration(
        flag: "--max-age", aliases: ["--max-disk-age"], kind: .duration(.age),
        defaultValue: .described("`\(sdDefault)`"),
        summary: "Expire files older than this: 30s, 15m, 12h, 7d",
        notes: ["negative: never", "0: everything"],
        more: "Without it nothing expires (SD's own default is \(sdDefault)).",
        valueName: "duration")
    case .maxDiskSize:
      return Declaration(
        flag: "--max-size", aliases: ["--max-disk-size"], kind: .size,
        defaultValue: .described("`\(CleanupConfiguration().maxDiskSize)` (no limit)"),
        summary: "Trim when the cache is above this size: 500MB, 2GiB", notes: ["0: no limit"],
        more: "Alone, it only trims: nothing expires by an age nobody gave.", valueName: "size")
    case .expireType:
      // The flag's default is shown by argument-parser, from the option's own default.
      return Declaration(
        flag: "--expire-type", kind: .choice(ExpireType.allCases.map(\.rawValue)),
        defaultValue: .described("`\(CleanupConfiguration().expireType.rawValue)`"),
        summary: "Which file date counts: " + Self.either(ExpireType.allCases.map(\.rawValue)),
        valueName: "type")
    case .maxDelete:
      return Declaration(
        flag: "--max-delete", kind: .text, defaultValue: .described("none"),
        summary:
          "Delete nothing if the passes would delete more than this: a number of files (500) or "
          + "a share of the files (10%)",
        valueName: "count|percent")
    case .concurrency:
      return Declaration(
        flag: "--concurrency", kind: count, defaultValue: .value("\(defaults.concurrency)"),
        summary: "Downloads at once in total")
    case .perHostConcurrency:
      return Declaration(
        flag: "--per-host-concurrency", kind: count,
        defaultValue: .value("auto"),
        summary:
          "Connections at once to one host, by this worker, and so downloads over HTTP/1.1",
        notes: ["N shards open N times as many"],
        more:
          "auto: each host's limit is found as the run goes, from 4 up while its answers start "
          + "as fast as they did, down when they queue or it answers 429 or 503 (up to "
          + "--max-per-host-concurrency); --verbose says where each host settled. A host that "
          + "answered 429 or 503 to a step past what it served is kept under that step by the "
          + "runs of the next 7 days (the state remembers it). A number is fixed: SD's own "
          + "downloader takes \(DownloaderConfiguration.sdPerHostConcurrency).",
        valueName: "n|auto")
    case .perHostStreams:
      return Declaration(
        flag: "--per-host-streams", kind: count, defaultValue: .setting(.concurrency),
        summary:
          "Downloads at once to one host that answers over HTTP/2, as streams on its connections",
        more:
          "auto: each such host's limit is found as the run goes, as --per-host-concurrency "
          + "auto finds it (up to --max-per-host-concurrency).",
        valueName: "n|auto")
    case .maxPerHostConcurrency:
      return Declaration(
        flag: "--max-per-host-concurrency", kind: count, defaultValue: .setting(.concurrency),
        summary:
          "The most downloads at once to one host that an adaptive limit (auto) may reach",
        valueName: "n")
    case .fleetPerHostConcurrency:
      return Declaration(
        flag: "--fleet-per-host-concurrency", kind: count, defaultValue: .described("none"),
        summary:
          "Downloads at once to one host by all N shards together: each shard takes M / N, "
          + "rounded down, at least 1",
        notes: ["in place of --per-host-concurrency"], valueName: "M")
    case .timeout:
      return Declaration(
        flag: "--timeout", kind: .duration(.positive),
        defaultValue: .value(formatDuration(defaults.timeout)),
        summary: "Connect and idle timeout of a download", valueName: "duration")
    case .deadline:
      return Declaration(
        flag: "--deadline", kind: .duration(.positive),
        defaultValue: .value(formatDuration(defaults.deadline)),
        summary: "The most one download may take in total", valueName: "duration")
    case .maxResponseSize:
      return Declaration(
        flag: "--max-response-size", kind: .size,
        defaultValue: .value("\(defaults.maxResponseSize / (1024 * 1024))MiB"),
        summary: "A larger response fails and is not kept",
        more: "Not blacklisted: a run with a higher limit asks again.", valueName: "size")
    case .retries:
      return Declaration(
        flag: "--retries", kind: .count(PrefetchConfiguration.retriesRange),
        defaultValue: .value("\(defaults.retries)"),
        summary: "Further attempts after a transient failure",
        notes: ["timeouts, connection errors, 429, 502-504"])
    case .validate:
      let levels = ValidationLevel.allCases.map(\.rawValue)
      return Declaration(
        flag: "--validate", kind: .choice(levels),
        defaultValue: .value(defaults.validation.rawValue),
        summary: "How downloads are checked: " + Self.either(levels), valueName: "level")
    case .maxPixels:
      return Declaration(
        flag: "--max-pixels", kind: .count(PipelineConfiguration.maxPixelsRange),
        defaultValue: .value("\(defaults.maxPixels)"),
        summary:
          "A larger image (width x height) fails as badImageData, refused before decoding",
        more: "Not blacklisted: a run with a higher limit asks again.", valueName: "count")
    case .blacklistTTL:
      return Declaration(
        flag: "--blacklist-ttl", kind: .duration(.positive), defaultValue: .unset("never"),
        summary: "Forget a blacklisted URL this long after its last failure",
        valueName: "duration")
    case .maxRunTime:
      return Declaration(
        flag: "--max-run-time", kind: .duration(.positive), defaultValue: .unset("no limit"),
        summary:
          "Stop the run this long after it starts, as a signal stops it, and mark its report "
          + "interrupted",
        notes: ["exit 1"], valueName: "duration")
    case .rate:
      return Declaration(
        flag: "--rate", kind: .rate, defaultValue: .unset("no limit"),
        summary: "Requests a second to one host, at most: 20/s, 300/m, 0.5/s",
        more: "Downloads of a host start at least 1/rate apart.", valueName: "rate")
    case .maxBandwidth:
      return Declaration(
        flag: "--max-bandwidth", aliases: ["--limit-rate"], kind: .bandwidth,
        defaultValue: .unset("no cap"),
        summary: "Bytes a second that all downloads together receive, at most: 10MB/s, 500KiB/s",
        more: "--limit-rate is curl's and wget's name for it.", valueName: "size/s")
    case .hostBackoff:
      return Declaration(
        flag: "--host-backoff", kind: .onOff, defaultValue: .value("\(defaults.hostBackoff)"),
        summary:
          "After a 429 or 503 with Retry-After, hold back every download of that host until "
          + "then (at most 60 s), not only that URL's next attempt")
    case .caBundle:
      return Declaration(
        flag: "--cacert", aliases: ["--ca-bundle"], kind: .text,
        defaultValue: .described(
          "`CURL_CA_BUNDLE`, else `SSL_CERT_FILE` and `SSL_CERT_DIR`, else the system's"),
        summary:
          "Verify servers against the CA certificates in this PEM file, as curl --cacert does: "
          + "for images and sitemaps on an internal certificate authority's certificates",
        namesField: true,
        discussion: """
          Without it, as for curl: $CURL_CA_BUNDLE, else $SSL_CERT_FILE and $SSL_CERT_DIR, else \
          the system's certificates. The file (or the variable's file or folder) is checked \
          before the run: missing, or with no PEM certificate, is exit 2. A certificate that \
          these CA certificates do not verify fails its URL without blacklisting it.
          """, valueName: "file")
    case .proxy:
      return Declaration(
        flag: "--proxy", kind: .text,
        defaultValue: .environment(["https_proxy", "http_proxy", "all_proxy"]),
        summary:
          "Send every request through this proxy, http://host:port or socks5h://host:port, as "
          + "curl --proxy does",
        namesField: true, valueName: "url")
    case .noProxy:
      return Declaration(
        flag: "--no-proxy", kind: .text, defaultValue: .environment(["NO_PROXY", "no_proxy"]),
        summary:
          "Hosts reached directly, not through the proxy: comma-separated names, domains or "
          + "addresses, * for all",
        namesField: true, valueName: "hosts")
    case .denyAddresses:
      return Declaration(
        flag: "--deny-addresses", kind: .text, defaultValue: .described("none"),
        summary:
          "Never connect to these addresses, checked after names resolve, for images, sitemaps, "
          + "manifests and every redirect: comma-separated private, loopback, link-local or "
          + "blocks such as 10.0.0.0/8",
        namesField: true, more: "Link-local is refused unless --allow-link-local.",
        discussion: """
          private is 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 and fc00::/7; \
          loopback is 127.0.0.0/8 and ::1; link-local is 169.254.0.0/16 and fe80::/10, where \
          cloud metadata services answer. A refused URL fails as addressDenied, neither retried \
          nor blacklisted. Through a proxy, the address checked is the proxy's.
          """, valueName: "rules")
    case .allowLinkLocal:
      return Declaration(
        flag: "--allow-link-local", kind: .onOff, defaultValue: .described("`false`"),
        summary:
          "Connect to link-local addresses (169.254.0.0/16, fe80::/10), which are refused by "
          + "default",
        namesField: true)
    }
  }

  /// `a, b or c`.
  private static func either(_ words: [String]) -> String {
    words.dropLast().joined(separator: ", ") + " or " + (words.last ?? "")
  }
}
