import Core
import Foundation
import HTTP
import Maintenance
import Pipeline
import Prefetcher
import Yams

/// A setting the command line gave in place of the job file's: its job file field
/// (`prefetch.concurrency`) and its value as the run says it (`1`).
public typealias CommandLineSetting = (field: String, value: String)

/// A maintenance pass a job asks for, in the order they run.
public enum JobPass: String, Sendable, CaseIterable {
  case migrate
  case expire
  case trim
  /// `imagecache verify`'s audit, after expire and trim (issue 45).
  case verify
}

/// One job: the configuration tree that job files (SPEC section 6) and the command line both
/// decode into, like Nuke's `ImagePipeline.Configuration`: which cache, which manifests, default
/// options and context, the prefetch and cleanup settings (each default stated once, in
/// ``PrefetchConfiguration`` and ``CleanupConfiguration``), which passes run, and where the
/// report goes. Relative paths in a job file are relative to its folder.
public struct Job: Sendable {
  public var name: String
  /// The job file, when the job came from one.
  public var file: String?
  public var location: CacheLocation
  /// `maxDiskAge`, `maxDiskSize` and `expireType`.
  public var cleanup = CleanupConfiguration()
  /// Manifest files, or http(s) URLs of manifests and sitemaps.
  public var manifests: [String] = []
  /// Image URLs given one by one (`prefetch --url`, as wget and aria2 take them), read before
  /// the manifests as the lines of one would be.
  public var urls: [String] = []
  /// How sitemap manifests are read.
  public var sitemap = SitemapSettings()
  /// Run as one shard of N (SPEC section 9): only the URLs and files whose cache key hashes to
  /// it. `shard:` in a job file, `--shard K/N` on the command line.
  public var shard: Shard? {
    get { prefetch.shard }
    set { prefetch.shard = newValue }
  }
  /// Whether the manifests are prefetched (false for `migrate`, whose manifests only name the
  /// keys whose legacy file names are renamed).
  public var prefetchesManifests = true
  public var options = ImageOptions()
  public var context = ImageContext()
  public var prefetch = PrefetchConfiguration()
  /// The passes to run: migrate before the prefetch, expire, trim and verify after it. None unless
  /// the job lists them (SPEC section 6): a job that names no passes deletes nothing.
  public var passes: [JobPass] = []
  /// The audit of `imagecache verify` (issue 45), run after any prefetch, expire and trim. The
  /// `verify` command leaves temporary files to it, unswept; a job that lists the `verify`
  /// pass sweeps them first, as every job does.
  public var verify: VerifyConfiguration?
  /// A legacy folder to merge in the migrate pass (else SD 3/4's folder beside the cache).
  public var migrateFrom: String?
  /// The report file; `{date}` and `{time}` are replaced by the run's start (UTC), `{job}`,
  /// `{shard}` and `{shards}` as in ``expandingPlaceholders(in:)``.
  public var report: String?
  /// A Prometheus metrics file, rewritten after each run (SPEC section 6).
  public var metrics: String?
  /// Warnings for people (UI-only options), each naming its file, line and field.
  public var warnings: [ConfigurationError] = []
  /// Exit 0, not 1, when the run finished with URLs failed (`allowURLFailures:`,
  /// `--allow-url-failures`), for an engine that holds back what follows a worker that
  /// exits non-zero. The failures stay in the report and the metrics; fatal errors, locks,
  /// usage errors, signals and manifests that fail as a whole keep their exit codes.
  public var allowURLFailures = false
  /// The fleet run this run is a shard of, written in its report for `report merge`
  /// (`--run-id`, else the engine's job ID; SPEC section 9).
  public var runID: String?
  /// The `prefetch:` settings that the command line (`run --concurrency 1`) gave in place of
  /// the job file's, for this run only: each its job file field and its value as said, in
  /// the report's `commandLineSettings`.
  public var commandLineSettings: [CommandLineSetting] = []

  public init(name: String, file: String? = nil, location: CacheLocation) {
    self.name = name
    self.file = file
    self.location = location
  }

  public static let knownKeys = [
    "name", "cache", "manifests", "sitemap", "shard", "options", "context", "prefetch",
    "maintenance", "verify", "migrate", "report", "metrics", "allowURLFailures",
  ]

  /// Whether the file at `path` reads as a job file rather than a manifest: its first line
  /// that is not blank, a `#` comment or YAML's `---` starts with a job key (`cache:`,
  /// `"manifests":`, after the `{` of JSON). A manifest line is a URL or `{"url": ...}`, so a
  /// manifest never does. Only the first 4 KB are read: a manifest may be huge.
  public static func looksLikeJobFile(path: String) -> Bool {
    // A file that cannot be read is not taken for a job file: its own read, as a manifest,
    // says why. A failed close of a file only read loses nothing.
    guard let handle = FileHandle(forReadingAtPath: path) else { return false }
    defer { try? handle.close() }
    guard let head = try? handle.read(upToCount: 4096) else { return false }
    for rawLine in String(decoding: head, as: UTF8.self).split(whereSeparator: \.isNewline) {
      // Trimmed without NSString (`trimmingCharacters(in: .whitespaces)`), whose first use
      // costs more than this whole look (it runs before the first request), and with no
      // generic type that the start has not made already (each is a search of the binary's
      // protocol conformances).
      var line = String(rawLine).trimmingWhitespace(keepingLineBreaks: true)
      if line.hasPrefix("\u{FEFF}") { line.removeFirst() }
      if line.isEmpty || line.hasPrefix("#") || line == "---" || line == "{" { continue }
      if line.hasPrefix("{") {
        line = String(line.dropFirst()).trimmingWhitespace(keepingLineBreaks: true)
      }
      var key = line.prefix { $0 != ":" }
      while key.first == "\"" || key.first == " " { key.removeFirst() }
      while key.last == "\"" || key.last == " " { key.removeLast() }
      return line.contains(":" as Character) && knownKeys.contains(String(key))
    }
    return false
  }

  /// Reads and checks a job file (YAML, or JSON, which YAML reads too). Every mistake names the
  /// file, the line and the field.
  public static func load(path: String) throws(ConfigurationError) -> Job {
    // A path that cannot be examined is reported by the read below.
    if let attributes = try? FileSystem.attributes(atPath: path), attributes.isDirectory {
      throw ConfigurationError(source: path, message: "is a folder, not a job file")
    }
    let data: Data
    do {
      data = try FileSystem.existingContents(atPath: path)
    } catch {
      throw ConfigurationError(
        source: path, message: "cannot read the job file: \(error.namingWorkingDirectory())")
    }
    guard data.count <= maxFileSize else {
      throw ConfigurationError(
        source: path,
        message: "a job file is small; this one is \(formatBytes(UInt64(data.count))) "
          + "(at most \(formatBytes(UInt64(maxFileSize))))")
    }
    guard let text = String(data: data, encoding: .utf8) else {
      throw ConfigurationError(source: path, message: "the job file is not UTF-8 text")
    }
    // Before Yams sees it: composing nested aliases (a "billion laughs") takes time exponential
    // in their depth, even before anything walks the result.
    if let line = YAMLAnchorScanner.firstAnchorOrAlias(in: text) {
      throw ConfigurationError(
        source: path, line: line,
        message: "YAML anchors and aliases (&name, *name) are not supported in job files")
    }
    let root: Node?
    do {
      root = try Yams.compose(yaml: text)
    } catch let error as YamlError {
      throw ConfigurationError(
        source: path, line: Self.line(of: error),
        message: "not valid YAML or JSON: \(Self.problem(of: error))")
    } catch {
      throw ConfigurationError(source: path, message: "not valid YAML or JSON")
    }
    guard let root else { throw ConfigurationError(source: path, message: "the job file is empty") }
    return try JobParser(file: path).parse(root)
  }

  /// `path` with `{job}` made the job's name, `{shard}` its shard's index K and `{shards}` the
  /// number of shards N (`all` and `1` when the run is not sharded), so that every worker of a
  /// fleet writes its own file without the engine expanding variables in arguments.
  public func expandingPlaceholders(in path: String) -> String {
    Self.expandingPlaceholders(in: path, name: name, shard: shard)
  }

  /// `path` with `{job}`, `{shard}` and `{shards}` filled in for a job named `name` run as
  /// `shard`, as ``expandingPlaceholders(in:)`` does.
  static func expandingPlaceholders(in path: String, name: String, shard: Shard?) -> String {
    path.replacingOccurrences(of: "{job}", with: name)
      .replacingOccurrences(of: "{shards}", with: shard.map { "\($0.count)" } ?? "1")
      .replacingOccurrences(of: "{shard}", with: shard.map { "\($0.index)" } ?? "all")
  }

  /// Why `path` cannot be a metrics file (`metrics:`, `--metrics`), or `nil` when it can: a
  /// metrics file is one file rewritten by each run (which keeps the last success time from
  /// the one it replaces), so `{date}` and `{time}`, which name a new file each run, are
  /// refused rather than written literally or left to fill the collector's folder.
  public static func metricsPathProblem(_ path: String) -> String? {
    guard path.contains("{date}") || path.contains("{time}") else { return nil }
    return "{date} and {time} are for reports: a metrics file is one file that each run "
      + "rewrites (node_exporter reads every file in its folder, and the last success time is "
      + "kept from the file replaced); give a fixed name ({job}, {shard} and {shards} may be in it)"
  }

  /// The largest job file read: with anchors refused, reading one costs a few times this.
  public static let maxFileSize = 1 << 20

  /// The job's own report path for a run started at `date`, placeholders filled in.
  public func reportPath(startedAt date: Date) -> String? {
    report.map { reportPath($0, startedAt: date) }
  }

  /// The report path `pattern` (the job's `report:`, `--report`) for a run started at `date`:
  /// `{job}`, `{shard}` and `{shards}` as in ``expandingPlaceholders(in:)``, `{date}` and
  /// `{time}` the start's UTC date and time, the same for a job file and the command line.
  public func reportPath(_ pattern: String, startedAt date: Date) -> String {
    let report = expandingPlaceholders(in: pattern)
    let stamp = UTCTime(date)
    let (day, time) = (stamp.dateText, stamp.compactTimeText)
    let path = report.replacingOccurrences(of: "{date}", with: day).replacingOccurrences(
      of: "{time}", with: time)
    guard path != report else { return path }
    // {time} has one-second resolution: a second run in the same second gets `-2`, `-3`...
    // rather than overwriting the first one's report.
    let url = URL(fileURLWithPath: path)
    let ext = url.pathExtension
    let stem = ext.isEmpty ? path : String(path.dropLast(ext.count + 1))
    var candidate = path
    var number = 1
    while FileManager.default.fileExists(atPath: candidate) {
      number += 1
      candidate = stem + "-\(number)" + (ext.isEmpty ? "" : "." + ext)
    }
    return candidate
  }

  static func line(of error: YamlError) -> Int? {
    switch error {
    case .scanner(_, _, let mark, _), .parser(_, _, let mark, _), .composer(_, _, let mark, _):
      return mark.line
    case .duplicatedKeysInMapping(_, let context):
      return context.mark.line
    case .reader(_, let offset?, _, let yaml):
      return yaml.utf8.prefix(offset).count { $0 == UInt8(ascii: "\n") } + 1
    default:
      return nil
    }
  }

  /// What is wrong, in the parser's words, without the file's text: Yams' own description
  /// quotes the lines around the problem (for a duplicate key, the whole mapping), and a job
  /// file's lines hold `Authorization` and `Cookie` values that must not reach a cron log.
  static func problem(of error: YamlError) -> String {
    switch error {
    case .scanner(let context, let problem, let mark, _),
      .parser(let context, let problem, let mark, _),
      .composer(let context, let problem, let mark, _):
      return (context.map { "\($0.text) at line \($0.mark.line): " } ?? "")
        + "\(problem) at line \(mark.line), column \(mark.column)"
    case .reader(let problem, _, _, _):
      return problem
    case .duplicatedKeysInMapping(let duplicates, _):
      // Keys are names, never values; shown only when they are plain.
      let keys = duplicates.sorted().map {
        $0.containsControlCharacter() || $0.utf8.count > 100 ? "(a key)" : "'\($0)'"
      }
      return "a key appears twice in one mapping: \(keys.joined(separator: ", "))"
    case .writer(let problem), .emitter(let problem), .representer(let problem):
      return problem
    case .dataCouldNotBeDecoded:
      return "not UTF-8 text"
    case .no, .memory:
      return "the parser failed"
    }
  }
}
