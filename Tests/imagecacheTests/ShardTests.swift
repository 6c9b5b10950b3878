import Core
import Foundation
import TestSupport
import XCTest

/// Sharded runs (SPEC section 9, issue 11 items 1-3): N worker processes on one cache.
final class ShardTests: LoopbackTestCase {
  static let imageCount = 2000
  static let broken = 30

  override var routes: [String: Route] {
    var routes: [String: Route] = [:]
    for index in 0..<Self.imageCount {
      routes["/i/\(index).jpg"] = { _ in .image(Fixtures.jpeg, type: "image/jpeg") }
    }
    // Not an image: badImageData, which SD 5 blacklists.
    for index in 0..<Self.broken {
      routes["/page/\(index).jpg"] = { _ in .image(Data("<html></html>".utf8), type: "text/html") }
    }
    return routes
  }

  /// The images, then URLs that answer a web page (blacklisted after one attempt).
  private func manifest() throws -> String {
    let path = temporary.appending("urls.txt")
    let urls =
      (0..<Self.imageCount).map { server.url("/i/\($0).jpg") }
      + (0..<Self.broken).map { server.url("/page/\($0).jpg") }
    try urls.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  /// Starts every worker at once and returns their reports' prefetch parts.
  private func workers(
    _ argumentLists: [[String]], environments: [[String: String]?]? = nil
  ) throws -> [PrefetchReport] {
    var running: [(Process, Pipe, Pipe)] = []
    for (index, arguments) in argumentLists.enumerated() {
      running.append(
        try ImageCacheBinary.start(arguments, environment: environments?[index] ?? nil))
    }
    var reports: [PrefetchReport] = []
    for (index, (process, stdout, stderr)) in running.enumerated() {
      let result = ImageCacheBinary.finish(process, stdout, stderr)
      XCTAssertTrue([0, 1].contains(result.status), "worker \(index): \(result.stderr)")
      XCTAssertFalse(result.stderr.contains("locked"), result.stderr)
      reports.append(try XCTUnwrap(try RunReport.decode(Data(result.stdout.utf8)).prefetch))
    }
    return reports
  }

  private func sum(_ reports: [PrefetchReport], _ count: KeyPath<PrefetchCounts, Int>) -> Int {
    reports.reduce(0) { $0 + $1.counts[keyPath: count] }
  }

  /// A negative `--first-task` (the first task ID of the fleet's array is 0 or more), a
  /// negative `--shard` or `--shards`, `--shards 0` and a `--run-id` with a control character
  /// are mistakes in the command (exit 2) naming the flag and its value, not a shard worked out
  /// from them; a negative number after the flag is its value, not an unknown option.
  func testANegativeFirstTaskOrNoShardsIsAUsageErrorAndNothingIsFetched() throws {
    let urls = temporary.appending("urls.txt")
    try server.url("/i/0.jpg").write(toFile: urls, atomically: true, encoding: .utf8)
    for (flags, said) in [
      (["--shards", "4", "--first-task=-1"], "--first-task -1: a task ID is 0 or more"),
      (["--shards", "4", "--first-task", "-1"], "--first-task -1: a task ID is 0 or more"),
      (["--first-task", "-2"], "--first-task -2: a task ID is 0 or more"),
      (["--shard", "-1/4"], "--shard -1/4: expected K/N with 0 <= K < N"),
      (["--shards", "-4"], "--shards -4: must be at least 1"),
      (["--shards", "0"], "--shards 0: must be at least 1"),
      (
        ["--shard", "0/2", "--run-id", "night\u{1B}[31m"],
        "--run-id must be non-empty text without control characters"
      ),
    ] {
      let result = try ImageCacheBinary.run(
        ["prefetch", urls, "--cache", temporary.appending("cache")] + flags,
        environment: ["SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4"])
      XCTAssertEqual(result.status, 2, "\(flags): \(result.stderr)")
      XCTAssertTrue(result.stderr.contains(said), result.stderr)
    }
    XCTAssertEqual(server.requestCount("/i/0.jpg"), 0)
  }

  func testTheShardHashIsFixedForever() {
    // The first 8 bytes of MD5(key), big-endian, mod N: these must never change.
    XCTAssertEqual(Shard.index(ofCacheKey: "https://example.com/a.jpg", count: 7), 0)
    XCTAssertEqual(Shard.index(ofCacheKey: "https://example.com/b.jpg", count: 7), 1)
    XCTAssertEqual(Shard.index(ofCacheKey: "http://127.0.0.1/y.png", count: 2), 1)
    XCTAssertEqual(
      Shard.index(ofCacheKey: "https://cdn.example.invalid/i/42.jpg", count: 1000), 271)
    // A file's shard is read from its name alone.
    for index in 0..<200 {
      let key = "https://example.com/\(index).jpg"
      let shard = Shard(index: Shard.index(ofCacheKey: key, count: 5), count: 5)!
      XCTAssertEqual(shard.owns(fileName: CacheFileName.fileName(forKey: key)), true)
      XCTAssertEqual(shard.owns(fileName: CacheFileName.md5Hex(key)), true)
    }
    XCTAssertNil(Shard(index: 0, count: 5)!.owns(fileName: "notes.txt"))
    XCTAssertNil(Shard("3/3"))
    XCTAssertEqual(Shard("2/3"), Shard(index: 2, count: 3))
  }

  func testWorkersOnOneCacheFetchEveryURLOnceAndAddUpToOneRun() throws {
    let urls = try manifest()
    let cache = temporary.appending("shared")
    let shards = try workers(
      (0..<3).map {
        [
          "prefetch", urls, "--cache", cache, "--shard", "\($0)/3", "--json", "--retries", "0",
          "--report", temporary.appending("shard-\($0).json"),
        ]
      })
    for index in 0..<Self.imageCount {
      XCTAssertEqual(server.requestCount("/i/\(index).jpg"), 1, "/i/\(index).jpg")
    }
    XCTAssertEqual(sum(shards, \.downloaded), Self.imageCount)
    XCTAssertEqual(sum(shards, \.total), Self.imageCount + Self.broken)
    for report in shards {
      XCTAssertEqual(report.otherShards, Self.imageCount + Self.broken - report.total)
      XCTAssertGreaterThan(report.total, 0)
    }
    XCTAssertEqual(
      try DiskCache(location: CacheLocation(directory: cache)).usage().fileCount, Self.imageCount)

    // One unsharded run of the same manifest: the same counts.
    let single = try workers([
      ["prefetch", urls, "--cache", temporary.appending("single"), "--json", "--retries", "0"]
    ])[0]
    for count in [\PrefetchCounts.total, \.downloaded, \.failed, \.blacklisted, \.skipped] {
      XCTAssertEqual(sum(shards, count), single.counts[keyPath: count])
    }

    // `report merge`: one report of the whole run, with one unsharded run's counts.
    let merged = temporary.appending("merged.json")
    let merge = try ImageCacheBinary.run(
      ["report", "merge"] + (0..<3).map { temporary.appending("shard-\($0).json") } + [
        "--report", merged,
      ])
    XCTAssertEqual(merge.status, 1, "URLs failed, as in one run: \(merge.stderr)")
    let data = try XCTUnwrap(FileManager.default.contents(atPath: merged))
    XCTAssertEqual(
      SchemaValidator.validate(
        try JSONSerialization.jsonObject(with: data), against: try SchemaValidator.reportSchema()),
      [])
    let whole = try RunReport.decode(data)
    let prefetch = try XCTUnwrap(whole.prefetch)
    for count in [\PrefetchCounts.total, \.downloaded, \.failed, \.blacklisted, \.skipped] {
      XCTAssertEqual(prefetch.counts[keyPath: count], single.counts[keyPath: count])
    }
    XCTAssertEqual(prefetch.otherShards, 0)
    XCTAssertEqual(prefetch.downloads.count, Self.imageCount)
    XCTAssertEqual(Set(prefetch.failures.map(\.url)).count, Self.broken)
    XCTAssertEqual(prefetch.blacklistedURLs.count, Self.broken)
    XCTAssertEqual(whole.status, .completed)
    XCTAssertEqual(whole.mergedFrom?.map(\.total), shards.map(\.total), "the shards, listed")
    let page = try ImageCacheBinary.run(["report", "html", merged])
    XCTAssertEqual(page.status, 0, page.stderr)
    XCTAssertTrue(page.stdout.contains("Shards (3)"))

    // Kubernetes' way: --shards N and JOB_COMPLETION_INDEX.
    let indexed = try workers(
      (0..<2).map { _ in
        ["prefetch", urls, "--cache", temporary.appending("k8s"), "--shards", "2", "--json"]
      },
      environments: (0..<2).map {
        ProcessInfo.processInfo.environment.merging(["JOB_COMPLETION_INDEX": "\($0)"]) { $1 }
      })
    XCTAssertEqual(sum(indexed, \.downloaded), Self.imageCount)
    for index in 0..<Self.imageCount {
      XCTAssertEqual(server.requestCount("/i/\(index).jpg"), 3, "once per cache")
    }
  }

  func testAChangedNumberOfShardsKeepsTheBlacklist() throws {
    let urls = try manifest()
    let cache = temporary.appending("cache")
    let three = try workers(
      (0..<3).map {
        ["prefetch", urls, "--cache", cache, "--shard", "\($0)/3", "--json", "--retries", "0"]
      })
    XCTAssertEqual(sum(three, \.failed), Self.broken)
    let four = try workers(
      (0..<4).map {
        ["prefetch", urls, "--cache", cache, "--shard", "\($0)/4", "--json", "--retries", "0"]
      })
    XCTAssertEqual(sum(four, \.blacklisted), Self.broken, "refused up front under N=4")
    XCTAssertEqual(sum(four, \.diskHits), Self.imageCount)
    for index in 0..<Self.broken {
      XCTAssertEqual(server.requestCount("/page/\(index).jpg"), 1)
    }
    let list = try ImageCacheBinary.run(["blacklist", "list", "--cache", cache, "--json"])
    let entries = try XCTUnwrap(
      try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [Any])
    XCTAssertEqual(entries.count, Self.broken, "blacklist list reads every shard's state")
    let stats = try ImageCacheBinary.run(["stats", "--cache", cache, "--json"])
    let figures = try XCTUnwrap(
      try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
    XCTAssertEqual(figures["blacklistedURLs"] as? Int, Self.broken, "and so does stats")
    XCTAssertEqual(figures["stateFiles"] as? Int, 7, "three shards' files and four's")
  }

  /// `trim` needs the whole cache; `expire` on a shard takes its own files, shard 0 also those
  /// whose names are not digests, so that the shards together expire what one run would.
  func testTrimOnAShardIsRefusedAndExpireTakesOnlyItsOwnFiles() throws {
    let cache = temporary.appending("cache")
    let builder = CacheBuilder(root: cache + "/default")
    let old = Int64(Date().timeIntervalSince1970) - 30 * 86_400
    var owned: Set<String> = []
    let shard = Shard(index: 1, count: 3)!
    for index in 0..<60 {
      let name = CacheFileName.fileName(forKey: "https://example.com/\(index).jpg")
      try builder.file(name, accessTime: old)
      if shard.owns(fileName: name) == true { owned.insert(name) }
    }
    try builder.file("notes.txt", accessTime: old)
    let trim = try ImageCacheBinary.run([
      "maintain", "--cache", cache, "--shard", "1/3", "--max-size", "1MB",
    ])
    XCTAssertEqual(trim.status, 2, trim.stderr)
    XCTAssertTrue(trim.stderr.contains("trim needs the whole cache"), trim.stderr)
    XCTAssertEqual(try builder.remainingFiles().count, 61, "nothing ran")

    let expire = try ImageCacheBinary.run([
      "maintain", "--cache", cache, "--shard", "1/3", "--max-age", "7d",
    ])
    XCTAssertEqual(expire.status, 0, expire.stderr)
    let remaining = Set(try builder.remainingFiles())
    XCTAssertFalse(owned.isEmpty)
    XCTAssertTrue(remaining.isDisjoint(with: owned), "the shard's own files expired")
    XCTAssertEqual(remaining.count, 61 - owned.count, "the others' and unowned files stay")
    XCTAssertTrue(remaining.contains("notes.txt"))

    // A name of no digest is shard 0's to expire, as one run over the whole cache would.
    let first = try ImageCacheBinary.run([
      "maintain", "--cache", cache, "--shard", "0/3", "--max-age", "7d",
    ])
    XCTAssertEqual(first.status, 0, first.stderr)
    let last = Set(try builder.remainingFiles())
    XCTAssertFalse(last.contains("notes.txt"), "expired by shard 0")
    XCTAssertFalse(last.isEmpty)
    XCTAssertTrue(
      last.allSatisfy { Shard(index: 2, count: 3)!.owns(fileName: $0) == true },
      "only shard 2's files are left: \(last.sorted())")
  }

  /// A legacy SD 3/4 folder merged by a sharded `migrate`: the files whose names start with no
  /// digest (`notes.txt`, `sub/photo.png`) are shard 0's, so that the shards together merge
  /// every file once. Owned by no shard, they stayed in the legacy folder forever, each shard
  /// calling them "another shard's".
  func testAShardedMigrateMergesTheLegacyFilesOfNoDigestOnce() throws {
    let cache = temporary.appending("cache")
    let legacy = temporary.appending("legacy")
    try FileManager.default.createDirectory(
      atPath: legacy + "/sub", withIntermediateDirectories: true)
    let digests = (0..<12).map { CacheFileName.fileName(forKey: "https://example.com/\($0).jpg") }
    let foreign = ["notes.txt", "sub/photo.png", "IMG_0001.JPG"]
    for name in digests + foreign {
      XCTAssertTrue(
        FileManager.default.createFile(atPath: legacy + "/" + name, contents: Data(name.utf8)))
    }
    var moved = 0
    for index in [1, 2, 0] {
      let result = try ImageCacheBinary.run([
        "migrate", "--cache", cache, "--from", legacy, "--shard", "\(index)/3", "--json",
      ])
      XCTAssertEqual(result.status, 0, result.stderr)
      let report = try RunReport.decode(Data(result.stdout.utf8))
      moved += report.maintenance.reduce(0) { $0 + $1.filesMoved }
    }
    XCTAssertEqual(moved, digests.count + foreign.count, "each file merged once")
    for name in digests + foreign {
      XCTAssertEqual(
        try String(contentsOfFile: cache + "/default/" + name, encoding: .utf8), name, name)
    }
    XCTAssertFalse(FileManager.default.fileExists(atPath: legacy), "nothing left behind")
  }

  func testShardsShareTheCacheLockAndHoldTheirOwn() throws {
    let cache = temporary.appending("cache")
    try FileManager.default.createDirectory(
      atPath: cache + "/default/.imagecache", withIntermediateDirectories: true)
    func hold(_ file: String, shared: Bool) throws -> Process {
      try LockHolder.start(cache + "/default/.imagecache/" + file, shared: shared)
    }
    // A shard at work: the cache's lock shared, its own alone.
    let cacheLock = try hold("lock", shared: true)
    let shardLock = try hold("lock.shard-0-of-2", shared: false)
    defer {
      cacheLock.terminate()
      shardLock.terminate()
    }
    let unsharded = try ImageCacheBinary.run(["maintain", "--cache", cache, "--max-size", "1GB"])
    XCTAssertEqual(
      unsharded.status, 3, "a trim waits for or refuses the shards: \(unsharded.stderr)")
    let sameShard = try ImageCacheBinary.run(["maintain", "--cache", cache, "--shard", "0/2"])
    XCTAssertEqual(sameShard.status, 3, "one worker per shard: \(sameShard.stderr)")
    let otherShard = try ImageCacheBinary.run(["maintain", "--cache", cache, "--shard", "1/2"])
    XCTAssertEqual(otherShard.status, 0, "another shard runs beside it: \(otherShard.stderr)")
  }
}
