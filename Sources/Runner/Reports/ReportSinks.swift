import Core
import Foundation

/// Streams a prefetch's per-URL entries into a ``ReportWriter``.
public struct PrefetchSink: PrefetchRecorder, Sendable {
  let writer: ReportWriter

  public mutating func recordDownload(_ download: DownloadReport) {
    writer.append(to: \ReportWriter.State.downloads) { download.write(to: &$0) }
  }

  public mutating func recordVariant(_ variant: VariantReport) {
    writer.append(to: \ReportWriter.State.variants) { variant.write(to: &$0) }
  }

  public mutating func recordFailure(_ failure: FailureReport) {
    writer.append(to: \ReportWriter.State.failures) { failure.write(to: &$0) }
  }

  public mutating func recordLineError(_ message: String) {
    writer.append(to: \ReportWriter.State.lineErrors) { $0.string(message) }
  }

  public mutating func recordInputFailure(_ message: String) {
    writer.append(to: \ReportWriter.State.inputFailures) { $0.string(message) }
  }

  public mutating func recordPlanned(_ planned: PlannedURL) { writer.recordPlanned(planned) }
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
