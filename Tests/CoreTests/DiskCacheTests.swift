import Core
import State
import TestSupport
import XCTest

final class DiskCacheTests: TemporaryFolderTestCase {
  private var location: CacheLocation { CacheLocation(directory: temporary.path) }

  /// A stored file's dates before a test reads it: access and modification years apart, so
  /// that a hit that sets or keeps the wrong one is seen.
  static let oldAccess = Date(timeIntervalSince1970: 1_000_000_000)
  static let oldModification = Date(timeIntervalSince1970: 1_100_000_000)

  func testStoreLandsUnderNamespaceWithSDFileName() throws {
    let cache = DiskCache(location: location)
    try cache.store(Fixtures.jpeg, forKey: "https://example.com/img/photo.jpg?size=large")
    let expected = temporary.appending("default/4d71d9e1d36571b22d5dd89b751927a9.jpg")
    XCTAssertEqual(FileManager.default.contents(atPath: expected), Fixtures.jpeg)
  }

  func testLegacyNameWithoutExtensionIsFoundOnRead() throws {
    let key = "https://example.com/img/photo.jpg?size=large"
    try FileSystem.createDirectory(path: temporary.appending("default"))
    let legacy = temporary.appending("default/4d71d9e1d36571b22d5dd89b751927a9")
    XCTAssertTrue(FileManager.default.createFile(atPath: legacy, contents: Fixtures.png))

    let cache = DiskCache(location: location)
    XCTAssertEqual(try cache.data(forKey: key), Fixtures.png)
    XCTAssertTrue(try cache.containsData(forKey: key))
    XCTAssertEqual(try cache.existingPath(forKey: key), legacy)
  }

  func testACacheFileThatCannotBeReadIsAnErrorNamingItNotAMiss() throws {
    let key = "https://example.com/a.png"
    let cache = DiskCache(location: location)
    // A folder where the file should be: open succeeds, read fails (EISDIR), even as root.
    try FileSystem.createDirectory(path: cache.cachePath(forKey: key))
    XCTAssertThrowsError(try cache.data(forKey: key)) { error in
      XCTAssertEqual((error as? FileSystemError)?.path, cache.cachePath(forKey: key))
      XCTAssertEqual((error as? FileSystemError)?.errno, EISDIR)
    }
  }

  func testCurrentNameWinsOverLegacyName() throws {
    let key = "https://example.com/a.png"
    let cache = DiskCache(location: location)
    try FileSystem.createDirectory(path: cache.path)
    XCTAssertTrue(
      FileManager.default.createFile(
        atPath: cache.path + "/8c11d92f07c76baf29e49afd2301deb2", contents: Data("old".utf8)))
    try cache.store(Fixtures.png, forKey: key)
    XCTAssertEqual(try cache.data(forKey: key), Fixtures.png)
  }

  func testReadSetsAccessTimeToNowAndKeepsModificationTime() throws {
    let key = "https://example.com/a.png"
    let cache = DiskCache(location: location)
    try cache.store(Fixtures.png, forKey: key)
    let path = cache.cachePath(forKey: key)
    try FileSystem.setTimes(path: path, access: Self.oldAccess, modification: Self.oldModification)

    _ = try cache.data(forKey: key)
    let attributes = try XCTUnwrap(try FileSystem.attributes(atPath: path))
    XCTAssertGreaterThan(attributes.accessDate, Date().addingTimeInterval(-60))
    XCTAssertEqual(attributes.modificationDate, Self.oldModification)
  }

  /// SD 5.20+ sets the access time of a hit itself: with `relatime` (Linux's default) the
  /// kernel's read updates it only when it is a day old or not after the file's change time,
  /// and with `noatime` never. Here the access time is after the change time (an hour ahead,
  /// as a clock that was fast leaves it), so the read alone would keep it: the hit sets it.
  func testAHitSetsTheAccessTimeWhereTheKernelWouldNot() throws {
    let key = "https://example.com/recent.png"
    let cache = DiskCache(location: location)
    try cache.store(Fixtures.png, forKey: key)
    let path = cache.cachePath(forKey: key)
    try FileSystem.setTimes(
      path: path, access: Date().addingTimeInterval(3600),
      modification: Date(timeIntervalSince1970: 1_000_000_000))

    XCTAssertEqual(try cache.data(forKey: key), Fixtures.png)
    let accessed = try XCTUnwrap(try FileSystem.attributes(atPath: path)).accessDate
    XCTAssertLessThan(abs(accessed.timeIntervalSinceNow), 60, "now, not \(accessed)")
  }

  /// The four dates SD's `expireType` chooses from are read each from its own field of
  /// `statx`: two files whose access, modification, birth and change orders disagree.
  func testAFilesFourDatesAreEachReadFromItsOwnField() throws {
    let builder = CacheBuilder(root: location.diskCachePath)
    let made = try builder.datedFiles(
      [
        .init("first-born", accessTime: 2_000, modificationTime: 1_000),
        .init("second-born", accessTime: 1_000, modificationTime: 2_000),
      ], changeOrder: ["second-born", "first-born"])
    let first = try XCTUnwrap(made["first-born"])
    let second = try XCTUnwrap(made["second-born"])
    XCTAssertEqual(
      [first.accessTime, first.modificationTime, second.accessTime, second.modificationTime],
      [2_000, 1_000, 1_000, 2_000].map { $0 * 1_000_000_000 })
    guard let firstBirth = first.creationTime, let secondBirth = second.creationTime else {
      try requireOrSkip("the file system of \(temporary.path) reports no birth times")
    }
    XCTAssertLessThan(firstBirth, secondBirth)
    XCTAssertLessThan(secondBirth, second.changeTime)
    XCTAssertLessThan(second.changeTime, first.changeTime)
    XCTAssertLessThan(abs(first.changeDate.timeIntervalSinceNow), 60)
  }

  func testTouchIsAHitWithoutReadingAndAMissOtherwise() throws {
    let cache = DiskCache(location: location)
    let key = "https://example.com/a.png"
    XCTAssertFalse(try cache.touch(forKey: key))
    try cache.store(Fixtures.png, forKey: key)
    let path = cache.cachePath(forKey: key)
    try FileSystem.setTimes(path: path, access: Self.oldAccess, modification: Self.oldModification)
    XCTAssertTrue(try cache.touch(forKey: key))
    let attributes = try XCTUnwrap(try FileSystem.attributes(atPath: path))
    XCTAssertGreaterThan(attributes.accessDate, Date().addingTimeInterval(-60))
    XCTAssertEqual(attributes.modificationDate, Self.oldModification)
  }

  func testContainsDoesNotCountAsAHit() throws {
    let cache = DiskCache(location: location)
    let key = "https://example.com/a.png"
    try cache.store(Fixtures.png, forKey: key)
    let path = cache.cachePath(forKey: key)
    try FileSystem.setTimes(path: path, access: Self.oldAccess, modification: Self.oldModification)
    let before = try XCTUnwrap(try FileSystem.attributes(atPath: path))
    XCTAssertTrue(try cache.containsData(forKey: key))
    let attributes = try XCTUnwrap(try FileSystem.attributes(atPath: path))
    XCTAssertEqual(attributes.accessDate, Self.oldAccess)
    XCTAssertEqual(attributes.modificationDate, Self.oldModification)
    XCTAssertEqual(attributes.changeTime, before.changeTime, "nothing about the file was set")
  }

  func testRemoveDeletesCurrentAndLegacyNames() throws {
    let cache = DiskCache(location: location)
    let key = "https://example.com/a.png"
    try cache.store(Fixtures.png, forKey: key)
    XCTAssertTrue(
      FileManager.default.createFile(
        atPath: cache.path + "/8c11d92f07c76baf29e49afd2301deb2", contents: Data("old".utf8)))
    XCTAssertTrue(try cache.removeData(forKey: key))
    XCTAssertFalse(try cache.containsData(forKey: key))
    XCTAssertFalse(try cache.removeData(forKey: key))
  }

  func testRemoveAllKeepsTheToolsHiddenState() throws {
    let cache = DiskCache(location: location)
    try cache.store(Fixtures.png, forKey: "https://example.com/a.png")
    try cache.store(Fixtures.jpeg, forKey: "https://example.com/b.jpg")
    try FileSystem.createDirectory(path: cache.path + "/sub")
    XCTAssertTrue(
      FileManager.default.createFile(atPath: cache.path + "/sub/x", contents: Data("x".utf8)))
    _ = try StateStore(location: location)

    try cache.removeAllData()
    XCTAssertEqual(try cache.usage().fileCount, 0)
    XCTAssertTrue(FileManager.default.fileExists(atPath: location.stateDirectory + "/state.sqlite"))
  }

  func testUsageCountsLogicalAndAllocatedBytesOfVisibleFilesOnly() throws {
    let cache = DiskCache(location: location)
    try cache.store(Data(repeating: 1, count: 10_000), forKey: "https://example.com/a.png")
    try cache.store(Data(repeating: 2, count: 1), forKey: "https://example.com/b.png")
    try FileSystem.createDirectory(path: cache.path + "/nested")
    XCTAssertTrue(
      FileManager.default.createFile(atPath: cache.path + "/nested/c", contents: Data(count: 100)))
    XCTAssertTrue(
      FileManager.default.createFile(atPath: cache.path + "/.hidden", contents: Data(count: 5000)))
    _ = try StateStore(location: location)

    let usage = try cache.usage()
    XCTAssertEqual(usage.fileCount, 3)
    XCTAssertEqual(usage.logicalBytes, 10_101)
    // Allocated sizes are st_blocks * 512: whole blocks, at least the logical size here.
    XCTAssertEqual(usage.allocatedBytes % 512, 0)
    XCTAssertGreaterThanOrEqual(usage.allocatedBytes, 10_101)
    var expectedAllocated: UInt64 = 0
    for name in [
      "8c11d92f07c76baf29e49afd2301deb2.png", "85efc80e9f4d19b93a614ce5927f9e7a.png", "nested/c",
    ] {
      var info = stat()
      if stat(cache.path + "/" + name, &info) == 0 {
        expectedAllocated += UInt64(info.st_blocks) * 512
      }
    }
    XCTAssertEqual(usage.allocatedBytes, expectedAllocated)
  }

  func testEmptyCacheHasNoUsage() throws {
    XCTAssertEqual(try DiskCache(location: location).usage(), DiskUsage())
  }

  func testDefaultDirectoryFollowsXDGCacheHome() {
    XCTAssertEqual(
      CacheLocation.defaultDirectory(environment: ["XDG_CACHE_HOME": "/var/cache/x", "HOME": "/h"]),
      "/var/cache/x/com.hackemist.SDImageCache")
    XCTAssertEqual(
      CacheLocation.defaultDirectory(environment: ["XDG_CACHE_HOME": "", "HOME": "/home/u"]),
      "/home/u/.cache/com.hackemist.SDImageCache")
    XCTAssertEqual(
      CacheLocation.defaultDirectory(environment: ["HOME": "/home/u"]),
      "/home/u/.cache/com.hackemist.SDImageCache")
    XCTAssertEqual(CacheLocation(directory: "/d", namespace: "avatars").diskCachePath, "/d/avatars")
  }

  func testStoreFailureLeavesNothingBehind() throws {
    let cache = DiskCache(location: location)
    try FileSystem.createDirectory(path: cache.path)
    // A directory under the cache name makes the final rename fail.
    let key = "https://example.com/a.png"
    try FileSystem.createDirectory(path: cache.cachePath(forKey: key) + "/blocker")
    XCTAssertThrowsError(try cache.store(Fixtures.png, forKey: key))
    let leftovers = try FileManager.default.contentsOfDirectory(atPath: cache.path)
    XCTAssertEqual(leftovers, ["8c11d92f07c76baf29e49afd2301deb2.png"])
  }

  /// A store puts the new bytes in place of the old under the key's name: the old file is
  /// replaced, not kept, and no temporary file is left beside it.
  func testAStoreReplacesTheKeysFileAndLeavesNothingElse() throws {
    let cache = DiskCache(location: location)
    let key = "https://example.com/a.jpg"
    try cache.store(Data("old".utf8), forKey: key)
    try cache.store(Data("new".utf8), forKey: key)
    XCTAssertEqual(try cache.data(forKey: key), Data("new".utf8))
    XCTAssertEqual(
      try FileManager.default.contentsOfDirectory(atPath: cache.path),
      [CacheFileName.fileName(forKey: key)])
  }

  /// A store killed at any moment leaves the old file or the new one, never a partial file under
  /// the cache name (SPEC section 1). The writer alternates two 8 MiB payloads under one key.
  func testKillDuringStoreNeverLeavesAPartialFile() throws {
    let cache = DiskCache(location: location)
    let key = "https://example.com/big.jpg"
    let payloadSize = 8 << 20
    for round in 0..<12 {
      let writer = Process()
      writer.executableURL = URL(fileURLWithPath: BuiltProducts.executable("cache-writer"))
      writer.arguments = [cache.path, key]
      let output = Pipe()
      writer.standardOutput = output
      try writer.run()
      // "stored": one full store has landed (a store takes milliseconds). A writer whose store
      // failed ends without it: the round fails then, or after 30 s, never waits forever.
      var stored = pollfd(
        fd: output.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
      guard poll(&stored, 1, 30_000) == 1, !output.fileHandleForReading.availableData.isEmpty
      else {
        _ = killAndReap(writer)
        return XCTFail("round \(round): no store landed")
      }
      usleep(UInt32.random(in: 0...40_000))
      if let signal = killAndReap(writer) {
        XCTAssertEqual(
          signal, SIGKILL, "round \(round): the writer ended on its own (a store failed)")
      }

      let data = try XCTUnwrap(try cache.data(forKey: key), "round \(round)")
      XCTAssertEqual(data.count, payloadSize, "round \(round)")
      XCTAssertTrue(
        data.allSatisfy { $0 == data.first } && [0x41, 0x42].contains(data.first!),
        "round \(round): mixed content")
      XCTAssertEqual(try cache.usage().fileCount, 1, "round \(round)")
    }
  }

  /// Only a regular file holds a key's data: a folder of its name is no hit (a prefetch stores
  /// the key), and a legacy file beside it is found instead.
  func testAFolderUnderAKeysNameIsNotItsData() throws {
    let key = "https://example.com/img/photo.jpg?size=large"
    let cache = DiskCache(location: location)
    try FileSystem.createDirectory(path: cache.cachePath(forKey: key))
    XCTAssertFalse(try cache.containsData(forKey: key))
    XCTAssertNil(try cache.existingPath(forKey: key))
    let legacy = temporary.appending("default/4d71d9e1d36571b22d5dd89b751927a9")
    XCTAssertTrue(FileManager.default.createFile(atPath: legacy, contents: Fixtures.png))
    XCTAssertEqual(try cache.existingPath(forKey: key), legacy)
  }
}

/// Kills `writer` and waits until it is gone; the signal that ended it, `nil` when Foundation
/// reaped it first. waitpid(2), not `waitUntilExit()`: Foundation can miss the end of a child
/// that died before it was killed (a store that failed), and then waits forever.
private func killAndReap(_ writer: Process) -> Int32? {
  kill(writer.processIdentifier, SIGKILL)
  var status: Int32 = 0
  var reaped: pid_t
  repeat {
    reaped = waitpid(writer.processIdentifier, &status, 0)
  } while reaped < 0 && errno == EINTR
  return reaped == writer.processIdentifier ? status & 0x7F : nil
}

/// Issue 26, item 8: the temporary name of a store fits `NAME_MAX` for every name SD makes.
final class LongFileNameTests: TemporaryFolderTestCase {
  func testAKeyWithTheLongestExtensionSDKeepsIsStoredAndReadBack() throws {
    let cache = DiskCache(location: CacheLocation(directory: temporary.path))
    for extensionLength in [200, 222] {
      let key = "https://example.com/a." + String(repeating: "e", count: extensionLength)
      let name = CacheFileName.fileName(forKey: key)
      XCTAssertEqual(name.utf8.count, 33 + extensionLength)
      try cache.store(Fixtures.png, forKey: key)
      XCTAssertEqual(try cache.data(forKey: key), Fixtures.png)
    }
  }

  func testATemporaryNameNeverPassesNameMaxAndKeepsItsPrefix() {
    for name in [String(repeating: "x", count: 255), String(repeating: "é", count: 200), "a.jpg"] {
      let temporary = FileSystem.temporaryName(for: name, suffix: "abc-12")
      XCTAssertLessThanOrEqual(temporary.utf8.count, 255)
      XCTAssertTrue(temporary.hasPrefix(FileSystem.temporaryPrefix))
      XCTAssertTrue(temporary.hasSuffix(".abc-12"))
    }
  }
}

/// Issue 26, item 1: a path that leads to one of this process's own descriptors (as the
/// standard-output device names do) is written to that descriptor, never opened or renamed.
/// Here the descriptor is the test's own pipe, reached through a link in a temporary folder:
/// nothing on the machine but the pipe is written.
final class OwnDescriptorOutputTests: TemporaryFolderTestCase {
  func testALinkToThisProcesssOwnDescriptorIsWrittenThroughTheDescriptor() throws {
    var ends: [Int32] = [0, 0]
    XCTAssertEqual(pipe(&ends), 0)
    defer {
      close(ends[0])
      close(ends[1])
    }
    let link = temporary.appending("out")
    XCTAssertEqual(symlink("/proc/self/fd/\(ends[1])", link), 0)

    let output = try OutputFile(path: link)
    XCTAssertEqual(output.disposition, .descriptor(ends[1]))
    try output.write(Array("report".utf8))
    var buffer = [UInt8](repeating: 0, count: 16)
    let count = read(ends[0], &buffer, buffer.count)
    XCTAssertEqual(String(decoding: buffer.prefix(max(0, count)), as: UTF8.self), "report")
    var info = stat()
    XCTAssertEqual(lstat(link, &info), 0)
    XCTAssertEqual(info.st_mode & S_IFMT, S_IFLNK, "the link was replaced")
  }
}
