import CCrypto
import Foundation

/// One of N shards of a run (SPEC section 9): the URLs whose cache key hashes to `index`.
///
/// The hash is fixed forever, the same on every machine, version and CPU: the first 8 bytes of
/// the MD5 of the cache key's UTF-8 bytes (the digest SD names the file by), read as a
/// big-endian unsigned 64-bit integer, modulo `count`. So a file's shard can be read from its
/// name alone: its first 16 hex digits.
public struct Shard: Sendable, Equatable, Hashable, CustomStringConvertible {
  /// 0-based, as Kubernetes' `JOB_COMPLETION_INDEX`.
  public let index: Int
  public let count: Int

  public init?(index: Int, count: Int) {
    guard count >= 1, (0..<count).contains(index) else { return nil }
    self.index = index
    self.count = count
  }

  /// `K/N`, with `0 <= K < N`.
  public init?(_ text: String) {
    let parts = text.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else {
      return nil
    }
    self.init(index: index, count: count)
  }

  public var description: String { "\(index)/\(count)" }

  /// What names this shard's lock and state files: `shard-K-of-N`.
  public var fileSuffix: String { "shard-\(index)-of-\(count)" }

  /// The shard of `cacheKey` among `count`.
  public static func index(ofCacheKey cacheKey: String, count: Int) -> Int {
    let bytes = Array(cacheKey.utf8.prefix { $0 != 0 })
    var digest = [UInt8](repeating: 0, count: 16)
    bytes.withUnsafeBufferPointer { ic_md5($0.baseAddress, $0.count, &digest) }
    return index(ofDigestPrefix: digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }, count: count)
  }

  private static func index(ofDigestPrefix prefix: UInt64, count: Int) -> Int {
    Int(prefix % UInt64(count))
  }

  public func owns(cacheKey: String) -> Bool {
    Self.index(ofCacheKey: cacheKey, count: count) == index
  }

  /// Whether the cache file `name` (SD's `md5[.ext]`, or a legacy variant) is this shard's;
  /// `nil` when the name does not start with 32 hex digits (no shard owns it).
  public func owns(fileName name: String) -> Bool? {
    let hex = name.utf8.prefix(32)
    guard hex.count == 32, hex.allSatisfy({ $0.isHexDigit }) else { return nil }
    guard let prefix = UInt64(String(decoding: hex.prefix(16), as: UTF8.self), radix: 16) else {
      return nil
    }
    return Self.index(ofDigestPrefix: prefix, count: count) == index
  }
}

extension UInt8 {
  fileprivate var isHexDigit: Bool {
    (0x30...0x39).contains(self) || (0x61...0x66).contains(self) || (0x41...0x46).contains(self)
  }
}
