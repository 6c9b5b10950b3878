import Core
import Foundation
import HTTP
import Maintenance
import Pipeline
import Prefetcher
import State

extension JobRunner {
  /// Whether passes print a line per file: with `--verbose`, and in a dry run unless the
  /// report (which lists the same plan) is going to stdout.
  private var echoesActions: Bool {
    settings.verbose || (settings.dryRun && !settings.printsReport)
  }

  func beginPass(
    _ pass: MaintenancePassReport.Pass, in writer: ReportWriter, listsActions: Bool
  )
    throws -> PassSink
  {
    let console = console
    return try writer.beginPass(
      pass, dryRun: settings.dryRun, listsActions: listsActions,
      echo: echoesActions ? { action, summary in echo(.passAction(action, in: summary)) } : nil,
      echoError: { console.report(.passError(pass: pass, message: $0)) })
  }

  /// A pass's event for one file: a dry run's plan is the command's output (unless the report
  /// goes to stdout); what a real run did is reported, as progress is.
  private func echo(_ event: RunEvent) {
    if settings.dryRun && !settings.printsReport {
      console.output(event)
    } else {
      console.report(event)
    }
  }

  func endPass(_ pass: PassSink, in writer: ReportWriter) {
    writer.endPass(pass)
    console.report(.passFinished(pass.summary))
  }

  /// The migrate pass (SPEC section 4): merge the legacy folder (`migrate.from`, else each of
  /// SD 3/4's folders beside the cache) when it exists, then rename the legacy file names of
  /// the manifests' keys.
  func migrate(into writer: ReportWriter, stop: StopFlag, warnings: RunWarnings) async throws {
    let migrator = CacheMigrator(location: job.location, shard: job.shard)
    let now = Date()
    let sources = job.migrateFrom.map { [$0] } ?? migrator.legacyDirectories
    let found = sources.filter { FileManager.default.fileExists(atPath: $0) }
    for source in found where !stop.isStopped {
      let pass = try beginPass(.migrate, in: writer, listsActions: true)
      var recorder = pass
      try migrator.mergeDirectory(
        from: source, dryRun: settings.dryRun, now: now, into: &recorder,
        stop: { stop.isStopped })
      endPass(pass, in: writer)
      // The merged folder goes only once it is empty; either way, say what became of it, and
      // of a kept one, what is still in it and why.
      if !settings.dryRun {
        if FileManager.default.fileExists(atPath: source) {
          warnings.add(.legacyFolderKept(path: source, leftovers: migrator.leftovers(in: source)))
        } else {
          console.report(.legacyFolderMerged(path: source))
        }
      }
    }
    if found.isEmpty && (settings.verbose || job.migrateFrom != nil) {
      // A nightly job that lists migrate says nothing when there is nothing to migrate; a
      // rerun of a finished --from migration says so and succeeds.
      console.report(
        .noLegacyFolder(path: sources.map(FileSystem.named).joined(separator: " or ")))
    }
    guard !stop.isStopped else { return }
    guard !job.manifests.isEmpty else {
      // Without the URLs no legacy name can be renamed: SD 5 looks for the current names, so
      // say how many files keep a legacy one, and what gives them SD 5's names.
      let count = try migrator.legacyNameCount(mergedFrom: found, dryRun: settings.dryRun)
      if count > 0 {
        warnings.add(
          .legacyNamesLeft(
            count: count, path: job.location.diskCachePath, dryRun: settings.dryRun))
      }
      return
    }
    let pass = try beginPass(.migrate, in: writer, listsActions: true)
    // One downloader for the pass's sitemaps and manifest URLs (their connections reused, the
    // host's limits kept across them), stopped before the pass ends.
    try await Downloader.withDownloader(configuration: job.prefetch.http) { documents in
      var recorder = pass
      var items = job.manifestItems
      items.stop = stop
      items.downloader = documents
      let keys = items.cacheKeys { lineError in
        var lineErrors = pass
        lineErrors.recordError(lineError.description)
      }
      migrator.renameLegacyFileNames(
        keys: keys, dryRun: settings.dryRun, now: now, into: &recorder, stop: { stop.isStopped })
    }
    endPass(pass, in: writer)
  }

  /// The expire and trim passes the job lists, in one walk (SPEC section 4).
  func clean(into writer: ReportWriter, stop: StopFlag, warnings: RunWarnings) throws {
    let expires = job.passes.contains(.expire)
    let trims = job.passes.contains(.trim)
    guard expires || trims else {
      // A job file that lists no pass says so: its author may have expected SD's expiry.
      if job.file != nil { console.report(.noCleaningPasses(job: job.name, passes: job.passes)) }
      return
    }
    var configuration = job.cleanup
    if !expires { configuration.maxDiskAge = -1 }
    if !trims { configuration.maxDiskSize = 0 }
    console.report(.maintenanceLimits(configuration, expires: expires, trims: trims))
    if let limit = configuration.maxDelete {
      let cleaner = CacheCleaner(
        diskCachePath: job.location.diskCachePath, configuration: configuration, shard: job.shard)
      let plan = try cleaner.plan(stop: { stop.isStopped })
      if !limit.allows(deletions: plan.deletions, of: plan.files) {
        let refusal = MaintenanceError.overDeletionLimit(
          planned: plan.deletions, files: plan.files, limit: limit)
        // A dry run shows the whole plan all the same: it is how the limits are checked.
        guard settings.dryRun else { throw refusal }
        console.report(.warning(.overDeletionLimit(refusal)))
      }
    }
    let listsActions = settings.dryRun || settings.verbose
    var expire = try beginPass(.expire, in: writer, listsActions: listsActions)
    var trim = try beginPass(.trim, in: writer, listsActions: listsActions)
    let sizes = try CacheCleaner(
      diskCachePath: job.location.diskCachePath, configuration: configuration, shard: job.shard
    ).run(
      dryRun: settings.dryRun, expire: &expire, trim: &trim, stop: { stop.isStopped },
      warn: { warnings.add(.maintenance($0)) })
    // The report says what the limits were and what they did to the cache's size: a person
    // reading it in the morning should not have to know the job file or SD's defaults.
    expire.summary.limits = configuration.limits
    trim.summary.limits = configuration.limits
    if let sizes {
      expire.summary.cacheBytesBefore = sizes.before
      expire.summary.cacheBytesAfter = sizes.afterExpire
      trim.summary.cacheBytesBefore = sizes.afterExpire
      trim.summary.cacheBytesAfter = sizes.afterTrim
    }
    if expires { endPass(expire, in: writer) }
    if trims { endPass(trim, in: writer) }
  }
}
