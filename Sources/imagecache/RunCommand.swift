import ArgumentParser
import Core
import Foundation
import Runner

struct RunCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "run",
    abstract: "Run job files: migrate, prefetch, expire, trim and verify, then write the report.",
    discussion: """
      For each job, under the cache's run lock: the migrate pass (if the job lists it), the \
      prefetch of the job's manifests, the expire, trim and verify passes it lists, then the JSON \
      report (to the job's 'report' path, --report and/or --json). A mistake in a job file is \
      reported with its file, line and field, and nothing runs (exit 2); --metrics's file \
      says the run failed, so that the alerts see that night. A signal stops the \
      job in hand after the work in hand, writes its report marked interrupted, and runs no \
      further job. A job that cannot run (its cache locked by another run, read-only or \
      full) does not stop the next ones: the command ends with the most serious status. With several jobs, --report FILE without {job} writes FILE-<job>.json per \
      job, and --json prints one JSON array of their reports. See imagecache-job(5) or docs/jobs.md for the job file reference and jobs/example.yaml for an \
      example.

      Exit codes: 0 every job done, 1 URLs failed in some job, or the blacklist refused all \
      of its URLs (0 with --allow-url-failures \
      or allowURLFailures: true in the job: the report and metrics still count them), 2 \
      usage or job file error, 3 another run holds the lock, 4 fatal I/O error, 130/143 \
      interrupted.

      Fleets: --shard K/N, or --shards N|auto with K (and N) from Kubernetes, Slurm or Grid \
      Engine; {shard} and {shards} in --report, --metrics and the job's report: and \
      metrics: paths become K and N (all and 1 unsharded), so that no engine needs to \
      expand variables. A shard's report records its shard, the manifest entries it read \
      and the run ID (--run-id, else the engine's: $SLURM_ARRAY_JOB_ID, Grid Engine's \
      $JOB_ID, or $JOB_UID or $JOB_NAME in an Indexed Job), which report merge checks.

      The job's prefetch settings may be given as prefetch's flags, such as --concurrency, \
      --timeout or --max-bandwidth: each one given takes the place of the job file's value \
      for this run only (the file is not changed), and the run says which ones it took.

      Examples:
        imagecache run jobs/example.yaml
        imagecache run /etc/imagecache/nightly.yaml --wait \\
          --report '/var/log/imagecache/{job}.json'
        imagecache run /etc/imagecache/nightly.yaml --concurrency 8 \\
          --max-bandwidth 5MB/s
      """)

  @Argument(
    help: ArgumentHelp("Job files (YAML or JSON).", valueName: "job"),
    completion: .file(extensions: ["yaml", "yml", "json"]))
  var jobs: [String]

  @OptionGroup var reportOptions: ReportOptions
  @OptionGroup var shardOptions: ShardOptions
  @OptionGroup var fleetOptions: FleetOptions
  /// The job's `prefetch:` settings, overridden for this run only.
  @OptionGroup var limits: PrefetchLimits

  @Flag(
    name: .customLong("dry-run"),
    help: ArgumentHelp(
      "Download and write nothing: print on stdout what each URL would do (as prefetch "
        + "--dry-run) and what the passes would do. Only --report and --metrics are written.",
      discussion: """
        Manifests and sitemaps given by URL are still fetched, to list their URLs; no image is \
        requested. The job's cache need not exist yet: the run says it is new.
        """))
  var dryRun = false

  @Flag(name: .shortAndLong, help: "List every file the maintenance passes delete or move.")
  var verbose = false

  func run() async throws {
    // Every job is read and checked before any runs; a mistake is exit 2, without a usage
    // block (the job file is wrong, not the command line).
    var settings = reportOptions.settings(dryRun: dryRun, verbose: verbose)
    let several = jobs.count > 1
    if several {
      // One --report file per job, not one overwritten by each.
      settings.reportFiles = settings.reportFiles.map(Self.perJob)
      settings.metricsFiles = settings.metricsFiles.map(Self.perJob)
    }
    let environment = ProcessInfo.processInfo.environment
    var loaded: [Job] = []
    for path in jobs {
      var job: Job
      do {
        job = try Job.load(path: path)
      } catch {
        // The alerts read the metrics: a night whose job file is broken says it failed in
        // --metrics's file that night (its own metrics: is in the broken file).
        let metrics = UnreadableJobMetrics(
          jobFile: path, shard: try? shardOptions.resolved(environment: environment),
          metricsFiles: settings.metricsFiles)
        metrics.write(console: reportOptions.console)
        if settings.metricsFiles.isEmpty && metrics.mentionsOwnMetrics {
          reportOptions.console.say(
            "warning: metrics not written: the job's own metrics: file is named in \(path), "
              + "which has the mistake below; --metrics FILE (the cron wrapper's IMAGECACHE_METRICS) "
              + "is written even then", severity: .warning)
        }
        throw error
      }
      job.commandLineSettings = try limits.apply(to: &job.prefetch)
      try shardOptions.apply(to: &job)
      fleetOptions.apply(to: &job, environment: environment)
      loaded.append(job)
    }
    for (path, job) in zip(jobs, loaded) {
      do {
        try job.checkManifests(what: "\(path): manifest")
      } catch {
        // A night whose manifest never arrived: its report and metrics say it failed.
        JobRunner(job: job, settings: settings, console: reportOptions.console)
          .reportCannotStart(error)
        throw error
      }
    }
    // With several jobs, --json prints one JSON array of their reports.
    let array = several && settings.printsReport
    if array { Console.write("[\n", to: STDOUT_FILENO) }
    // The exit status of each job that ran, the most serious one ending the command as it
    // ends `prefetch`: an image given as a manifest (2) before an audit that could not read an
    // entry (4), before failed URLs (1).
    var statuses: Set<ExitStatus> = []
    for (index, job) in loaded.enumerated() {
      if array && index > 0 { Console.write(",\n", to: STDOUT_FILENO) }
      if !job.commandLineSettings.isEmpty {
        reportOptions.console.say(
          "\(job.name): for this run, from the command line: "
            + job.commandLineSettings.map { "\($0.field) \($0.value)" }.joined(separator: ", "))
      }
      let outcome: RunOutcome
      do {
        outcome = try await JobRunner(job: job, settings: settings, console: reportOptions.console)
          .run()
      } catch let error as any ExitStatusProviding where !array {
        // A job that could not run (its cache locked by another run, read-only, full) is no
        // reason to skip the next jobs, whose caches may be fine: each has its own report,
        // and the command ends with the most serious status.
        Console.standard.say("imagecache: \(error)", severity: .error)
        statuses.insert(error.exitStatus)
        continue
      } catch {
        if array { Console.write("]\n", to: STDOUT_FILENO) }
        throw error
      }
      if outcome.signal != nil {
        if array { Console.write("]\n", to: STDOUT_FILENO) }
        try outcome.exit()
      }
      statuses.insert(outcome.exitStatus)
    }
    if array { Console.write("]\n", to: STDOUT_FILENO) }
    if let worst = [ExitStatus.usage, .fatalIO, .locked, .someURLsFailed].first(
      where: statuses.contains)
    {
      throw ExitCode(worst.rawValue)
    }
  }

  /// `path` with `{job}` in it: as given when it has one, else `-{job}` before the extension.
  static func perJob(_ path: String) -> String {
    guard !path.contains("{job}") else { return path }
    let url = URL(fileURLWithPath: path)
    let ext = url.pathExtension
    guard !ext.isEmpty else { return path + "-{job}" }
    return String(path.dropLast(ext.count + 1)) + "-{job}." + ext
  }
}
