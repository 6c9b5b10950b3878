import Core
import Foundation

/// How prefetching runs (SPEC sections 2 and 5): the one configuration value that the
/// downloader, the manager and the prefetcher read, each default stated here once. Job files
/// (`prefetch:`) and the command-line flags of the same names both set it.
public struct PrefetchConfiguration: Sendable, Equatable {
  /// Downloads at once in total: curl's `--parallel` default, chosen by measurement (see
  /// docs/benchmarks.md, "Prefetch under latency").
  public var concurrency = 50
  /// Connections at once to one host (SD's downloader default), and so downloads at once to a
  /// host that answers over HTTP/1.1, where each download needs a connection of its own.
  public var perHostConcurrency = 6
  /// Downloads at once to one host that multiplexes them over HTTP/2 (streams on its
  /// connections, which stay within `perHostConcurrency` and the server's
  /// `SETTINGS_MAX_CONCURRENT_STREAMS`). `nil`: up to `concurrency`. A host counts as HTTP/2
  /// from its first answer over it; until its first answer it gets the lower of this and
  /// `perHostConcurrency`.
  public var perHostStreams: Int?
  /// Further attempts after a transient failure (timeouts, connection errors, 429, 502-504).
  public var retries = 2
  /// The first retry waits about this long; each further one twice as long (with jitter).
  public var retryBaseDelay: TimeInterval = 0.5
  /// No wait between attempts, `Retry-After` included, is longer than this.
  public var maxRetryDelay: TimeInterval = 60
  /// Connect timeout and idle timeout between bytes (SD's `downloadTimeout`).
  public var timeout: TimeInterval = 15
  /// The most one download may take from request to last byte.
  public var deadline: TimeInterval = 60
  /// A larger body fails with `responseTooLarge` and nothing is kept.
  public var maxResponseSize: UInt64 = 50 * 1024 * 1024
  public var maxRedirects = 10
  /// How a body is checked before it is stored.
  public var validation: ValidationLevel = .structure
  /// An image with more pixels is `badImageData`, refused before any pixel is decoded: no
  /// header may make validation allocate gigabytes.
  public var maxPixels = 100_000_000
  /// A blacklisted URL counts as blacklisted for this long after its last failure; `nil`:
  /// forever.
  public var blacklistTTL: TimeInterval?
  /// The longest a whole run may take, from when it holds the cache's lock: then it stops as a
  /// signal stops it (the work in hand finished or discarded, nothing new started) and its
  /// report is marked interrupted, so that a night's run fits its window; `nil`: no limit.
  public var maxRunTime: TimeInterval?
  public var userAgent = "imagecache/\(ImageCacheVersion.current)"
  /// Take only this shard's URLs (SPEC section 9); `nil`: every URL.
  public var shard: Shard?
  /// Downloads at once to one host by a whole fleet of N shards: each shard takes
  /// ``perHostShare(ofFleet:shards:)`` of it in place of `perHostConcurrency` (which is per
  /// worker: N workers open N times as many). `nil`: each takes `perHostConcurrency`.
  public var fleetPerHostConcurrency: Int?
  /// Which servers are trusted and how they are reached: the same for image downloads and
  /// for sitemap and manifest fetches.
  public var connection = Connection()

  /// Requests a second that one host is sent at most, by this worker: downloads of a host
  /// start at least `1 / rate` seconds apart (redirect hops are not delayed). `nil`: no limit.
  public var requestsPerSecondPerHost: Double?
  /// Bytes a second that the run's downloads receive in all, at most: bodies as they arrive
  /// (after decompression), held to the cap within one read (up to 100 KiB) at any moment and
  /// on average over a second or more. `nil`: no cap. A cap too low for `deadline` fails
  /// downloads as timed out.
  public var maxBytesPerSecond: UInt64?
  /// When a download gets 429 or 503 with `Retry-After`, every download of that host waits
  /// until then (at most `maxRetryDelay`), not only that URL's next attempt.
  public var hostBackoff = true

  /// One of `shards` workers' part of a fleet-wide per-host limit: `fleet / shards` rounded
  /// down, so that the fleet stays within `fleet`, but at least 1, so that every shard makes
  /// progress (then, with more shards than `fleet`, the fleet opens one per shard).
  public static func perHostShare(ofFleet fleet: Int, shards: Int) -> Int {
    max(1, fleet / max(1, shards))
  }

  public init() {}

  /// The most downloads at once to one host that multiplexes: `perHostStreams`, or
  /// `concurrency` when unset.
  public var streamsPerHost: Int { perHostStreams ?? concurrency }

  /// The most downloads at once to one host, whatever it speaks.
  var mostPerHost: Int { max(perHostConcurrency, streamsPerHost) }

  /// What `concurrency`, `perHostConcurrency` and `perHostStreams` may be set to: past it, file descriptors and
  /// memory run out long before downloads go faster (SPEC section 7: numbers are
  /// range-checked).
  public static let concurrencyRange = 1...10_000
  /// What `retries` may be set to.
  public static let retriesRange = 0...100
  /// What `maxPixels` may be set to: a terapixel.
  public static let maxPixelsRange = 1...1_000_000_000_000
}

/// How requests reach servers and which certificate authorities vouch for them, as curl's
/// flags of the same purpose (`--cacert`, `--capath`, `--proxy`, `--noproxy`). Left unset, a
/// setting is libcurl's own: the system's CA certificates, and the proxy of `http_proxy`,
/// `https_proxy`, `all_proxy` and `NO_PROXY`, which libcurl reads from the environment itself.
public struct Connection: Sendable, Equatable {
  /// A file of CA certificates (PEM) that server certificates are verified against, for an
  /// origin signed by an internal certificate authority (job: `prefetch.caBundle`).
  public var caBundle: String?
  /// A folder of CA certificates under their hashed names (`openssl rehash`), from
  /// `SSL_CERT_DIR`.
  public var caDirectory: String?
  /// The proxy of every request (`http://host:port`, `socks5h://host:port`...; job:
  /// `prefetch.proxy`), in place of the environment's.
  public var proxy: String?
  /// Hosts reached without a proxy, comma-separated (`*`: all; job: `prefetch.noProxy`), in
  /// place of `NO_PROXY`.
  public var noProxy: String?
  /// The addresses no connection may be opened to, checked after the name is resolved
  /// (link-local unless allowed): through a proxy, the proxy's own address.
  public var addressRules = AddressRules()

  public init() {}

  /// The proxy schemes libcurl speaks; a proxy without a scheme is HTTP.
  public static let proxySchemes = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]

  /// What is wrong with `path` as a CA bundle, if anything: it must be a readable file of PEM
  /// certificates, checked before the run, not found wanting by the first download (which
  /// would fail every https URL as `serverCertificateUntrusted`).
  public static func caBundleProblem(_ path: String) -> String? {
    var isFolder: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
      return FileSystem.reason("\(path): no such file", forUserPath: path)
    }
    guard !isFolder.boolValue, let handle = FileHandle(forReadingAtPath: path) else {
      return "\(path): not a readable file"
    }
    defer { try? handle.close() }
    // A PEM bundle is text: its certificates' markers are found in what is read, whatever
    // else the file holds (comments, explanatory text), as OpenSSL finds them.
    let text = String(
      decoding: (try? handle.read(upToCount: maxCABundleBytes)) ?? Data(), as: UTF8.self)
    guard pemCertificateMarkers.contains(where: text.contains) else {
      return "\(path): not a PEM bundle of CA certificates (no '-----BEGIN CERTIFICATE-----' "
        + "line; a DER certificate converts with 'openssl x509 -inform der -in FILE -out "
        + "FILE.pem')"
    }
    return nil
  }

  /// The lines that begin a certificate in a PEM file, as OpenSSL reads them.
  static let pemCertificateMarkers = [
    "-----BEGIN CERTIFICATE-----", "-----BEGIN TRUSTED CERTIFICATE-----",
    "-----BEGIN X509 CERTIFICATE-----",
  ]

  /// How much of a CA bundle is read for its certificates: the system's whole bundle is
  /// about 200 KB.
  static let maxCABundleBytes = 64 << 20

  /// What is wrong with `paths` (`SSL_CERT_DIR`: folders separated by `:`) as folders of CA
  /// certificates, if anything: each must be a folder that can be read.
  public static func caDirectoryProblem(_ paths: String) -> String? {
    for path in paths.split(separator: ":").map(String.init) {
      var isFolder: ObjCBool = false
      guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
        return "\(path): no such folder"
      }
      guard isFolder.boolValue, FileManager.default.isReadableFile(atPath: path) else {
        return "\(path): not a readable folder"
      }
    }
    return nil
  }

  /// What is wrong with `proxy` as a proxy URL, if anything. The text is not quoted back: a
  /// proxy URL may hold a password.
  public static func proxyProblem(_ proxy: String) -> String? {
    guard !proxy.isEmpty, !proxy.containsControlCharacter(), !proxy.contains(where: \.isWhitespace)
    else {
      return "expected a proxy URL such as http://proxy.example:3128, without spaces or "
        + "control characters"
    }
    if let separator = proxy.range(of: "://") {
      let scheme = proxy[..<separator.lowerBound].lowercased()
      guard proxySchemes.contains(scheme) else {
        return "the proxy's scheme must be one of \(proxySchemes.joined(separator: ", "))"
      }
    }
    return nil
  }

  /// The proxy libcurl goes through for a URL of `scheme` (`http`, `https`) unless the
  /// no-proxy list exempts its host, and where it was set: ``proxy``, else the environment
  /// variables libcurl 7.88 reads (`http_proxy`, `https_proxy` or `HTTPS_PROXY`, then
  /// `all_proxy` or `ALL_PROXY`; an empty one is unset). The no-proxy list is left to libcurl:
  /// ``ProxyInUse/refusedConnection(_:)`` tells from libcurl's words whether it was the proxy
  /// that could not be reached.
  public func proxy(forScheme scheme: String, environment: [String: String]) -> ProxyInUse? {
    if let proxy { return ProxyInUse(proxy, setBy: "--proxy or prefetch.proxy") }
    var names = ["\(scheme.lowercased())_proxy"]
    if scheme.lowercased() != "http" { names.append(names[0].uppercased()) }
    for name in names + ["all_proxy", "ALL_PROXY"] {
      if let value = environment[name], !value.isEmpty {
        return ProxyInUse(value, setBy: "environment variable \(name)")
      }
    }
    return nil
  }

  /// What is wrong with `hosts` as a list of hosts reached without the proxy, if anything.
  public static func noProxyProblem(_ hosts: String) -> String? {
    guard !hosts.containsControlCharacter() else {
      return "expected host names, comma-separated, without control characters"
    }
    return nil
  }

  /// Whether the run verifies servers against CA certificates the operator named (`--cacert`,
  /// `prefetch.caBundle`, `CURL_CA_BUNDLE`, `SSL_CERT_FILE`, `SSL_CERT_DIR`) rather than the
  /// system's: then a certificate that does not verify may be the configuration's fault, and
  /// its URL is not blacklisted.
  public var namesCertificateAuthorities: Bool { caBundle != nil || caDirectory != nil }

  /// What is wrong with the CA certificates that ``trusting(environment:)`` would take from
  /// `environment`, if anything: the variable, and its problem. Checked before the run, as
  /// `--cacert` is.
  public func environmentProblem(_ environment: [String: String]) -> ConfigurationError? {
    guard !namesCertificateAuthorities else { return nil }
    func problem(_ name: String, _ check: (String) -> String?) -> ConfigurationError? {
      guard let text = environment[name], !text.isEmpty, let problem = check(text) else {
        return nil
      }
      return ConfigurationError(
        source: "environment variable \(name)",
        message: problem + "; name a readable one, or unset it to use the system's")
    }
    if environment["CURL_CA_BUNDLE"].map({ !$0.isEmpty }) == true {
      return problem("CURL_CA_BUNDLE", Self.caBundleProblem)
    }
    return problem("SSL_CERT_FILE", Self.caBundleProblem)
      ?? problem("SSL_CERT_DIR", Self.caDirectoryProblem)
  }

  /// With the CA certificates that curl(1) takes from the environment when no flag names any:
  /// `CURL_CA_BUNDLE`, else `SSL_CERT_DIR` and `SSL_CERT_FILE`. libcurl the library reads none
  /// of them, so that without this an operator's `SSL_CERT_FILE` would be ignored.
  public func trusting(environment: [String: String]) -> Connection {
    guard caBundle == nil && caDirectory == nil else { return self }
    func value(_ name: String) -> String? {
      guard let text = environment[name], !text.isEmpty else { return nil }
      return text
    }
    var connection = self
    if let bundle = value("CURL_CA_BUNDLE") {
      connection.caBundle = bundle
    } else {
      connection.caDirectory = value("SSL_CERT_DIR")
      connection.caBundle = value("SSL_CERT_FILE")
    }
    return connection
  }
}

/// A proxy a request goes through, as failures name it: without its user name and password,
/// which are secrets (SPEC section 11).
public struct ProxyInUse: Sendable, Equatable {
  /// `scheme://host:port`.
  public let url: String
  /// What set it: the flag and job setting, or the environment variable.
  public let setBy: String
  /// Host and port as libcurl names them in its messages (no brackets around IPv6).
  let host: String
  let port: Int

  /// `proxy` as libcurl reads it: no scheme is HTTP, no port is 1080 (443 for an HTTPS proxy).
  init?(_ proxy: String, setBy: String) {
    let separator = proxy.range(of: "://")
    let scheme = separator.map { proxy[..<$0.lowerBound].lowercased() } ?? "http"
    var authority = separator.map { proxy[$0.upperBound...] } ?? proxy[...]
    authority = authority.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
    if let at = authority.lastIndex(of: "@") {
      authority = authority[authority.index(after: at)...]
    }
    var host = authority
    var port = scheme == "https" ? 443 : 1080
    if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
      let rest = host[host.index(after: close)...]
      host = host[host.index(after: host.startIndex)..<close]
      if rest.hasPrefix(":"), let number = Int(rest.dropFirst()) { port = number }
    } else if let colon = host.lastIndex(of: ":") {
      if let number = Int(host[host.index(after: colon)...]) { port = number }
      host = host[..<colon]
    }
    guard !host.isEmpty else { return nil }
    self.host = String(host)
    self.port = port
    self.setBy = setBy
    let shownHost = host.contains(":") ? "[\(host)]" : String(host)
    url = "\(scheme)://\(shownHost):\(port)"
  }

  /// Whether libcurl's `message` for a connection that failed (`CURLE_COULDNT_CONNECT`) is
  /// about this proxy: libcurl 7.88 names the host and port it tried ("Failed to connect to
  /// HOST port PORT after...") and, through a proxy, only ever connects to the proxy. A host the
  /// no-proxy list exempts is connected to directly, and its own name is in the message.
  public func refusedConnection(_ message: String) -> Bool {
    message.contains("connect to \(host) port \(port) ")
  }
}
