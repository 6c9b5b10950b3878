import Foundation

/// A URL's origin: scheme, host and port (the port the scheme implies when the URL names
/// none). The job's and a line's headers go with a redirect only to the first request's origin
/// and to the origins the job trusts (SPEC section 5).
public struct Origin: Sendable, Hashable {
  package let scheme: String
  package let host: String
  package let port: Int

  package init(_ url: URL) {
    scheme = url.scheme?.lowercased() ?? ""
    host = url.host?.lowercased() ?? ""
    port = url.port ?? Self.defaultPort(scheme)
  }

  /// An origin as the state keeps it, its parts as ``init(_:)`` leaves them.
  package init(scheme: String, host: String, port: Int) {
    self.scheme = scheme
    self.host = host
    self.port = port
  }

  /// A bare http(s) origin as a user writes it, `https://cdn.example.com` or
  /// `http://10.0.0.5:8080` (one trailing slash allowed); `nil` for anything more or less: a
  /// path, query, fragment or user name would suggest a narrower trust than an origin gives.
  package init?(parsing text: String) {
    guard let components = URLComponents(string: text),
      let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
      let host = components.host, !host.isEmpty,
      components.user == nil, components.password == nil,
      components.path.isEmpty || components.path == "/",
      components.query == nil, components.fragment == nil,
      (1...65535).contains(components.port ?? Self.defaultPort(scheme)),
      let url = components.url
    else { return nil }
    self.init(url)
  }

  private static func defaultPort(_ scheme: String) -> Int { scheme == "https" ? 443 : 80 }
}
