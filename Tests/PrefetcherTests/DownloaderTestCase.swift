import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import TestSupport
import XCTest

/// A test of downloads against the loopback server (``LoopbackTestCase``), into a cache in the
/// temporary folder: every downloader the test makes is shut down after it, and every
/// prefetcher keeps its runs' state in memory (no database and no lock).
class DownloaderTestCase: LoopbackTestCase {
  /// The cache: `cache` in the temporary folder.
  var location: CacheLocation!
  /// Every downloader the test made, shut down after it.
  var downloaders: [Downloader] = []

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  override func tearDown() async throws {
    for downloader in downloaders { await downloader.shutdown() }
    try await super.tearDown()
  }

  /// A downloader with `configuration`, shut down after the test.
  func makeDownloader(_ configuration: DownloaderConfiguration = DownloaderConfiguration())
    -> Downloader
  {
    let downloader = Downloader(configuration: configuration)
    downloaders.append(downloader)
    return downloader
  }

  /// A prefetcher of `configuration` into ``location``, with a manager of its own and new,
  /// empty state, on `downloader` or else on a new one of `configuration.http`.
  func makePrefetcher(_ configuration: PrefetchConfiguration, on downloader: Downloader? = nil)
    throws -> Prefetcher
  {
    try Prefetcher(
      location: location, configuration: configuration, namespaces: MemoryNamespaces(),
      downloader: downloader ?? makeDownloader(configuration.http))
  }
}
