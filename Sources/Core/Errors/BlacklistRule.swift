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
