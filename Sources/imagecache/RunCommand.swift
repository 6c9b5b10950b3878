import ArgumentParser
import Core
import Foundation
import Maintenance
import Prefetcher

struct RunCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "run",
    abstract: "Run job files: migrate, prefetch, expire and trim, then write the report.",
    discussion: """
      For each job, under the cache's run lock: the migrate pass (if the job lists it), the \
      prefetch of the job's manifests, the expire and trim passes it lists, then the JSON \
      report (to the job's 'report' path, --report and/or --json). A mistake in a job file is \
      reported with its file, line and field, and nothing runs (exit 2). See README.md for \
      the job file reference and jobs/example.yaml for an example.

      Examples:
        imagecache run jobs/example.yaml
        imagecache run /etc/imagecache/nightly.yaml --wait --report '/var/log/imagecache/{job}.json'
      """)

  @Argument(help: ArgumentHelp("Job files (YAML or JSON).", valueName: "job"))
  var jobs: [String]

  @OptionGroup var reportOptions: ReportOptions

  @Flag(
    name: .customLong("dry-run"),
    help: "Download nothing and print what the maintenance passes would do.")
  var dryRun = false

  @Flag(name: .shortAndLong, help: "List every file the maintenance passes delete or move.")
  var verbose = false

  func validate() throws {
    for path in jobs {
      do {
        _ = try Job.load(path: path)
      } catch {
        throw ValidationError(error.description)
      }
    }
  }

  func run() async throws {
    var failed = false
    for path in jobs {
      let job = try Job.load(path: path)
      let outcome = try await JobRunner(
        job: job, dryRun: dryRun, verbose: verbose, reportOptions: reportOptions
      ).run()
      if outcome.signal != nil { try outcome.exit() }
      failed = failed || outcome.failed > 0
    }
    if failed { throw ExitCode(ExitStatus.someURLsFailed.rawValue) }
  }
}

/// One job, start to finish.
struct JobRunner {
  var job: Job
  var dryRun: Bool
  var verbose: Bool
  var reportOptions: ReportOptions

  func run() async throws -> PrefetchOutcome {
    let location = job.location
    let lock = try RunLock(location: location, wait: reportOptions.wait)
    defer { withExtendedLifetime(lock) {} }
    var report = RunReport(job: job.name, location: location, startedAt: Date())
    report.warnings = job.warnings
    for warning in job.warnings { Console.say("warning: \(warning)") }
    Console.say("\(job.name): cache \(location.diskCachePath)")

    if job.passes.contains(.migrate) {
      report.maintenance += try migrate(
        location: location, from: job.migrateFrom,
        manifests: ManifestItems(
          paths: job.manifests, defaultOptions: job.options, defaultContext: job.context),
        dryRun: dryRun, verbose: verbose)
    }

    var outcome = PrefetchOutcome(signal: nil, failed: 0)
    if !dryRun && !job.manifests.isEmpty {
      outcome = try await PrefetchRun(
        location: location, manifests: job.manifests, options: job.options, context: job.context,
        limits: job.prefetch
      ).execute(into: &report)
    }

    if outcome.signal == nil && (job.passes.contains(.expire) || job.passes.contains(.trim)) {
      let cleaner = CacheCleaner(
        diskCachePath: location.diskCachePath,
        configuration: CleanupConfiguration(
          maxDiskAge: job.passes.contains(.expire) ? job.maxDiskAge : -1,
          maxDiskSize: job.passes.contains(.trim) ? job.maxDiskSize : 0,
          expireType: job.expireType))
      let (expire, trim) = try runMaintenance {
        try cleaner.run(dryRun: dryRun, listActions: dryRun || verbose)
      }
      for pass in [expire, trim] where job.passes.contains(JobPass(rawValue: pass.pass.rawValue)!) {
        describe(pass, verbose: verbose)
        report.maintenance.append(pass)
      }
    }

    report.finishedAt = Date()
    if let prefetch = report.prefetch {
      Console.say(
        "\(job.name): \(prefetch.total) URLs: \(prefetch.downloaded) downloaded, "
          + "\(prefetch.memoryHits + prefetch.diskHits) hits, \(prefetch.notModified) not modified, "
          + "\(prefetch.failed) failed, \(prefetch.blacklisted) blacklisted, \(prefetch.skipped) skipped, "
          + "\(formatBytes(prefetch.bytesDownloaded)) in \(String(describing: Int(prefetch.durationSeconds * 1000))) ms"
      )
      for failure in prefetch.failures.prefix(20) {
        Console.say(
          "  failed \(failure.url): \(failure.name)\(failure.httpStatus.map { " \($0)" } ?? "")\(failure.blacklisted ? " (blacklisted)" : "")"
        )
      }
      if prefetch.failures.count > 20 {
        Console.say("  ... and \(prefetch.failures.count - 20) more in the report")
      }
    }
    if let path = job.reportPath(startedAt: report.startedAt) {
      try FileSystem.writeAtomically(try report.jsonData(), toPath: path)
      Console.say("\(job.name): report written to \(path)")
    }
    var options = reportOptions
    options.report = reportOptions.report?.replacingOccurrences(of: "{job}", with: job.name)
    try options.emit(report)
    return outcome
  }

}
