import CCurl
import Core
import Foundation
import Synchronization

/// One download to make.
public struct DownloadRequest: Sendable {
  public var url: URL
  /// The job's and the URL's headers, on top of SD's defaults.
  public var headers: [String: String] = [:]
  /// Where else than the URL's own origin `headers` go when a redirect leads there.
  public var trustedOrigins: Set<Origin> = []
  /// Overrides the configured idle timeout (the `downloadTimeout` context key).
  public var timeout: TimeInterval?
  /// Stored validators: sent as `If-None-Match` / `If-Modified-Since` (refreshCached).
  public var validators: CacheValidators?
  public var allowInvalidSSLCertificates = false
  public var handleCookies = false
  /// Where it goes among the downloads waiting for room in the limits.
  public var priority = DownloadPriority.normal
  /// The `Accept` header, SD's for images unless a document (a sitemap) asks for its own.
  public var accept = "image/*,*/*;q=0.8"
  /// Where a 2xx body goes: kept in memory for the response (`nil`: an image), or written to
  /// this open file (a document), whose descriptor stays the caller's.
  public var bodyFile: Int32?
  /// Where a 2xx body kept for the response goes once it passes
  /// ``Transfer/memoryBuffer``: a hidden temporary file made in this folder (the cache folder,
  /// so that the store renames it into place), written as the bytes arrive. `nil`: the whole
  /// body stays in memory.
  public var spillFolder: String?

  public init(url: URL) {
    self.url = url
  }
}

/// A finished download: a 2xx with its whole body, or a 304 answer to a conditional request.
public struct DownloadResponse: Sendable {
  public var status: Int
  /// The body: in memory, or the mapping of ``spilledBody``'s file.
  public var body: Data
  /// The file holding the body when it passed the memory buffer (``DownloadRequest/spillFolder``):
  /// moved into place by the store, removed when the response is dropped.
  public var spilledBody: SpilledBody?
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
  /// Ended before its first request was sent: the downloader was shut down, or the download
  /// waited for room in its limits when it was cancelled or its start condition said no.
  public var notStarted = false
  /// The server refused the HTTP/2 stream before answering (RST_STREAM REFUSED_STREAM): its
  /// host is held back for ``retryAfter`` as after a 429.
  public var refusedStream = false
  /// A refusal that answered a probe of the origin's adaptive limit
  /// (``AdaptiveLimit/refusalIsProbe(inFlight:sentIn:)``): the run asked past what the origin
  /// served, so the refusal is the run's own doing, answered by the limit's cut.
  public var refusedProbe = false
  /// The certificates it was checked against are the run's own (`--cacert`, `--capath`, the
  /// CA environment): an untrusted server certificate may be their fault, not the server's.
  public var ownCertificateAuthorities = false

  public init(_ error: ImageCacheError, retryAfter: TimeInterval? = nil) {
    self.error = error
    self.retryAfter = retryAfter
  }

  static var cancelledBeforeStart: DownloadFailure {
    var failure = DownloadFailure(.cancelled)
    failure.notStarted = true
    return failure
  }
}

/// The HTTP side of SD's downloader on libcurl's multi interface: one thread drives every
/// transfer (HTTP/1.1 keep-alive, HTTP/2 multiplexed over TLS), with SD's default headers,
/// redirects followed hop by hop (http and https only, at most `maxRedirects`, the job's headers
/// kept to the first origin and the trusted ones), the idle timeout, a total deadline and a
/// size limit counted after decompression. Its thread and handles live for one
/// ``withDownloader(configuration:_:)`` scope.
public final class Downloader: Sendable {
  public let configuration: DownloaderConfiguration
  /// Started by the first download, so that a run of cache hits never starts the thread or
  /// opens a connection; `stopped` once shut down.
  private let state = Mutex<(loop: TransferLoop?, stopped: Bool)>((nil, false))

  /// The longest the transfer thread waits in `curl_multi_poll` before it looks again. Work
  /// queued for it wakes it at once; tests make this long to show that nothing waits for it.
  private let idleWaitMilliseconds: Int32

  /// The most downloads at once that one host may be given, whatever it speaks, as its
  /// ``HostTable`` keeps the limit: a caller that queues ahead of the downloader (so that a
  /// download that ends is followed at once) queues a multiple of it.
  package var mostPerHost: Int { HostTable.mostPerHost(configuration) }

  /// Callers use ``withDownloader(configuration:_:)``; tests of this package that keep one
  /// downloader across a test's steps create and shut it down themselves.
  package init(
    configuration: DownloaderConfiguration = DownloaderConfiguration(),
    idleWaitMilliseconds: Int32 = 1000
  ) {
    self.configuration = configuration
    self.idleWaitMilliseconds = idleWaitMilliseconds
  }

  /// Runs libcurl's process-wide set-up (OpenSSL's with it) now, once per process, so that a
  /// caller can overlap it with other work; the first download runs it otherwise.
  public static func prepareLibrary() {
    _ = curlInitialised
  }

  /// Runs `body` with a downloader whose transfer thread is stopped when it returns or throws,
  /// as async-http-client's `withHTTPClient` does with its client.
  public static func withDownloader<Result>(
    configuration: DownloaderConfiguration = DownloaderConfiguration(),
    _ body: (Downloader) async throws -> Result
  ) async throws -> Result {
    let downloader = Downloader(configuration: configuration)
    let result: Result
    do {
      result = try await body(downloader)
    } catch {
      await downloader.shutdown()
      throw error
    }
    await downloader.shutdown()
    return result
  }

  /// Cancels what is in flight and stops the transfer thread. No download may start afterwards
  /// (one that tries fails as cancelled).
  package func shutdown() async {
    await markStopped()?.stop()
  }

  /// Starts ``shutdown()`` and returns at once: the transfer thread closes its connections
  /// while the caller goes on (the scope's end still waits for it). For a caller that knows,
  /// on the thread where it learns it, that nothing more will be downloaded.
  public func beginShutdown() {
    markStopped()?.requestStop()
  }

  /// ``shutdown()`` for a caller that is not a task: returns once the transfer thread has
  /// ended.
  package func shutdownAndWait() {
    markStopped()?.stopAndWait()
  }

  /// Refuses every download from now on; the loop to stop, if one started.
  private func markStopped() -> TransferLoop? {
    state.withLock { state in
      state.stopped = true
      return state.loop
    }
  }

  /// Downloads `request.url`, or fails with SD's error for what went wrong. Cancelling the task
  /// cancels the transfer.
  public func download(_ request: DownloadRequest) async throws(DownloadFailure) -> DownloadResponse
  {
    guard let loop = startedLoop() else { throw .cancelledBeforeStart }
    let transfer = Transfer(request: request, configuration: configuration)
    let result = await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        transfer.completion = { continuation.resume(returning: $0) }
        loop.submit(.start(transfer))
      }
    } onCancel: {
      loop.submit(.cancel(transfer))
    }
    return try result.get()
  }

  /// A download in flight, started by ``start(_:completion:)``.
  public struct Handle: Sendable {
    fileprivate let transfer: Transfer
    fileprivate let loop: TransferLoop
  }

  /// Starts downloading `request.url` without a task: `completion` is called once, on the
  /// transfer thread, when the download ends (it must be quick: queue the result and return).
  /// The prefetcher uses it to take finished downloads in batches, and queues more than the
  /// limits let run (``PrefetchConfiguration/concurrency``, per host too): the rest wait on the
  /// transfer thread and start the moment one ends. `startsIf`, asked on that thread when a
  /// waiting download's turn comes, can end it unsent instead (cancelled, `notStarted`): a run
  /// that has stopped starts nothing new.
  public func start(
    _ request: DownloadRequest, startsIf: (@Sendable () -> Bool)? = nil,
    completion: @escaping @Sendable (Result<DownloadResponse, DownloadFailure>) -> Void
  ) -> Handle? {
    guard let loop = startedLoop() else {
      completion(.failure(.cancelledBeforeStart))
      return nil
    }
    let transfer = Transfer(request: request, configuration: configuration)
    transfer.completion = completion
    transfer.startsIf = startsIf
    loop.submit(.start(transfer))
    return Handle(transfer: transfer, loop: loop)
  }

  /// Cancels a download started by ``start(_:completion:)``: its completion gets `cancelled`
  /// unless it had ended already.
  public func cancel(_ handle: Handle) {
    handle.loop.submit(.cancel(handle.transfer))
  }

  /// Each host's limit with `--per-host-concurrency auto`, as of now (none with fixed limits).
  public var hostLimits: [HostLimit] {
    HostTable.report(state.withLock { $0.loop }?.adaptiveLimits.withLock { $0 } ?? [:])
  }

  /// The origins that refused at the knee of their adaptive limit since the downloader started,
  /// as of now: what to remember for the next runs (``OriginRefusal``), or `nil` for an origin
  /// that refuses at random (to forget any refusal the state holds of it). A refusal served as
  /// many cleanly since is left out: an earlier run's refusal stays in the state (a run kept
  /// under it never served past it). Empty with fixed limits.
  public var refusals: [Origin: OriginRefusal?] {
    state.withLock { $0.loop }?.refusals.withLock { $0 } ?? [:]
  }

  /// The hosts that asked to wait (429 or 503 with `Retry-After`) since the downloader
  /// started, and how long their downloads were held back, as of now.
  public var hostBackoffs: [HostBackoff] {
    guard let loop = state.withLock({ $0.loop }) else { return [] }
    return HostTable.report(
      loop.backoffLog.withLock { $0 }, at: DispatchTime.now().uptimeNanoseconds)
  }

  private func startedLoop() -> TransferLoop? {
    state.withLock { state -> TransferLoop? in
      guard !state.stopped else { return nil }
      if state.loop == nil {
        state.loop = TransferLoop(
          configuration: configuration, idleWaitMilliseconds: idleWaitMilliseconds)
      }
      return state.loop
    }
  }

  /// The libcurl loaded and what it was built with, for `--version`.
  public static var libcurlVersion: String {
    guard let info = curl_version_info(ic_curl_version_now)?.pointee else { return "libcurl" }
    var text = "libcurl " + String(cString: info.version)
    var features: [String] = []
    if let ssl = info.ssl_version { features.append(String(cString: ssl)) }
    if let zlib = info.libz_version { features.append("zlib/" + String(cString: zlib)) }
    if let nghttp2 = info.nghttp2_version { features.append("nghttp2/" + String(cString: nghttp2)) }
    if !features.isEmpty { text += " (" + features.joined(separator: ", ") + ")" }
    return text
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
}
