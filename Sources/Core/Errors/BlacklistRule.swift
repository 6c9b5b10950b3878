import Foundation

/// When a blacklisted URL stops counting as blacklisted (SPEC section 2: our blacklist can
/// expire after a configurable time). The one rule for the manager and the state store.
public enum BlacklistRule {
  /// Whether a URL that last failed at `lastFailedAt` is still blacklisted at `now`, given an
  /// optional time-to-live after its last failure (`nil`: forever).
  public static func isActive(lastFailedAt: Date, at now: Date, timeToLive: TimeInterval?) -> Bool {
    guard let timeToLive else { return true }
    return lastFailedAt.addingTimeInterval(timeToLive) > now
  }
}

extension BlacklistRule {
  /// A 64-bit hash of a blacklist key (the URL with its password masked), the same in every
  /// process: FNV-1a of its UTF-8 bytes. A run keeps this hash of each entry in memory, not the
  /// entry, and reads the entry of a URL whose hash it holds (a collision refuses no URL).
  public static func hash(ofURL url: String) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in url.utf8 {
      hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
    }
    return hash
  }
}
