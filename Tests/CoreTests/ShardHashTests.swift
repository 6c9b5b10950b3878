import Core
import Foundation
import TestSupport
import XCTest

/// SPEC section 9: a URL's shard is a stable hash of its cache key, the same on every machine
/// and version. The rule (Shard.swift): the first 8 bytes of the MD5 of the key's UTF-8 bytes,
/// read as a big-endian unsigned 64-bit integer, modulo N. Here it is computed apart from the
/// code, over many keys and shard counts, including counts that do not divide 255 (for those
/// that do, 256 = 1 mod N, and any byte order gives the same remainder).
final class ShardHashTests: TemporaryFolderTestCase {
  /// The MD5 of each key as md5sum(1) prints it (lowercase hex), one process for them all.
  private func md5sums(_ keys: [String]) throws -> [String] {
    let paths = keys.indices.map { temporary.appending("key-\($0)") }
    for (key, path) in zip(keys, paths) {
      XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(key.utf8)))
    }
    let result = try Command.run("/usr/bin/env", ["md5sum"] + paths)
    XCTAssertEqual(result.status, 0, result.stderr)
    let digests = result.stdout.split(separator: "\n").map { String($0.prefix(32)) }
    XCTAssertEqual(digests.count, keys.count)
    return digests
  }

  /// The remainder of the hex number `digits` by `count`, one digit at a time: no 64-bit
  /// integer, so no byte order, is involved.
  private func remainder(ofHex digits: Substring, by count: Int) -> Int {
    digits.reduce(0) { ($0 * 16 + Int(String($1), radix: 16)!) % count }
  }

  func testTheShardIsTheDigestsFirstEightBytesBigEndianModuloN() throws {
    var random = SeededRandom(seed: 0x5EA5)
    var keys = ["", "https://example.com/a.jpg", "https://example.com/i/\u{00E9}t\u{00E9}.png"]
    for index in 0..<300 {
      keys.append(
        "https://cdn\(index % 4).example.com/p/\(UInt64.random(in: 0...UInt64.max, using: &random))"
          + [".jpg", ".png?w=200", "", ".webp#x"][index % 4])
    }
    let digests = try md5sums(keys)
    for count in [1, 2, 7, 10, 13, 16, 100, 256, 1000, 65_537, 1_000_003] {
      var seen = Set<Int>()
      for (key, digest) in zip(keys, digests) {
        let expected = remainder(ofHex: digest.prefix(16), by: count)
        seen.insert(expected)
        XCTAssertEqual(
          Shard.index(ofCacheKey: key, count: count), expected,
          "\(key.debugDescription), N = \(count)")
        // A file's shard is read from its name alone: the same shard owns the key and the file.
        let owner = try XCTUnwrap(Shard(index: expected, count: count))
        XCTAssertTrue(owner.owns(cacheKey: key), "\(key.debugDescription), N = \(count)")
        XCTAssertEqual(owner.owns(fileName: digest + ".jpg"), true, "\(digest), N = \(count)")
        XCTAssertEqual(owner.owns(fileName: digest.uppercased()), true, "\(digest), N = \(count)")
      }
      if count <= 13 {
        XCTAssertEqual(seen.count, count, "303 keys reach every one of \(count) shards")
      }
    }
  }

  /// `--shard K/N` is exactly two whole numbers with `0 <= K < N`; and a file whose name is not
  /// 32 hex digits first (a digest, then its extension) is no shard's, whatever its start.
  func testAShardIsKOfNAndANameWithoutThirtyTwoHexDigitsIsNoShards() throws {
    XCTAssertEqual(Shard("2/3"), Shard(index: 2, count: 3))
    for text in ["1/2/3", "1/2/", "/2", "1/", "3/3", "-1/3", "1", "1:2", "a/b", ""] {
      XCTAssertNil(Shard(text), text)
    }
    let digest = "0123456789abcdef0123456789abcdef"
    for count in [1, 2, 3] {
      let shard = try XCTUnwrap(Shard(index: 0, count: count))
      XCTAssertNotNil(shard.owns(fileName: digest + ".png"), "N = \(count)")
      for name in [
        String(digest.prefix(16)) + "0123456789abcdeg.png", String(digest.prefix(31)) + ".png",
        String(digest.prefix(16)) + "-notes.txt-----.png",
      ] {
        XCTAssertNil(shard.owns(fileName: name), "\(name), N = \(count)")
      }
    }
  }
}
