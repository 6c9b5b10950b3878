import Core
import Foundation
import Maintenance

extension JobRunner {
  /// `imagecache verify` (issue 45): the audit, streamed into the report's `verify` section and
  /// said on the console as it goes (the first bad files, as a prefetch's first failures, and
  /// with `--verbose` every bad and noted file), then the
  /// repair, a `repair` pass of its own, when one is asked for. `--max-delete` is checked
  /// against the bad files before anything is repaired: over it, nothing is, and the run
  /// fails (exit 2), its report listing them all the same; a dry run says so and goes on.
  func verify(_ configuration: VerifyConfiguration, into writer: ReportWriter, stop: StopFlag)
    throws
  {
    try writer.beginVerify(
      level: configuration.level, repair: configuration.repair, dryRun: settings.dryRun)
    var configuration = configuration
    configuration.staleTemporaryAge = Self.staleTemporaryAge
    let verifier = CacheVerifier(
      diskCachePath: job.location.diskCachePath, configuration: configuration)
    let console = console
    let verbose = settings.verbose
    var badSaid = 0
    let findings = try verifier.run(
      record: { file in
        writer.recordVerified(file)
        if verbose {
          console.report(.verifiedFile(file))
        } else if file.outcome == .bad {
          if badSaid < EchoingPrefetchSink.failuresToSay {
            console.report(.verifiedFile(file))
          } else if badSaid == EchoingPrefetchSink.failuresToSay {
            console.report(.furtherBadFilesInReportOnly)
          }
          badSaid += 1
        }
      },
      recordError: { message in
        writer.recordVerifyError(message)
        console.report(.verifyError(message))
      },
      stop: { stop.isStopped })
    writer.verifyCounts = findings.counts
    console.report(
      .verifyFinished(job: job.name, counts: findings.counts, level: configuration.level))
    guard configuration.repair != .none, findings.counts.bad > 0, !findings.stopped else { return }
    if let limit = configuration.maxDelete,
      !limit.allows(deletions: findings.counts.bad, of: findings.counts.files)
    {
      let refusal = MaintenanceError.overRepairLimit(
        bad: findings.counts.bad, files: findings.counts.files, repair: configuration.repair,
        limit: limit)
      guard settings.dryRun else { throw refusal }
      console.report(.warning(.overDeletionLimit(refusal)))
    }
    let pass = try beginPass(.repair, in: writer, listsActions: true)
    var recorder = pass
    try verifier.repair(
      findings, dryRun: settings.dryRun, into: &recorder, stop: { stop.isStopped })
    endPass(pass, in: writer)
  }
}
