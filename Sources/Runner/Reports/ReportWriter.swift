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
  fileprivate struct State {
    var outputs: [ReportOutput]
    var failures: SpillFile
    var downloads: SpillFile
    var lineErrors: SpillFile
    var blacklistedURLs: SpillFile
    var passes: [FinishedPass] = []
    /// The first error writing a temporary file; ``finish`` throws it.
    var writeError: FileSystemError?
  }

  struct FinishedPass {
    var summary: PassSummary
    var actions: SpillFile
    var errors: SpillFile
  }

  private let job: String
  private let location: CacheLocation
  private let startedAt: Date
  /// Every file and buffer, behind one lock: the prefetcher records from its tasks.
  private let state: Mutex<State>
  /// The report files this writer writes.
  public let files: [String]

  /// Opens every destination first, so that a report path that cannot be written fails the
  /// run before it does anything.
  /// - Parameters:
  ///   - files: report files (their folders are created).
  ///   - standardOutput: also print the report on stdout (`--json`).
  public init(
    job: String, location: CacheLocation, startedAt: Date, files: [String],
    standardOutput: Bool
  ) throws {
    self.job = job
    self.location = location
    self.startedAt = startedAt
    self.files = files
    var outputs = try files.map { try ReportOutput(file: $0) }
    if standardOutput { outputs.append(ReportOutput(descriptor: STDOUT_FILENO)) }
    state = Mutex(
      State(
        outputs: outputs, failures: try SpillFile(), downloads: try SpillFile(),
        lineErrors: try SpillFile(), blacklistedURLs: try SpillFile()))
  }

  // MARK: Prefetch

  /// A recorder that streams a prefetch's downloads, failures and bad lines into the report.
  public var prefetchRecorder: PrefetchSink { PrefetchSink(writer: self) }

  /// One URL still on the blacklist after the run.
  public func recordBlacklisted(_ url: String) {
    append(to: \State.blacklistedURLs) { $0.string(url) }
  }

  fileprivate func append(
    to array: KeyPath<State, SpillFile>, _ element: @Sendable (inout JSONOutput) -> Void
  ) {
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
      summary: PassSummary(pass: pass, dryRun: dryRun), actions: try SpillFile(),
      errors: try SpillFile(), listsActions: listsActions, echo: echo, echoError: echoError)
  }

  /// Adds a finished pass (its counts, actions and errors) to the report.
  public func endPass(_ pass: PassSink) {
    state.withLock { state in
      if let error = pass.writeError, state.writeError == nil { state.writeError = error }
      state.passes.append(
        FinishedPass(summary: pass.summary, actions: pass.actions, errors: pass.errors))
    }
  }

  // MARK: Finishing

  /// Puts the report together and writes it to every destination: report files are renamed
  /// into place, stdout gets the same bytes. A write to stdout that fails (a closed pipe) is
  /// not an error: the report files are what must not be lost.
  public func finish(
    status: RunReport.Status, finishedAt: Date, prefetch: PrefetchCounts?, warnings: [String],
    error: String? = nil
  ) throws {
    try state.withLock { state in
      if let writeError = state.writeError { throw writeError }
      for output in state.outputs {
        try write(
          to: output, state: state, status: status, finishedAt: finishedAt, prefetch: prefetch,
          warnings: warnings, error: error)
        try output.commit()
      }
    }
  }

  private func write(
    to output: ReportOutput, state: State, status: RunReport.Status, finishedAt: Date,
    prefetch: PrefetchCounts?, warnings: [String], error: String?
  ) throws {
    var json = JSONOutput()
    json.raw("{")
    json.key("schemaVersion")
    json.integer(1)
    json.raw(",")
    json.key("job")
    json.string(job)
    json.raw(",")
    json.key("status")
    json.string(status.rawValue)
    json.raw(",")
    json.key("startedAt")
    json.date(startedAt)
    json.raw(",")
    json.key("finishedAt")
    json.date(finishedAt)
    json.raw(",")
    json.key("cache")
    json.raw("{")
    json.key("path")
    json.string(location.directory)
    json.raw(",")
    json.key("namespace")
    json.string(location.namespace)
    json.raw("}")
    if let error {
      json.raw(",")
      json.key("error")
      json.string(error)
    }
    if let prefetch {
      json.raw(",\n")
      json.key("prefetch")
      json.raw("{")
      Self.writeCounts(prefetch, to: &json)
      json.raw(",")
      json.key("failures")
      try output.write(&json)
      try state.failures.copy(to: output)
      json.raw(",")
      json.key("downloads")
      try output.write(&json)
      try state.downloads.copy(to: output)
      json.raw(",")
      json.key("blacklistedURLs")
      try output.write(&json)
      try state.blacklistedURLs.copy(to: output)
      json.raw(",")
      json.key("lineErrors")
      try output.write(&json)
      try state.lineErrors.copy(to: output)
      json.raw("}")
    }
    json.raw(",\n")
    json.key("maintenance")
    json.raw("[")
    for (index, pass) in state.passes.enumerated() {
      if index > 0 { json.raw(",") }
      json.raw("\n{")
      json.key("pass")
      json.string(pass.summary.pass.rawValue)
      json.raw(",")
      json.key("dryRun")
      json.bool(pass.summary.dryRun)
      json.raw(",")
      json.key("filesRemoved")
      json.integer(pass.summary.filesRemoved)
      json.raw(",")
      json.key("filesMoved")
      json.integer(pass.summary.filesMoved)
      json.raw(",")
      json.key("bytesFreed")
      json.integer(pass.summary.bytesFreed)
      json.raw(",")
      json.key("errors")
      try output.write(&json)
      try pass.errors.copy(to: output)
      json.raw(",")
      json.key("actions")
      try output.write(&json)
      try pass.actions.copy(to: output)
      json.raw("}")
    }
    json.raw("],\n")
    json.key("warnings")
    json.raw("[")
    for (index, warning) in warnings.enumerated() {
      if index > 0 { json.raw(",") }
      json.string(warning)
    }
    json.raw("]}\n")
    try output.write(&json)
  }

  private static func writeCounts(_ counts: PrefetchCounts, to json: inout JSONOutput) {
    let integers: [(StaticString, Int)] = [
      ("total", counts.total), ("memoryHits", counts.memoryHits), ("diskHits", counts.diskHits),
      ("downloaded", counts.downloaded), ("notModified", counts.notModified),
      ("failed", counts.failed), ("blacklisted", counts.blacklisted), ("skipped", counts.skipped),
    ]
    for (name, value) in integers {
      json.key(name)
      json.integer(value)
      json.raw(",")
    }
    json.key("bytesDownloaded")
    json.integer(counts.bytesDownloaded)
    json.raw(",")
    json.key("durationSeconds")
    json.number(counts.durationSeconds)
  }
}

/// Streams a prefetch's per-URL entries into a ``ReportWriter``.
public struct PrefetchSink: PrefetchRecorder, Sendable {
  let writer: ReportWriter

  public mutating func recordDownload(_ download: DownloadReport) {
    writer.append(to: \ReportWriter.State.downloads) { download.write(to: &$0) }
  }

  public mutating func recordFailure(_ failure: FailureReport) {
    writer.append(to: \ReportWriter.State.failures) { failure.write(to: &$0) }
  }

  public mutating func recordLineError(_ message: String) {
    writer.append(to: \ReportWriter.State.lineErrors) { $0.string(message) }
  }
}

/// Streams one maintenance pass's actions and errors into a ``ReportWriter``, counting them.
/// A reference, so that errors found beside the pass (bad manifest lines while a migration
/// reads its keys) can be added to it while it runs.
public final class PassSink: MaintenanceRecorder {
  public var summary: PassSummary
  let actions: SpillFile
  let errors: SpillFile
  let listsActions: Bool
  let echo: ((MaintenanceAction, PassSummary) -> Void)?
  let echoError: ((String) -> Void)?
  var writeError: FileSystemError?

  init(
    summary: PassSummary, actions: SpillFile, errors: SpillFile, listsActions: Bool,
    echo: ((MaintenanceAction, PassSummary) -> Void)?, echoError: ((String) -> Void)?
  ) {
    self.summary = summary
    self.actions = actions
    self.errors = errors
    self.listsActions = listsActions
    self.echo = echo
    self.echoError = echoError
  }

  public func keep(_ action: MaintenanceAction) {
    echo?(action, summary)
    guard listsActions else { return }
    store { () throws(FileSystemError) in try actions.append { action.write(to: &$0) } }
  }

  public func keep(error: String) {
    echoError?(error)
    store { () throws(FileSystemError) in try errors.append { $0.string(error) } }
  }

  private func store(_ body: () throws(FileSystemError) -> Void) {
    do {
      try body()
    } catch {
      if writeError == nil { writeError = error }
    }
  }
}
