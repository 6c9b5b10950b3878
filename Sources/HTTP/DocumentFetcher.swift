import Core
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Fetches one document that is not an image (a sitemap, a manifest named by URL) into an
/// unlinked temporary file, through the downloader's transfer thread: the rules and limits of
/// image downloads are then the same code (SPEC sections 2 and 6): http and https only,
/// redirects followed hop by hop by ``RedirectChain`` (the job's headers only to the first
/// URL's origin and the trusted origins), the connect and idle timeout, the total deadline,
/// the size limit after decompression of a `Content-Encoding`.
///
/// A fetch is a transfer like any other to its host: it counts against `concurrency` and the
/// host's limits, its rate and back-off (a sitemap's origin is usually the images' origin,
/// and it is owed the same politeness), and it goes before the downloads waiting for room
/// (high priority), since the run's next items wait for it.
///
/// It blocks the calling thread until the document is in: call it off the concurrency pool
/// (the prefetcher reads its items on a thread of its own, ``ItemFeed``).
public enum DocumentFetcher {
  /// The file descriptor of a temporary file holding the body, positioned at its start; the
  /// caller closes it. The file has no name: nothing is left behind, whatever happens.
  /// - Parameters:
  ///   - downloader: the run's (a prefetch's, a dry run's, the migrate pass's); without one (a
  ///     library caller that gave none), a downloader is made for this fetch and stopped, its
  ///     thread ended, before this returns.
  ///   - stop: the run's stop channel, watched while the fetch waits, as is the cancellation
  ///     of the producing thread (``ProducerContext``); once either is set, the fetch is
  ///     cancelled at once and ends as `cancelled` (a signal must not wait for a slow
  ///     server).
  public static func fetch(
    _ url: URL, through downloader: Downloader? = nil, configuration: DownloaderConfiguration,
    headers: [String: String] = [:], trustedOrigins: Set<Origin> = [],
    allowInvalidSSLCertificates: Bool = false, stop: StopFlag? = nil
  ) throws(ImageCacheError) -> Int32 {
    guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
      throw .invalidURL(url.absoluteString, reason: "only http and https are fetched")
    }
    let descriptor: Int32
    do {
      descriptor = try FileSystem.makeScratchFile(for: "sitemap")
    } catch {
      throw .localFailure(reason: "cannot create a temporary file: \(error)")
    }
    var request = DownloadRequest(url: url)
    request.headers = headers
    request.trustedOrigins = trustedOrigins
    request.allowInvalidSSLCertificates = allowInvalidSSLCertificates
    request.accept = "application/xml,text/xml;q=0.9,*/*;q=0.8"
    request.bodyFile = descriptor
    request.priority = .high
    let owned = downloader == nil ? Downloader(configuration: configuration) : nil
    // A downloader of its own (a caller that gave none) is gone, thread and all, on return.
    defer { owned?.shutdownAndWait() }
    let context = ProducerContext.current
    let stops = [stop, context?.cancellation].compactMap { $0 }
    context?.willWait()
    switch wait(for: request, on: downloader ?? owned!, stops: stops) {
    case .success:
      lseek(descriptor, 0, SEEK_SET)
      return descriptor
    case .failure(let failure):
      close(descriptor)
      throw failure.notStarted ? .cancelled : failure.error
    }
  }

  /// Starts `request` and waits for its end, cancelling it the moment one of `stops` is set.
  private static func wait(
    for request: DownloadRequest, on downloader: Downloader, stops: [StopFlag]
  ) -> Result<DownloadResponse, DownloadFailure> {
    let done = DispatchSemaphore(value: 0)
    let answer = Mutex<Result<DownloadResponse, DownloadFailure>?>(nil)
    let handle = downloader.start(request, startsIf: { !stops.contains { $0.isStopped } }) {
      result in
      answer.withLock { $0 = result }
      done.signal()
    }
    let observations = stops.map { stop in
      stop.onStop { if let handle { downloader.cancel(handle) } }
    }
    done.wait()
    for observation in observations { observation.cancel() }
    return answer.withLock { $0 } ?? .failure(DownloadFailure(.cancelled))
  }
}
