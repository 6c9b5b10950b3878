import ArgumentParser
import Core
import Foundation
import Runner

/// `--cache` and `--namespace`, the same on every subcommand (SPEC section 7).
struct CacheOptions: ParsableArguments {
  @Option(
    name: .long,
    help: ArgumentHelp(
      "The disk cache directory: the folder that holds namespaces.",
      discussion: "Default: $XDG_CACHE_HOME/com.hackemist.SDImageCache (else ~/.cache/...).",
      valueName: "dir"),
    completion: .directory)
  var cache: String?

  @Option(
    name: .long,
    help: ArgumentHelp("The namespace folder inside the cache directory.", valueName: "ns"))
  var namespace: String = CacheLocation.defaultNamespace

  /// The cache, its directory made absolute (reports name it; a cron job's working directory
  /// is nobody's business).
  var location: CacheLocation {
    var directory = cache ?? CacheLocation.defaultDirectory()
    if !directory.hasPrefix("/") {
      directory = FileManager.default.currentDirectoryPath + "/" + directory
    }
    return CacheLocation(
      directory: URL(fileURLWithPath: directory).standardizedFileURL.path, namespace: namespace)
  }

  /// Refuses a cache that does not exist, for the commands that only read or maintain one
  /// (only `prefetch`, `run` and a real `migrate` create a cache): a typo in `--cache` is an
  /// error, never an empty cache or a new folder.
  func requireExistingCache() throws {
    try FileSystem.checkCacheFolders(location)
    let path = location.diskCachePath
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
      throw ConfigurationError(
        source: "--cache",
        message: FileSystem.reason(
          "no cache at \(path) (no such folder); prefetch and run create one",
          forUserPath: cache ?? path))
    }
    guard isDirectory.boolValue else {
      throw ConfigurationError(source: "--cache", message: "\(path) is not a folder")
    }
  }

  func validate() throws {
    if let problem = CacheLocation.namespaceProblem(namespace) {
      throw ValidationError("--namespace \(problem)")
    }
  }
}

/// `--shard K/N` and `--shards N|auto`, on the subcommands that can run as one of N workers.
struct ShardOptions: ParsableArguments {
  // Each of the three takes the argument after it as its value, as --max-age does: `-1` is a
  // wrong number to name (exit 2 by validate()), not an unknown option that leaves the flag
  // without its value.
  @Option(
    name: .long, parsing: .unconditional,
    help: ArgumentHelp(
      "Run as shard K (from 0) of N: only the URLs and files whose cache key hashes to K.",
      valueName: "K/N"))
  var shard: String?

  @Option(
    name: .long, parsing: .unconditional,
    help: ArgumentHelp(
      "With no --shard: run as one of N shards, K from the engine: $JOB_COMPLETION_INDEX "
        + "(Kubernetes), else Slurm's or Grid Engine's array task (auto: N from the array too).",
      discussion: """
        Slurm: K = (SLURM_ARRAY_TASK_ID - _MIN) / _STEP, N = (_MAX - _MIN) / _STEP + 1, and \
        SLURM_ARRAY_TASK_COUNT must be N; Grid Engine: the same with SGE_TASK_ID, _FIRST, \
        _LAST and _STEPSIZE. A variable that is not a number or contradicts another is exit 2.
        """,
      valueName: "N|auto"))
  var shards: ShardCount?

  @Option(
    name: .long, parsing: .unconditional,
    help: ArgumentHelp(
      "With --shards N: the first task ID of the fleet's array, so that a rerun of some of its "
        + "tasks (sbatch --array=2, qsub -t 3) runs exactly their shards (K = task ID - this).",
      discussion: """
        Grid Engine's arrays start at 1, so it is 1 unless given; a Slurm array may start at 0 \
        or 1, so a rerun under Slurm needs it. Give it in the fleet's own command too: it is \
        checked against the array there.
        """,
      valueName: "ID"))
  var firstTask: Int?

  func validate() throws {
    _ = try resolved(environment: ProcessInfo.processInfo.environment)
  }

  /// The shard these flags name, if any: `--shard`, else `--shards` with the index (and, with
  /// `auto`, the count) from the engine's environment.
  func resolved(environment: [String: String]) throws -> Shard? {
    if let shard {
      guard let value = Shard(shard) else {
        throw ValidationError("--shard \(shard): expected K/N with 0 <= K < N, such as 0/4")
      }
      return value
    }
    if let firstTask, firstTask < 0 {
      throw ValidationError("--first-task \(firstTask): a task ID is 0 or more")
    }
    guard let shards else {
      if firstTask != nil { throw ValidationError("--first-task goes with --shards N") }
      return nil
    }
    if case .fixed(let count) = shards, count < 1 {
      throw ValidationError("--shards \(count): must be at least 1")
    }
    let value: Shard?
    do {
      value = try Shard.fromEnvironment(environment, count: shards, firstTask: firstTask)
    } catch {
      throw ValidationError(error.description)
    }
    guard let value else {
      throw ValidationError(
        "--shards \(shards) without --shard needs JOB_COMPLETION_INDEX (a Kubernetes Indexed "
          + "Job), SLURM_ARRAY_TASK_ID (a Slurm job array) or SGE_TASK_ID (a Grid Engine array)")
    }
    return value
  }

  /// The shard for a job: the flags' when given, else the job's own. A job whose `shard:`
  /// names another shard than the flags is refused (exit 2) naming both: running either one
  /// silently would leave a shard of the fleet undone or done twice.
  func apply(to job: inout Job) throws {
    guard let shard = try resolved(environment: ProcessInfo.processInfo.environment) else {
      return
    }
    if let own = job.shard, own != shard {
      let flags =
        self.shard != nil
        ? "--shard \(shard)"
        : "--shards \(shard.count) with JOB_COMPLETION_INDEX=\(shard.index) (shard \(shard))"
      throw ConfigurationError(
        source: job.file ?? job.name, field: "shard",
        message: "\(own) contradicts \(flags) on the command line; give the shard in one place")
    }
    job.shard = shard
  }
}

extension CountOrAuto: ExpressibleByArgument, CustomStringConvertible {
  public init?(argument: String) {
    if argument == "auto" {
      self = .auto
    } else if let count = Int(argument) {
      self = .fixed(count)
    } else {
      return nil
    }
  }

  public var description: String {
    switch self {
    case .auto: "auto"
    case .fixed(let count): "\(count)"
    }
  }
}

/// `--allow-url-failures` and `--run-id`, on `run` and `prefetch`: what a fleet's engine needs.
struct FleetOptions: ParsableArguments {
  @Flag(
    name: .customLong("allow-url-failures"),
    help: ArgumentHelp(
      "Exit 0, not 1, when the run finished with some URLs failed, or with every URL "
        + "refused by the blacklist (job: allowURLFailures).",
      discussion: """
        For engines that hold back what follows a worker that exits non-zero (Slurm's \
        afterok, a Kubernetes Job's completion). The failures stay in the report and the \
        metrics. Manifests that fail as a whole, fatal errors (4), locks (3), usage errors \
        (2) and signals (130/143) keep their exit codes.
        """))
  var allowURLFailures = false

  @Option(
    name: .customLong("run-id"),
    help: ArgumentHelp(
      "The fleet run this shard is part of, written in its report for report merge (default: "
        + "$SLURM_ARRAY_JOB_ID, else Grid Engine's $JOB_ID, else $JOB_UID (the Job's UID, "
        + "which deploy/k8s sets) or $JOB_NAME in a Kubernetes Indexed Job).",
      valueName: "id"))
  var runID: String?

  func validate() throws {
    if let runID, runID.isEmpty || runID.containsControlCharacter() {
      throw ValidationError("--run-id must be non-empty text without control characters")
    }
  }

  /// Sets the job's exit policy and run ID. The engine's run ID is taken only for a sharded
  /// run: a lone run has no fleet to be checked against.
  func apply(to job: inout Job, environment: [String: String]) {
    if allowURLFailures { job.allowURLFailures = true }
    job.runID = runID ?? (job.shard != nil ? Self.engineRunID(environment) : nil)
  }

  /// The run ID an engine gives every worker of one run: Slurm's array job ID, else Grid
  /// Engine's job ID in an array job, else the Kubernetes Job's UID (`JOB_UID`, which
  /// deploy/k8s sets from the pod's `controller-uid` label: new for every Job, where a name is
  /// reused night after night), else its name (`JOB_NAME`, from the `job-name` label); the
  /// Kubernetes ones taken only in an Indexed Job (`JOB_COMPLETION_INDEX` set), where they are
  /// the Job's and not some other tool's.
  static func engineRunID(_ environment: [String: String]) -> String? {
    func value(_ name: String) -> String? {
      guard let text = environment[name], !text.isEmpty, !text.containsControlCharacter() else {
        return nil
      }
      return text
    }
    if let slurm = value("SLURM_ARRAY_JOB_ID") { return slurm }
    if let task = environment["SGE_TASK_ID"], task != "undefined", let grid = value("JOB_ID") {
      return grid
    }
    if environment["JOB_COMPLETION_INDEX"] != nil, let job = value("JOB_UID") ?? value("JOB_NAME") {
      return job
    }
    return nil
  }
}

/// `--report FILE`, `--json` and `--wait`, on every subcommand that does work.
struct ReportOptions: ParsableArguments {
  @Option(
    name: .long,
    help: ArgumentHelp(
      "Write the JSON report to this file ({job} becomes the job's name, {shard} and {shards} "
        + "the shard K and N, or all and 1 when unsharded, {date} and {time} the run's start "
        + "in UTC, YYYY-MM-DD and HHMMSS, as in a job's report:).", valueName: "file"),
    completion: .file())
  var report: String?

  @Flag(name: .long, help: "Print the JSON report on stdout.")
  var json = false

  @Option(
    name: .long,
    help: ArgumentHelp(
      "Write the run's figures here in Prometheus text format, for node_exporter's textfile "
        + "collector ({job}, {shard} and {shards} as in --report; not {date} or {time}: each "
        + "run rewrites the one file).",
      discussion: """
        Written after the report. A file that cannot be written then (its folder not \
        creatable or not writable) is a warning, in the report too (metricsErrors), and the \
        exit code stays the run's own. A job file that run cannot read (exit 2) has its \
        failure written here too, under the labels of the series the file holds.
        """, valueName: "file"),
    completion: .file())
  var metrics: String?

  @Flag(
    name: .long,
    help: "Wait for another run on the same cache to finish instead of exiting with code 3.")
  var wait = false

  @Option(
    name: .customLong("wait-timeout"),
    help: ArgumentHelp(
      "With --wait, give up (exit 3) after waiting this long, as flock -w does (0 to 36500d).",
      valueName: "duration"))
  var waitTimeout: Duration?

  @Flag(
    name: .shortAndLong,
    help: "Print only warnings, failures and errors on stderr (no progress or summaries).")
  var quiet = false

  /// Where human output goes: stderr, filtered by --quiet.
  var console: Console { Console(quiet: quiet) }

  func validate() throws {
    try waitTimeout?.check("--wait-timeout", allowed: .nonNegative)
    if let metrics, let problem = Job.metricsPathProblem(metrics) {
      throw ValidationError("--metrics \(metrics): \(problem)")
    }
  }

  /// The run settings these flags give.
  func settings(dryRun: Bool = false, verbose: Bool = false) -> RunSettings {
    var settings = RunSettings()
    settings.dryRun = dryRun
    settings.verbose = verbose
    // --wait-timeout says how long to wait: it implies --wait.
    settings.wait = wait || waitTimeout != nil
    settings.waitTimeout = waitTimeout?.seconds
    settings.reportFiles = report.map { [$0] } ?? []
    settings.printsReport = json
    settings.metricsFiles = metrics.map { [$0] } ?? []
    settings.environment = ProcessInfo.processInfo.environment
    return settings
  }
}
