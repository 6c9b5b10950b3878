import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import State
import TestSupport
import XCTest

/// The plan of `prefetch --dry-run` takes SD's pipeline decisions (SPEC section 2, steps 1-4)
/// from the cache and the URL alone: these are the cases the command-line tests leave out.
final class PrefetchPlannerTests: TemporaryFolderTestCase {
  var location: CacheLocation!
  let url = "https://cdn.example/p/a.jpg"

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.path)
    try FileSystem.createDirectory(path: location.diskCachePath)
  }

  private func plan(_ options: Set<ImageOption> = [], context: ImageContext = ImageContext())
    throws -> PlannedAction
  {
    try PrefetchPlanner(
      location: location, timeToLive: nil,
      blacklist: { try StateStore.blacklistOfEveryStateFile(location: $0, leavingNoTrace: true) }
    ).plan(
      PrefetchItem(url: url, options: ImageOptions(options), context: context)
    ).action
  }

  func testACachedURLIsRevalidatedWithRefreshCachedAndAMissIsSkippedWithFromCacheOnly() throws {
    XCTAssertEqual(try plan([.fromCacheOnly]), .miss)
    try DiskCache(location: location).store(Fixtures.jpeg, forKey: url)
    XCTAssertEqual(try plan(), .hit)
    XCTAssertEqual(try plan([.refreshCached]), .revalidate)
    XCTAssertEqual(try plan([.refreshCached, .fromCacheOnly]), .hit, "never a request")
    XCTAssertEqual(try plan([.fromLoaderOnly]), .download)
  }

  func testAVariantIsAHitWhenItsOriginalIsCached() throws {
    var context = ImageContext()
    context.variant = VariantRequest(thumbnail: ThumbnailSize(width: 10, height: 10))
    XCTAssertEqual(try plan(context: context), .download)
    try DiskCache(location: location).store(Fixtures.jpeg, forKey: url)
    XCTAssertEqual(try plan(context: context), .hit, "made from the original, no request")
  }
}
