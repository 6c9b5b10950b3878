import Core
import TestSupport
import XCTest

final class MemoryCacheTests: XCTestCase {
  func testEvictsLeastRecentlyUsedByCount() {
    let cache = MemoryCache(countLimit: 2)
    cache.setData(Data("a".utf8), forKey: "a")
    cache.setData(Data("b".utf8), forKey: "b")
    XCTAssertNotNil(cache.data(forKey: "a"))  // a is now the most recent
    cache.setData(Data("c".utf8), forKey: "c")
    XCTAssertNotNil(cache.data(forKey: "a"))
    XCTAssertNil(cache.data(forKey: "b"))
    XCTAssertNotNil(cache.data(forKey: "c"))
    XCTAssertEqual(cache.count, 2)
  }

  /// What an entry of `bytes` under a one-letter key costs.
  private let entryCost = { (bytes: Int) in bytes + 1 + MemoryCache.entryOverhead }

  func testEvictsByTotalCost() {
    let cache = MemoryCache(totalCostLimit: entryCost(40) * 5 / 2)
    cache.setData(Data(count: 40), forKey: "a")
    cache.setData(Data(count: 40), forKey: "b")
    cache.setData(Data(count: 40), forKey: "c")
    XCTAssertNil(cache.data(forKey: "a"))
    XCTAssertEqual(cache.totalCost, 2 * entryCost(40))
  }

  func testEntryLargerThanTheCostLimitIsNotKept() {
    let limit = 5 + "small".utf8.count + MemoryCache.entryOverhead
    let cache = MemoryCache(totalCostLimit: limit)
    cache.setData(Data(count: 5), forKey: "small")
    cache.setData(Data(count: limit - MemoryCache.entryOverhead), forKey: "big")
    XCTAssertNil(cache.data(forKey: "big"))
    XCTAssertNotNil(cache.data(forKey: "small"))
  }

  func testReplacingAnEntryUpdatesItsCost() {
    let cache = MemoryCache()
    cache.setData(Data(count: 10), forKey: "a")
    cache.setData(Data(count: 3), forKey: "a")
    XCTAssertEqual(cache.totalCost, entryCost(3))
    XCTAssertEqual(cache.count, 1)
    cache.removeData(forKey: "a")
    XCTAssertEqual(cache.totalCost, 0)
  }

  func testConcurrentUseKeepsTheLimits() async {
    let cache = MemoryCache(totalCostLimit: 1000, countLimit: 50)
    await withTaskGroup(of: Void.self) { group in
      for worker in 0..<8 {
        group.addTask {
          for i in 0..<2000 {
            let key = "k\((worker * 7 + i) % 300)"
            if i % 3 == 0 {
              _ = cache.data(forKey: key)
            } else {
              cache.setData(Data(count: (i % 40) + 1), forKey: key)
            }
          }
        }
      }
    }
    XCTAssertLessThanOrEqual(cache.count, 50)
    XCTAssertLessThanOrEqual(cache.totalCost, 1000)
  }

  /// An entry that holds little but its key (an image on disk, a tiny image) still costs its
  /// key and its bookkeeping: a manifest of long URLs or of tiny images stays under the limit
  /// however long it is.
  func testAnEntryCostsItsKeyAndItsBookkeepingToo() {
    let limit = 1 << 20
    let query = String(repeating: "q", count: 60_000)
    let longKeys = MemoryCache(totalCostLimit: limit)
    let tinyImages = MemoryCache(totalCostLimit: limit)
    for index in 0..<10_000 {
      longKeys.setOnDisk(forKey: "https://example.com/\(index).gif?\(query)", cost: 42)
      tinyImages.setOnDisk(forKey: "https://example.com/\(index).gif", cost: 42)
    }
    XCTAssertLessThanOrEqual(longKeys.count * query.utf8.count, limit)
    XCTAssertLessThanOrEqual(tinyImages.count * MemoryCache.entryOverhead, limit)
  }
}

final class ImageCacheTests: TemporaryFolderTestCase {
  var cache: ImageCache!

  override func setUpWithError() throws {
    try super.setUpWithError()
    cache = ImageCache(
      memory: MemoryCache(), disk: DiskCache(location: CacheLocation(directory: temporary.path)))
  }

  func testQuerySaysWhereTheHitCameFrom() throws {
    let key = "https://example.com/a.png"
    XCTAssertNil(try cache.query(key: key))
    try cache.store(Fixtures.png, forKey: key, cacheType: .disk)
    XCTAssertEqual(try cache.query(key: key)?.source, .disk)
    // The disk hit was promoted to memory, as SD does.
    XCTAssertEqual(try cache.query(key: key)?.source, .memory)
  }

  func testStoreCacheTypeChoosesTheTiers() throws {
    try cache.store(Fixtures.png, forKey: "m", cacheType: .memory)
    XCTAssertTrue(cache.memory.containsData(forKey: "m"))
    XCTAssertFalse(try cache.disk.containsData(forKey: "m"))

    try cache.store(Fixtures.png, forKey: "n", cacheType: .none)
    XCTAssertNil(try cache.query(key: "n"))

    try cache.store(Fixtures.png, forKey: "all", cacheType: .all)
    XCTAssertTrue(cache.memory.containsData(forKey: "all"))
    XCTAssertTrue(try cache.disk.containsData(forKey: "all"))
  }

  func testQueryCacheTypeLimitsWhereToLook() throws {
    try cache.store(Fixtures.png, forKey: "d", cacheType: .disk)
    try cache.store(Fixtures.png, forKey: "m", cacheType: .memory)
    XCTAssertNil(try cache.query(key: "d", cacheType: .memory))
    XCTAssertNil(try cache.query(key: "m", cacheType: .disk))
    XCTAssertNil(try cache.query(key: "d", cacheType: .none))
    XCTAssertEqual(try cache.query(key: "d", cacheType: .disk)?.source, .disk)
    XCTAssertEqual(try cache.query(key: "m", cacheType: .memory)?.source, .memory)
  }

  /// An image stored in both tiers is a memory hit from then on, as in SD, but its bytes are
  /// not held twice: the memory entry stands for the file, and reads it when the bytes are
  /// asked for. Bytes stored in memory only are held.
  func testAnImageOnDiskIsAMemoryHitWithoutASecondCopyOfItsBytes() throws {
    let key = "https://example.com/both.png"
    try cache.store(Fixtures.png, forKey: key, cacheType: .all)
    XCTAssertEqual(cache.memory.entry(forKey: key), .onDisk)
    XCTAssertEqual(
      cache.memory.totalCost, Fixtures.png.count + key.utf8.count + MemoryCache.entryOverhead,
      "counted at its size")
    XCTAssertEqual(try cache.query(key: key, readData: false)?.source, .memory)
    let hit = try XCTUnwrap(try cache.query(key: key))
    XCTAssertEqual(hit.source, .memory)
    XCTAssertEqual(hit.data, Fixtures.png)

    try cache.store(Fixtures.jpeg, forKey: "memory-only", cacheType: .memory)
    XCTAssertEqual(cache.memory.entry(forKey: "memory-only"), .data(Fixtures.jpeg))

    // A disk hit that is read is recorded in memory the same way.
    let other = "https://example.com/disk.png"
    try cache.store(Fixtures.png, forKey: other, cacheType: .disk)
    XCTAssertEqual(try cache.query(key: other)?.source, .disk)
    XCTAssertEqual(cache.memory.entry(forKey: other), .onDisk)

    // A disk hit under the legacy name (no extension) stays a memory hit, with its bytes.
    let legacy = "https://example.com/legacy.png"
    try Fixtures.png.write(
      to: URL(fileURLWithPath: cache.disk.path + "/" + CacheFileName.md5Hex(legacy)))
    XCTAssertEqual(try cache.query(key: legacy)?.source, .disk)
    let legacyHit = try XCTUnwrap(try cache.query(key: legacy))
    XCTAssertEqual(legacyHit.source, .memory)
    XCTAssertEqual(legacyHit.data, Fixtures.png)

    // The file removed behind the cache's back: the entry goes too, and the bytes are not
    // made up.
    try FileManager.default.removeItem(atPath: cache.disk.cachePath(forKey: key))
    XCTAssertNil(try cache.query(key: key))
    XCTAssertFalse(cache.memory.containsData(forKey: key))
  }

  func testQueryWithoutReadingDataOnlyTouchesTheFile() throws {
    try cache.store(Fixtures.png, forKey: "d", cacheType: .disk)
    let hit = try XCTUnwrap(try cache.query(key: "d", readData: false))
    XCTAssertEqual(hit.source, .disk)
    XCTAssertNil(hit.data)
    XCTAssertFalse(cache.memory.containsData(forKey: "d"))
  }
}
