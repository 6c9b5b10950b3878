import Core
import Foundation

/// How SD's pipeline decides and checks (SPEC section 2): what a body must pass to be stored,
/// and how long a failed URL stays blacklisted. The prefetch's ``PrefetchConfiguration`` holds
/// one.
public struct PipelineConfiguration: Sendable, Equatable {
  /// How a body is checked before it is stored.
  public var validation: ValidationLevel = .structure
  /// An image with more pixels is `badImageData`, refused before any pixel is decoded: no
  /// header may make validation allocate gigabytes.
  public var maxPixels = 100_000_000
  /// A blacklisted URL counts as blacklisted for this long after its last failure; `nil`:
  /// forever.
  public var blacklistTTL: TimeInterval?

  public init() {}

  /// What `maxPixels` may be set to: a terapixel.
  public static let maxPixelsRange = 1...1_000_000_000_000
}
