import ArgumentParser
import Core
import Foundation
import Prefetcher
import Runner
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// `--cache` and `--namespace`, the same on every subcommand (SPEC section 7).
struct CacheOptions: ParsableArguments {
  @Option(
    name: .long,
    help: ArgumentHelp(
      "The disk cache directory: the folder that holds namespaces.",
      discussion: "Default: $XDG_CACHE_HOME/com.hackemist.SDImageCache (else ~/.cache/...).",
      valueName: "dir"))
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
    let path = location.diskCachePath
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
      throw ConfigurationError(
        source: "--cache",
        message: "no cache at \(path) (no such folder); prefetch and run create one")
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
  @Option(
    name: .long,
    help: ArgumentHelp(
      "Run as shard K (from 0) of N: only the URLs and files whose cache key hashes to K.",
      valueName: "K/N"))
  var shard: String?

  @Option(
    name: .long,
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
    guard let shards else { return nil }
    if case .fixed(let count) = shards, count < 1 {
      throw ValidationError("--shards must be at least 1")
    }
    let value: Shard?
    do {
      value = try Shard.fromEnvironment(environment, count: shards)
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

extension ShardCount: ExpressibleByArgument, CustomStringConvertible {
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
      "Exit 0, not 1, when the run finished with some URLs failed (job: allowURLFailures).",
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
        + "$SLURM_ARRAY_JOB_ID, else Grid Engine's $JOB_ID, else $JOB_NAME in a Kubernetes "
        + "Indexed Job).",
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
  /// Engine's job ID in an array job, else the Kubernetes Job's name (`JOB_NAME`, which deploy/k8s sets from the pod's `job-name`
  /// label), taken only in an Indexed Job (`JOB_COMPLETION_INDEX` set), where the name is the
  /// Job's and not some other tool's.
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
    if environment["JOB_COMPLETION_INDEX"] != nil, let name = value("JOB_NAME") { return name }
    return nil
  }
}

/// `--report FILE`, `--json` and `--wait`, on every subcommand that does work.
struct ReportOptions: ParsableArguments {
  @Option(
    name: .long,
    help: ArgumentHelp(
      "Write the JSON report to this file ({job} becomes the job's name, {shard} and {shards} "
        + "the shard K and N, or all and 1 when unsharded).", valueName: "file"))
  var report: String?

  @Flag(name: .long, help: "Print the JSON report on stdout.")
  var json = false

  @Option(
    name: .long,
    help: ArgumentHelp(
      "Write the run's figures here in Prometheus text format, for node_exporter's textfile "
        + "collector ({job}, {shard} and {shards} as in --report).",
      discussion: """
        Written after the report. A file that cannot be written then (its folder not \
        creatable or not writable) is a warning, in the report too (metricsErrors), and the \
        exit code stays the run's own.
        """, valueName: "file"))
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

/// Human output on stderr, so that stdout stays for the data: `--json`, lists, plans. Best
/// effort: a closed or full stderr or stdout loses the line, never the run (SPEC section 10).
struct Console: RunConsole {
  static let standard = Console()

  /// `--quiet`: only what reports something wrong.
  var quiet = false

  /// The least severity shown: `--quiet` keeps warnings (failed URLs, skipped lines, an
  /// interrupted run) and errors.
  var threshold: RunEvent.Severity { quiet ? .warning : .debug }

  func report(_ event: RunEvent) { say(event.wording, severity: event.severity) }

  /// A line of the command's own, shown if its severity reaches ``threshold``.
  func say(_ line: String, severity: RunEvent.Severity = .info) {
    if severity < threshold { return }
    // Every line for people comes through here: no URL password reaches a log.
    StatusLine.standardError.print(line.maskingURLPasswords + "\n")
  }

  func output(_ event: RunEvent) { output(event.wording) }

  /// What the command exists to print (a list, a dry run's plan) goes to stdout, as curl,
  /// rsync and git print theirs, so that it can be piped and grepped; `--quiet` keeps it.
  func output(_ line: String) {
    Self.write(line.maskingURLPasswords + "\n", to: STDOUT_FILENO)
  }

  func progress(total: @escaping @Sendable () -> Int?) -> (any PrefetchProgress)? {
    quiet ? nil : ConsoleProgress(total: total, console: self)
  }

  static func write(_ text: String, to descriptor: Int32) {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
      let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
      if written < 0 && errno == EINTR { continue }
      guard written > 0 else { return }
      bytes = bytes.dropFirst(written)
    }
  }

  /// Pretty, key-sorted JSON with ISO 8601 dates, on stdout.
  static func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    write(String(decoding: try encoder.encode(value), as: UTF8.self) + "\n", to: STDOUT_FILENO)
  }
}

/// The status line a terminal shows below the lines of a run, and every other line written to
/// stderr: a line said while the status is up is written over it (`\r`, erase to the end of
/// the line), and the status is drawn again below it, so that no line is ever glued to a
/// status or left half-erased. One for the process, as there is one stderr.
final class StatusLine: Sendable {
  static let standardError = StatusLine(descriptor: STDERR_FILENO)

  private let descriptor: Int32
  /// The status drawn at the bottom, without a newline; `nil` when none is. Its lock is held
  /// while writing, so that lines from two threads are never interleaved.
  private let shown = Mutex<String?>(nil)

  init(descriptor: Int32) { self.descriptor = descriptor }

  /// Writes `text` (whole lines) above the status, if one is shown.
  func print(_ text: String) {
    shown.withLock { shown in
      guard let shown else { return Console.write(text, to: descriptor) }
      Console.write(Self.eraseLine + text + shown, to: descriptor)
    }
  }

  /// Draws `status` in place of the one shown; `final` ends it with a newline, for good.
  func show(_ status: String, final: Bool) {
    shown.withLock { shown in
      shown = final ? nil : status
      Console.write(Self.eraseLine + status + (final ? "\n" : ""), to: descriptor)
    }
  }

  /// The terminal's width in columns, asked at each redraw so that a resized window is
  /// followed; 80 when the terminal does not say.
  var columns: Int {
    var size = winsize()
    guard ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
    return Int(size.ws_col)
  }

  private static let eraseLine = "\r\u{1B}[K"
}

/// On a terminal, one status line kept at the bottom and rewritten in place, never wider than
/// the terminal; otherwise a log line every few seconds.
final class ConsoleProgress: PrefetchProgress, Sendable {
  private let console: Console
  private let isTerminal = isatty(STDERR_FILENO) == 1
  private let statusLine = StatusLine.standardError
  private let lastPrinted = Mutex(Date.distantPast)
  /// The lines to go, once counted (never for sitemaps).
  private let counted = Mutex<Int?>(nil)
  private let countDone = DispatchSemaphore(value: 0)

  /// Counts the lines on a thread of its own: a manifest of millions of lines takes seconds to
  /// read, and the downloads start meanwhile (the total shows once it is known).
  init(total count: @escaping @Sendable () -> Int?, console: Console) {
    self.console = console
    let thread = Thread { [self] in
      let total = count()
      counted.withLock { $0 = total }
      countDone.signal()
    }
    thread.name = "imagecache-line-count"
    thread.start()
  }

  private var total: Int? { counted.withLock { $0 } }

  func update(_ counts: PrefetchCounts, elapsed: TimeInterval) {
    let interval: TimeInterval = isTerminal ? 0.2 : 5
    let now = Date()
    let due = lastPrinted.withLock { lastPrinted in
      guard now.timeIntervalSince(lastPrinted) >= interval else { return false }
      lastPrinted = now
      return true
    }
    if due { show(counts, elapsed: elapsed, final: false) }
  }

  func finish(_ counts: PrefetchCounts, elapsed: TimeInterval) {
    // A short run may end before its lines are counted: the last line says the total, unless
    // counting would hold the exit up (a huge manifest and an early signal).
    _ = countDone.wait(timeout: .now() + 0.2)
    show(counts, elapsed: elapsed, final: true)
  }

  /// One part of the status, and how much it matters when the terminal is too narrow for all:
  /// the least important go first.
  private struct Field {
    var text: String
    var importance: Int
  }

  private func fields(_ counts: PrefetchCounts, elapsed: TimeInterval) -> [Field] {
    let done = counts.total
    let total = total
    let rate = elapsed > 0 ? Double(done) / elapsed : 0
    let bytesPerSecond = elapsed > 0 ? Double(counts.bytesDownloaded) / elapsed : 0
    var fields = [
      Field(text: "\(done)\(total.map { "/\($0)" } ?? "") done", importance: 9),
      Field(text: "\(counts.memoryHits + counts.diskHits) hits", importance: 3),
      Field(text: "\(counts.downloaded) downloaded", importance: 5),
      Field(text: "\(counts.notModified) not modified", importance: 1),
      Field(text: "\(counts.failed) failed", importance: 8),
      Field(text: "\(counts.blacklisted) blacklisted", importance: 2),
      Field(text: "\(Int(rate)) URLs/s", importance: 7),
      Field(text: "\(formatBytes(UInt64(bytesPerSecond)))/s", importance: 6),
    ]
    if let total, rate > 0 && total > done {
      fields.append(Field(text: "ETA \(Int(Double(total - done) / rate))s", importance: 4))
    }
    return fields
  }

  /// The fields that fit in `width` columns, the least important dropped first; cut short
  /// only when the most important alone does not fit. A status that wrapped would leave a
  /// line behind at every redraw, since `\r` goes back to the start of the last row only.
  private static func fitting(_ fields: [Field], width: Int) -> String {
    var kept = fields
    var text = kept.map(\.text).joined(separator: ", ")
    while text.count > width, kept.count > 1,
      let least = kept.indices.min(by: { kept[$0].importance < kept[$1].importance })
    {
      kept.remove(at: least)
      text = kept.map(\.text).joined(separator: ", ")
    }
    return String(text.prefix(max(0, width)))
  }

  private func show(_ counts: PrefetchCounts, elapsed: TimeInterval, final: Bool) {
    let fields = fields(counts, elapsed: elapsed)
    if isTerminal {
      // One column spare: a line that fills the last column leaves some terminals waiting to
      // wrap, and the next `\r` would then go back to the wrong row.
      statusLine.show(Self.fitting(fields, width: statusLine.columns - 1), final: final)
    } else {
      console.say(fields.map(\.text).joined(separator: ", "))
    }
  }
}

/// Parses `--max-age`-style values with the unit parsers of Core. The range is checked in
/// `validate()`, where the flag's name and its range are known: a value out of range is exit 2
/// naming both, never a crash when the seconds become nanoseconds.
struct Duration: ExpressibleByArgument, CustomStringConvertible {
  var seconds: TimeInterval
  /// As given, for messages: an overflowing value's seconds are infinite.
  private var text: String?
  var description: String { formatDuration(seconds) }
  init?(argument: String) {
    // A value that does not parse is argument-parser's usage error, which names the flag.
    guard let seconds = try? parseDurationValue(argument) else { return nil }
    self.seconds = seconds
    text = argument
  }
  init(seconds: TimeInterval) { self.seconds = seconds }

  /// Refuses a value outside `allowed`, naming `flag`.
  func check(_ flag: String, allowed: DurationRange) throws {
    do {
      _ = try allowed.check(seconds, text: text ?? description)
    } catch {
      throw ValidationError("\(flag) \(error)")
    }
  }

  /// Refuses a value `setting` does not take, naming its flag, in the job file's words.
  func check(_ setting: NumericSetting) throws {
    guard case .duration(let allowed) = setting.rule else {
      preconditionFailure("\(setting.flag) is not a duration")
    }
    try check(setting.flag, allowed: allowed)
  }
}

/// Parses `--max-size`-style values: 0 to 2^63-1 bytes.
struct ByteCount: ExpressibleByArgument, CustomStringConvertible {
  var bytes: UInt64
  var description: String { "\(bytes)" }
  /// Why the value given is not a size, kept for `validate()`: argument-parser's own message
  /// for a value it cannot take would not say the range.
  var problem: UnitParseError?
  init?(argument: String) {
    do {
      bytes = try parseByteCount(argument)
    } catch  where error.outOfRange {
      bytes = 0
      problem = error
    } catch {
      // A value that does not parse is argument-parser's usage error, which names the flag.
      return nil
    }
  }
  init(bytes: UInt64) { self.bytes = bytes }

  /// Refuses a value out of range, naming `flag`.
  func check(_ flag: String) throws {
    if let problem { throw ValidationError("\(flag) \(problem)") }
  }
}

/// Parses `--rate`: requests a second (`20/s`, `300/m`). Why a value is not one is kept for
/// `validate()`, which names the flag and what is expected.
struct RequestRate: ExpressibleByArgument {
  var perSecond: Double = 0
  var problem: UnitParseError?
  init(argument: String) {
    do {
      perSecond = try parseRequestRate(argument)
    } catch {
      problem = error
    }
  }

  /// Refuses a value that is not a rate in range, naming `flag`.
  func check(_ flag: String) throws {
    if let problem { throw ValidationError("\(flag) \(problem)") }
  }
}

/// Parses `--max-bandwidth`: bytes a second (`10MB/s`). Why a value is not one is kept for
/// `validate()`, which names the flag and what is expected.
struct Bandwidth: ExpressibleByArgument {
  var bytesPerSecond: UInt64 = 0
  var problem: UnitParseError?
  init(argument: String) {
    do {
      bytesPerSecond = try parseBandwidth(argument)
    } catch {
      problem = error
    }
  }

  /// Refuses a value that is not a bandwidth in range, naming `flag`.
  func check(_ flag: String) throws {
    if let problem { throw ValidationError("\(flag) \(problem)") }
  }
}

/// Refuses a count `setting` does not take, naming its flag, in the job file's words.
func checkCount(_ value: Int, _ setting: NumericSetting) throws {
  do {
    _ = try setting.check(count: value, text: String(value))
  } catch {
    throw ValidationError("\(setting.flag) \(error)")
  }
}

extension ExpireType: ExpressibleByArgument {}
extension ValidationLevel: ExpressibleByArgument {}
extension SitemapOrder: ExpressibleByArgument {}
