import ArgumentParser
import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import Runner

/// The defaults the help states, read from where they are stated once.
private let defaults = PrefetchConfiguration()

/// The settings of a job's `prefetch:` section, as flags of the same names (SPEC section 7),
/// declared once for the two commands that take them: `prefetch`, where a flag not given
/// leaves the default of ``PrefetchConfiguration``, and `run`, where it leaves the job file's
/// value and a flag given overrides the job's for this run only (the file is not changed).
struct PrefetchLimits: ParsableArguments {
  @Option(help: "Downloads at once in total (1 to 10000; default: \(defaults.concurrency)).")
  var concurrency: Int?

  @Option(
    name: .customLong("per-host-concurrency"),
    help: ArgumentHelp(
      "Connections at once to one host, by this worker, and so downloads over HTTP/1.1 "
        + "(1 to 10000; N shards open N times as many; default: \(defaults.perHostConcurrency))."))
  var perHostConcurrency: Int?

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
      "Connect and idle timeout of a download (1ms to 36500d; default: "
        + "\(Duration(seconds: defaults.timeout))).", valueName: "duration"))
  var timeout: Duration?

  @Option(
    help: ArgumentHelp(
      "The most one download may take in total (1ms to 36500d; default: "
        + "\(Duration(seconds: defaults.deadline))).", valueName: "duration"))
  var deadline: Duration?

  @Option(
    name: .customLong("max-response-size"),
    help: ArgumentHelp(
      "A larger response fails and is not kept (0 to 2^63-1 bytes; default: "
        + "\(defaults.maxResponseSize)).", valueName: "size"))
  var maxResponseSize: ByteCount?

  @Option(
    help: ArgumentHelp(
      "Further attempts after a transient failure (timeouts, connection errors, 429, 502-504; 0 "
        + "to 100; default: \(defaults.retries))."))
  var retries: Int?

  @Option(
    name: .customLong("validate"),
    help: ArgumentHelp(
      "How downloads are checked: none, structure or full (default: "
        + "\(defaults.validation.rawValue)).", valueName: "level"))
  var validation: ValidationLevel?

  @Option(
    name: .customLong("max-pixels"),
    help: ArgumentHelp(
      "A larger image (width x height) fails as badImageData, refused before decoding (1 to "
        + "10^12; default: \(defaults.maxPixels)).",
      valueName: "count"))
  var maxPixels: Int?

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
  var hostBackoff: Bool?

  func validate() throws {
    if let concurrency { try checkCount(concurrency, .concurrency) }
    if let perHostConcurrency { try checkCount(perHostConcurrency, .perHostConcurrency) }
    if let perHostStreams { try checkCount(perHostStreams, .perHostStreams) }
    if let fleetPerHostConcurrency {
      try checkCount(fleetPerHostConcurrency, .fleetPerHostConcurrency)
    }
    if let retries { try checkCount(retries, .retries) }
    if let maxPixels { try checkCount(maxPixels, .maxPixels) }
    try timeout?.check(.timeout)
    try deadline?.check(.deadline)
    try blacklistTTL?.check(.blacklistTTL)
    try maxRunTime?.check(.maxRunTime)
    try maxResponseSize?.check("--max-response-size")
    try rate?.check("--rate")
    try maxBandwidth?.check("--max-bandwidth")
    var connection = Connection()
    do {
      // The CA file is read when the run applies the flags: a missing file is no mistake in
      // the command line's syntax, and gets no usage line.
      try applyConnection(to: &connection, checkingFiles: false)
    } catch {
      throw ValidationError(error.description)
    }
  }

  /// Puts the settings given on the command line in `limits`, and leaves the others as they
  /// are: the defaults for `prefetch`, the job file's for `run`. Returns those it set, each as
  /// its job file field and its value (`prefetch.concurrency`, `1`), for the run to say.
  @discardableResult
  func apply(to limits: inout PrefetchConfiguration) throws(ConfigurationError)
    -> [CommandLineSetting]
  {
    var given: [CommandLineSetting] = []
    func set<Value>(
      _ value: Value?, _ setting: String, _ text: (Value) -> String = { "\($0)" },
      _ store: (Value) -> Void
    ) {
      guard let value else { return }
      store(value)
      given.append(("prefetch." + setting, text(value)))
    }
    set(concurrency, "concurrency") { limits.concurrency = $0 }
    set(perHostConcurrency, "perHostConcurrency") { limits.perHostConcurrency = $0 }
    set(perHostStreams, "perHostStreams") { limits.perHostStreams = $0 }
    set(fleetPerHostConcurrency, "fleetPerHostConcurrency") {
      limits.fleetPerHostConcurrency = $0
    }
    set(timeout, "timeout") { limits.timeout = $0.seconds }
    set(deadline, "deadline") { limits.deadline = $0.seconds }
    set(maxResponseSize, "maxResponseSize") { limits.maxResponseSize = $0.bytes }
    set(retries, "retries") { limits.retries = $0 }
    set(validation, "validate", \.rawValue) { limits.validation = $0 }
    set(maxPixels, "maxPixels") { limits.maxPixels = $0 }
    set(blacklistTTL, "blacklistTTL") { limits.blacklistTTL = $0.seconds }
    set(maxRunTime, "maxRunTime") { limits.maxRunTime = $0.seconds }
    set(rate, "rate", \.text) {
      limits.requestsPerSecondPerHost = $0.perSecond
    }
    set(maxBandwidth, "maxBandwidth", \.text) {
      limits.maxBytesPerSecond = $0.bytesPerSecond
    }
    set(hostBackoff, "hostBackoff") { limits.hostBackoff = $0 }
    // The connection's settings are set, and checked, by applyConnection.
    set(caBundle, "caBundle") { _ in }
    set(proxy, "proxy", \.maskingURLPasswords) { _ in }
    set(noProxy, "noProxy") { _ in }
    set(denyAddresses, "denyAddresses") { _ in }
    set(allowLinkLocal ? true : nil, "allowLinkLocal") { _ in }
    try applyConnection(to: &limits.connection, checkingFiles: true)
    return given
  }

  /// `--cacert`, `--proxy`, `--no-proxy`, `--deny-addresses` and `--allow-link-local`, each
  /// checked as a job file's are; the CA file's contents only when `checkingFiles`.
  private func applyConnection(to connection: inout Connection, checkingFiles: Bool)
    throws(ConfigurationError)
  {
    func refuse(_ flag: String, _ problem: String?) throws(ConfigurationError) {
      guard let problem else { return }
      throw ConfigurationError(source: "command line", field: flag, message: problem)
    }
    if let caBundle {
      if checkingFiles { try refuse("--cacert", Connection.caBundleProblem(caBundle)) }
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
}

extension RequestRate {
  /// As the run says it: `20/s`, `0.5/s`.
  fileprivate var text: String {
    perSecond == perSecond.rounded() ? "\(Int(perSecond))/s" : "\(perSecond)/s"
  }
}

extension Bandwidth {
  /// As the run says it: `5.0 MB/s`.
  fileprivate var text: String { "\(formatBytes(bytesPerSecond))/s" }
}
