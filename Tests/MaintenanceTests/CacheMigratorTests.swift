import Core
import Maintenance
import TestSupport
import XCTest

final class CacheMigratorTests: TemporaryFolderTestCase {
  var location: CacheLocation!
  var cache: CacheBuilder!
  var legacy: CacheBuilder!
  let now = Date(timeIntervalSince1970: 1_700_000_000)

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("com.hackemist.SDImageCache"))
    cache = CacheBuilder(root: location.diskCachePath)
    legacy = CacheBuilder(root: CacheMigrator(location: location).legacyDirectories[0])
  }

  private func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

  func testLegacyDirectoriesAreTheSD4AndSD3LayoutsOfTheNamespaceBesideTheCurrentOne() {
    XCTAssertEqual(
      CacheMigrator(location: location).legacyDirectories[0],
      temporary.appending("default/com.hackemist.SDWebImageCache.default"))
    let avatars = CacheLocation(directory: location.directory, namespace: "avatars")
    XCTAssertEqual(
      CacheMigrator(location: avatars).legacyDirectories,
      [
        temporary.appending("avatars/com.hackemist.SDWebImageCache.avatars"),
        temporary.appending("com.hackemist.SDWebImageCache.avatars"),
      ])
  }

  /// The newer of two files is the one modified later, whatever their access, birth and
  /// change dates say: the legacy files are made first, and each loser was read last.
  func testMergeMovesEveryFileAndResolvesCollisionsKeepingTheNewer() throws {
    try legacy.file("a", size: 1, accessTime: 100)
    // Modified after the b in place.
    try legacy.file("b", size: 2, accessTime: 100, modificationTime: 300)
    // Modified before the c in place, which is born and changed after it.
    try legacy.file("c", size: 3, accessTime: 400, modificationTime: 100)
    try legacy.file("sub/d", size: 4, accessTime: 100)
    try cache.file("b", size: 20, accessTime: 400, modificationTime: 200)
    try cache.file("c", size: 30, accessTime: 100, modificationTime: 200)
    try cache.file("e", size: 50, accessTime: 200)

    let migrator = CacheMigrator(location: location)
    let report = try migrator.mergeDirectory(
      from: migrator.legacyDirectories[0], dryRun: false, now: now)
    XCTAssertEqual(try cache.remainingFiles(), ["a", "b", "c", "e", "sub/d"])
    XCTAssertEqual(contents(cache.root + "/b")?.count, 2, "the newer b won")
    XCTAssertEqual(contents(cache.root + "/c")?.count, 30, "the newer c stayed")
    XCTAssertEqual(report.filesMoved, 3)
    XCTAssertEqual(report.filesRemoved, 0)
    XCTAssertTrue(report.errors.isEmpty, "\(report.errors)")

    // Nothing is lost: both losers are kept aside, with their contents.
    let aside = report.actions.filter { $0.kind == .keptAside }
    XCTAssertEqual(Set(aside.map(\.path)), ["b", "c"])
    for action in aside {
      let path = location.diskCachePath + "/" + action.destination!
      XCTAssertTrue(action.destination!.hasPrefix(".imagecache/collisions/"))
      XCTAssertEqual(contents(path)?.count, action.path == "b" ? 20 : 3)
    }
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: legacy.root), "the emptied legacy folder is gone")
  }

  func testMergeKeepsTimestamps() throws {
    try legacy.file("a", accessTime: 123, modificationTime: 456)
    let migrator = CacheMigrator(location: location)
    _ = try migrator.mergeDirectory(from: migrator.legacyDirectories[0], dryRun: false, now: now)
    let attributes = try XCTUnwrap(try FileSystem.attributes(atPath: cache.root + "/a"))
    XCTAssertEqual(attributes.modificationTime, 456_000_000_000)
    XCTAssertEqual(attributes.accessTime, 123_000_000_000)
  }

  func testMergeDryRunChangesNothingAndPlansWhatARunDoes() throws {
    try legacy.file("a", accessTime: 100)
    try legacy.file("b", accessTime: 300)
    try cache.file("b", accessTime: 200)
    let migrator = CacheMigrator(location: location)
    let plan = try migrator.mergeDirectory(
      from: migrator.legacyDirectories[0], dryRun: true, now: now)
    XCTAssertEqual(try legacy.remainingFiles(), ["a", "b"])
    XCTAssertEqual(try cache.remainingFiles(), ["b"])
    let done = try migrator.mergeDirectory(
      from: migrator.legacyDirectories[0], dryRun: false, now: now)
    XCTAssertEqual(plan.actions, done.actions)
    XCTAssertTrue(plan.dryRun)
  }

  func testMergeTwiceChangesNothingTheSecondTime() throws {
    try legacy.file("a", accessTime: 100)
    let migrator = CacheMigrator(location: location)
    _ = try migrator.mergeDirectory(from: migrator.legacyDirectories[0], dryRun: false, now: now)
    let second = try migrator.mergeDirectory(
      from: migrator.legacyDirectories[0], dryRun: false, now: now)
    XCTAssertEqual(second.actions, [])
    XCTAssertEqual(try cache.remainingFiles(), ["a"])
  }

  func testMergeSkipsHiddenEntriesAndLeavesTheirFolder() throws {
    try legacy.file(".DS_Store", accessTime: 100)
    try legacy.file("a", accessTime: 100)
    let migrator = CacheMigrator(location: location)
    _ = try migrator.mergeDirectory(from: migrator.legacyDirectories[0], dryRun: false, now: now)
    XCTAssertTrue(FileManager.default.fileExists(atPath: legacy.root + "/.DS_Store"))
    XCTAssertEqual(try cache.remainingFiles(), ["a"])
  }

  /// The legacy folder is walked as its files are moved, never listed whole first (it holds
  /// as many files as the cache): a file that arrives in a folder the walk has not reached yet
  /// is moved too.
  func testMergeMovesFilesAsTheWalkFindsThem() throws {
    try legacy.file("a/1", accessTime: 100)
    try legacy.file("b/1", accessTime: 100)
    var recorder = ActionRecorder()
    recorder.onFirstAction = { action in
      // The other folder, which the walk enters only after the one it is in.
      let other = action.path.hasPrefix("a/") ? "b" : "a"
      _ = try? self.legacy.file(other + "/2", accessTime: 100)
    }
    let migrator = CacheMigrator(location: location)
    let finished = try migrator.mergeDirectory(
      from: migrator.legacyDirectories[0], dryRun: false, now: now, into: &recorder)

    XCTAssertTrue(finished)
    XCTAssertEqual(recorder.summary.filesMoved, 3, "\(recorder.actions)")
    XCTAssertEqual(try cache.remainingFiles().count, 3)
    XCTAssertFalse(FileManager.default.fileExists(atPath: legacy.root), "emptied and removed")
  }

  func testMergeStoppedLeavesTheRestAndTheFolder() throws {
    for i in 0..<5 { try legacy.file("f\(i)", accessTime: 100) }
    var recorder = ActionRecorder()
    var asked = 0
    let migrator = CacheMigrator(location: location)
    // Asked before each file: the third time, after two.
    let finished = try migrator.mergeDirectory(
      from: migrator.legacyDirectories[0], dryRun: false, now: now, into: &recorder,
      stop: {
        asked += 1
        return asked > 2
      })

    XCTAssertFalse(finished)
    XCTAssertEqual(try cache.remainingFiles(), recorder.actions.map(\.path).sorted())
    XCTAssertEqual(recorder.actions.count, 2)
    XCTAssertEqual(try legacy.remainingFiles().count, 3, "the rest stays for the next run")
  }

  func testMergeOnAShardMovesOnlyTheShardsFiles() throws {
    let names = (0..<12).map { CacheFileName.md5Hex("https://example.com/\($0).png") + ".png" }
    for name in names { try legacy.file(name, accessTime: 100) }
    let shard = try XCTUnwrap(Shard(index: 1, count: 3))
    let migrator = CacheMigrator(location: location, shard: shard)
    let report = try migrator.mergeDirectory(
      from: migrator.legacyDirectories[0], dryRun: false, now: now)

    let own = names.filter { shard.owns(fileName: $0) == true }.sorted()
    XCTAssertFalse(own.isEmpty)
    XCTAssertEqual(try cache.remainingFiles(), own)
    XCTAssertEqual(report.actions.map(\.path).sorted(), own)
    XCTAssertEqual(try legacy.remainingFiles(), names.filter { !own.contains($0) }.sorted())
  }

  /// A source above the cache (`--from` the cache's parent) holds the cache itself: its files
  /// stay where they are, and none is moved into itself.
  func testMergeFromAFolderHoldingTheCacheLeavesTheCachesFiles() throws {
    try cache.file("in-cache", accessTime: 100)
    let source = location.directory
    try CacheBuilder(root: source).file("legacy", accessTime: 100)
    let report = try CacheMigrator(location: location).mergeDirectory(
      from: source, dryRun: false, now: now)

    XCTAssertEqual(report.actions.map(\.path), ["legacy"])
    XCTAssertEqual(try cache.remainingFiles(), ["in-cache", "legacy"])
  }

  func testRenamesEveryLegacyFileNameScheme() throws {
    let noExtensionKey = "https://example.com/a.png"
    let rawKey = "https://example.com/img/photo.jpg?size=large"
    // Path extension "p:ng" (SD 4.2-4.4.2 kept the colon), raw string extension "2".
    let uncappedKey = "https://example.com/a.p:ng?v=1.2"
    let md5 = CacheFileName.md5Hex
    try cache.file(md5(noExtensionKey), size: 1, accessTime: 100)
    try cache.file(md5(rawKey) + ".jpg?size=large", size: 2, accessTime: 100)
    try cache.file(md5(uncappedKey) + ".p:ng", size: 3, accessTime: 100)
    try cache.file("unrelated", accessTime: 100)

    let migrator = CacheMigrator(location: location)
    let report = migrator.renameLegacyFileNames(
      keys: [noExtensionKey, rawKey, uncappedKey, "https://example.com/absent.gif"], dryRun: false,
      now: now)
    XCTAssertEqual(report.filesMoved, 3)
    XCTAssertTrue(report.errors.isEmpty, "\(report.errors)")
    XCTAssertEqual(
      try cache.remainingFiles(),
      [
        CacheFileName.fileName(forKey: noExtensionKey), CacheFileName.fileName(forKey: rawKey),
        CacheFileName.fileName(forKey: uncappedKey), "unrelated",
      ].sorted())
    XCTAssertEqual(CacheFileName.fileName(forKey: uncappedKey), md5(uncappedKey) + ".png")
    let disk = DiskCache(location: location)
    XCTAssertEqual(try disk.data(forKey: rawKey)?.count, 2)

    let second = migrator.renameLegacyFileNames(
      keys: [noExtensionKey, rawKey, uncappedKey], dryRun: false, now: now)
    XCTAssertEqual(second.actions, [], "a second run changes nothing")
  }

  func testFileNameCollisionKeepsTheNewerUnderTheCurrentName() throws {
    let key = "https://example.com/img/photo.jpg?size=large"
    let md5 = CacheFileName.md5Hex(key)
    // Newer by modification date, which SD's writes set: not by access date, which a hit
    // moves (the newest content was read least recently).
    try cache.file(md5 + ".jpg", size: 10, accessTime: 400, modificationTime: 100)
    try cache.file(md5, size: 20, accessTime: 50, modificationTime: 300)  // newest
    try cache.file(md5 + ".jpg?size=large", size: 30, accessTime: 350, modificationTime: 200)

    let migrator = CacheMigrator(location: location)
    let plan = migrator.renameLegacyFileNames(keys: [key], dryRun: true, now: now)
    XCTAssertEqual(try cache.remainingFiles().count, 3, "a dry run moves nothing")
    let report = migrator.renameLegacyFileNames(keys: [key], dryRun: false, now: now)
    XCTAssertEqual(plan.actions, report.actions)
    XCTAssertEqual(try cache.remainingFiles(), [md5 + ".jpg"])
    XCTAssertEqual(contents(cache.root + "/" + md5 + ".jpg")?.count, 20)
    let aside = report.actions.filter { $0.kind == .keptAside }
    XCTAssertEqual(aside.count, 2)
    let keptSizes = aside.map { contents(location.diskCachePath + "/" + $0.destination!)?.count }
    XCTAssertEqual(Set(keptSizes), [10, 30])
  }
  /// `migrate --from` the cache itself, however the path is written: nothing to merge, and no
  /// file is moved aside as its own collision.
  func testMergeFromTheCacheItselfChangesNothing() throws {
    try cache.file("a", size: 1, accessTime: 100)
    try cache.file("sub/b", size: 2, accessTime: 100)
    let migrator = CacheMigrator(location: location)
    for source in [
      location.diskCachePath, location.diskCachePath + "/",
      location.directory + "/./" + location.namespace,
    ] {
      for dryRun in [true, false] {
        let report = try migrator.mergeDirectory(from: source, dryRun: dryRun, now: now)
        XCTAssertEqual(report.actions, [], source)
        XCTAssertEqual(report.errors, [], source)
      }
    }
    XCTAssertEqual(try cache.remainingFiles(), ["a", "sub/b"])
    XCTAssertFalse(FileManager.default.fileExists(atPath: location.stateDirectory))
  }

  /// Two files modified at the same moment: the one in place stays (nothing newer comes in)
  /// and the incoming one is kept aside. A dry run plans exactly what the run does, for the
  /// passes after a tie too: the file that stayed is the one a later collision puts aside.
  func testATieKeepsTheFileInPlaceAndADryRunPlansItSo() throws {
    let older = CacheBuilder(root: CacheMigrator(location: location).legacyDirectories[1])
    try cache.file("x", size: 10, accessTime: 100, modificationTime: 200)
    try legacy.file("x", size: 20, accessTime: 100, modificationTime: 200)
    try older.file("x", size: 30, accessTime: 100, modificationTime: 300)
    // A third folder (`--from`): the third collision on x in one run.
    let given = CacheBuilder(root: temporary.appending("given"))
    try given.file("x", size: 70, accessTime: 100, modificationTime: 400)
    let key = "https://example.com/img/photo.jpg?size=large"
    let md5 = CacheFileName.md5Hex(key)
    try cache.file(md5 + ".jpg", size: 40, accessTime: 100, modificationTime: 200)
    try cache.file(md5, size: 50, accessTime: 100, modificationTime: 200)
    try cache.file(md5 + ".jpg?size=large", size: 60, accessTime: 100, modificationTime: 300)

    /// Both merges, then the renames, as one run does them.
    func migrate(dryRun: Bool) throws -> [MaintenanceAction] {
      let migrator = CacheMigrator(location: location)
      var actions: [MaintenanceAction] = []
      for source in migrator.legacyDirectories + [given.root] {
        actions += try migrator.mergeDirectory(from: source, dryRun: dryRun, now: now).actions
      }
      return actions + migrator.renameLegacyFileNames(keys: [key], dryRun: dryRun, now: now).actions
    }
    let plan = try migrate(dryRun: true)
    let done = try migrate(dryRun: false)
    XCTAssertEqual(plan, done)
    XCTAssertEqual(
      done.map { "\($0.kind.rawValue) \($0.path) \($0.bytes)" },
      [
        "keptAside x 20", "keptAside x 10", "move x 30", "keptAside x 30", "move x 70",
        "keptAside \(md5) 50", "keptAside \(md5).jpg 40", "move \(md5).jpg?size=large 60",
      ])
    XCTAssertEqual(try cache.remainingFiles(), [md5 + ".jpg", "x"])
    XCTAssertEqual(contents(cache.root + "/x")?.count, 70)
    XCTAssertEqual(contents(cache.root + "/" + md5 + ".jpg")?.count, 60)
    // Nothing lost: every loser is where the report says, with its own contents.
    for action in done where action.kind == .keptAside {
      XCTAssertEqual(
        contents(location.diskCachePath + "/" + action.destination!)?.count, Int(action.bytes),
        "\(action)")
    }
    let asides = done.filter { $0.kind == .keptAside }.compactMap(\.destination)
    XCTAssertEqual(Set(asides).count, 5, "\(asides)")
  }

  /// Only a regular file under a legacy name is a legacy cache file: a folder or a symbolic
  /// link of that name is left where it is.
  func testARenameLeavesAFolderOrALinkUnderALegacyName() throws {
    let folderKey = "https://example.com/a.png"
    let linkKey = "https://example.com/b.png"
    let md5 = CacheFileName.md5Hex
    try cache.file(md5(folderKey) + "/inside", size: 1, accessTime: 100)
    try cache.file("target", size: 2, accessTime: 100)
    try FileManager.default.createSymbolicLink(
      atPath: cache.root + "/" + md5(linkKey), withDestinationPath: "target")

    let report = CacheMigrator(location: location).renameLegacyFileNames(
      keys: [folderKey, linkKey], dryRun: false, now: now)
    XCTAssertEqual(report.actions, [])
    XCTAssertEqual(report.errors, [])
    XCTAssertTrue(
      FileManager.default.fileExists(atPath: cache.root + "/" + md5(folderKey) + "/inside"))
    XCTAssertNotNil(try FileSystem.attributes(atPath: cache.root + "/" + md5(linkKey)))
    XCTAssertNil(try FileSystem.attributes(atPath: cache.root + "/" + md5(linkKey) + ".png"))
    XCTAssertNil(try FileSystem.attributes(atPath: cache.root + "/" + md5(folderKey) + ".png"))
  }

  /// On a shard, the renames are of the shard's own keys only (SPEC section 9): another
  /// shard's run renames the rest, and the shards together rename every key once.
  func testRenamesOnAShardAreOfItsOwnKeysOnly() throws {
    let keys = (0..<12).map { "https://example.com/\($0).png" }
    for key in keys { try cache.file(CacheFileName.md5Hex(key), accessTime: 100) }
    var renamed: [String] = []
    for index in 0..<3 {
      let shard = try XCTUnwrap(Shard(index: index, count: 3))
      let own = keys.filter { shard.owns(cacheKey: $0) }
      XCTAssertFalse(own.isEmpty)
      let report = CacheMigrator(location: location, shard: shard).renameLegacyFileNames(
        keys: keys, dryRun: false, now: now)
      XCTAssertEqual(
        report.actions.map(\.destination), own.map { CacheFileName.fileName(forKey: $0) },
        "shard \(index)")
      renamed += own
    }
    XCTAssertEqual(renamed.sorted(), keys.sorted())
    XCTAssertEqual(
      try cache.remainingFiles(), keys.map { CacheFileName.fileName(forKey: $0) }.sorted())
  }

  /// A merged folder goes once it is empty, with every folder in it however deep.
  func testMergeRemovesTheEmptiedFolderWithItsNestedFolders() throws {
    try legacy.file("a/b/c/deep", accessTime: 100)
    try legacy.file("a/shallow", accessTime: 100)
    try legacy.file("top", accessTime: 100)
    let migrator = CacheMigrator(location: location)
    let report = try migrator.mergeDirectory(
      from: migrator.legacyDirectories[0], dryRun: false, now: now)
    XCTAssertEqual(report.filesMoved, 3)
    XCTAssertEqual(try cache.remainingFiles(), ["a/b/c/deep", "a/shallow", "top"])
    XCTAssertFalse(FileManager.default.fileExists(atPath: legacy.root), "emptied and removed")
  }

  /// What a merge left in the folder it kept, and why, as the run says it: hidden entries (a
  /// hidden folder's files too), what is not a regular file, another shard's files, and the
  /// files it did not move; only the reasons that hold a file are named.
  func testTheLeftoversOfAKeptFolderAreSortedByWhyTheyStayed() throws {
    let names = (0..<8).map { CacheFileName.md5Hex("https://example.com/\($0).png") + ".png" }
    let shard = try XCTUnwrap(Shard(index: 0, count: 2))
    let other = try XCTUnwrap(names.first { shard.owns(fileName: $0) == false })
    let own = try XCTUnwrap(names.first { shard.owns(fileName: $0) == true })
    try legacy.file(".DS_Store", size: 100, accessTime: 100)
    try legacy.file(".git/objects/ab", size: 200, accessTime: 100)
    try legacy.file(other, size: 300, accessTime: 100)
    try legacy.file("sub/" + own, size: 400, accessTime: 100)
    try FileManager.default.createSymbolicLink(
      atPath: legacy.root + "/link", withDestinationPath: own)

    let left = CacheMigrator(location: location, shard: shard).leftovers(in: legacy.root)
    XCTAssertEqual([left.hidden.files, left.notRegularFiles.files], [2, 1])
    XCTAssertEqual([left.otherShards.files, left.notMoved.files], [1, 1])
    XCTAssertEqual(left.hidden.bytes, 300)
    XCTAssertEqual(left.notRegularFiles.bytes, UInt64(own.utf8.count), "the link's own size")
    XCTAssertEqual([left.otherShards.bytes, left.notMoved.bytes], [300, 400])
    XCTAssertEqual(left.total.files, 5)
    XCTAssertEqual(left.total.bytes, 1000 + UInt64(own.utf8.count))
    XCTAssertEqual(
      left.description,
      "5 file(s) (1.0 KB) remain: 2 hidden (never migrated), 1 not a regular file (links, "
        + "FIFOs and devices are not cache files), 1 another shard's (its own run merges them), "
        + "1 not moved (see the pass's errors, or the run stopped before them)")

    try FileManager.default.removeItem(atPath: legacy.root)
    try legacy.file(".DS_Store", size: 100, accessTime: 100)
    XCTAssertEqual(
      CacheMigrator(location: location).leftovers(in: legacy.root).description,
      "1 file(s) (100 B) remain: 1 hidden (never migrated)")
  }

  /// With no manifest to rename by, the run counts the files that keep a legacy name: a dry
  /// run counts those its merge would bring in too (a real run has merged them already), and a
  /// shard its own.
  func testTheLegacyNameCountIsOfTheCacheAndWhatADryRunWouldMerge() throws {
    let names = (0..<8).map { CacheFileName.md5Hex("https://example.com/\($0).png") }
    for name in names.prefix(4) { try cache.file(name, accessTime: 100) }
    for name in names.dropFirst(4) { try legacy.file(name, accessTime: 100) }
    try cache.file(names[0] + ".png", accessTime: 100)
    try cache.file("notes", accessTime: 100)
    let migrator = CacheMigrator(location: location)
    XCTAssertEqual(try migrator.legacyNameCount(mergedFrom: [legacy.root], dryRun: true), 8)
    XCTAssertEqual(try migrator.legacyNameCount(mergedFrom: [legacy.root], dryRun: false), 4)
    let shard = try XCTUnwrap(Shard(index: 1, count: 2))
    XCTAssertEqual(
      try CacheMigrator(location: location, shard: shard).legacyNameCount(
        mergedFrom: [legacy.root], dryRun: true),
      names.filter { shard.owns(fileName: $0) == true }.count)
  }

}

/// Keeps a pass's actions, and calls `onFirstAction` with the first.
private struct ActionRecorder: MaintenanceRecorder {
  var summary = PassSummary(pass: .migrate, dryRun: false)
  var actions: [MaintenanceAction] = []
  var onFirstAction: (MaintenanceAction) -> Void = { _ in }

  mutating func keep(_ action: MaintenanceAction) {
    if actions.isEmpty { onFirstAction(action) }
    actions.append(action)
  }

  mutating func keep(error: String) {}
}
