import ArgumentParser
import Core
import Foundation
import Prefetcher
import Runner

/// The prefetch settings of a job, as flags (SPEC section 7: each job setting has a flag of the
/// same name). Defaults are read from ``PrefetchConfiguration``, where they are stated once.
struct PrefetchSettings: ParsableArguments {
  @Option(
    name: .customLong("option"),
    help: ArgumentHelp(
      "An SD option for every URL, e.g. retryFailed, refreshCached (repeatable).", valueName: "name"
    ))
  var options: [String] = []

  @Option(
    name: .customLong("header"),
    help: ArgumentHelp("A request header, \"Name: value\" (repeatable).", valueName: "header"))
  var headers: [String] = []

  @Option(
    name: .customLong("trusted-origin"),
    help: ArgumentHelp(
      "An origin, http(s)://host[:port], that a redirect may take the request's headers to "
        + "(repeatable): curl's --location-trusted, for that origin only. Other origins get none.",
      valueName: "origin"))
  var trustedOrigins: [String] = []

  @Option(
    name: .customLong("cache-key-filter"),
    help: ArgumentHelp(
      "url (default), stripQuery, or strip:NAME,NAME to drop those query parameters.",
      valueName: "filter"))
  var cacheKeyFilter: String?

  @Option(
    name: .customLong("store-cache-type"),
    help: ArgumentHelp("Where to store: none, disk, memory or all (default).", valueName: "type"))
  var storeCacheType: String?

  @Option(
    name: .customLong("query-cache-type"),
    help: ArgumentHelp(
      "Where to look before downloading: none, disk, memory or all (default).", valueName: "type"))
  var queryCacheType: String?

  @Option(help: "Downloads at once in total (1 to 10000).")
  var concurrency = PrefetchConfiguration().concurrency

  @Option(
    name: .customLong("per-host-concurrency"),
    help: ArgumentHelp(
      "Connections at once to one host, by this worker, and so downloads over HTTP/1.1 "
        + "(1 to 10000; N shards open N times as many)."))
  var perHostConcurrency = PrefetchConfiguration().perHostConcurrency

  @Option(
    name: .customLong("per-host-streams"),
    help: ArgumentHelp(
      "Downloads at once to one host that answers over HTTP/2, as streams on its connections "
        + "(1 to 10000; default: --concurrency).",
      valueName: "n"))
  var perHostStreams: Int?

  @Option(
    name: .customLong("fleet-per-host-concurrency"),
    help: ArgumentHelp(
      "Downloads at once to one host by all N shards together: each shard takes M / N, "
        + "rounded down, at least 1 (in place of --per-host-concurrency; 1 to 10000).",
      valueName: "M"))
  var fleetPerHostConcurrency: Int?

  @Option(
    help: ArgumentHelp(
      "Connect and idle timeout of a download (1ms to 36500d).", valueName: "duration"))
  var timeout = Duration(seconds: PrefetchConfiguration().timeout)

  @Option(
    help: ArgumentHelp(
      "The most one download may take in total (1ms to 36500d).", valueName: "duration"))
  var deadline = Duration(seconds: PrefetchConfiguration().deadline)

  @Option(
    name: .customLong("max-response-size"),
    help: ArgumentHelp(
      "A larger response fails and is not kept (0 to 2^63-1 bytes).", valueName: "size"))
  var maxResponseSize = ByteCount(bytes: PrefetchConfiguration().maxResponseSize)

  @Option(
    help: ArgumentHelp(
      "Further attempts after a transient failure (timeouts, connection errors, 429, 502-504; 0 "
        + "to 100)."))
  var retries = PrefetchConfiguration().retries

  @Option(
    name: .customLong("validate"),
    help: ArgumentHelp("How downloads are checked: none, structure or full.", valueName: "level"))
  var validation = PrefetchConfiguration().validation

  @Option(
    name: .customLong("max-pixels"),
    help: ArgumentHelp(
      "A larger image (width x height) fails as badImageData, refused before decoding (1 to "
        + "10^12).",
      valueName: "count"))
  var maxPixels = PrefetchConfiguration().maxPixels

  @Option(
    name: .customLong("blacklist-ttl"),
    help: ArgumentHelp(
      "Forget a blacklisted URL this long after its last failure (1ms to 36500d; default: "
        + "never).",
      valueName: "duration"))
  var blacklistTTL: Duration?

  @Option(
    name: .customLong("max-run-time"),
    help: ArgumentHelp(
      "Stop the run this long after it starts, as a signal stops it, and mark its report "
        + "interrupted (exit 1; 1ms to 36500d; default: no limit).",
      valueName: "duration"))
  var maxRunTime: Duration?

  @Option(
    name: [.customLong("cacert"), .customLong("ca-bundle")],
    help: ArgumentHelp(
      "Verify servers against the CA certificates in this PEM file, as curl --cacert does: "
        + "for images and sitemaps on an internal certificate authority's certificates (job: "
        + "prefetch.caBundle).",
      discussion: """
        Without it, as for curl: $CURL_CA_BUNDLE, else $SSL_CERT_FILE and $SSL_CERT_DIR, else \
        the system's certificates. The file (or the variable's file or folder) is checked \
        before the run: missing, or with no PEM certificate, is exit 2. A certificate that \
        these CA certificates do not verify fails its URL without blacklisting it.
        """, valueName: "file"),
    completion: .file())
  var caBundle: String?

  @Option(
    help: ArgumentHelp(
      "Send every request through this proxy, http://host:port or socks5h://host:port, as "
        + "curl --proxy does (job: prefetch.proxy; default: $https_proxy, $http_proxy, "
        + "$all_proxy).",
      valueName: "url"))
  var proxy: String?

  @Option(
    name: .customLong("no-proxy"),
    help: ArgumentHelp(
      "Hosts reached directly, not through the proxy: comma-separated names, domains or "
        + "addresses, * for all (job: prefetch.noProxy; default: $NO_PROXY, $no_proxy).",
      valueName: "hosts"))
  var noProxy: String?

  @Option(
    name: .customLong("deny-addresses"),
    help: ArgumentHelp(
      "Never connect to these addresses, checked after names resolve, for images, sitemaps, "
        + "manifests and every redirect: comma-separated private, loopback, link-local or "
        + "blocks such as 10.0.0.0/8 (job: prefetch.denyAddresses). Link-local is refused "
        + "unless --allow-link-local.",
      discussion: """
        private is 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 and fc00::/7; \
        loopback is 127.0.0.0/8 and ::1; link-local is 169.254.0.0/16 and fe80::/10, where \
        cloud metadata services answer. A refused URL fails as addressDenied, neither retried \
        nor blacklisted. Through a proxy, the address checked is the proxy's.
        """, valueName: "rules"))
  var denyAddresses: String?

  @Flag(
    name: .customLong("allow-link-local"),
    help: ArgumentHelp(
      "Connect to link-local addresses (169.254.0.0/16, fe80::/10), which are refused by "
        + "default (job: prefetch.allowLinkLocal)."))
  var allowLinkLocal = false

  @Option(
    help: ArgumentHelp(
      "Requests a second to one host, at most: 20/s, 300/m, 0.5/s (1/h to 10000/s; default: "
        + "no limit). Downloads of a host start at least 1/rate apart.",
      valueName: "rate"))
  var rate: RequestRate?

  @Option(
    name: [.customLong("max-bandwidth"), .customLong("limit-rate")],
    help: ArgumentHelp(
      "Bytes a second that all downloads together receive, at most: 10MB/s, 500KiB/s (from "
        + "1KB/s; default: no cap). --limit-rate is curl's and wget's name for it.",
      valueName: "size/s"))
  var maxBandwidth: Bandwidth?

  @Flag(
    name: .customLong("host-backoff"),
    inversion: .prefixedNo,
    help: ArgumentHelp(
      "After a 429 or 503 with Retry-After, hold back every download of that host until then "
        + "(at most 60 s), not only that URL's next attempt (default: on)."))
  var hostBackoff = PrefetchConfiguration().hostBackoff

  @Flag(
    name: .customLong("sitemap-pages"),
    help: "In sitemaps, also prefetch each page's own <loc> when it names an image.")
  var sitemapPages = false

  @Option(
    name: .customLong("sitemap-order"),
    help: ArgumentHelp(
      "document (default), or lastmod: each sitemap's newest <lastmod> first.", valueName: "order"))
  var sitemapOrder = SitemapOrder.document

  func validate() throws {
    try checkCount(concurrency, .concurrency)
    try checkCount(perHostConcurrency, .perHostConcurrency)
    try checkCount(retries, .retries)
    try checkCount(maxPixels, .maxPixels)
    try timeout.check(.timeout)
    try deadline.check(.deadline)
    try blacklistTTL?.check(.blacklistTTL)
    try maxRunTime?.check(.maxRunTime)
    try maxResponseSize.check("--max-response-size")
    try rate?.check("--rate")
    try maxBandwidth?.check("--max-bandwidth")
    if let perHostStreams { try checkCount(perHostStreams, .perHostStreams) }
    if let fleetPerHostConcurrency {
      try checkCount(fleetPerHostConcurrency, .fleetPerHostConcurrency)
    }
    var job = Job(name: "prefetch", location: CacheLocation(directory: "."))
    do {
      try apply(to: &job)
    } catch {
      throw ValidationError(error.description)
    }
  }

  /// Sets the job's options, context and prefetch configuration from these flags. The context
  /// flags go through the same parser as a job file's `context:` and a manifest line's.
  func apply(to job: inout Job) throws(ConfigurationError) {
    let (options, warnings) = try ImageOptions.parse(
      self.options, source: "command line", field: "--option")
    job.options = options
    job.warnings += warnings
    job.context = try ImageContext().applying(try contextObject(), source: "command line")
    job.prefetch.concurrency = concurrency
    job.prefetch.perHostConcurrency = perHostConcurrency
    job.prefetch.perHostStreams = perHostStreams
    job.prefetch.fleetPerHostConcurrency = fleetPerHostConcurrency
    job.prefetch.timeout = timeout.seconds
    job.prefetch.deadline = deadline.seconds
    job.prefetch.maxResponseSize = maxResponseSize.bytes
    job.prefetch.retries = retries
    job.prefetch.validation = validation
    job.prefetch.maxPixels = maxPixels
    job.prefetch.blacklistTTL = blacklistTTL?.seconds
    job.prefetch.maxRunTime = maxRunTime?.seconds
    try applyConnection(to: &job.prefetch.connection)
    job.prefetch.requestsPerSecondPerHost = rate?.perSecond
    job.prefetch.maxBytesPerSecond = maxBandwidth?.bytesPerSecond
    job.prefetch.hostBackoff = hostBackoff
    job.sitemap = SitemapSettings(pages: sitemapPages, order: sitemapOrder)
  }

  /// `--cacert`, `--proxy`, `--no-proxy`, `--deny-addresses` and `--allow-link-local`, each
  /// checked as a job file's are.
  private func applyConnection(to connection: inout Connection) throws(ConfigurationError) {
    func refuse(_ flag: String, _ problem: String?) throws(ConfigurationError) {
      guard let problem else { return }
      throw ConfigurationError(source: "command line", field: flag, message: problem)
    }
    if let caBundle {
      try refuse("--cacert", Connection.caBundleProblem(caBundle))
      connection.caBundle = caBundle
    }
    if let proxy {
      try refuse("--proxy", Connection.proxyProblem(proxy))
      connection.proxy = proxy
    }
    if let noProxy {
      try refuse("--no-proxy", Connection.noProxyProblem(noProxy))
      connection.noProxy = noProxy
    }
    if let denyAddresses {
      switch AddressRules.parse(denyAddresses.split(separator: ",").map(String.init)) {
      case .success(let ranges): connection.addressRules.denied = ranges
      case .failure(let error): try refuse("--deny-addresses", error.description)
      }
    }
    if allowLinkLocal { connection.addressRules.allowLinkLocal = true }
  }

  /// `--cache-key-filter`'s text (`url`, `stripQuery`, `strip:a,b`) as the `cacheKeyFilter`
  /// value a job file's context holds, for the context parser shared with job files.
  static func cacheKeyFilterJSON(_ text: String) -> JSONValue {
    guard text.hasPrefix("strip:") else { return .string(text) }
    return .object([
      "stripQueryParameters": .array(
        text.dropFirst(6).split(separator: ",").map { .string(String($0)) })
    ])
  }

  /// The context flags as the JSON object a job file's `context:` would hold.
  private func ordinal(_ number: Int) -> String {
    switch number {
    case 1: "first"
    case 2: "second"
    case 3: "third"
    default: "\(number)th"
    }
  }

  private func contextObject() throws(ConfigurationError) -> [String: JSONValue] {
    var object: [String: JSONValue] = [:]
    if let storeCacheType { object["storeCacheType"] = .string(storeCacheType) }
    if let queryCacheType { object["queryCacheType"] = .string(queryCacheType) }
    if !headers.isEmpty {
      var fields: [String: JSONValue] = [:]
      for (index, header) in headers.enumerated() {
        let parts = header.split(separator: ":", maxSplits: 1)
        guard parts.count == 2 else {
          // Not echoed: a header without its colon is still a secret (`Authorization Bearer x`).
          throw ConfigurationError(
            source: "command line", field: "--header",
            message:
              "the \(ordinal(index + 1)) --header is not \"Name: value\" (its text is not shown: "
              + "it may hold a secret)")
        }
        fields[parts[0].trimmingCharacters(in: .whitespaces)] = .string(
          parts[1].trimmingCharacters(in: .whitespaces))
      }
      object["headers"] = .object(fields)
    }
    if let cacheKeyFilter { object["cacheKeyFilter"] = Self.cacheKeyFilterJSON(cacheKeyFilter) }
    if !trustedOrigins.isEmpty {
      object["trustedOrigins"] = .array(trustedOrigins.map(JSONValue.string))
    }
    return object
  }
}
