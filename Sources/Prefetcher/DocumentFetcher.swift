import CCurl
import Core
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Fetches one document that is not an image (a sitemap) into an unlinked temporary file, with
/// the limits of image downloads (SPEC sections 2 and 6): http and https only, at most
/// `maxRedirects` redirects and only to http or https, the connect and idle timeout, the total
/// deadline and the size limit (after decompression of a `Content-Encoding`). It blocks the
/// calling thread: a manifest is read synchronously, between the loads that it feeds.
///
/// curl follows the redirects itself here; it drops `Authorization` and `Cookie` headers on a
/// redirect to another host, as the image downloader does.
public enum DocumentFetcher {
  /// The file descriptor of a temporary file holding the body, positioned at its start; the
  /// caller closes it. The file has no name: nothing is left behind, whatever happens.
  /// - Parameter stop: checked at least once a second while the fetch runs; once it is set,
  ///   the fetch ends as `cancelled` (a signal must not wait for a slow server).
  public static func fetch(
    _ url: URL, configuration: PrefetchConfiguration, headers: [String: String] = [:],
    allowInvalidSSLCertificates: Bool = false, stop: StopFlag? = nil
  ) throws(ImageCacheError) -> Int32 {
    guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
      throw .invalidURL(url.absoluteString, reason: "only http and https are fetched")
    }
    guard curlInitialised, let easy = curl_easy_init() else {
      throw .network(.other, message: "curl_easy_init failed")
    }
    defer { curl_easy_cleanup(easy) }
    let sink = try FileSink(limit: configuration.maxResponseSize, stop: stop)
    var keepFile = false
    defer { if !keepFile { close(sink.descriptor) } }

    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(ic_error_size))
    defer { errorBuffer.deallocate() }
    errorBuffer[0] = 0
    var headerList: UnsafeMutablePointer<curl_slist>?
    defer { curl_slist_free_all(headerList) }
    var lines = ["Accept: application/xml,text/xml;q=0.9,*/*;q=0.8"]
    lines += headers.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
    for line in lines { headerList = curl_slist_append(headerList, line) }

    ic_easy_setopt_string(easy, CURLOPT_URL, url.absoluteString)
    ic_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
    EasyHandle.setLimits(
      easy, idleTimeout: configuration.timeout,
      limit: Int(clamping: configuration.maxResponseSize),
      allowInvalidSSLCertificates: allowInvalidSSLCertificates)
    ic_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
    ic_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)
    ic_easy_setopt_long(easy, CURLOPT_MAXREDIRS, configuration.maxRedirects)
    ic_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(configuration.deadline * 1000))
    ic_easy_setopt_string(easy, CURLOPT_USERAGENT, configuration.userAgent)
    ic_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList)
    ic_easy_setopt_long(easy, CURLOPT_FAILONERROR, 1)
    ic_easy_setopt_write_function(easy, CURLOPT_WRITEFUNCTION, writeToSink)
    ic_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque())
    ic_easy_setopt_xferinfo_function(easy, checkStop)
    ic_easy_setopt_pointer(easy, CURLOPT_XFERINFODATA, Unmanaged.passUnretained(sink).toOpaque())
    ic_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0)

    let code = withExtendedLifetime(sink) { curl_easy_perform(easy) }
    var status = 0
    ic_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
    if sink.tooLarge {
      throw .network(
        .responseTooLarge,
        message: "the body is over the \(configuration.maxResponseSize)-byte limit")
    }
    if let failure = sink.failure {
      throw .network(.other, message: "cannot write a temporary file: \(failure)")
    }
    if code == CURLE_HTTP_RETURNED_ERROR { throw .invalidDownloadStatusCode(status) }
    if sink.stop?.isStopped == true { throw .cancelled }
    guard code == CURLE_OK else {
      let error = CurlFailure.error(for: code, detail: String(cString: errorBuffer))
      if case .invalidURL(_, let reason) = error {
        throw .invalidURL(url.absoluteString, reason: reason)
      }
      throw error
    }
    guard (200...299).contains(status) else { throw .invalidDownloadStatusCode(status) }
    lseek(sink.descriptor, 0, SEEK_SET)
    keepFile = true
    return sink.descriptor
  }

  /// Where the body goes: a temporary file, unlinked as soon as it is made.
  private final class FileSink {
    let descriptor: Int32
    let limit: UInt64
    let stop: StopFlag?
    var written: UInt64 = 0
    var tooLarge = false
    var failure: String?

    init(limit: UInt64, stop: StopFlag?) throws(ImageCacheError) {
      self.limit = limit
      self.stop = stop
      var template = Array((NSTemporaryDirectory() + "/imagecache-sitemap-XXXXXX").utf8CString)
      let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
      guard descriptor >= 0 else {
        throw .network(
          .other, message: "cannot create a temporary file: \(String(cString: strerror(errno)))")
      }
      template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
      self.descriptor = descriptor
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
      written += UInt64(bytes.count)
      guard written <= limit else {
        tooLarge = true
        return false
      }
      var rest = bytes[...]
      while !rest.isEmpty {
        let count = Glibc.write(
          descriptor, UnsafeRawBufferPointer(rebasing: rest).baseAddress, rest.count)
        if count < 0 {
          if errno == EINTR { continue }
          failure = String(cString: strerror(errno))
          return false
        }
        rest = rest.dropFirst(count)
      }
      return true
    }
  }

  /// curl's progress callback: non-zero aborts the transfer.
  private static let checkStop: curl_xferinfo_callback = { context, _, _, _, _ in
    let sink = Unmanaged<FileSink>.fromOpaque(context!).takeUnretainedValue()
    return sink.stop?.isStopped == true ? 1 : 0
  }

  private static let writeToSink: curl_write_callback = { data, size, count, context in
    let sink = Unmanaged<FileSink>.fromOpaque(context!).takeUnretainedValue()
    let length = size * count
    guard let data, length > 0 else { return length }
    return sink.write(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
  }
}
