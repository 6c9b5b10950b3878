import Core
import Foundation

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
    var found = stat()
    guard stat(path, &found) == 0 else {
      let code = errno
      guard code == ENOENT || code == ENOTDIR else {
        // A loop of symbolic links, a folder on the way that may not be searched: said as
        // it is, not as a missing file.
        return "\(path): \(String(cString: strerror(code)))"
      }
      return FileSystem.reason("\(path): no such file", forUserPath: path)
    }
    // Opened without waiting for a writer: a FIFO (or a device) is no bundle libcurl can read
    // after this check has read it, and a FIFO with no writer would hold the run forever.
    let isFolder = found.st_mode & S_IFMT == S_IFDIR
    let descriptor = isFolder ? -1 : open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    guard descriptor >= 0 else { return "\(path): not a readable file" }
    let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    defer { try? handle.close() }
    var status = stat()
    guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
      return "\(path): not a regular file"
    }
    // A PEM bundle is text: its certificates' markers are found in what is read, whatever
    // else the file holds (comments, explanatory text), as OpenSSL finds them. Read until the
    // first one (the system's bundle begins with one), not whole: the check is in front of
    // the run's first request.
    guard containsCertificateMarker(handle) else {
      return "\(path): not a PEM bundle of CA certificates (no '-----BEGIN CERTIFICATE-----' "
        + "line; a DER certificate converts with 'openssl x509 -inform der -in FILE -out "
        + "FILE.pem')"
    }
    return nil
  }

  /// Whether a marker of `pemCertificateMarkers` is in the first `maxCABundleBytes` of
  /// `handle`, read `caBundleChunkBytes` at a time (each chunk searched with the end of the one
  /// before, so that a marker split between two is found).
  private static func containsCertificateMarker(_ handle: FileHandle) -> Bool {
    let markers = pemCertificateMarkers.map { Array($0.utf8) }
    let overlap = markers.map(\.count).max()! - 1
    var window: [UInt8] = []
    var total = 0
    while total < maxCABundleBytes,
      let chunk = try? handle.read(upToCount: min(caBundleChunkBytes, maxCABundleBytes - total)),
      !chunk.isEmpty
    {
      total += chunk.count
      chunk.withUnsafeBytes { window.append(contentsOf: $0) }
      for marker in markers where contains(window, marker) { return true }
      window.removeFirst(max(0, window.count - overlap))
    }
    return false
  }

  private static func contains(_ bytes: [UInt8], _ marker: [UInt8]) -> Bool {
    guard bytes.count >= marker.count else { return false }
    return (0...(bytes.count - marker.count)).contains { start in
      bytes[start] == marker[0] && bytes[start..<(start + marker.count)].elementsEqual(marker)
    }
  }

  static let caBundleChunkBytes = 16 << 10

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
