#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// SD's error codes (SPEC section 2), with the stable names reports use.
package enum SDErrorCode: Int, Sendable, Codable, CaseIterable {
  case invalidURL = 1000
  case badImageData = 1001
  case cacheNotModified = 1002
  case blackListed = 1003
  case invalidDownloadOperation = 2000
  case invalidDownloadStatusCode = 2001
  case cancelled = 2002
  case invalidDownloadResponse = 2003
  case invalidDownloadContentType = 2004

  /// SD's name for the code, as it appears in reports.
  package var name: String {
    switch self {
    case .invalidURL: "invalidURL"
    case .badImageData: "badImageData"
    case .cacheNotModified: "cacheNotModified"
    case .blackListed: "blackListed"
    case .invalidDownloadOperation: "invalidDownloadOperation"
    case .invalidDownloadStatusCode: "invalidDownloadStatusCode"
    case .cancelled: "cancelled"
    case .invalidDownloadResponse: "invalidDownloadResponse"
    case .invalidDownloadContentType: "invalidDownloadContentType"
    }
  }
}

/// Network failures below HTTP, reported with a stable name (SPEC section 2).
public enum NetworkFailure: String, Sendable, Codable, CaseIterable {
  case timedOut
  case cannotConnectToHost
  case cannotFindHost
  case networkConnectionLost
  case notConnectedToInternet
  case secureConnectionFailed
  case serverCertificateUntrusted
  case badServerResponse
  case cannotDecodeContentData
  case tooManyRedirects
  case responseTooLarge
  /// A response header line over libcurl's limit (100 KiB), which libcurl 7.88 reports as
  /// "Out of memory".
  case responseHeaderTooLarge
  /// A compressed (gzip, deflate) body followed by more bytes: browsers and Apple's URL
  /// loading ignore them, libcurl 7.88 refuses the body ("Failed writing received data").
  /// Not the image's fault, so never blacklisted.
  case trailingDataAfterCompressedBody
  /// A connection to an address the run's rules refuse (`--deny-addresses`, link-local by
  /// default): the run's configuration, not the URL's fault, so neither retried nor
  /// blacklisted.
  case addressDenied
  case cancelled
  case other

  /// SD 5's transient errors, which never put a URL on the blacklist.
  package var isTransient: Bool {
    switch self {
    case .timedOut, .cannotConnectToHost, .cannotFindHost, .networkConnectionLost,
      .notConnectedToInternet, .cancelled:
      true
    case .secureConnectionFailed, .serverCertificateUntrusted, .badServerResponse,
      .cannotDecodeContentData, .tooManyRedirects, .responseTooLarge, .responseHeaderTooLarge,
      .trailingDataAfterCompressedBody, .addressDenied, .other:
      false
    }
  }

  /// SD 5's rule, every failure that is not transient puts the URL on the blacklist, but for
  /// ours alone: a body libcurl refuses where SD's URL loading takes it, and the run's own
  /// rules (its addresses, its size limit), which SD has not and a later run may change.
  package var blacklistsURL: Bool {
    !isTransient && self != .trailingDataAfterCompressedBody && self != .addressDenied
      && self != .responseTooLarge
  }

  /// URLError-style numeric codes, so that every failure in a report carries a number.
  package var code: Int {
    switch self {
    case .timedOut: -1001
    case .cannotFindHost: -1003
    case .cannotConnectToHost: -1004
    case .networkConnectionLost: -1005
    case .notConnectedToInternet: -1009
    case .tooManyRedirects: -1007
    case .responseTooLarge: -1103
    case .responseHeaderTooLarge: -1011
    case .trailingDataAfterCompressedBody: -1016
    case .secureConnectionFailed: -1200
    case .serverCertificateUntrusted: -1202
    case .badServerResponse: -1011
    case .cannotDecodeContentData: -1016
    // URLError's number for a connection that policy (App Transport Security) refuses.
    case .addressDenied: -1022
    case .cancelled: -999
    case .other: -1
    }
  }
}

/// Every way loading one image can fail, carrying SD's code and name and what a user needs to
/// act on it (SPEC section 2).
public enum ImageCacheError: Error, Sendable, Equatable {
  case invalidURL(String, reason: String)
  case badImageData(reason: String)
  /// An image with more pixels than the run's `maxPixels`, refused before it is decoded: SD's
  /// `badImageData` by code and name, but the run's own limit, not the URL's fault, so never
  /// blacklisted (a run with a higher limit asks again).
  case overPixelLimit(reason: String)
  case blackListed(String)
  case invalidDownloadStatusCode(Int)
  case invalidDownloadResponse(reason: String)
  case invalidDownloadContentType(String)
  case cancelled
  case network(NetworkFailure, message: String)
  /// The image downloaded but could not be written to the cache; `cause` says why (the file
  /// system's `errno`), when the file system said.
  case storeFailed(reason: String, cause: FailureCause? = nil)
  /// The state database (blacklist, validators) could not be read or written; the message
  /// names its file, `cause` is SQLite's result code (or the file system's `errno`) under it.
  case stateFailed(reason: String, cause: FailureCause? = nil)
  /// A manifest line names another namespace whose lock another run holds: nothing is
  /// written there (SPEC section 10).
  case namespaceLocked(String)
  /// This machine failed the load, not the URL: a cache file that cannot be read, a transfer
  /// that could not be set up. Never blacklisted: the URL is not at fault.
  case localFailure(reason: String)

  /// SD's code for this error, when SD has one (network and store failures have none).
  package var sdCode: SDErrorCode? {
    switch self {
    case .invalidURL: .invalidURL
    case .badImageData, .overPixelLimit: .badImageData
    case .blackListed: .blackListed
    case .invalidDownloadStatusCode: .invalidDownloadStatusCode
    case .invalidDownloadResponse: .invalidDownloadResponse
    case .invalidDownloadContentType: .invalidDownloadContentType
    case .cancelled: .cancelled
    case .network, .storeFailed, .stateFailed, .namespaceLocked, .localFailure: nil
    }
  }

  /// SD's numeric code (URLError-style negative numbers for network failures).
  public var code: Int {
    switch self {
    case .network(let failure, _): failure.code
    case .storeFailed: -3000
    case .stateFailed: -3001
    case .namespaceLocked: -3002
    case .localFailure: -3003
    default: sdCode?.rawValue ?? 0
    }
  }

  /// The stable name reports use.
  package var name: String {
    switch self {
    case .network(let failure, _): failure.rawValue
    case .storeFailed: "storeFailed"
    case .stateFailed: "stateFailed"
    case .namespaceLocked: "namespaceLocked"
    case .localFailure: "localFailure"
    default: sdCode?.name ?? "unknown"
    }
  }

  /// The HTTP status, for status failures.
  public var httpStatus: Int? {
    if case .invalidDownloadStatusCode(let status) = self { return status }
    return nil
  }

  /// Worth another attempt (SPEC section 5): timeouts, connection errors, 429 and 502-504.
  package var isTransient: Bool {
    switch self {
    case .network(let failure, _): failure.isTransient && failure != .cancelled
    case .invalidDownloadStatusCode(let status): [429, 502, 503, 504].contains(status)
    default: false
    }
  }

  /// The run's own limit this failure met, as its flag and job key, when it is one: SD has
  /// neither, so a URL over one is not blacklisted for it (SPEC section 2).
  package var runsOwnLimit: String? {
    switch self {
    case .network(.responseTooLarge, _): "--max-response-size, prefetch.maxResponseSize"
    case .overPixelLimit: "--max-pixels, prefetch.maxPixels"
    default: nil
    }
  }

  /// This network or pixel-limit failure with `text` added to its message (another, as it is).
  package func adding(_ text: String) -> ImageCacheError {
    switch self {
    case .network(let failure, let message): .network(failure, message: message + text)
    case .overPixelLimit(let reason): .overPixelLimit(reason: reason + text)
    default: self
    }
  }

  /// SD 5's blacklist rule: invalid URLs, bad image data and non-transient network errors put a
  /// URL on the failed-URL blacklist; HTTP status failures and transient errors do not, nor do
  /// the run's own limits (``runsOwnLimit``).
  package var blacklistsURL: Bool {
    switch self {
    case .invalidURL, .badImageData: true
    case .network(let failure, _): failure.blacklistsURL
    case .overPixelLimit, .blackListed, .invalidDownloadStatusCode, .invalidDownloadResponse,
      .invalidDownloadContentType, .cancelled, .storeFailed, .stateFailed, .namespaceLocked,
      .localFailure:
      false
    }
  }

  /// A failure that every later store would meet too: the disk is full, over quota or
  /// read-only. It ends the run (SPEC section 2, step 7) instead of failing URL after URL.
  /// So does a cache folder removed or replaced by a file during the run (`ENOENT`,
  /// `ENOTDIR`: stores never create it once a run holds its lock), and any failure of the
  /// state database, and running out of file descriptors (``OpenFileLimit``), whether a store
  /// or a download met it.
  package var endsRun: Bool {
    switch self {
    case .storeFailed(_, .errno(let errno)?):
      [ENOSPC, EDQUOT, EROFS, ENOENT, ENOTDIR].contains(errno)
        || OpenFileLimit.isExhausted(errno: errno)
    case .stateFailed: true
    case .network(_, let message), .localFailure(let message):
      OpenFileLimit.isExhausted(message: message)
    default: false
    }
  }

  /// This failure, with which limit was reached and how to raise it when it says the file
  /// descriptors ran out (``OpenFileLimit``).
  package var withOpenFileAdvice: ImageCacheError {
    func advised(_ text: String) -> String {
      let errno = text.contains(String(cString: strerror(ENFILE))) ? ENFILE : EMFILE
      return "\(text); \(OpenFileLimit.advice(errno: errno))"
    }
    return switch self {
    case .network(let failure, let message) where OpenFileLimit.isExhausted(message: message):
      .network(failure, message: advised(message))
    case .localFailure(let reason) where OpenFileLimit.isExhausted(message: reason):
      .localFailure(reason: advised(reason))
    default: self
    }
  }

  /// A sentence for people.
  package var message: String {
    switch self {
    case .invalidURL(let url, let reason): "invalid URL \(url.debugDescription): \(reason)"
    case .badImageData(let reason): "not a valid image: \(reason)"
    case .overPixelLimit(let reason): "not stored: \(reason)"
    case .blackListed(let url): "\(url) is on the failed-URL blacklist (use retryFailed)"
    case .invalidDownloadStatusCode(let status): "unacceptable HTTP status \(status)"
    case .invalidDownloadResponse(let reason): "invalid response: \(reason)"
    case .invalidDownloadContentType(let type): "unacceptable content type \(type)"
    case .cancelled: "cancelled"
    case .network(let failure, let message): "\(failure.rawValue): \(message)"
    case .storeFailed(let reason, _): "could not store in the cache: \(reason)"
    case .stateFailed(let reason, _): "could not use the state database: \(reason)"
    case .namespaceLocked(let namespace):
      "another run holds the lock of namespace \(namespace.debugDescription); nothing written there"
    case .localFailure(let reason): "failed on this machine, not the URL's fault: \(reason)"
    }
  }
}

extension ImageCacheError: CauseProviding {
  /// What the file system or SQLite said under a store or state failure.
  public var cause: FailureCause? {
    switch self {
    case .storeFailed(_, let cause), .stateFailed(_, let cause): cause
    default: nil
    }
  }

  /// The state failure of `error`: its words as the reason, its code as the cause.
  package static func stateFailed(_ error: any Error) -> ImageCacheError {
    .stateFailed(reason: "\(error)", cause: FailureCause(of: error))
  }
}

extension ImageCacheError: CustomStringConvertible {
  public var description: String { "\(name) (\(code)): \(message)" }
}
