import Core
import Foundation
import HTTP
import Pipeline

/// How prefetching runs (SPEC sections 2 and 5): the downloader's settings, the pipeline's and
/// the scheduler's own, each declared once in its layer and each default stated there. Job
/// files (`prefetch:`) and the command-line flags of the same names both set it; a setting of a
/// layer is read and written through this value by its name (`configuration.concurrency`).
@dynamicMemberLookup
public struct PrefetchConfiguration: Sendable, Equatable {
  /// The downloader's settings: limits, timeouts, sizes, connections.
  public var http = DownloaderConfiguration()
  /// SD's pipeline's settings: validation, the blacklist's TTL.
  public var pipeline = PipelineConfiguration()
  /// Further attempts after a transient failure (timeouts, connection errors, 429, 502-504).
  public var retries = 2
  /// The longest a whole run may take, from when it holds the cache's lock: then it stops as a
  /// signal stops it (the work in hand finished or discarded, nothing new started) and its
  /// report is marked interrupted, so that a night's run fits its window; `nil`: no limit.
  public var maxRunTime: TimeInterval?
  /// Take only this shard's URLs (SPEC section 9); `nil`: every URL.
  public var shard: Shard?
  /// Downloads at once to one host by a whole fleet of N shards: each shard takes
  /// ``perHostShare(ofFleet:shards:)`` of it in place of `perHostConcurrency` (which is per
  /// worker: N workers open N times as many). `nil`: each takes `perHostConcurrency`.
  public var fleetPerHostConcurrency: Int?

  public init() {}

  public subscript<Value>(dynamicMember setting: WritableKeyPath<DownloaderConfiguration, Value>)
    -> Value
  {
    get { http[keyPath: setting] }
    set { http[keyPath: setting] = newValue }
  }

  public subscript<Value>(dynamicMember setting: WritableKeyPath<PipelineConfiguration, Value>)
    -> Value
  {
    get { pipeline[keyPath: setting] }
    set { pipeline[keyPath: setting] = newValue }
  }

  public subscript<Value>(dynamicMember setting: KeyPath<DownloaderConfiguration, Value>) -> Value {
    http[keyPath: setting]
  }

  /// One of `shards` workers' part of a fleet-wide per-host limit: `fleet / shards` rounded
  /// down, so that the fleet stays within `fleet`, but at least 1, so that every shard makes
  /// progress (then, with more shards than `fleet`, the fleet opens one per shard).
  public static func perHostShare(ofFleet fleet: Int, shards: Int) -> Int {
    max(1, fleet / max(1, shards))
  }

  /// What `retries` may be set to.
  public static let retriesRange = 0...100
}
