import Core
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Writes a run's JSON report as the run goes (SPEC section 6), in constant memory whatever the
/// number of files or URLs: each array (failures, downloads, a pass's actions...) is streamed
/// into an unlinked temporary file as its entries happen, and ``finish(status:finishedAt:prefetch:warnings:error:)``
/// puts the report together from them, to each report file (atomically: a temporary file
/// renamed into place) and to stdout.
///
/// The JSON is compact, one array entry a line, keys in the order of `docs/report-schema.json`
/// (schema version 1, the same as ``RunReport`` decodes).
public final class ReportWriter: Sendable {
  struct State {
    var outputs: [ReportOutput]
    var failures: SpillFile
    var downloads: SpillFile
    var variants: SpillFile
    var lineErrors: SpillFile
    var inputFailures: SpillFile
    var blacklistedURLs: SpillFile
    var plannedURLs: SpillFile
    var passes: [FinishedPass] = []
    /// `imagecache verify`'s audit, once it began.
    var verify: VerifySection?
    /// The first error writing a temporary file; ``finish`` throws it.
    var writeError: FileSystemError?
  }

  struct VerifySection {
    var level: VerifyLevel
    var repair: VerifyRepair
    var dryRun: Bool
    var counts = VerifyCounts()
    var files: SpillFile
    var errors: SpillFile
  }

  struct FinishedPass {
    var summary: PassSummary
    var actions: SpillFile
    var errors: SpillFile
  }

  private let job: String
  private let location: CacheLocation
  private let startedAt: Date
  /// The fleet run and the shard the report is of (SPEC section 9), when there are.
  private let runID: String?
  private let shard: Shard?
  /// Written as `allowURLFailures: true` when set.
  private let allowsURLFailures: Bool
  /// The settings the command line gave in place of the job file's, written as
  /// `commandLineSettings` when there are.
  private let commandLineSettings: [CommandLineSetting]
  /// The earlier attempts of this shard of this run, written as `previousAttempts`.
  private let previousAttempts: [RunReport.Attempt]
  /// Every file and buffer, behind one lock: the prefetcher records from its tasks.
  private let state: Mutex<State>
  /// The report files this writer writes.
  public let files: [String]

  /// Opens every destination first, so that a report path that cannot be written fails the
  /// run before it does anything.
  /// - Parameters:
  ///   - files: report files (their folders are created).
  ///   - standardOutput: also print the report on stdout (`--json`).
  ///   - runID: the fleet run's identity, written as `runID`.
  ///   - shard: the shard of a sharded run, written as `shard`, with `manifestEntries`.
  ///   - allowsURLFailures: the run's failed URLs do not make its exit code 1.
  ///   - commandLineSettings: ``Job/commandLineSettings``.
  ///   - previousAttempts: the earlier attempts of this shard of this run
  ///     (``RunReport/previousAttempts(in:runID:shard:)``).
  public init(
    job: String, location: CacheLocation, startedAt: Date, files: [String],
    standardOutput: Bool, runID: String? = nil, shard: Shard? = nil,
    allowsURLFailures: Bool = false,
    commandLineSettings: [CommandLineSetting] = [],
    previousAttempts: [RunReport.Attempt] = []
  ) throws {
    self.job = job
    self.location = location
    self.startedAt = startedAt
    self.runID = runID
    self.shard = shard
    self.allowsURLFailures = allowsURLFailures
    self.commandLineSettings = commandLineSettings
    self.previousAttempts = previousAttempts
    self.files = files
    var outputs = try files.map { try ReportOutput(file: $0) }
    if standardOutput { outputs.append(ReportOutput()) }
    keepsLists = !outputs.isEmpty
    state = Mutex(
      State(
        outputs: outputs, failures: try Self.spillFile(keepsLists),
        downloads: try Self.spillFile(keepsLists), variants: try Self.spillFile(keepsLists),
        lineErrors: try Self.spillFile(keepsLists), inputFailures: try Self.spillFile(keepsLists),
        blacklistedURLs: try Self.spillFile(keepsLists),
        plannedURLs: try Self.spillFile(keepsLists)))
  }

  /// Whether the report goes anywhere: a run with no report file and no `--json` keeps its
  /// counts only (its lists, a JSON entry per download, would be written for nobody).
  private let keepsLists: Bool

  private static func spillFile(_ keeps: Bool) throws(FileSystemError) -> SpillFile {
    keeps ? try SpillFile() : SpillFile.discarding()
  }

  // MARK: Prefetch

  /// A recorder that streams a prefetch's downloads, failures and bad lines into the report.
  public var prefetchRecorder: PrefetchSink { PrefetchSink(writer: self) }

  /// One URL still on the blacklist after the run.
  public func recordBlacklisted(_ url: String) {
    append(to: \State.blacklistedURLs) { $0.string(url) }
  }

  /// One URL of a dry run's plan.
  public func recordPlanned(_ planned: PlannedURL) {
    append(to: \State.plannedURLs) { planned.write(to: &$0) }
  }

  func append(
    to array: KeyPath<State, SpillFile>, _ element: @Sendable (inout JSONOutput) -> Void
  ) {
    guard keepsLists else { return }
    state.withLock { state in
      do throws(FileSystemError) {
        try state[keyPath: array].append(element)
      } catch {
        if state.writeError == nil { state.writeError = error }
      }
    }
  }

  // MARK: Maintenance

  /// A recorder for one maintenance pass; hand it back to ``endPass(_:)`` when the pass ends.
  /// - Parameters:
  ///   - listsActions: write the per-file actions (dry runs, migrations and `--verbose`);
  ///     counts and errors are always written.
  ///   - echo: called with each action as it is recorded (per-file console lines).
  ///   - echoError: called with each per-file error as it is recorded.
  public func beginPass(
    _ pass: MaintenancePassReport.Pass, dryRun: Bool, listsActions: Bool,
    echo: ((MaintenanceAction, PassSummary) -> Void)? = nil,
    echoError: ((String) -> Void)? = nil
  ) throws -> PassSink {
    PassSink(
      summary: PassSummary(pass: pass, dryRun: dryRun), actions: try Self.spillFile(keepsLists),
      errors: try Self.spillFile(keepsLists), listsActions: listsActions, echo: echo,
      echoError: echoError)
  }

  /// The counts of the passes ended so far.
  public var passSummaries: [PassSummary] { state.withLock { $0.passes.map(\.summary) } }

  /// Adds a finished pass (its counts, actions and errors) to the report.
  public func endPass(_ pass: PassSink) {
    state.withLock { state in
      if let error = pass.writeError, state.writeError == nil { state.writeError = error }
      state.passes.append(
        FinishedPass(summary: pass.summary, actions: pass.actions, errors: pass.errors))
    }
  }

  // MARK: Verify

  /// Starts the report's `verify` section.
  public func beginVerify(level: VerifyLevel, repair: VerifyRepair, dryRun: Bool) throws {
    let section = VerifySection(
      level: level, repair: repair, dryRun: dryRun, files: try Self.spillFile(keepsLists),
      errors: try Self.spillFile(keepsLists))
    state.withLock { $0.verify = section }
  }

  /// A file the audit found bad or worth a note.
  public func recordVerified(_ file: VerifiedFile) {
    appendToVerify(\.files) { file.write(to: &$0) }
  }

  /// An entry the audit could not read.
  public func recordVerifyError(_ message: String) {
    appendToVerify(\.errors) { $0.string(message) }
  }

  /// The audit's counts, as far as it went.
  public var verifyCounts: VerifyCounts? {
    get { state.withLock { $0.verify?.counts } }
    set { state.withLock { if let newValue { $0.verify?.counts = newValue } } }
  }

  private func appendToVerify(
    _ array: KeyPath<VerifySection, SpillFile>, _ element: @Sendable (inout JSONOutput) -> Void
  ) {
    guard keepsLists else { return }
    state.withLock { state in
      guard let verify = state.verify else { return }
      do throws(FileSystemError) {
        try verify[keyPath: array].append(element)
      } catch {
        if state.writeError == nil { state.writeError = error }
      }
    }
  }

  // MARK: Finishing

  /// Puts the report together and writes it to every destination: report files are renamed
  /// into place, stdout gets the same bytes. A write to stdout that fails (a closed pipe) is
  /// not an error: the report files are what must not be lost. A dry run gives its `plan` in
  /// place of the `prefetch` counts. `urlsListed`: the URLs the manifests list, for a run
  /// that did not get through them; a merge gives the `night` of its shards' attempts.
  public func finish(
    status: RunReport.Status, finishedAt: Date, prefetch: PrefetchCounts?, warnings: [String],
    error: String? = nil, mergedFrom: [RunReport.MergedReport]? = nil,
    metricsErrors: [String] = [], plan: PrefetchPlanCounts? = nil, urlsListed: Int? = nil,
    night: RunReport.Night? = nil
  ) throws {
    try state.withLock { state in
      if let writeError = state.writeError { throw writeError }
      for output in state.outputs {
        try write(
          to: output, state: state, status: status, finishedAt: finishedAt, prefetch: prefetch,
          warnings: warnings, error: error, mergedFrom: mergedFrom, metricsErrors: metricsErrors,
          plan: plan, urlsListed: urlsListed, night: night)
        try output.commit()
      }
    }
  }

  private func write(
    to output: ReportOutput, state: State, status: RunReport.Status, finishedAt: Date,
    prefetch: PrefetchCounts?, warnings: [String], error: String?,
    mergedFrom: [RunReport.MergedReport]?, metricsErrors: [String], plan: PrefetchPlanCounts?,
    urlsListed: Int?, night: RunReport.Night?
  ) throws {
    var json = JSONOutput()
    json.raw("{")
    json.key("schemaVersion")
    json.integer(1)
    json.member("job", job)
    json.member("status", status.rawValue)
    json.member("startedAt")
    json.date(startedAt)
    json.member("finishedAt")
    json.date(finishedAt)
    json.member("cache")
    json.raw("{")
    json.key("path")
    json.string(location.directory)
    json.member("namespace", location.namespace)
    json.raw("}")
    if let runID { json.member("runID", runID) }
    if allowsURLFailures {
      json.member("allowURLFailures")
      json.bool(true)
    }
    if !commandLineSettings.isEmpty {
      json.member("commandLineSettings")
      json.raw("{")
      for (index, setting) in commandLineSettings.enumerated() {
        if index > 0 { json.raw(",") }
        json.string(setting.field)
        json.raw(":")
        json.string(setting.value)
      }
      json.raw("}")
    }
    if let shard {
      json.member("shard")
      json.raw("{")
      json.key("index")
      json.integer(shard.index)
      json.member("count", shard.count)
      json.raw("}")
      // Every shard reads every entry: its own ones and the other shards' make them all.
      if let prefetch {
        json.member("manifestEntries")
        json.raw("{")
        json.key("total")
        json.integer(prefetch.total + prefetch.otherShards)
        json.member("ownShard", prefetch.total)
        json.raw("}")
      }
    }
    if !previousAttempts.isEmpty {
      json.member("previousAttempts")
      json.raw("[")
      for (index, attempt) in previousAttempts.enumerated() {
        json.raw(index > 0 ? ",{" : "{")
        Self.writeSpan(
          attempt.status, attempt.startedAt, attempt.finishedAt, following: false, to: &json)
        json.member("downloaded", attempt.downloaded)
        json.member("bytesDownloaded", attempt.bytesDownloaded)
        json.raw("}")
      }
      json.raw("]")
    }
    if let error { json.member("error", error) }
    if let urlsListed { json.member("urlsListed", urlsListed) }
    if let mergedFrom {
      json.member("mergedFrom")
      json.raw("[")
      for (index, entry) in mergedFrom.enumerated() {
        json.raw(index > 0 ? ",{" : "{")
        json.key("file")
        json.string(entry.file)
        Self.writeSpan(entry.status, entry.startedAt, entry.finishedAt, following: true, to: &json)
        json.member("total", entry.total)
        json.member("downloaded", entry.downloaded)
        json.member("failed", entry.failed)
        if let attempts = entry.attempts { json.member("attempts", attempts) }
        json.raw("}")
      }
      json.raw("]")
    }
    if let night {
      json.member("night")
      json.raw("{")
      json.key("attempts")
      json.integer(night.attempts)
      json.member("downloaded", night.downloaded)
      json.member("bytesDownloaded", night.bytesDownloaded)
      json.raw("}")
    }
    /// `,"key":[...]`, the array's entries copied from its temporary file.
    func array(_ key: StaticString, _ entries: SpillFile) throws(FileSystemError) {
      json.member(key)
      try output.write(&json)
      try entries.copy(to: output)
    }
    if let prefetch {
      json.raw("\n")
      json.member("prefetch")
      json.raw("{")
      Self.writeCounts(prefetch, to: &json)
      try array("failures", state.failures)
      try array("downloads", state.downloads)
      try array("variants", state.variants)
      try array("blacklistedURLs", state.blacklistedURLs)
      try array("lineErrors", state.lineErrors)
      try array("inputFailures", state.inputFailures)
      json.raw("}")
    }
    if let plan {
      json.raw("\n")
      json.member("plan")
      json.raw("{")
      json.key("counts")
      json.raw("{")
      json.key("total")
      json.integer(plan.total)
      let counts: [(StaticString, Int)] = [
        ("hit", plan.hit), ("download", plan.download), ("revalidate", plan.revalidate),
        ("blacklisted", plan.blacklisted), ("invalid", plan.invalid), ("miss", plan.miss),
        ("failed", plan.failed), ("skipped", plan.skipped), ("inputsFailed", plan.inputsFailed),
      ]
      for (name, value) in counts { json.member(name, value) }
      json.raw("}")
      try array("urls", state.plannedURLs)
      try array("lineErrors", state.lineErrors)
      try array("inputFailures", state.inputFailures)
      json.raw("}")
    }
    if let verify = state.verify {
      json.raw("\n")
      json.member("verify")
      json.raw("{")
      json.key("level")
      json.string(verify.level.rawValue)
      json.member("repair", verify.repair.rawValue)
      json.member("dryRun")
      json.bool(verify.dryRun)
      json.member("counts")
      json.raw("{")
      json.key("files")
      json.integer(verify.counts.files)
      let counts: [(StaticString, Int)] = [
        ("ok", verify.counts.ok), ("note", verify.counts.note), ("bad", verify.counts.bad),
        ("errors", verify.counts.errors),
      ]
      for (name, value) in counts { json.member(name, value) }
      json.raw("}")
      try array("files", verify.files)
      try array("errors", verify.errors)
      json.raw("}")
    }
    json.raw("\n")
    json.member("maintenance")
    json.raw("[")
    for (index, pass) in state.passes.enumerated() {
      json.raw(index > 0 ? ",\n{" : "\n{")
      json.key("pass")
      json.string(pass.summary.pass.rawValue)
      json.member("dryRun")
      json.bool(pass.summary.dryRun)
      json.member("filesRemoved", pass.summary.filesRemoved)
      json.member("filesMoved", pass.summary.filesMoved)
      json.member("bytesFreed", pass.summary.bytesFreed)
      json.member("filesNotRemoved", pass.summary.filesNotRemoved)
      if pass.summary.pass == .repair {
        json.member("filesRefetched", pass.summary.filesRefetched)
        json.member("filesNotRefetched", pass.summary.filesNotRefetched)
      }
      if let limits = pass.summary.limits {
        json.member("limits")
        json.raw("{")
        json.key("maxDiskAge")
        json.number(limits.maxDiskAge)
        json.member("maxDiskSize", limits.maxDiskSize)
        json.member("expireType", limits.expireType.rawValue)
        json.raw("}")
      }
      if let before = pass.summary.cacheBytesBefore {
        json.member("cacheBytesBefore", before)
      }
      if let after = pass.summary.cacheBytesAfter { json.member("cacheBytesAfter", after) }
      try array("errors", pass.errors)
      try array("actions", pass.actions)
      json.raw("}")
    }
    json.raw("]\n")
    json.member("warnings", strings: warnings)
    if !metricsErrors.isEmpty { json.member("metricsErrors", strings: metricsErrors) }
    json.raw("}\n")
    try output.write(&json)
  }

  /// `"status":...,"startedAt":...,"finishedAt":...` of a shard's report or attempt, after an
  /// earlier member of its object when `following`.
  private static func writeSpan(
    _ status: RunReport.Status, _ startedAt: Date, _ finishedAt: Date, following: Bool,
    to json: inout JSONOutput
  ) {
    if following { json.member("status") } else { json.key("status") }
    json.string(status.rawValue)
    json.member("startedAt")
    json.date(startedAt)
    json.member("finishedAt")
    json.date(finishedAt)
  }

  private static func writeCounts(_ counts: PrefetchCounts, to json: inout JSONOutput) {
    json.key("total")
    json.integer(counts.total)
    let integers: [(StaticString, Int)] = [
      ("memoryHits", counts.memoryHits), ("diskHits", counts.diskHits),
      ("downloaded", counts.downloaded), ("notModified", counts.notModified),
      ("failed", counts.failed), ("blacklisted", counts.blacklisted), ("skipped", counts.skipped),
      ("derived", counts.derived), ("inputsFailed", counts.inputsFailed),
    ]
    for (name, value) in integers { json.member(name, value) }
    if counts.otherShards > 0 { json.member("otherShards", counts.otherShards) }
    json.member("bytesDownloaded", counts.bytesDownloaded)
    json.member("durationSeconds")
    json.number(counts.durationSeconds)
    writeHostLimits(counts.hostLimits, to: &json)
    guard !counts.hostBackoffs.isEmpty else { return }
    json.member("hostBackoffs")
    json.raw("[")
    for (index, backoff) in counts.hostBackoffs.enumerated() {
      json.raw(index > 0 ? ",{" : "{")
      json.key("host")
      json.string(backoff.host)
      json.member("pauses", backoff.pauses)
      json.member("seconds")
      json.number(backoff.seconds)
      json.raw("}")
    }
    json.raw("]")
  }
}

/// `hostLimits`, when the per-host limits were adaptive (none otherwise).
func writeHostLimits(_ limits: [HostLimit], to json: inout JSONOutput) {
  guard !limits.isEmpty else { return }
  json.member("hostLimits")
  json.raw("[")
  for (index, limit) in limits.enumerated() {
    json.raw(index > 0 ? ",{" : "{")
    json.key("host")
    json.string(limit.host)
    let figures: [(StaticString, Int)] = [
      ("final", limit.final), ("min", limit.min), ("median", limit.median), ("max", limit.max),
    ]
    for (name, value) in figures { json.member(name, value) }
    if let heldUnder = limit.heldUnder { json.member("heldUnder", heldUnder) }
    json.member("cuts")
    json.raw("{")
    for (position, cause) in limit.cuts.keys.sorted().enumerated() {
      // The causes are AdaptiveLimit's own words, not input: no escaping needed, but quoted
      // as any string is.
      if position > 0 { json.raw(",") }
      json.string(cause)
      json.raw(":")
      json.integer(limit.cuts[cause]!)
    }
    json.raw("}}")
  }
  json.raw("]")
}
