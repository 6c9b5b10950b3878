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
/// Redirects are followed hop by hop by the image downloader's rule (``RedirectChain``): the
/// job's headers go only to the first URL's origin and to the trusted origins.
public enum DocumentFetcher {
  /// The file descriptor of a temporary file holding the body, positioned at its start; the
  /// caller closes it. The file has no name: nothing is left behind, whatever happens.
  /// - Parameter stop: checked at least once a second while the fetch runs; once it is set,
  ///   the fetch ends as `cancelled` (a signal must not wait for a slow server).
  public static func fetch(
    _ url: URL, configuration: PrefetchConfiguration, headers: [String: String] = [:],
    trustedOrigins: Set<Origin> = [], allowInvalidSSLCertificates: Bool = false,
    stop: StopFlag? = nil
  ) throws(ImageCacheError) -> Int32 {
    guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
      throw .invalidURL(url.absoluteString, reason: "only http and https are fetched")
    }
    guard curlInitialised, let easy = curl_easy_init() else {
      throw .localFailure(reason: "curl_easy_init failed")
    }
    defer { curl_easy_cleanup(easy) }
    let sink = try FileSink(easy: easy, limit: configuration.maxResponseSize, stop: stop)
    var keepFile = false
    defer { if !keepFile { close(sink.descriptor) } }

    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(ic_error_size))
    defer { errorBuffer.deallocate() }
    var headerList: UnsafeMutablePointer<curl_slist>?
    defer { curl_slist_free_all(headerList) }

    ic_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
    EasyHandle.setLimits(
      easy, idleTimeout: configuration.timeout,
      limit: Int(clamping: configuration.maxResponseSize), connection: configuration.connection,
      allowInvalidSSLCertificates: allowInvalidSSLCertificates)
    // Followed here, so that each hop gets the headers the rule gives it.
    ic_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0)
    ic_easy_setopt_long(easy, CURLOPT_FAILONERROR, 1)
    ic_easy_setopt_write_function(easy, CURLOPT_WRITEFUNCTION, writeToSink)
    ic_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque())
    ic_easy_setopt_xferinfo_function(easy, checkStop)
    ic_easy_setopt_pointer(easy, CURLOPT_XFERINFODATA, Unmanaged.passUnretained(sink).toOpaque())
    ic_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0)

    var chain = RedirectChain(
      url, maxRedirects: configuration.maxRedirects,
      defaults: [
        ("Accept", "application/xml,text/xml;q=0.9,*/*;q=0.8"),
        ("User-Agent", configuration.userAgent),
      ],
      headers: headers, trustedOrigins: trustedOrigins)
    let deadline =
      DispatchTime.now().uptimeNanoseconds + UInt64(max(0, configuration.deadline) * 1e9)
    while true {
      let now = DispatchTime.now().uptimeNanoseconds
      guard now < deadline else {
        throw .network(
          .timedOut, message: "the fetch took longer than its \(configuration.deadline) s deadline")
      }
      ic_easy_setopt_string(easy, CURLOPT_URL, chain.url.absoluteString)
      ic_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int((deadline - now) / 1_000_000)))
      curl_slist_free_all(headerList)
      headerList = nil
      for line in chain.headerLines() { headerList = curl_slist_append(headerList, line) }
      ic_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList)
      errorBuffer[0] = 0
      sink.drained = 0

      let code = withExtendedLifetime(sink) { curl_easy_perform(easy) }
      var status = 0
      ic_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
      if sink.tooLarge {
        throw .network(
          .responseTooLarge,
          message: "the body is over the \(configuration.maxResponseSize)-byte limit")
      }
      if let failure = sink.failure {
        throw .localFailure(reason: "cannot write a temporary file: \(failure)")
      }
      if code == CURLE_HTTP_RETURNED_ERROR { throw .invalidDownloadStatusCode(status) }
      if sink.stop?.isStopped == true { throw .cancelled }
      guard code == CURLE_OK || sink.drainedEnough else {
        let error = CurlFailure.error(for: code, detail: String(cString: errorBuffer))
        if case .invalidURL(_, let reason) = error {
          throw .invalidURL(chain.url.absoluteString, reason: reason)
        }
        throw error
      }
      var location: UnsafeMutablePointer<CChar>?
      ic_easy_getinfo_string(easy, CURLINFO_REDIRECT_URL, &location)
      if RedirectChain.redirectStatuses.contains(status), let location {
        _ = try chain.follow(String(cString: location))
        continue
      }
      guard (200...299).contains(status) else { throw .invalidDownloadStatusCode(status) }
      break
    }
    lseek(sink.descriptor, 0, SEEK_SET)
    keepFile = true
    return sink.descriptor
  }

  /// Where the body goes: a temporary file, unlinked as soon as it is made. A redirect's body
  /// is read and dropped instead, up to ``Transfer/maxDrained`` bytes.
  private final class FileSink {
    let descriptor: Int32
    let easy: UnsafeMutableRawPointer
    let limit: UInt64
    let stop: StopFlag?
    var written: UInt64 = 0
    var tooLarge = false
    var failure: String?
    /// Bytes of the current hop's redirect body dropped.
    var drained = 0
    /// The redirect's body passed ``Transfer/maxDrained``: the hop stopped reading it.
    var drainedEnough: Bool { drained > Transfer.maxDrained }

    init(easy: UnsafeMutableRawPointer, limit: UInt64, stop: StopFlag?) throws(ImageCacheError) {
      self.easy = easy
      self.limit = limit
      self.stop = stop
      do {
        descriptor = try FileSystem.makeScratchFile(for: "sitemap")
      } catch {
        throw .localFailure(reason: "cannot create a temporary file: \(error)")
      }
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
      var status = 0
      ic_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
      if RedirectChain.redirectStatuses.contains(status) {
        drained += bytes.count
        return !drainedEnough
      }
      written += UInt64(bytes.count)
      guard written <= limit else {
        tooLarge = true
        return false
      }
      do {
        try FileSystem.writeAll(bytes, to: descriptor, path: "sitemap temporary file")
      } catch {
        failure = "\(error)"
        return false
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
