import Core
import Foundation
import Maintenance
import State
import Synchronization

/// Something a run has to tell people, as data: the command line words it and shows it or not
/// by its ``severity`` (`--quiet` keeps warnings and errors), tests look at the case itself.
public enum RunEvent: Sendable {
  /// How much a person needs to see an event: the console's filter orders them.
  public enum Severity: Int, Sendable, Comparable, CaseIterable {
    case debug
    case info
    /// Worth knowing, not a problem.
    case notice
    /// Something a person should look at; the run goes on, its exit code unaffected by it.
    case warning
    /// Something failed: a URL, an input, a file of a pass, the run.
    case error

    public static func < (lhs: Severity, rhs: Severity) -> Bool { lhs.rawValue < rhs.rawValue }
  }

  /// Another run holds the cache's lock and this one waits for it (`--wait`).
  case waitingForLock(job: String, holder: RunLock.Holder?, timeout: TimeInterval?)
  /// The run holds the lock and starts on its cache; `created`: the folder did not exist (and
  /// unless `dryRun`, was created).
  case runStarted(job: String, cachePath: String, created: Bool, dryRun: Bool = false)
  /// A warning of the run, also in its report unless said otherwise (``RunWarnings``).
  case warning(RunWarning)
  /// What killed runs left behind was removed (or, in a dry run, would be): the report's
  /// warnings list it too.
  case staleTemporariesSwept(job: String, count: Int, bytes: UInt64, dryRun: Bool)

  // The prefetch, one URL or line at a time.
  /// A manifest line that is not a URL the run can use: skipped, the run goes on.
  case lineSkipped(message: String)
  /// A manifest or sitemap that could not be read to its end.
  case inputFailed(message: String)
  /// A URL that failed; the console shows the first few (``EchoingPrefetchSink``).
  case urlFailed(FailureReport)
  /// The failures past those the console shows are in the report only.
  case furtherFailuresInReportOnly
  /// The whole message of the first failure of a class whose cause is usually the run's
  /// set-up rather than the URL (``EchoingPrefetchSink/saidInFull``): how to trust a
  /// certificate issuer, which proxy or host could not be found or reached.
  case failureCause(message: String)
  /// A variant (thumbnail, transform) that was not made, with `--verbose`.
  case variantSkipped(url: String, reason: String)
  /// A dry run's plan for one URL: the command's output.
  case planned(PlannedURL)
  /// The prefetch's summary; `refusal`: URLs the blacklist refused, said in the same line.
  case prefetchFinished(job: String, counts: PrefetchCounts, refusal: BlacklistRefusal?)
  /// Where a host's adaptive limit (`--per-host-concurrency auto`) settled, with `--verbose`:
  /// a number an operator may fix instead.
  case hostLimitSettled(HostLimit)
  case planFinished(job: String, plan: PrefetchPlanCounts)

  // The maintenance passes.
  /// The legacy folder the migrate pass reads is not there (said when it was asked for).
  case noLegacyFolder(path: String)
  /// The merged legacy folder, removed once empty (a kept one is a warning,
  /// ``RunWarning/legacyFolderKept(path:leftovers:)``).
  case legacyFolderMerged(path: String)
  /// A job that lists neither expire nor trim: nothing is deleted, and the run says so, since
  /// SD would have expired files after 7 days (`passes`: what the job lists, perhaps migrate).
  case noCleaningPasses(job: String, passes: [JobPass])
  /// The limits the expire and trim passes run with, said before they start.
  case maintenanceLimits(CleanupConfiguration, expires: Bool, trims: Bool)
  /// One file a pass deletes or moves (or would): `--verbose`, or a dry run's plan.
  case passAction(MaintenanceAction, in: PassSummary)
  /// A file a pass could not handle; the pass goes on.
  case passError(pass: MaintenancePassReport.Pass, message: String)
  case passFinished(PassSummary)
  /// A file `verify` found bad (always said) or worth a note (said with `--verbose`).
  case verifiedFile(VerifiedFile)
  /// The bad files past those the console shows are in the report only.
  case furtherBadFilesInReportOnly
  /// An entry `verify` could not read; the audit goes on, and exits 4.
  case verifyError(String)
  /// `verify`'s summary: the files by outcome.
  case verifyFinished(job: String, counts: VerifyCounts, level: VerifyLevel)

  // The end of the run.
  case interrupted(job: String, signal: Int32)
  /// The run's `maxRunTime` stopped it.
  case timeLimitReached(job: String, seconds: TimeInterval)
  /// The error that ended the run; the report, marked failed, says it too.
  case runFailed(job: String, error: any Error)
  /// The report of a failed run could not be written either.
  case reportNotWritten(job: String, error: any Error)
  case reportWritten(job: String, path: String)
  case metricsWritten(job: String, path: String)

  public var severity: Severity {
    switch self {
    case .waitingForLock, .runStarted, .variantSkipped, .hostLimitSettled, .planned, .planFinished,
      .noLegacyFolder,
      .legacyFolderMerged,
      .noCleaningPasses, .maintenanceLimits, .passAction,
      .reportWritten,
      .metricsWritten:
      .info
    case .prefetchFinished(_, _, let refusal): refusal == nil ? .info : .warning
    case .furtherFailuresInReportOnly, .furtherBadFilesInReportOnly, .failureCause: .notice
    case .warning, .staleTemporariesSwept, .lineSkipped, .interrupted, .timeLimitReached: .warning
    case .passFinished(let summary): summary.errorCount > 0 ? .warning : .info
    case .verifiedFile(let file): file.outcome == .bad ? .warning : .info
    case .verifyFinished(_, let counts, _): counts.bad + counts.errors > 0 ? .warning : .info
    case .verifyError: .error
    case .inputFailed, .urlFailed, .passError, .runFailed, .reportNotWritten: .error
    }
  }
}

/// A warning of a run: said on the console as it happens and listed in the report's
/// `warnings` (SPEC section 10), worded by ``description`` for both.
public enum RunWarning: Sendable, CustomStringConvertible {
  /// A job file's or a manifest line's option that only matters to a UI, named by file, line
  /// and field.
  case ignoredOption(ConfigurationError)
  /// `fleetPerHostConcurrency` below the shard count: every shard still opens a connection.
  case fleetConcurrencyBelowShards(fleet: Int, shards: Int)
  /// What the state store said when it opened (a corrupt state file moved aside).
  case stateFile(String)
  /// The sweep of temporary files failed while another error ended the run, or could not
  /// remove one of them.
  case sweepFailed(String)
  /// Earlier runs that died without finishing, marked abandoned.
  case abandonedRuns(count: Int)
  /// A host that asked the run to wait (429 or 503 with Retry-After).
  case hostBackoff(HostBackoff)
  /// Temporary files left by killed runs, removed (or in a dry run, to remove).
  case staleTemporaries(count: Int, bytes: UInt64, dryRun: Bool)
  /// A metrics file that could not be written; the run's work and exit status stand.
  case metricsNotWritten(path: String, error: any Error)
  /// The cache's size could not be measured: the metrics go without it.
  case metricsWithoutCacheSize(error: any Error)
  /// A dry run over the deletion limit (`maxDelete`): the real run would refuse to start.
  case overDeletionLimit(MaintenanceError)
  /// URLs the blacklist refused without a request; the summary line says it too.
  case blacklistRefused(BlacklistRefusal)
  /// The wall clock stepped by `seconds` (negative: back) during the run: the duration is the
  /// monotonic clock's, and an end before the start is written as the start plus it.
  case clockStepped(seconds: TimeInterval)
  /// A merged legacy folder that still holds files, kept: what is left in it and why.
  case legacyFolderKept(path: String, leftovers: MigrationLeftovers)
  /// Files of the namespace under legacy names after a migration without manifests: SD 5
  /// looks for the current names, which only the URLs give.
  case legacyNamesLeft(count: Int, path: String, dryRun: Bool)
  /// A maintenance pass that went on outside its bounds (trim's files held in memory).
  case maintenance(MaintenanceWarning)
  /// The run's `maxRunTime` stopped it (the console says it as an event of its own): the
  /// report says why it is `interrupted`, where a signal's exit code would.
  case timeLimitReached(seconds: TimeInterval)
  /// Passes the job lists that a signal or the time limit stopped the run before, or that a
  /// failure (`failed`) ended it before.
  case passesNotRun([JobPass], failed: Bool = false)
  /// The manifests listed no URL to try: empty, comments only, or every line skipped
  /// (`skipped` of them), as an export that came out empty or a server's error page in text.
  case nothingListed(skipped: Int)
  /// A signal stopped the run while it waited for the cache's lock (`--wait`): nothing done.
  case stoppedWaitingForLock
  /// The job's expire and trim, run after a full disk ended the prefetch, failed too.
  case cleaningAfterFullDiskFailed(String)

  public var description: String {
    switch self {
    case .ignoredOption(let error): "\(error)"
    case .fleetConcurrencyBelowShards(let fleet, let shards):
      "fleetPerHostConcurrency \(fleet) is less than the \(shards) shards: each still opens "
        + "1 connection to a host, \(shards) in all"
    case .stateFile(let message): message
    case .sweepFailed(let message): message
    case .abandonedRuns(let count):
      "marked \(count) earlier run(s) abandoned: they died without finishing (kill -9, power loss)"
    case .hostBackoff(let backoff):
      "\(backoff.host) asked to wait (429 or 503 with Retry-After) \(backoff.pauses) time(s): "
        + "its downloads were held back \(String(format: "%.1f", backoff.seconds)) s in all"
    case .staleTemporaries(let count, let bytes, let dryRun):
      "\(dryRun ? "would remove" : "removed") \(count) temporary file(s) "
        + "(\(formatBytes(bytes))) left by a killed run"
    case .metricsNotWritten(let path, let error):
      "metrics not written to \(path): \(error); the run's work and exit status are unaffected"
    case .metricsWithoutCacheSize(let error): "metrics without the cache's size: \(error)"
    case .overDeletionLimit(let refusal): "a real run would stop here: \(refusal)"
    case .blacklistRefused(let refusal): "\(refusal)"
    case .legacyFolderKept(let path, let leftovers):
      "migrate: kept \(path): \(leftovers)"
    case .legacyNamesLeft(let count, let path, let dryRun):
      "migrate: \(count) file(s) in \(path) \(dryRun ? "would keep" : "keep") legacy names "
        + "(no extension, or query text in it) that SD 5 does not look up; give their URLs "
        + "with --manifest FILE (a job's manifests) to rename them to SD 5's names"
    case .maintenance(let warning): "\(warning)"
    case .clockStepped(let seconds):
      "clockStepped: the system clock stepped \(seconds < 0 ? "back" : "forward") "
        + "\(String(format: "%.1f", abs(seconds))) s during the run; the duration is measured "
        + "by the monotonic clock"
    case .timeLimitReached(let seconds):
      "interrupted: the run's time limit (\(Int(seconds)) s, maxRunTime) was reached; the URLs "
        + "not started are left for the next run"
    case .nothingListed(let skipped):
      "nothing tried: the manifests listed no URL"
        + (skipped > 0 ? " but \(skipped) line(s) that could not be used (see lineErrors)" : "")
    case .stoppedWaitingForLock:
      "interrupted while waiting for the cache's lock (--wait): nothing was done"
    case .cleaningAfterFullDiskFailed(let error):
      "not run: expire and trim, tried after the disk filled, failed: \(error)"
    case .passesNotRun(let passes, let failed):
      "not run: " + passes.map(\.rawValue).joined(separator: ", ")
        + " (the job lists them; the run \(failed ? "failed" : "was interrupted") before them)"
    }
  }
}

/// The warnings of one run, gathered as it goes for its report: each is said on the console
/// when it is added, so that the console and the report list the same ones.
final class RunWarnings: Sendable {
  private let list = Mutex<[RunWarning]>([])
  private let console: any RunConsole

  init(console: any RunConsole) {
    self.console = console
  }

  /// Says the warning and keeps it for the report.
  func add(_ warning: RunWarning) {
    console.report(.warning(warning))
    keep(warning)
  }

  /// Keeps a warning for the report that an event of its own has said on the console.
  func keep(_ warning: RunWarning) {
    list.withLock { $0.append(warning) }
  }

  /// The report's `warnings`, in the order they came.
  var messages: [String] { list.withLock { $0.map(\.description) } }

  /// The report's `metricsErrors`: the metrics files that could not be written, and what
  /// they lack.
  var metricsErrors: [String] {
    list.withLock {
      $0.compactMap {
        switch $0 {
        case .metricsNotWritten, .metricsWithoutCacheSize: $0.description
        default: nil
        }
      }
    }
  }
}

/// URLs of a run that the failed-URL blacklist refused without a request (SPEC section 12: a
/// summary says when the blacklist refused URLs). A blacklist outlives the problem that filled
/// it (a certificate since fixed, a manifest line since corrected), so the run says how many,
/// how old the blacklist is, and how to try them again, instead of a quiet count.
public struct BlacklistRefusal: Sendable, Equatable, CustomStringConvertible {
  /// URLs refused up front, the report's `prefetch.blacklisted`.
  public var count: Int
  /// When the blacklist's oldest entry first failed, if the blacklist could be read.
  public var oldestFailure: Date?
  /// Nothing else happened: no hit, no download, no failure. The run did no work at all.
  public var refusedEverything: Bool
  /// The cache whose blacklist it is, for the command that clears it.
  public var location: CacheLocation
  /// When the sentence is said, for the oldest entry's age.
  public var now = Date()

  public init(
    count: Int, oldestFailure: Date?, refusedEverything: Bool, location: CacheLocation
  ) {
    self.count = count
    self.oldestFailure = oldestFailure
    self.refusedEverything = refusedEverything
    self.location = location
  }

  /// The refusal for a run's counts, or `nil` when the blacklist refused nothing.
  public init?(counts: PrefetchCounts, oldestFailure: Date?, location: CacheLocation) {
    guard counts.blacklisted > 0 else { return nil }
    self.init(
      count: counts.blacklisted, oldestFailure: oldestFailure,
      refusedEverything: Self.refusedEverything(counts), location: location)
  }

  /// The blacklist refused URLs and nothing else happened: no hit, no download, no failure.
  public static func refusedEverything(_ counts: PrefetchCounts) -> Bool {
    let worked =
      counts.memoryHits + counts.diskHits + counts.downloaded + counts.notModified + counts.failed
    return counts.blacklisted > 0 && worked == 0
  }

  /// The command that empties this cache's blacklist.
  public var clearCommand: String {
    "imagecache blacklist clear --cache \(location.directory)"
      + (location.namespace == CacheLocation.defaultNamespace
        ? "" : " --namespace \(location.namespace)")
  }

  public var description: String {
    let age = oldestFailure.map {
      "; its oldest entry first failed \(Self.age(now.timeIntervalSince($0))) ago"
    }
    return (refusedEverything ? "nothing was tried: " : "")
      + "\(count) URL(s) refused by the blacklist without a request (they failed in an earlier "
      + "run\(age ?? "")); to try them again: --option retryFailed (options: [retryFailed] "
      + "in a job), or \(clearCommand)"
  }

  /// An age as a person says it: `12 days`, `5 hours`, `3 minutes`, `40 seconds`.
  static func age(_ seconds: TimeInterval) -> String {
    let seconds = max(0, seconds)
    for (unit, size) in [("day", 86_400.0), ("hour", 3600), ("minute", 60)] where seconds >= size {
      let count = Int(seconds / size)
      return "\(count) \(unit)\(count == 1 ? "" : "s")"
    }
    let count = Int(seconds)
    return "\(count) second\(count == 1 ? "" : "s")"
  }
}
