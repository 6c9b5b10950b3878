import Core
import Foundation
import HTTP
import Maintenance
import Pipeline
import Prefetcher

/// A numeric setting that a job file and the command line both take, with its name in each and
/// the values it takes, stated once. Both check a value here, and put the same words after
/// their own name for it: `job.yaml:4: field 'prefetch.concurrency': "0" is out of range:
/// expected a whole number from 1 to 10000` and `--concurrency "0" is out of range: ...`.
public enum NumericSetting: Sendable, CaseIterable {
  case concurrency
  case perHostConcurrency
  case perHostStreams
  case fleetPerHostConcurrency
  case retries
  case maxPixels
  case timeout
  case deadline
  case blacklistTTL
  case maxRunTime
  case maxDiskAge

  /// What values a setting takes.
  public enum Rule: Sendable, Equatable {
    case count(ClosedRange<Int>)
    case duration(DurationRange)
  }

  public var rule: Rule {
    switch self {
    case .concurrency, .perHostConcurrency, .perHostStreams, .fleetPerHostConcurrency:
      .count(DownloaderConfiguration.concurrencyRange)
    case .retries: .count(PrefetchConfiguration.retriesRange)
    case .maxPixels: .count(PipelineConfiguration.maxPixelsRange)
    case .timeout, .deadline, .blacklistTTL, .maxRunTime: .duration(.positive)
    case .maxDiskAge: .duration(.age)
    }
  }

  /// Its field in a job file.
  public var field: String {
    switch self {
    case .concurrency: "prefetch.concurrency"
    case .perHostConcurrency: "prefetch.perHostConcurrency"
    case .perHostStreams: "prefetch.perHostStreams"
    case .fleetPerHostConcurrency: "prefetch.fleetPerHostConcurrency"
    case .retries: "prefetch.retries"
    case .maxPixels: "prefetch.maxPixels"
    case .timeout: "prefetch.timeout"
    case .deadline: "prefetch.deadline"
    case .blacklistTTL: "prefetch.blacklistTTL"
    case .maxRunTime: "prefetch.maxRunTime"
    case .maxDiskAge: "cache.maxDiskAge"
    }
  }

  /// Its flag on the command line.
  public var flag: String {
    switch self {
    case .concurrency: "--concurrency"
    case .perHostConcurrency: "--per-host-concurrency"
    case .perHostStreams: "--per-host-streams"
    case .fleetPerHostConcurrency: "--fleet-per-host-concurrency"
    case .retries: "--retries"
    case .maxPixels: "--max-pixels"
    case .timeout: "--timeout"
    case .deadline: "--deadline"
    case .blacklistTTL: "--blacklist-ttl"
    case .maxRunTime: "--max-run-time"
    case .maxDiskAge: "--max-age"
    }
  }

  /// `value` (`nil`: `text` is not a whole number) when the setting takes it.
  public func check(count value: Int?, text: String) throws(UnitParseError) -> Int {
    guard case .count(let allowed) = rule else {
      preconditionFailure("\(field) is not a count")
    }
    let expected = "a whole number from \(allowed.lowerBound) to \(allowed.upperBound)"
    guard let value else { throw UnitParseError(value: text, expected: expected) }
    guard allowed.contains(value) else {
      throw UnitParseError(value: text, expected: expected, outOfRange: true)
    }
    return value
  }

  /// `seconds`, parsed from `text`, when the setting takes it.
  public func check(seconds: TimeInterval, text: String) throws(UnitParseError) -> TimeInterval {
    guard case .duration(let allowed) = rule else {
      preconditionFailure("\(field) is not a duration")
    }
    return try allowed.check(seconds, text: text)
  }
}
