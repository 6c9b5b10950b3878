import AsyncHTTPClient
import Core
import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import NIOSSL
import State
import Synchronization

/// One download to make.
public struct DownloadRequest: Sendable {
  public var url: URL
  /// The job's and the URL's headers, on top of SD's defaults.
  public var headers: [String: String] = [:]
  /// Overrides the configured idle timeout (the `downloadTimeout` context key).
  public var timeout: TimeInterval?
  /// Stored validators: sent as `If-None-Match` / `If-Modified-Since` (refreshCached).
  public var validators: CacheValidators?
  public var allowInvalidSSLCertificates = false
  public var handleCookies = false

  public init(url: URL) {
    self.url = url
  }
}

/// A finished download: a 2xx with its whole body, or a 304 answer to a conditional request.
public struct DownloadResponse: Sendable {
  public var status: Int
  public var body: Data
  public var etag: String?
  public var lastModified: String?
  /// The URL after redirects.
  public var url: URL

  public var notModified: Bool { status == 304 }
}

/// A failed download: SD's error, plus the server's `Retry-After` when it sent one.
public struct DownloadFailure: Error, Sendable {
  public var error: ImageCacheError
  public var retryAfter: TimeInterval?

  public init(_ error: ImageCacheError, retryAfter: TimeInterval? = nil) {
    self.error = error
    self.retryAfter = retryAfter
  }
}

/// The HTTP side of SD's downloader on async-http-client: one shared client per timeout and TLS
/// setting, SD's default headers, redirects followed by hand (http and https only, at most
/// `maxRedirects`), a total deadline and a size limit enforced while the body streams.
/// Its clients live for one ``withDownloader(configuration:_:)`` scope.
public final class Downloader: Sendable {
  public let configuration: PrefetchConfiguration
  private let clients = Mutex<[ClientKey: HTTPClient]>([:])
  private let cookies = CookieJar()

  struct ClientKey: Hashable {
    var timeoutMilliseconds: Int64
    var insecure: Bool
  }

  /// Callers use ``withDownloader(configuration:_:)``; tests of this package that keep one
  /// downloader across a test's steps create and shut it down themselves.
  package init(configuration: PrefetchConfiguration = PrefetchConfiguration()) {
    self.configuration = configuration
  }

  /// Runs `body` with a downloader whose clients are shut down when it returns or throws, as
  /// async-http-client's `withHTTPClient` does.
  public static func withDownloader<Result>(
    configuration: PrefetchConfiguration = PrefetchConfiguration(),
    _ body: (Downloader) async throws -> Result
  ) async throws -> Result {
    let downloader = Downloader(configuration: configuration)
    let result: Result
    do {
      result = try await body(downloader)
    } catch {
      try await downloader.shutdown()
      throw error
    }
    try await downloader.shutdown()
    return result
  }

  /// Shuts every client down. No download may start afterwards.
  package func shutdown() async throws {
    let all = clients.withLock { clients in
      defer { clients.removeAll() }
      return Array(clients.values)
    }
    for client in all { try await client.shutdown() }
  }

  /// Downloads `request.url`, or fails with SD's error for what went wrong.
  public func download(_ request: DownloadRequest) async throws(DownloadFailure) -> DownloadResponse
  {
    let deadline = configuration.deadline
    do {
      return try await withThrowingTaskGroup(of: DownloadResponse.self) { group in
        group.addTask { try await self.followRedirects(request) }
        group.addTask {
          try await Task.sleep(nanoseconds: UInt64(deadline * 1e9))
          throw DownloadFailure(
            .network(.timedOut, message: "the download took longer than its \(deadline) s deadline")
          )
        }
        defer { group.cancelAll() }
        return try await group.next()!
      }
    } catch let failure as DownloadFailure {
      throw failure
    } catch {
      throw DownloadFailure(Self.classify(error))
    }
  }

  private func followRedirects(_ request: DownloadRequest) async throws -> DownloadResponse {
    var url = request.url
    for _ in 0...configuration.maxRedirects {
      let response = try await fetchOnce(url: url, request: request)
      guard case .redirect(let location) = response else {
        if case .final(let download) = response { return download }
        fatalError("unreachable")
      }
      guard let next = URL(string: location, relativeTo: url)?.absoluteURL else {
        throw DownloadFailure(.invalidURL(location, reason: "redirect to an unparsable URL"))
      }
      guard let scheme = next.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
        throw DownloadFailure(
          .invalidURL(next.absoluteString, reason: "redirect to a scheme other than http or https"))
      }
      url = next
    }
    throw DownloadFailure(
      .network(.tooManyRedirects, message: "more than \(configuration.maxRedirects) redirects"))
  }

  private enum Hop {
    case redirect(String)
    case final(DownloadResponse)
  }

  private func fetchOnce(url: URL, request: DownloadRequest) async throws -> Hop {
    var httpRequest = HTTPClientRequest(url: url.absoluteString)
    httpRequest.method = .GET
    httpRequest.headers.add(name: "Accept", value: "image/*,*/*;q=0.8")
    httpRequest.headers.add(name: "User-Agent", value: configuration.userAgent)
    for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) {
      httpRequest.headers.replaceOrAdd(name: name, value: value)
    }
    if let validators = request.validators {
      if let etag = validators.etag {
        httpRequest.headers.replaceOrAdd(name: "If-None-Match", value: etag)
      }
      if let lastModified = validators.lastModified {
        httpRequest.headers.replaceOrAdd(name: "If-Modified-Since", value: lastModified)
      }
    }
    if request.handleCookies, let host = url.host, let cookie = cookies.header(for: host) {
      httpRequest.headers.replaceOrAdd(name: "Cookie", value: cookie)
    }

    let client = client(
      timeout: request.timeout ?? configuration.timeout,
      insecure: request.allowInvalidSSLCertificates)
    let response = try await client.execute(
      httpRequest, deadline: .now() + .seconds(Int64(configuration.deadline) + 1))
    let status = Int(response.status.code)
    if request.handleCookies, let host = url.host {
      cookies.store(response.headers["Set-Cookie"], for: host)
    }
    if [301, 302, 303, 307, 308].contains(status),
      let location = response.headers.first(name: "Location")
    {
      try await Self.drain(response.body)
      return .redirect(location)
    }
    let isConditionalAnswer = status == 304 && request.validators != nil
    guard (200...299).contains(status) || isConditionalAnswer else {
      try await Self.drain(response.body)
      throw DownloadFailure(
        .invalidDownloadStatusCode(status),
        retryAfter: Self.retryAfter(response.headers.first(name: "Retry-After")))
    }
    let limit = Int(clamping: configuration.maxResponseSize)
    if let declared = response.headers.first(name: "Content-Length").flatMap(Int.init),
      declared > limit
    {
      throw DownloadFailure(
        .network(
          .responseTooLarge, message: "Content-Length \(declared) is over the \(limit)-byte limit"))
    }
    var body = Data()
    for try await buffer in response.body {
      guard body.count + buffer.readableBytes <= limit else {
        throw DownloadFailure(
          .network(.responseTooLarge, message: "body is over the \(limit)-byte limit"))
      }
      buffer.withUnsafeReadableBytes { body.append(contentsOf: $0) }
    }
    return .final(
      DownloadResponse(
        status: status, body: body, etag: response.headers.first(name: "ETag"),
        lastModified: response.headers.first(name: "Last-Modified"), url: url))
  }

  private func client(timeout: TimeInterval, insecure: Bool) -> HTTPClient {
    let key = ClientKey(timeoutMilliseconds: Int64(timeout * 1000), insecure: insecure)
    return clients.withLock { clients in
      if let client = clients[key] { return client }
      var configuration = HTTPClient.Configuration()
      configuration.timeout = .init(
        connect: .milliseconds(key.timeoutMilliseconds),
        read: .milliseconds(key.timeoutMilliseconds))
      configuration.redirectConfiguration = .disallow
      // A compressed body counts by its decompressed size: a gzip bomb is a response too large.
      configuration.decompression = .enabled(
        limit: .size(Int(clamping: self.configuration.maxResponseSize)))
      configuration.connectionPool = .init(
        idleTimeout: .seconds(60),
        concurrentHTTP1ConnectionsPerHostSoftLimit: self.configuration.perHostConcurrency)
      // A refused or unreachable connection is a failure of this download (retried, if at all,
      // by the prefetcher's backoff), not something to retry silently until the timeout.
      configuration.connectionPool.retryConnectionEstablishment = false
      if insecure {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        configuration.tlsConfiguration = tls
      }
      let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
      clients[key] = client
      return client
    }
  }

  /// Reads and drops the body of a redirect or an error answer, so that the connection can be
  /// reused; a body over 64 KiB is not worth reading and fails the download like a lost
  /// connection would.
  private static func drain(_ body: HTTPClientResponse.Body) async throws {
    _ = try await body.collect(upTo: 64 * 1024)
  }

  /// `Retry-After` as seconds or as an HTTP date.
  static func retryAfter(_ value: String?) -> TimeInterval? {
    guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else {
      return nil
    }
    if let seconds = TimeInterval(value) { return max(0, seconds) }
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
    guard let date = formatter.date(from: value) else { return nil }
    return max(0, date.timeIntervalSinceNow)
  }

  /// Maps what async-http-client and NIO throw to SD's error names (SPEC section 2).
  static func classify(_ error: Error) -> ImageCacheError {
    if error is CancellationError { return .cancelled }
    if let error = error as? NIOHTTPDecompression.DecompressionError, error == .limit {
      return .network(
        .responseTooLarge, message: "the decompressed body is over the response size limit")
    }
    if let error = error as? HTTPClientError {
      switch error {
      case .connectTimeout, .readTimeout, .deadlineExceeded, .tlsHandshakeTimeout,
        .getConnectionFromPoolTimeout, .writeTimeout:
        return .network(.timedOut, message: "\(error)")
      case .remoteConnectionClosed:
        return .network(.networkConnectionLost, message: "the server closed the connection")
      case .cancelled, .requestStreamCancelled:
        return .cancelled
      default:
        if [HTTPClientError.invalidURL, .emptyHost, .emptyScheme].contains(error) {
          return .invalidURL("", reason: "\(error)")
        }
        return .network(.other, message: "\(error)")
      }
    }
    if let error = error as? NIOConnectionError {
      if error.connectionErrors.isEmpty && (error.dnsAError != nil || error.dnsAAAAError != nil) {
        return .network(.cannotFindHost, message: "cannot resolve \(error.host)")
      }
      return .network(
        .cannotConnectToHost, message: "cannot connect to \(error.host):\(error.port)")
    }
    if let error = error as? IOError {
      switch error.errnoCode {
      case ECONNREFUSED, EHOSTUNREACH, ENETUNREACH:
        return .network(.cannotConnectToHost, message: "\(error)")
      case ECONNRESET, EPIPE:
        return .network(.networkConnectionLost, message: "\(error)")
      case ETIMEDOUT:
        return .network(.timedOut, message: "\(error)")
      default:
        return .network(.other, message: "\(error)")
      }
    }
    if let error = error as? ChannelError, case .connectTimeout = error {
      return .network(.timedOut, message: "\(error)")
    }
    if error is NIOSSLError || error is BoringSSLError {
      return .network(.secureConnectionFailed, message: "\(error)")
    }
    return .network(.other, message: "\(error)")
  }
}

/// A minimal cookie store for `handleCookies`: what each host set, sent back to it.
final class CookieJar: Sendable {
  private let cookies = Mutex<[String: [String: String]]>([:])

  func store(_ setCookies: [String], for host: String) {
    guard !setCookies.isEmpty else { return }
    cookies.withLock { all in
      for header in setCookies {
        let pair = header.split(separator: ";", maxSplits: 1).first ?? ""
        let parts = pair.split(separator: "=", maxSplits: 1)
        guard parts.count == 2 else { continue }
        all[host, default: [:]][parts[0].trimmingCharacters(in: .whitespaces)] =
          parts[1].trimmingCharacters(in: .whitespaces)
      }
    }
  }

  func header(for host: String) -> String? {
    cookies.withLock { all in
      guard let jar = all[host], !jar.isEmpty else { return nil }
      return jar.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
    }
  }
}
