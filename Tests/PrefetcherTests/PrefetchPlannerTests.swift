import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import TestSupport
import XCTest

/// The plan of `prefetch --dry-run` is the pipeline's own decision (SPEC section 2, steps 1-4),
/// from the cache and the URL alone, taken by a planning manager: these are the cases the
/// command-line tests leave out.
final class PrefetchPlannerTests: TemporaryFolderTestCase {
  var location: CacheLocation!
  let url = "https://cdn.example/p/a.jpg"

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.path)
    try FileSystem.createDirectory(path: location.diskCachePath)
  }

  private func plan(_ options: Set<ImageOption> = [], context: ImageContext = ImageContext())
    async throws -> PlannedAction
  {
    let manager = try ImageManager(
      location: location, namespaces: MemoryNamespaces(), readOnly: true)
    // Never started: a plan requests nothing.
    let downloader = Downloader()
    let plan = await Prefetcher(manager: manager, downloader: downloader).plan([
      .success(PrefetchItem(url: url, options: ImageOptions(options), context: context))
    ])
    return try XCTUnwrap(plan.urls.first).action
  }

  func testACachedURLIsRevalidatedWithRefreshCachedAndAMissIsSkippedWithFromCacheOnly() async throws
  {
    let planned1 = try await plan([.fromCacheOnly])
    XCTAssertEqual(planned1, .miss)
    try DiskCache(location: location).store(Fixtures.jpeg, forKey: url)
    let planned2 = try await plan()
    XCTAssertEqual(planned2, .hit)
    let planned3 = try await plan([.refreshCached])
    XCTAssertEqual(planned3, .revalidate)
    let planned4 = try await plan([.refreshCached, .fromCacheOnly])
    XCTAssertEqual(planned4, .hit, "never a request")
    let planned5 = try await plan([.fromLoaderOnly])
    XCTAssertEqual(planned5, .download)
  }

  func testAVariantIsAHitWhenItsOriginalIsCached() async throws {
    var context = ImageContext()
    context.variant = VariantRequest(thumbnail: ThumbnailSize(width: 10, height: 10))
    let planned6 = try await plan(context: context)
    XCTAssertEqual(planned6, .download)
    try DiskCache(location: location).store(Fixtures.jpeg, forKey: url)
    let planned7 = try await plan(context: context)
    XCTAssertEqual(planned7, .hit, "made from the original, no request")
  }
}
