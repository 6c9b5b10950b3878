import CCurl
import Core
import Foundation

/// What each libcurl result code means in SD's terms (SPEC section 2): the one table that turns
/// a `CURLcode` into the error a report shows and the blacklist judges. The transient classes
/// (timedOut, cannotConnectToHost, cannotFindHost, networkConnectionLost) are retried and never
/// blacklisted; every other class is, as SD 5 does for the `NSURLError` it stands for.
enum CurlFailure {
  /// SD's error for `code`, with curl's own message (`detail`: its error buffer) kept. Out of
  /// file descriptors (`osErrno`: `CURLINFO_OS_ERRNO`), the system's words are added, which
  /// libcurl's message ("Couldn't connect to server") leaves out: they end the run.
  static func error(for code: CURLcode, detail: String, osErrno: Int32 = 0) -> ImageCacheError {
    var curlMessage = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
    // libcurl keeps no errno when it cannot make a socket: whether one could be made now.
    let osErrno =
      osErrno == 0 && code == CURLE_COULDNT_CONNECT ? OpenFileLimit.probe() ?? 0 : osErrno
    if OpenFileLimit.isExhausted(errno: osErrno) {
      curlMessage += " (\(String(cString: strerror(osErrno))))"
    }
    let failure = failureClass(of: code, detail: curlMessage)
    let message =
      switch failure {
      case .network(.responseHeaderTooLarge):
        "a response header line is over libcurl's 100 KiB limit (libcurl: \(curlMessage))"
      case .network(.trailingDataAfterCompressedBody):
        "the compressed body is followed by more bytes, which browsers ignore and libcurl "
          + "refuses (libcurl: \(curlMessage)); not blacklisted"
      case .network(.networkConnectionLost) where code == CURLE_SSL_CONNECT_ERROR:
        "the connection was lost during the TLS handshake (\(curlMessage))"
      // The usual cause is an origin signed by an internal certificate authority: the way to
      // trust it, rather than turning verification off. Against the system's CAs the URL is
      // blacklisted (SD 5's rule), so the run that trusts it needs retryFailed.
      case .network(.serverCertificateUntrusted):
        "\(curlMessage); to trust the certificate's issuer, give its CA certificate (PEM) with "
          + "--cacert FILE (job: prefetch.caBundle) or SSL_CERT_FILE, and retry a blacklisted "
          + "URL with the retryFailed option"
      default: curlMessage
      }
    return switch failure {
    case .invalidURL: .invalidURL("", reason: message)
    case .cancelled: .cancelled
    case .network(let failure): .network(failure, message: message)
    }
  }

  /// What OpenSSL says, through libcurl, when the peer reset or closed the connection during
  /// the handshake: a lost connection, not a refusal of the handshake or the certificate.
  static let lostDuringHandshake = [
    "Connection reset", "SSL_ERROR_SYSCALL", "unexpected eof", "Broken pipe",
  ]

  enum Class: Equatable {
    case invalidURL
    case cancelled
    case network(NetworkFailure)
  }

  static func failureClass(of code: CURLcode, detail: String = "") -> Class {
    switch code {
    case CURLE_SSL_CONNECT_ERROR
    where lostDuringHandshake.contains(where: { detail.localizedCaseInsensitiveContains($0) }):
      .network(.networkConnectionLost)
    // libcurl 7.88's dynamic buffers answer a header line over CURL_MAX_HTTP_HEADER this way;
    // memory itself running out in libcurl would end the process long before.
    case CURLE_OUT_OF_MEMORY:
      .network(.responseHeaderTooLarge)
    // Our body callbacks never stop a transfer this way (a body over the limit is told apart
    // before this table): only libcurl's decoder does, for bytes after the compressed stream.
    case CURLE_WRITE_ERROR:
      .network(.trailingDataAfterCompressedBody)
    case CURLE_URL_MALFORMAT:
      .invalidURL
    case CURLE_ABORTED_BY_CALLBACK:
      .cancelled
    case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
      .network(.cannotFindHost)
    case CURLE_COULDNT_CONNECT:
      .network(.cannotConnectToHost)
    case CURLE_OPERATION_TIMEDOUT:
      .network(.timedOut)
    // A body shorter than its Content-Length, a reset or a close mid-response, an HTTP/2
    // stream or connection torn down: the connection was lost, which a retry may mend.
    case CURLE_PARTIAL_FILE, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_HTTP2,
      CURLE_HTTP2_STREAM:
      .network(.networkConnectionLost)
    case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR,
      CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS:
      .network(.serverCertificateUntrusted)
    case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
      CURLE_SSL_ENGINE_NOTFOUND,
      CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED,
      CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_CLIENTCERT:
      .network(.secureConnectionFailed)
    case CURLE_TOO_MANY_REDIRECTS:
      .network(.tooManyRedirects)
    case CURLE_FILESIZE_EXCEEDED:
      .network(.responseTooLarge)
    case CURLE_BAD_CONTENT_ENCODING:
      .network(.cannotDecodeContentData)
    // Schemes are checked before curl sees a URL, so "unsupported protocol" means the server
    // answered in something other than HTTP/1.x or 2 (HTTP/0.9, another protocol).
    case CURLE_WEIRD_SERVER_REPLY, CURLE_UNSUPPORTED_PROTOCOL:
      .network(.badServerResponse)
    default:
      .network(.other)
    }
  }
}
