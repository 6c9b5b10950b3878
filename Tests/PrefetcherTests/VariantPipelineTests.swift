import Core
import Foundation
import HTTP
import Imaging
import Pipeline
import Prefetcher
import TestSupport
import XCTest

/// Thumbnails and transformers through SD 5.21.5's pipeline (issue 12): the derived key first,
/// then the original in the cache, then the network; the original stored under its own key and
/// the variant under the derived one.
final class VariantPipelineTests: DownloaderTestCase {
  var downloader: Downloader!

  override var routes: [String: Route] {
    [
      "/p/large.jpg": { _ in .image(Fixtures.largeJPEG, type: "image/jpeg") },
      "/p/noext": { _ in .image(Fixtures.largeJPEG, type: "image/jpeg") },
      "/p/alpha.png": { _ in .image(Fixtures.alphaPNG, type: "image/png") },
      "/p/anim.gif": { _ in .image(Fixtures.gif, type: "image/gif") },
      "/p/lossy.webp": { _ in .image(Fixtures.webpLossy, type: "image/webp") },
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    downloader = makeDownloader()
  }

  private func context(_ json: String) throws -> ImageContext {
    let object = try JSONDecoder().decode([String: JSONValue].self, from: Data(json.utf8))
    return try ImageContext().applying(object, source: "test")
  }

  private func load(
    _ path: String, _ context: ImageContext, options: Set<ImageOption> = [],
    manager: ImageManager? = nil
  ) async throws -> LoadResult {
    let manager =
      try manager ?? ImageManager(location: location, namespaces: MemoryNamespaces())
    return await Prefetcher(manager: manager, downloader: downloader).load(
      server.url(path), options: ImageOptions(options), context: context)
  }

  private var disk: DiskCache { DiskCache(location: location) }

  private func info(_ key: String) throws -> ImageInfo? {
    guard let data = try disk.data(forKey: key) else { return nil }
    return try ImageValidator(level: .full, maxPixels: 1 << 30).validate(data)
  }

  func testAnOriginalWhoseCacheFileCannotBeReadFailsAsALocalFailureNeverBlacklisted()
    async throws
  {
    let context = try context(#"{"imageThumbnailPixelSize": [200, 200]}"#)
    let url = server.url("/p/large.jpg")
    // A folder in place of the original's file: a read fails, even as root.
    try FileSystem.createDirectory(path: disk.cachePath(forKey: url))
    let result = try await load("/p/large.jpg", context)
    guard case .failed(let error, let blacklisted) = result.outcome else {
      return XCTFail("an unreadable cache file is not a miss: \(result.outcome)")
    }
    XCTAssertEqual(error.name, "localFailure")
    XCTAssertTrue(error.message.contains(disk.cachePath(forKey: url)), error.message)
    XCTAssertFalse(blacklisted)
    XCTAssertFalse(error.blacklistsURL)
    XCTAssertEqual(server.requestCount("/p/large.jpg"), 0, "nothing downloaded over the file")
  }

  func testAVariantIsStoredBesideTheOriginalAndASecondLoadIsAHit() async throws {
    let context = try context(
      ##"{"imageThumbnailPixelSize": [200, 200], "imageTransformer": [{"resizing": {"size": [60, 40], "scaleMode": "aspectFill"}}, {"tint": {"color": "#ff0000"}}]}"##
    )
    let url = server.url("/p/large.jpg")
    let first = try await load("/p/large.jpg", context)
    guard case .downloaded(let bytes, _) = first.outcome else {
      return XCTFail("\(first.outcome)")
    }
    XCTAssertEqual(bytes, Fixtures.largeJPEG.count)
    XCTAssertEqual(try disk.data(forKey: url), Fixtures.largeJPEG, "the original, byte for byte")
    let derived = DerivedKey.key(
      for: url, thumbnail: (200, 200),
      transformers: [
        .resizing(width: 60, height: 40, scaleMode: .aspectFill),
        .tint(color: ImageTransformer.Color(hex: "#ff0000")!, blendMode: 18),
      ])
    XCTAssertEqual(first.variant?.key, derived)
    XCTAssertEqual(
      try info(derived), ImageInfo(format: .jpeg, width: 60, height: 40),
      "the variant decodes, at the transformer's size")
    XCTAssertEqual(first.variant?.format, .jpeg)
    XCTAssertEqual(first.variant?.width, 60)

    let second = try await load("/p/large.jpg", context)
    guard case .diskHit = second.outcome else { return XCTFail("\(second.outcome)") }
    XCTAssertNil(second.variant, "a hit makes nothing")
    XCTAssertEqual(server.requestCount("/p/large.jpg"), 1)
  }

  func testAnOriginalAlreadyOnDiskIsRenderedWithoutADownload() async throws {
    let url = server.url("/p/large.jpg")
    try disk.store(Fixtures.largeJPEG, forKey: url)
    let result = try await load(
      "/p/large.jpg", try context(##"{"imageThumbnailPixelSize": "100x100"}"##))
    guard case .diskHit = result.outcome else { return XCTFail("\(result.outcome)") }
    XCTAssertEqual(server.requestCount("/p/large.jpg"), 0, "nothing downloaded")
    let derived = DerivedKey.key(for: url, thumbnail: (100, 100))
    XCTAssertEqual(try info(derived), ImageInfo(format: .jpeg, width: 100, height: 75))

    // originalQueryCacheType none: the original on disk is not looked at.
    let fresh = try await load(
      "/p/large.jpg",
      try context(
        ##"{"imageThumbnailPixelSize": [50, 50], "originalQueryCacheType": "none"}"##))
    guard case .downloaded = fresh.outcome else { return XCTFail("\(fresh.outcome)") }
    XCTAssertEqual(server.requestCount("/p/large.jpg"), 1)
  }

  func testFromCacheOnlyRendersFromTheOriginalButNeverDownloads() async throws {
    let context = try context(##"{"imageThumbnailPixelSize": [100, 100]}"##)
    let miss = try await load("/p/large.jpg", context, options: [.fromCacheOnly])
    guard case .cacheMiss = miss.outcome else { return XCTFail("\(miss.outcome)") }
    try disk.store(Fixtures.largeJPEG, forKey: server.url("/p/large.jpg"))
    let made = try await load("/p/large.jpg", context, options: [.fromCacheOnly])
    guard case .diskHit = made.outcome, made.variant?.width == 100 else {
      return XCTFail("\(made)")
    }
    XCTAssertEqual(server.requestCount("/p/large.jpg"), 0)
  }

  func testOriginalStoreCacheTypeNoneKeepsOnlyTheVariant() async throws {
    let url = server.url("/p/alpha.png")
    _ = try await load(
      "/p/alpha.png",
      try context(
        ##"{"imageThumbnailPixelSize": [50, 50], "originalStoreCacheType": "none"}"##))
    XCTAssertFalse(try disk.containsData(forKey: url))
    XCTAssertEqual(
      try info(DerivedKey.key(for: url, thumbnail: (50, 50))),
      ImageInfo(format: .png, width: 50, height: 25))
  }

  func testADerivedKeyWithoutExtensionIsWrittenUnderBothNames() async throws {
    let url = server.url("/p/noext") + "?w=1"
    let manager = try ImageManager(location: location, namespaces: MemoryNamespaces())
    let result = await Prefetcher(manager: manager, downloader: downloader).load(
      url, options: ImageOptions(),
      context: try context(##"{"imageThumbnailPixelSize": [40, 40]}"##))
    guard case .downloaded = result.outcome else { return XCTFail("\(result.outcome)") }
    let derived = DerivedKey.key(for: url, thumbnail: (40, 40))
    XCTAssertTrue(derived.hasSuffix("?w=1-Thumbnail({40.000000,40.000000},1)"), derived)
    let names = CacheFileName.variantFileNames(forKey: derived)
    XCTAssertEqual(names.count, 2, "iOS 17's name and the older one")
    for name in names {
      let data = try XCTUnwrap(FileManager.default.contents(atPath: disk.path + "/" + name))
      XCTAssertEqual(
        try ImageValidator(level: .full, maxPixels: 1 << 30).validate(data).width, 40, name)
    }
  }

  func testAThumbnailThenATransformerWithoutExtensionIsWrittenWhereIOS16LooksToo() async throws {
    let url = server.url("/p/noext")
    let result = try await load(
      "/p/noext",
      try context(
        ##"{"imageThumbnailPixelSize": [10, 20], "imageTransformer": {"blur": {"radius": 1}}}"##
      ))
    guard case .downloaded = result.outcome else { return XCTFail("\(result.outcome)") }
    // SD before iOS 17: the raw key through NSString's path methods (one slash after the
    // scheme), named by the raw string's extension.
    let ios16Key =
      "http:/" + url.dropFirst("http://".count)
      + "-Thumbnail({10.000000,20-SDImageBlurTransformer(1.000000).000000},1)"
    let ios17Key = DerivedKey.key(
      for: url, thumbnail: (10, 20), transformers: [.blur(radius: 1)])
    XCTAssertEqual(
      ios17Key,
      url + "-Thumbnail(%7B10.000000,20-SDImageBlurTransformer(1.000000).000000%7D,1)")
    for path in [
      disk.cachePath(forKey: ios17Key),
      disk.path + "/" + CacheFileName.md5Hex(ios16Key) + ".000000},1)",
    ] {
      let data = try XCTUnwrap(FileManager.default.contents(atPath: path), path)
      let info = try ImageValidator(level: .full, maxPixels: 1 << 30).validate(data)
      let (width, height) = (try XCTUnwrap(info.width), try XCTUnwrap(info.height))
      XCTAssertTrue(width <= 10 && height <= 20, "\(info)")
    }
  }

  func testAnimatedOriginalsAreStoredAsTheyAreAndWebPGetsNoVariant() async throws {
    let context = try context(##"{"imageThumbnailPixelSize": [10, 10]}"##)
    let gif = try await load("/p/anim.gif", context)
    XCTAssertEqual(gif.variant?.originalBytes, true)
    XCTAssertEqual(
      try disk.data(forKey: DerivedKey.key(for: server.url("/p/anim.gif"), thumbnail: (10, 10))),
      Fixtures.gif)

    let webp = try await load("/p/lossy.webp", context)
    guard case .downloaded = webp.outcome else { return XCTFail("\(webp.outcome)") }
    XCTAssertNotNil(webp.variant?.skipped)
    let derived = DerivedKey.key(for: server.url("/p/lossy.webp"), thumbnail: (10, 10))
    XCTAssertFalse(try disk.containsData(forKey: derived))
    XCTAssertTrue(try disk.containsData(forKey: server.url("/p/lossy.webp")))
  }

  /// A run counts as derived the variants it made, not those it skipped (a WebP original gets
  /// none): both are in the report's list, one is counted.
  func testOnlyTheVariantsMadeAreCountedAsDerived() async throws {
    let context = try context(##"{"imageThumbnailPixelSize": [10, 10]}"##)
    let manager = try ImageManager(location: location, namespaces: MemoryNamespaces())
    let report = await Prefetcher(manager: manager, downloader: downloader).run(
      ["/p/large.jpg", "/p/lossy.webp"].map {
        .success(PrefetchItem(url: server.url($0), context: context))
      })
    XCTAssertEqual(report.downloaded, 2, "\(report.failures)")
    XCTAssertEqual(report.variants.count, 2)
    XCTAssertEqual(report.variants.filter { $0.skipped == nil }.count, 1)
    XCTAssertEqual(report.derived, 1)
  }

  func testBadVariantContextsNameTheirField() {
    for (json, field) in [
      (##"{"imageThumbnailPixelSize": "big"}"##, "context.imageThumbnailPixelSize"),
      (##"{"imageThumbnailPixelSize": [-1, 5]}"##, "context.imageThumbnailPixelSize"),
      (##"{"imagePreserveAspectRatio": "yes"}"##, "context.imagePreserveAspectRatio"),
      (##"{"imageTransformer": {"filter": {"name": "CISepiaTone"}}}"##, "context.imageTransformer"),
      (
        ##"{"imageEncodeOptions": {"compressionQuality": 2}}"##,
        "context.imageEncodeOptions.compressionQuality"
      ),
      (##"{"originalQueryCacheType": "cloud"}"##, "context.originalQueryCacheType"),
    ] {
      XCTAssertThrowsError(try context(json), json) { error in
        XCTAssertEqual((error as? ConfigurationError)?.field, field, "\(error)")
      }
    }
  }
}
