import Core
import Foundation
import HTTP
import Maintenance
import Pipeline
import Prefetcher
import State

/// Where a run's events go: the command line words them and prints them on stderr, filtered
/// by their severity; tests keep them.
public protocol RunConsole: Sendable {
  func report(_ event: RunEvent)
  /// The progress display of a prefetch, if there is one. `total` counts the URLs to go (or
  /// `nil` when that cannot be known ahead, as for sitemaps); it reads every manifest, so a
  /// display calls it only if it shows the total, and off the run's path.
  func progress(total: @escaping @Sendable () -> Int?) -> (any PrefetchProgress)?
  /// What the command exists to print, a dry run's plan: the command line prints it on
  /// stdout, where reported events go to stderr, so that it can be piped.
  func output(_ event: RunEvent)
}

extension RunConsole {
  public func output(_ event: RunEvent) { report(event) }
}

/// How one run goes, beside the job itself: what the command line's flags say.
public struct RunSettings: Sendable {
  /// Download nothing: plan the prefetch and the maintenance passes without a request and
  /// without touching a file.
  public var dryRun = false
  /// List every file the maintenance passes delete, in the report and on the console.
  public var verbose = false
  /// Wait for another run's lock instead of failing with ``RunLock/Failure/held(path:holder:)``.
  public var wait = false
  /// With `wait`, give up after this long (exit 3); `nil`: wait as long as it takes.
  public var waitTimeout: TimeInterval?
  /// Report files besides the job's own (`--report`), placeholders filled in as the job's own
  /// (``Job/reportPath(_:startedAt:)``).
  public var reportFiles: [String] = []
  /// Also print the report on stdout (`--json`).
  public var printsReport = false
  /// Prometheus metrics files besides the job's own (`--metrics`); `{job}` becomes its name.
  public var metricsFiles: [String] = []
  /// The process's environment, for the CA certificates curl(1) takes from it
  /// (``Connection/trusting(environment:)``).
  public var environment: [String: String] = [:]

  public init() {}
}

/// How a run ended, for the exit code (SPEC section 6).
public struct RunOutcome: Sendable, Equatable {
  public var status: RunReport.Status
  /// The signal that interrupted the run.
  public var signal: Int32?
  /// The run's time limit stopped it (``PrefetchConfiguration/maxRunTime``).
  public var timeLimitReached = false
  /// URLs that failed (not counting blacklisted or skipped ones).
  public var failedURLs: Int
  /// Manifests and sitemaps that failed as a whole.
  public var failedInputs = 0
  /// Inputs that are no manifest at all (an image, binary data): a usage error, exit 2.
  public var notManifests = 0
  /// The blacklist refused every URL: nothing was tried, a night's work silently not done.
  /// Exit 1 like failed URLs, and allowed with them (``Job/allowURLFailures``).
  public var refusedEverything = false
  /// Files the maintenance passes meant to remove and could not (exit code 1).
  public var filesNotRemoved = 0
  /// The job allows failed URLs (``Job/allowURLFailures``): they do not make the exit code 1.
  public var urlFailuresAllowed = false
  /// The report files written.
  public var reportFiles: [String]
  /// Files `verify` found bad (exit code 1).
  public var badFiles = 0
  /// Entries `verify` could not read: its audit is incomplete (exit code 4).
  public var entriesNotRead = 0
}

/// Runs one job start to finish under the cache's run lock and with signals handled (SPEC
/// sections 4-6): the migrate pass if the job lists it, the prefetch of its manifests, the
/// expire and trim passes it lists, and the report, streamed as the run goes. `run`,
/// `prefetch`, `maintain` and `migrate` are all jobs.
public struct JobRunner: Sendable {
  public var job: Job
  public var settings: RunSettings
  public var console: any RunConsole
  /// A CA variable of the environment that names no usable certificates: refused before the
  /// run, as `--cacert` is, since it would fail every https URL.
  private let environmentProblem: ConfigurationError?
  /// Warnings about the run's settings, said when it starts: a fleet's per-host limit below
  /// its number of shards (each shard still takes one connection).
  private var setupWarnings: [RunWarning] {
    guard let fleet = job.prefetch.fleetPerHostConcurrency else { return [] }
    let shards = job.shard?.count ?? 1
    return shards > fleet ? [.fleetConcurrencyBelowShards(fleet: fleet, shards: shards)] : []
  }

  public init(job: Job, settings: RunSettings = RunSettings(), console: any RunConsole) {
    var job = job
    if let fleet = job.prefetch.fleetPerHostConcurrency {
      let shards = job.shard?.count ?? 1
      let share = PrefetchConfiguration.perHostShare(ofFleet: fleet, shards: shards)
      if job.prefetch.perHostConcurrency != nil { job.prefetch.perHostConcurrency = share }
      // An adaptive limit finds its level within the shard's share of the fleet's budget.
      if job.prefetch.adapts {
        job.prefetch.maxPerHostConcurrency = min(
          job.prefetch.maxPerHostConcurrency ?? share, share)
      }
    }
    environmentProblem = job.prefetch.connection.environmentProblem(settings.environment)
    job.prefetch.connection = job.prefetch.connection.trusting(environment: settings.environment)
    self.job = job
    self.settings = settings
    self.console = console
  }

  /// Runs the job. Throws for what ends a run before its report (the lock is held, a report
  /// path cannot be written) and for fatal errors during it, after writing the report marked
  /// `failed`.
  public func run() async throws -> RunOutcome {
    // libcurl's set-up (OpenSSL's with it: milliseconds) runs on another processor while the
    // run is checked, locked and its report opened, instead of in front of the first request.
    async let _: Void = job.prefetchesManifests ? Downloader.prepareLibrary() : ()
    let clock = RunClock()
    do {
      // The command line checks them before any job runs; a library caller is checked here.
      try job.checkManifests(what: job.file.map { "\($0): manifest" } ?? "manifest")
      try FileSystem.checkCacheFolders(job.location)
      if job.prefetchesManifests && !job.manifests.isEmpty, let environmentProblem {
        throw environmentProblem
      }
      if job.shard != nil && job.passes.contains(.trim) && job.cleanup.maxDiskSize > 0 {
        throw MaintenanceError.trimOnShard
      }
    } catch {
      // The caller says the error, once: one line, as every error in a file or the cache.
      reportNotStarted(error, clock: clock, says: false)
      throw error
    }
    // Taking the lock creates the cache's folders: whether it is new is decided before. A dry
    // run creates nothing, but says the cache is new: a typo in --cache shows.
    let createsCache = !FileManager.default.fileExists(atPath: job.location.diskCachePath)
    var lockOptions = RunLock.Options(
      wait: settings.wait, timeout: settings.waitTimeout, readOnly: settings.dryRun,
      shard: job.shard)
    let waiting = { (holder: RunLock.Holder?) in
      console.report(
        .waitingForLock(job: job.name, holder: holder, timeout: settings.waitTimeout))
    }
    var started = false
    do {
      // Signals are handled from before the lock is taken: a run that waits for it (`--wait`)
      // and is stopped meanwhile (a unit's start timeout, an engine's time limit) says so in
      // its report, where it used to die without one.
      return try await SignalScope.with { signals in
        lockOptions.stop = signals.stop
        do {
          return try await RunLock.withLock(
            location: job.location, options: lockOptions, waiting: waiting
          ) {
            started = true
            return try await runLocked(signals: signals, createsCache: createsCache)
          }
        } catch is CancellationError where !started && signals.signal != nil {
          return reportStoppedWaiting(signals, clock: clock)
        }
      }
    } catch {
      // Another run holding the lock is not this one failing: it writes its own report.
      if !started && !(error is CancellationError) && !Self.isHeld(error) {
        reportNotStarted(error, clock: clock)
      }
      throw error
    }
  }

  /// Writes the report and metrics of a run that a signal stopped while it waited for the
  /// cache's lock, marked `interrupted` with nothing done, and returns its outcome.
  private func reportStoppedWaiting(_ signals: SignalScope, clock: RunClock) -> RunOutcome {
    let files = reportNothingDone(.interrupted, error: nil, clock: clock) {
      $0.keep(.stoppedWaitingForLock)
    }
    if let signal = signals.signal { console.report(.interrupted(job: job.name, signal: signal)) }
    return RunOutcome(
      status: .interrupted, signal: signals.signal, failedURLs: 0, reportFiles: files)
  }

  private static func isHeld(_ error: any Error) -> Bool {
    switch error as? RunLock.Failure {
    case .held, .stillHeld: true
    case .cannotOpen, nil: false
    }
  }

  /// Writes the report and metrics of a run that cannot start for `error`, marked `failed`,
  /// for a command that checks its jobs before it runs any (a manifest missing, a job file
  /// given as one): a night whose manifest never arrived pages as failed, where its metrics
  /// used to keep the night before's success.
  public func reportCannotStart(_ error: any Error) {
    reportNotStarted(error, clock: RunClock(), says: false)
  }

  /// Writes the report and metrics of a run that could not start (a manifest missing, the
  /// cache's lock could not be opened: a read-only cache, a missing mount), marked `failed`,
  /// wherever they can be written: the run-failed alert reads them (SPEC section 12). What
  /// cannot be written is said on the console.
  /// `says`: the console says the error too (where the caller does not).
  private func reportNotStarted(_ error: any Error, clock: RunClock, says: Bool = true) {
    if says { console.report(.runFailed(job: job.name, error: error)) }
    _ = reportNothingDone(.failed, error: "\(error)", clock: clock)
  }

  /// Writes the report and metrics of a run that did nothing, with `status`, `error` and the
  /// warnings `warn` keeps, wherever they can be written (what cannot be is said on the
  /// console); returns the report files written.
  private func reportNothingDone(
    _ status: RunReport.Status, error: String?, clock: RunClock,
    warn: (RunWarnings) -> Void = { _ in }
  ) -> [String] {
    let warnings = RunWarnings(console: console)
    warn(warnings)
    do {
      let writer = try reportWriter(startedAt: clock.startedAt)
      let finish = finish(clock, warnings: warnings)
      let metrics = stageMetrics(
        writer: writer, status: status, finish: finish, counts: nil, warnings: warnings)
      try writer.finish(
        status: status, finishedAt: finish.finishedAt, prefetch: nil,
        warnings: warnings.messages, error: error, metricsErrors: warnings.metricsErrors,
        plan: nil)
      putInPlace(metrics)
      return writer.files
    } catch let reportError {
      console.report(.reportNotWritten(job: job.name, error: reportError))
      return []
    }
  }

  /// The run's report writer, for a run that started at `startedAt` (or could not start): its
  /// files, the run and shard it is of, its exit policy and the shard's earlier attempts.
  private func reportWriter(startedAt: Date) throws -> ReportWriter {
    let files = reportFiles(startedAt: startedAt)
    return try ReportWriter(
      job: job.name, location: job.location, startedAt: startedAt, files: files,
      standardOutput: settings.printsReport, runID: job.runID, shard: job.shard,
      allowsURLFailures: job.allowURLFailures, commandLineSettings: job.commandLineSettings,
      previousAttempts: RunReport.previousAttempts(in: files, runID: job.runID, shard: job.shard))
  }

  /// Whether `error` ended the run because the cache's disk is full or over quota: what
  /// deleting frees.
  package static func diskFull(_ error: Error) -> Bool {
    switch (error as? RunEndingError)?.failure {
    case .storeFailed(_, .errno(let errno)?): errno == ENOSPC || errno == EDQUOT
    // SQLITE_FULL: the state, in the cache's own folder, met the full disk first.
    case .stateFailed(_, .sqlite(let code)?): code & 0xff == 13
    default: false
    }
  }

  /// For the report of a prefetch that did not get through its URLs: how many its manifests
  /// list, so that the report says how many were not tried.
  private var urlsListedUnfinished: Int? {
    job.prefetchesManifests && !settings.dryRun && job.hasURLs ? Self.urlsListed(by: job) : nil
  }

  /// - Parameter createsCache: the cache did not exist before this run (a dry run leaves it so).
  private func runLocked(signals: SignalScope, createsCache: Bool) async throws -> RunOutcome {
    let clock = RunClock()
    let startedAt = clock.startedAt
    // The run's time limit stops it as a signal does, from when it holds the lock.
    let timeLimit = job.prefetch.maxRunTime.map { limit in
      Task {
        try? await Task.sleep(for: .seconds(limit))
        if !Task.isCancelled { signals.stopForTimeLimit() }
      }
    }
    defer { timeLimit?.cancel() }
    // A metrics path that can never be written (a folder, a block device) fails the run before
    // it does any work, as a report path does when its writer opens it.
    for file in metricsFiles { _ = try OutputFile(path: file) }
    let writer = try reportWriter(startedAt: startedAt)
    let warnings = RunWarnings(console: console)
    for warning in job.warnings { warnings.add(.ignoredOption(warning)) }
    for warning in setupWarnings { warnings.add(warning) }
    console.report(
      .runStarted(
        job: job.name, cachePath: job.location.diskCachePath, created: createsCache,
        dryRun: settings.dryRun))

    var counts: PrefetchCounts?
    var refusal: BlacklistRefusal?
    var plan: PrefetchPlanCounts?
    do {
      // The sweep of what killed runs left reads the whole cache folder (a million files take
      // a second or more): it runs beside the migration and the prefetch, which leave those
      // files alone, and is over before the maintenance passes count the cache.
      async let swept = staleTemporaries(startedAt: startedAt)
      var failure: Error?
      do {
        if job.passes.contains(.migrate) {
          try await migrate(into: writer, stop: signals.stop, warnings: warnings)
        }
        if job.prefetchesManifests && settings.dryRun && job.hasURLs
          && !signals.interrupted
        {
          plan = try await planPrefetch(into: writer, stop: signals.stop, warnings: warnings)
        } else if job.prefetchesManifests && job.hasURLs && !signals.interrupted {
          let prefetched = try await prefetch(
            into: writer, startedAt: startedAt, signals: signals, warnings: warnings)
          counts = prefetched.counts
          refusal = prefetched.refusal
          if let failure = prefetched.runEndingFailure { throw RunEndingError(failure: failure) }
        }
      } catch {
        failure = error
      }
      switch await swept {
      case .success(let stale): say(stale, warnings: warnings)
      // The failure that ended the run is the one thrown; the sweep's is not lost for it.
      case .failure(let error) where failure != nil: warnings.add(.sweepFailed("\(error)"))
      case .failure(let error): throw error
      }
      if let failure {
        // A full disk (or quota) ended the prefetch: the job's expire and trim, which only
        // delete, run all the same, so that the next night finds the room the job's limits
        // leave instead of failing the same way every night. The run still fails.
        var notRun = job.passes.filter { $0 != .migrate }
        if Self.diskFull(failure), !signals.interrupted {
          do {
            try clean(into: writer, stop: signals.stop, warnings: warnings)
          } catch {
            warnings.add(.cleaningAfterFullDiskFailed("\(error)"))
          }
          notRun.removeAll { $0 == .expire || $0 == .trim }
        }
        if !notRun.isEmpty { warnings.add(.passesNotRun(notRun, failed: true)) }
        throw failure
      }
      // A pass the job lists and the run never got to is said: a night stopped by its time
      // limit every time would otherwise never trim, and its report not say so.
      if signals.interrupted {
        let notRun = job.passes.filter { $0 != .migrate }
        if !notRun.isEmpty { warnings.add(.passesNotRun(notRun)) }
      } else {
        try clean(into: writer, stop: signals.stop, warnings: warnings)
        // After expire and trim: the audit judges the cache an app will read.
        if let verify = job.verify {
          if !signals.interrupted {
            try await self.verify(verify, into: writer, stop: signals.stop, warnings: warnings)
          } else if job.passes.contains(.verify) {
            warnings.add(.passesNotRun([.verify]))
          }
        }
      }
    } catch {
      console.report(.runFailed(job: job.name, error: error))
      do {
        let finish = finish(clock, warnings: warnings)
        let metrics = stageMetrics(
          writer: writer, status: .failed, finish: finish, counts: counts, warnings: warnings)
        try writer.finish(
          status: .failed, finishedAt: finish.finishedAt, prefetch: counts,
          warnings: warnings.messages, error: "\(error)",
          metricsErrors: warnings.metricsErrors, plan: plan, urlsListed: urlsListedUnfinished)
        putInPlace(metrics)
      } catch let reportError {
        console.report(.reportNotWritten(job: job.name, error: reportError))
      }
      throw error
    }

    let status: RunReport.Status = signals.interrupted ? .interrupted : .completed
    if let signal = signals.signal { console.report(.interrupted(job: job.name, signal: signal)) }
    if signals.timeLimitReached, let limit = job.prefetch.maxRunTime {
      console.report(.timeLimitReached(job: job.name, seconds: limit))
      warnings.keep(.timeLimitReached(seconds: limit))
    }
    if let counts {
      console.report(.prefetchFinished(job: job.name, counts: counts, refusal: refusal))
    }
    if let plan { console.report(.planFinished(job: job.name, plan: plan)) }
    let finish = finish(clock, warnings: warnings)
    let metrics = stageMetrics(
      writer: writer, status: status, finish: finish, counts: counts, warnings: warnings)
    try writer.finish(
      status: status, finishedAt: finish.finishedAt, prefetch: counts, warnings: warnings.messages,
      metricsErrors: warnings.metricsErrors, plan: plan,
      urlsListed: status == .interrupted ? urlsListedUnfinished : nil)
    for file in writer.files { console.report(.reportWritten(job: job.name, path: file)) }
    putInPlace(metrics)
    return RunOutcome(
      status: status, signal: signals.signal, timeLimitReached: signals.timeLimitReached,
      failedURLs: counts?.failed ?? 0,
      failedInputs: counts?.inputsFailed ?? plan?.inputsFailed ?? 0,
      notManifests: counts?.inputsNotManifests ?? 0,
      refusedEverything: refusal?.refusedEverything ?? false,
      filesNotRemoved: writer.passSummaries.reduce(0) { $0 + ($1.dryRun ? 0 : $1.filesNotRemoved) },
      urlFailuresAllowed: job.allowURLFailures,
      reportFiles: writer.files, badFiles: writer.verifyCounts?.bad ?? 0,
      entriesNotRead: writer.verifyCounts?.errors ?? 0)
  }

  /// The end of the run, with a warning in its report when the wall clock stepped.
  private func finish(_ clock: RunClock, warnings: RunWarnings) -> RunClock.Finish {
    let finish = clock.finish()
    if let step = finish.clockStep { warnings.add(.clockStepped(seconds: step)) }
    return finish
  }

  /// The metrics files of a run, on their way: written before the report is finished and put
  /// in place after it, so that a file that cannot be written is said in the report.
  private struct StagedMetrics {
    var metrics: RunMetrics?
    /// Files written to their temporary file, renamed into place once the report is.
    var staged: [OutputWriter] = []
    /// Devices, FIFOs, sockets and descriptors: written after the report, as before, so that
    /// a reader that takes the report first is not kept waiting by the metrics.
    var inPlace: [OutputFile] = []
  }

  /// Starts writing the metrics files (`--metrics`, the job's `metrics:`). A file that cannot
  /// be written (its folder missing and not creatable, or not writable) costs a warning, never
  /// the run's work or its exit status: the report, written next, says so (SPEC section 11).
  private func stageMetrics(
    writer: ReportWriter, status: RunReport.Status, finish: RunClock.Finish,
    counts: PrefetchCounts?, warnings: RunWarnings
  ) -> StagedMetrics {
    var result = StagedMetrics()
    let files = metricsFiles
    guard !files.isEmpty else { return result }
    let usage: DiskUsage?
    do {
      // A shard's own files only: summed across the fleet, the shards' figures are the cache.
      usage = try DiskCache(location: job.location).usage(shard: job.shard)
    } catch {
      // The metrics go without the cache's size, and the report says why.
      usage = nil
      warnings.add(.metricsWithoutCacheSize(error: error))
    }
    let metrics = RunMetrics(
      job: job.name, namespace: job.location.namespace, shard: job.shard, status: status,
      finishedAt: finish.finishedAt, durationSeconds: finish.durationSeconds, prefetch: counts,
      passes: writer.passSummaries, cache: usage, verify: writer.verifyCounts)
    result.metrics = metrics
    for file in files {
      do {
        let output = try OutputFile(path: file)
        guard case .replace = output.disposition else {
          result.inPlace.append(output)
          continue
        }
        result.staged.append(try metrics.stage(to: output))
      } catch {
        warnings.add(.metricsNotWritten(path: file, error: error))
      }
    }
    return result
  }

  /// Puts the staged metrics in place, once the report is. What fails now can no longer be
  /// said in the report: it is said on the console.
  private func putInPlace(_ staged: StagedMetrics) {
    for writer in staged.staged {
      do {
        try writer.commit()
        console.report(.metricsWritten(job: job.name, path: writer.output.path))
      } catch {
        console.report(.warning(.metricsNotWritten(path: writer.output.path, error: error)))
      }
    }
    guard let metrics = staged.metrics else { return }
    for output in staged.inPlace {
      do {
        try metrics.stage(to: output).commit()
        console.report(.metricsWritten(job: job.name, path: output.path))
      } catch {
        console.report(.warning(.metricsNotWritten(path: output.path, error: error)))
      }
    }
  }

  /// The job's `metrics:` file, then `--metrics`'s, `{job}`, `{shard}` and `{shards}` in
  /// either filled in. A dry run writes only what its own command line names: the job's files
  /// hold the real runs' figures, which alerts read (SPEC section 11).
  private var metricsFiles: [String] {
    let own = settings.dryRun ? [] : job.metrics.map { [$0] } ?? []
    return (own + settings.metricsFiles).map(job.expandingPlaceholders)
  }

  /// How old a temporary file of an atomic store must be before it counts as left by a killed
  /// run: far beyond any download's deadline.
  public static let staleTemporaryAge: TimeInterval = 3600

  /// Removes what killed runs left behind (SPEC section 8), or in a dry run says what would go.
  /// `imagecache verify` removes nothing it was not asked to: its audit names them instead. A
  /// job that lists the verify pass sweeps them as every job does, before its audit.
  private func staleTemporaries(startedAt: Date) -> Result<
    (count: Int, bytes: UInt64, notRemoved: [FileSystemError]), FileSystemError
  > {
    Result { () throws(FileSystemError) in
      guard job.verify == nil || job.passes.contains(.verify) else { return (0, 0, []) }
      return try FileSystem.removeStaleTemporaries(
        in: job.location.diskCachePath, olderThan: Self.staleTemporaryAge, now: startedAt,
        dryRun: settings.dryRun)
    }
  }

  /// Says what ``staleTemporaries(startedAt:)`` removed, if anything, and what it could not.
  private func say(
    _ stale: (count: Int, bytes: UInt64, notRemoved: [FileSystemError]), warnings: RunWarnings
  ) {
    for error in stale.notRemoved {
      warnings.add(.sweepFailed("a temporary file left by a killed run was not removed: \(error)"))
    }
    guard stale.count > 0 else { return }
    console.report(
      .staleTemporariesSwept(
        job: job.name, count: stale.count, bytes: stale.bytes, dryRun: settings.dryRun))
    warnings.keep(
      .staleTemporaries(count: stale.count, bytes: stale.bytes, dryRun: settings.dryRun))
  }

  /// The job's own report path, then `--report`'s; a dry run's only where its command line
  /// sends it.
  private func reportFiles(startedAt: Date) -> [String] {
    let own = settings.dryRun ? [] : job.reportPath(startedAt: startedAt).map { [$0] } ?? []
    return own + settings.reportFiles.map { job.reportPath($0, startedAt: startedAt) }
  }

}

/// A failure that ended a run part-way (exit code 4): the disk is full, over quota or
/// read-only, so every later store would fail too (SPEC section 2, step 7).
public struct RunEndingError: ExitStatusProviding, CauseProviding, Sendable {
  public var failure: ImageCacheError
  public var description: String { "the run stopped: \(failure.message)" }
  public var exitStatus: ExitStatus { .fatalIO }
  /// What the file system or SQLite said under the failure.
  public var cause: FailureCause? { failure.cause }
}
