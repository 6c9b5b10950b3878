import Core
import Foundation

/// One request's way through its redirects, followed hop by hop: the one redirect rule of
/// image downloads and document fetches alike (SPEC sections 2 and 5). A redirect goes to http
/// or https only, at most `maxRedirects` times. The tool's own headers go on every hop; the
/// headers the job or the line set (credentials or not: an API key or a signed token is a
/// secret too) go only to the first request's origin and to the origins the job trusts, as
/// curl's `--location-trusted` but per origin.
struct RedirectChain {
  /// A header as curl is given it, in order.
  typealias Header = (name: String, value: String)

  /// The current hop.
  private(set) var url: URL
  /// Redirects followed so far.
  private(set) var count = 0
  let maxRedirects: Int
  private let first: URL
  private let trustedOrigins: Set<Origin>
  /// The tool's own headers that the job's may replace (`Accept`, `User-Agent`).
  private let defaults: [Header]
  /// The job's and the line's, sorted by name.
  private let setHeaders: [Header]
  /// The tool's own headers that win over the job's: a revalidation's validators, which
  /// belong to the URL being revalidated wherever it leads.
  private let overrides: [Header]

  init(
    _ url: URL, maxRedirects: Int, defaults: [Header], headers: [String: String],
    trustedOrigins: Set<Origin>, overrides: [Header] = []
  ) {
    self.url = url
    self.maxRedirects = maxRedirects
    first = url
    self.trustedOrigins = trustedOrigins
    self.defaults = defaults
    setHeaders = headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    self.overrides = overrides
  }

  /// Whether the job's and the line's headers go to the current hop.
  private var carriesSetHeaders: Bool {
    guard count > 0 else { return true }
    let origin = Origin(url)
    return origin == Origin(first) || trustedOrigins.contains(origin)
  }

  /// The current hop's request headers as curl takes them: the defaults, replaced by the job's
  /// and the line's of the same name where those go, then the overrides.
  func headerLines() -> [String] {
    var headers = defaults
    func set(_ header: Header) {
      if let index = headers.firstIndex(where: {
        $0.name.caseInsensitiveCompare(header.name) == .orderedSame
      }) {
        headers[index] = header
      } else {
        headers.append(header)
      }
    }
    if carriesSetHeaders { setHeaders.forEach(set) }
    overrides.forEach(set)
    // "Name;" is how curl is told to send a header with an empty value.
    return headers.map { $0.value.isEmpty ? "\($0.name);" : "\($0.name): \($0.value)" }
  }

  /// Moves on to where a redirect's `Location` leads (relative to the current hop).
  mutating func follow(_ location: String) throws(ImageCacheError) -> URL {
    guard let next = URL(string: location, relativeTo: url)?.absoluteURL else {
      throw .invalidURL(location, reason: "redirect to an unparsable URL")
    }
    guard let scheme = next.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
      throw .invalidURL(
        next.absoluteString, reason: "redirect to a scheme other than http or https")
    }
    count += 1
    guard count <= maxRedirects else {
      throw .network(.tooManyRedirects, message: "more than \(maxRedirects) redirects")
    }
    url = next
    return next
  }

  /// The statuses whose `Location` is followed.
  static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]
}
