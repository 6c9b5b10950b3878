import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import State
import Synchronization
import TestSupport
import XCTest

@testable import Runner

/// A dry run's plan is the run's own decisions (one loop, one `decide`), so it cannot disagree
/// with the run: shown on a manifest of every kind of line, a cache that holds some of them,
/// a blacklist, a state file that cannot be read and a namespace whose state is broken, planned
/// first, then run, line by line.
final class PlanMatchesRunTests: LoopbackTestCase {
  private let shard = Shard(index: 0, count: 2)!
  private var location: CacheLocation!

  override var routes: [String: Route] {
    var routes = Self.images
    routes["/missing.png"] = { _ in ServerResponse(status: 404, body: Data("gone".utf8)) }
    for index in 0..<64 {
      routes["/img-\(index).png"] = { request in
        // A revalidation of what is cached is answered "not modified".
        request.header("If-None-Match") == "\"v1\""
          ? ServerResponse(status: 304) : .image(Fixtures.png, type: "image/png")
      }
    }
    return routes
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
    try FileSystem.createDirectory(path: location.diskCachePath)
  }

  /// `count` URLs made by `make` from 0, 1, 2... whose keys `shard` owns (or does not own).
  private func urls(
    _ count: Int, ownedByThisShard: Bool = true, from first: inout Int, _ make: (Int) -> String
  ) -> [String] {
    var found: [String] = []
    while found.count < count {
      let url = make(first)
      first += 1
      if Prefetcher.belongs(PrefetchItem(url: url), to: shard) == ownedByThisShard {
        found.append(url)
      }
    }
    return found
  }

  func testTheDryRunsPlanIsTheRunsOutcomeLineByLine() async throws {
    var used = 0
    let image: (Int) -> String = { self.server.url("/img-\($0).png") }
    let mine = urls(10, from: &used, image)
    let others = urls(2, ownedByThisShard: false, from: &used, image)
    let (hit, download, listed, cachedOnly, missOnly, revalidated) = (
      mine[0], mine[1], mine[2], mine[3], mine[4], mine[5]
    )
    let (variantOfCached, variantOfMissing, inCorrupt, inLinked) = (
      mine[6], mine[7], mine[8], mine[9]
    )
    let missing = urls(1, from: &used) { self.server.url("/missing.png?n=\($0)") }[0]
    let notHTTP = urls(1, from: &used) { "ftp://127.0.0.1/\($0).png" }[0]
    let disk = DiskCache(location: location)
    for url in [hit, cachedOnly, revalidated, variantOfCached] {
      try disk.store(Fixtures.png, forKey: url)
    }
    let store = try StateStore(location: location, shard: shard)
    try store.recordFailure(url: listed, code: 1001, name: "badImageData", reason: "r", at: Date())
    try store.setValidators(
      CacheValidators(cacheKey: revalidated, etag: "\"v1\"", lastModified: nil, updatedAt: Date()))
    // A state file of another run that cannot be read: a warning in both, never a failure.
    try Data("not a database".utf8).write(
      to: URL(fileURLWithPath: location.stateDirectory + "/state.sqlite"))
    // A namespace whose own state file is corrupt: a run moves it aside and goes on.
    let corrupt = CacheLocation(directory: location.directory, namespace: "corrupt")
    try FileSystem.createDirectory(path: corrupt.stateDirectory)
    try Data("not a database".utf8).write(
      to: URL(fileURLWithPath: corrupt.stateDirectory + "/" + StateStore.fileName(shard: shard)))
    // One whose state file is a symbolic link: refused, its lines fail before any request.
    let linked = CacheLocation(directory: location.directory, namespace: "linked")
    try FileSystem.createDirectory(path: linked.stateDirectory)
    try FileManager.default.createSymbolicLink(
      atPath: linked.stateDirectory + "/" + StateStore.fileName(shard: shard),
      withDestinationPath: store.path)

    var thumbnail = ImageContext()
    thumbnail.variant = VariantRequest(thumbnail: ThumbnailSize(width: 8, height: 8))
    func namespace(_ name: String) -> ImageContext {
      var context = ImageContext()
      context.namespace = name
      return context
    }
    func item(
      _ url: String, _ options: Set<ImageOption> = [], _ context: ImageContext = ImageContext()
    )
      -> Result<PrefetchItem, ConfigurationError>
    {
      .success(PrefetchItem(url: url, options: ImageOptions(options), context: context))
    }
    let items: [Result<PrefetchItem, ConfigurationError>] = [
      item(hit), item(download), item(listed), item(cachedOnly, [.fromCacheOnly]),
      item(missOnly, [.fromCacheOnly]), item(revalidated, [.refreshCached]),
      item(variantOfCached, [], thumbnail), item(variantOfMissing, [], thumbnail),
      item(inCorrupt, [], namespace("corrupt")), item(inLinked, [], namespace("linked")),
      item(missing), item(notHTTP), item("not a url"), item(others[0]), item(others[1]),
      .failure(ConfigurationError(source: "urls.txt", line: 15, message: "not JSON")),
    ]
    var configuration = PrefetchConfiguration()
    configuration.shard = shard

    let (plan, planWarnings) = try await Downloader.withDownloader(
      configuration: configuration.http
    ) { documents in
      let manager = try ImageManager(
        location: location, configuration: configuration.pipeline,
        namespaces: PlanningNamespaces(shard: shard), readOnly: true)
      defer { manager.close() }
      let plan = await Prefetcher(
        manager: manager, downloader: documents, configuration: configuration
      ).plan(items)
      return (plan, manager.warnings)
    }
    XCTAssertEqual(server.allRequests.count, 0, "a plan requests nothing")

    let outcomes = Mutex<[String: LoadOutcome]>([:])
    let (report, runWarnings) = try await Downloader.withDownloader(
      configuration: configuration.http
    ) { downloader in
      let manager = try ImageManager(
        location: location, configuration: configuration.pipeline,
        namespaces: StateNamespaces(location: location, store: store, shard: shard))
      defer { manager.close() }
      var prefetcher = Prefetcher(
        manager: manager, downloader: downloader, configuration: configuration)
      prefetcher.observesOutcome = { item, outcome in outcomes.withLock { $0[item.url] = outcome } }
      return (await prefetcher.run(items), manager.warnings)
    }

    let planned = Dictionary(uniqueKeysWithValues: plan.urls.map { ($0.url, $0.action) })
    let done = outcomes.withLock { $0 }.mapValues(Self.action)
    XCTAssertEqual(planned, done, "the plan, line by line, is what the run did")
    XCTAssertEqual(
      planned,
      [
        hit: .hit, download: .download, listed: .blacklisted, cachedOnly: .hit,
        missOnly: .miss, revalidated: .revalidate, variantOfCached: .hit,
        variantOfMissing: .download, inCorrupt: .download, inLinked: .failed,
        missing: .download, notHTTP: .invalid, "not a url": .invalid,
      ], "every kind of line is in the manifest")
    XCTAssertEqual(plan.urls.map(\.url), items.prefix(13).map { try! $0.get().url })
    XCTAssertEqual(plan.counts.total, report.total)
    XCTAssertEqual(plan.counts.skipped + plan.counts.miss, report.skipped)
    XCTAssertEqual(plan.lineErrors, report.lineErrors)
    XCTAssertEqual(report.otherShards, 2)
    // The same files are said, the plan in the conditional.
    for file in [
      "default/.imagecache/state.sqlite", "corrupt/.imagecache/state.shard-0-of-2.sqlite",
    ] {
      XCTAssertEqual(
        planWarnings.filter { $0.contains(file) }.count, 1, "\(file): \(planWarnings)")
      XCTAssertEqual(
        runWarnings.filter { $0.contains(file) }.count, 1, "\(file): \(runWarnings)")
    }
  }

  /// A plan's counts written before `failed` was counted still read, with 0 failed.
  func testAPlanOfAnEarlierVersionStillReads() throws {
    let earlier = Data(
      (#"{"total":3,"hit":1,"download":1,"revalidate":0,"blacklisted":0,"invalid":0,"miss":0,"#
        + #""skipped":1,"inputsFailed":0}"#).utf8)
    let counts = try JSONDecoder().decode(PrefetchPlanCounts.self, from: earlier)
    XCTAssertEqual(counts.failed, 0)
    XCTAssertEqual(counts.hit + counts.download + counts.skipped, counts.total)
    var now = counts
    now.failed = 2
    XCTAssertEqual(
      try JSONDecoder().decode(PrefetchPlanCounts.self, from: JSONEncoder().encode(now)), now)
  }

  /// The run's outcome as a plan names it: a failed download was a download, a failure before
  /// any request is `failed`.
  private static func action(_ outcome: LoadOutcome) -> PlannedAction {
    switch outcome {
    case .memoryHit, .diskHit: .hit
    case .downloaded: .download
    case .notModified: .revalidate
    case .cacheMiss: .miss
    case .blacklisted: .blacklisted
    case .failed(.invalidURL, _): .invalid
    case .failed(.stateFailed, _), .failed(.namespaceLocked, _), .failed(.localFailure, _):
      .failed
    case .failed: .download
    }
  }
}
