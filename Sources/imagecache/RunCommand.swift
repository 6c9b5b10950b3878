import ArgumentParser
import Core
import Foundation
import Runner

struct RunCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "run",
    abstract: "Run job files: migrate, prefetch, expire and trim, then write the report.",
    discussion: """
      For each job, under the cache's run lock: the migrate pass (if the job lists it), the \
      prefetch of the job's manifests, the expire and trim passes it lists, then the JSON \
      report (to the job's 'report' path, --report and/or --json). A mistake in a job file is \
      reported with its file, line and field, and nothing runs (exit 2). A signal stops the \
      job in hand after the work in hand, writes its report marked interrupted, and runs no \
      further job. See README.md for the job file reference and jobs/example.yaml for an \
      example.

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
      let job: Job
      do {
        job = try Job.load(path: path)
      } catch {
        throw ValidationError(error.description)
      }
      for manifest in job.manifests {
        try checkManifest(manifest, what: "\(path): manifest")
      }
    }
  }

  func run() async throws {
    var failed = false
    for path in jobs {
      let outcome = try await JobRunner(
        job: try Job.load(path: path),
        settings: reportOptions.settings(dryRun: dryRun, verbose: verbose),
        console: Console.standard
      ).run()
      if outcome.signal != nil { try outcome.exit() }
      failed = failed || outcome.failedURLs > 0
    }
    if failed { throw ExitCode(ExitStatus.someURLsFailed.rawValue) }
  }
}
