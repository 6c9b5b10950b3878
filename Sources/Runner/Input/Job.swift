import Core
import Foundation
import Maintenance
import Prefetcher
import Yams

/// A maintenance pass a job asks for, in the order they run.
public enum JobPass: String, Sendable, CaseIterable {
  case migrate
  case expire
  case trim
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
  /// The passes to run: migrate before the prefetch, expire and trim after it.
  public var passes: [JobPass] = [.expire, .trim]
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

  public init(name: String, file: String? = nil, location: CacheLocation) {
    self.name = name
    self.file = file
    self.location = location
  }

  public static let knownKeys = [
    "name", "cache", "manifests", "sitemap", "shard", "options", "context", "prefetch",
    "maintenance", "migrate", "report", "metrics", "allowURLFailures",
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
      var line = rawLine.trimmingCharacters(in: .whitespaces)
      if line.hasPrefix("\u{FEFF}") { line.removeFirst() }
      if line.isEmpty || line.hasPrefix("#") || line == "---" || line == "{" { continue }
      if line.hasPrefix("{") { line = line.dropFirst().trimmingCharacters(in: .whitespaces) }
      let key = line.prefix { $0 != ":" }.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
      return line.contains(":") && knownKeys.contains(key)
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
      throw ConfigurationError(source: path, message: "cannot read the job file: \(error)")
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
    path.replacingOccurrences(of: "{job}", with: name)
      .replacingOccurrences(of: "{shards}", with: shard.map { "\($0.count)" } ?? "1")
      .replacingOccurrences(of: "{shard}", with: shard.map { "\($0.index)" } ?? "all")
  }

  /// The largest job file read: with anchors refused, reading one costs a few times this.
  public static let maxFileSize = 1 << 20

  /// The report path for a run started at `date`, placeholders filled in.
  public func reportPath(startedAt date: Date) -> String? {
    guard let report = report.map(expandingPlaceholders) else { return nil }
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

/// Walks the node tree of a job file, so that every error can say where it is.
struct JobParser {
  let file: String
  var directory: String { (file as NSString).deletingLastPathComponent }

  func fail(_ node: Node?, _ field: String, _ message: String) -> ConfigurationError {
    ConfigurationError(
      source: file, line: node?.mark?.line, field: field.isEmpty ? nil : field, message: message)
  }

  func parse(_ root: Node) throws(ConfigurationError) -> Job {
    guard let top = root.mapping else {
      throw fail(root, "", "a job file is a mapping of settings")
    }
    try checkKeys(top, known: Job.knownKeys, prefix: "")
    let name =
      try string(top["name"], "name")
      ?? ((file as NSString).lastPathComponent as NSString).deletingPathExtension
    // The name becomes part of paths (`{job}` in report and metrics paths, the cron wrapper's
    // files): one path component, as a namespace (SPEC section 10).
    if let problem = CacheLocation.pathComponentProblem(name) {
      throw fail(
        top["name"] ?? root, "name",
        (top["name"] == nil ? "the job's name, taken from its file name, " : "")
          + "becomes a file name in {job} paths, and \(problem)")
    }

    guard let cacheNode = top["cache"], let cache = cacheNode.mapping else {
      throw fail(top["cache"] ?? root, "cache", "required: a mapping with at least 'directory'")
    }
    try checkKeys(
      cache,
      known: ["directory", "namespace", "maxDiskAge", "maxDiskSize", "expireType", "maxDelete"],
      prefix: "cache.")
    guard let directory = try string(cache["directory"], "cache.directory") else {
      throw fail(cacheNode, "cache.directory", "required")
    }
    let namespace =
      try string(cache["namespace"], "cache.namespace") ?? CacheLocation.defaultNamespace
    if let problem = CacheLocation.namespaceProblem(namespace) {
      throw fail(cache["namespace"], "cache.namespace", problem)
    }
    var job = Job(
      name: name, file: file,
      location: CacheLocation(directory: resolve(directory), namespace: namespace))
    if let age = cache["maxDiskAge"] {
      job.cleanup.maxDiskAge = try duration(age, .maxDiskAge)
    }
    if let size = cache["maxDiskSize"] {
      job.cleanup.maxDiskSize = try byteCount(size, "cache.maxDiskSize")
    }
    if let type = cache["expireType"] {
      job.cleanup.expireType = try choice(type, "cache.expireType", ExpireType.self)
    }
    if let limit = cache["maxDelete"] {
      guard let text = limit.scalar?.string, let parsed = DeletionLimit(parsing: text) else {
        throw fail(limit, "cache.maxDelete", "expected a number of files (500) or a share (10%)")
      }
      job.cleanup.maxDelete = parsed
    }

    if let manifests = top["manifests"] {
      guard let list = manifests.sequence, !list.isEmpty else {
        throw fail(manifests, "manifests", "expected a list of manifest files")
      }
      for (index, item) in list.enumerated() {
        guard let path = item.string else {
          throw fail(item, "manifests[\(index)]", "expected a file path or an http(s) URL")
        }
        let named = ManifestItems.isRemote(path) || path == ManifestItems.standardInput
        job.manifests.append(named ? path : resolve(path))
      }
    }
    if let sitemap = top["sitemap"] {
      guard let mapping = sitemap.mapping else {
        throw fail(sitemap, "sitemap", "expected a mapping (pages, order)")
      }
      try checkKeys(mapping, known: ["pages", "order"], prefix: "sitemap.")
      if let pages = mapping["pages"] {
        guard let value = pages.bool else {
          throw fail(pages, "sitemap.pages", "expected true or false")
        }
        job.sitemap.pages = value
      }
      if let order = mapping["order"] {
        job.sitemap.order = try choice(order, "sitemap.order", SitemapOrder.self)
      }
    }
    if let shard = top["shard"] {
      guard let text = shard.string, let value = Shard(text) else {
        throw fail(shard, "shard", "expected K/N: shard K (from 0) of N, such as 0/4")
      }
      job.shard = value
    }
    if let options = top["options"] {
      let names = try strings(options, "options")
      let parsed = try ImageOptions.parse(
        names, source: file, line: options.mark?.line, field: "options")
      job.options = parsed.0
      job.warnings += parsed.warnings
    }
    if let context = top["context"] {
      guard case .object(let object) = try json(context) else {
        throw fail(context, "context", "expected a mapping of context keys")
      }
      job.context = try ImageContext().applying(object, source: file, line: context.mark?.line)
    }
    if let prefetch = top["prefetch"] { try apply(prefetch, to: &job.prefetch) }
    if let maintenance = top["maintenance"] {
      job.passes = try strings(maintenance, "maintenance").map { name throws(ConfigurationError) in
        guard let pass = JobPass(rawValue: name) else {
          throw fail(
            maintenance, "maintenance",
            "unknown pass \(name.debugDescription) (known: migrate, expire, trim)")
        }
        return pass
      }
    }
    if let migrate = top["migrate"] {
      guard let mapping = migrate.mapping else {
        throw fail(migrate, "migrate", "expected a mapping")
      }
      try checkKeys(mapping, known: ["from"], prefix: "migrate.")
      job.migrateFrom = try string(mapping["from"], "migrate.from").map(resolve)
    }
    if let allow = top["allowURLFailures"] {
      guard let value = allow.bool else {
        throw fail(allow, "allowURLFailures", "expected true or false")
      }
      job.allowURLFailures = value
    }
    job.report = try string(top["report"], "report").map(resolve)
    job.metrics = try string(top["metrics"], "metrics").map(resolve)
    return job
  }

  /// The `prefetch:` settings, over the defaults of ``PrefetchConfiguration``.
  func apply(_ node: Node, to limits: inout PrefetchConfiguration) throws(ConfigurationError) {
    guard let mapping = node.mapping else { throw fail(node, "prefetch", "expected a mapping") }
    try checkKeys(
      mapping,
      known: [
        "concurrency", "perHostConcurrency", "perHostStreams", "timeout", "deadline",
        "maxResponseSize", "retries",
        "validate", "maxPixels", "blacklistTTL", "fleetPerHostConcurrency", "caBundle", "proxy",
        "noProxy", "rate", "maxBandwidth", "hostBackoff",
      ],
      prefix: "prefetch.")
    if let value = mapping["concurrency"] {
      limits.concurrency = try count(value, .concurrency)
    }
    if let value = mapping["perHostConcurrency"] {
      limits.perHostConcurrency = try count(value, .perHostConcurrency)
    }
    if let value = mapping["perHostStreams"] {
      limits.perHostStreams = try count(value, .perHostStreams)
    }
    if let value = mapping["fleetPerHostConcurrency"] {
      limits.fleetPerHostConcurrency = try count(value, .fleetPerHostConcurrency)
    }
    if let value = mapping["retries"] {
      limits.retries = try count(value, .retries)
    }
    if let value = mapping["timeout"] {
      limits.timeout = try duration(value, .timeout)
    }
    if let value = mapping["deadline"] {
      limits.deadline = try duration(value, .deadline)
    }
    if let value = mapping["maxResponseSize"] {
      limits.maxResponseSize = try byteCount(value, "prefetch.maxResponseSize")
    }
    if let value = mapping["validate"] {
      limits.validation = try choice(value, "prefetch.validate", ValidationLevel.self)
    }
    if let value = mapping["maxPixels"] {
      limits.maxPixels = try count(value, .maxPixels)
    }
    if let value = mapping["blacklistTTL"] {
      limits.blacklistTTL = try duration(value, .blacklistTTL)
    }
    if let value = mapping["rate"] {
      limits.requestsPerSecondPerHost = try unit(value, "prefetch.rate", parseRequestRate)
    }
    if let value = mapping["maxBandwidth"] {
      limits.maxBytesPerSecond = try unit(value, "prefetch.maxBandwidth", parseBandwidth)
    }
    if let value = mapping["hostBackoff"] {
      guard let enabled = value.bool else {
        throw fail(value, "prefetch.hostBackoff", "expected true or false")
      }
      limits.hostBackoff = enabled
    }
    try apply(mapping, to: &limits.connection)
  }

  /// `prefetch.caBundle` (relative to the job file), `prefetch.proxy` and `prefetch.noProxy`
  /// (text, or a list of hosts).
  func apply(_ mapping: Node.Mapping, to connection: inout Connection) throws(ConfigurationError) {
    if let value = mapping["caBundle"], let path = try string(value, "prefetch.caBundle") {
      let resolved = resolve(path)
      if let problem = Connection.caBundleProblem(resolved) {
        throw fail(value, "prefetch.caBundle", problem)
      }
      connection.caBundle = resolved
    }
    if let value = mapping["proxy"], let proxy = try string(value, "prefetch.proxy") {
      if let problem = Connection.proxyProblem(proxy) {
        throw fail(value, "prefetch.proxy", problem)
      }
      connection.proxy = proxy
    }
    if let value = mapping["noProxy"] {
      let hosts = try strings(value, "prefetch.noProxy").joined(separator: ",")
      if let problem = Connection.noProxyProblem(hosts) {
        throw fail(value, "prefetch.noProxy", problem)
      }
      connection.noProxy = hosts
    }
  }

  /// A value in a unit (a rate, a bandwidth) read by `parse`, whose error says what is
  /// expected.
  func unit<T>(_ node: Node, _ field: String, _ parse: (String) throws(UnitParseError) -> T)
    throws(ConfigurationError) -> T
  {
    do {
      return try parse(node.string ?? "")
    } catch {
      throw fail(node, field, error.description)
    }
  }

  func checkKeys(_ mapping: Node.Mapping, known: [String], prefix: String)
    throws(ConfigurationError)
  {
    for (key, _) in mapping {
      guard let name = key.string, known.contains(name) else {
        throw fail(
          key, prefix + (key.string ?? "?"),
          "unknown setting (known: \(known.joined(separator: ", ")))")
      }
    }
  }

  func string(_ node: Node?, _ field: String) throws(ConfigurationError) -> String? {
    guard let node else { return nil }
    guard case .scalar(let scalar) = node, !scalar.string.isEmpty else {
      throw fail(node, field, "expected text")
    }
    return scalar.string
  }

  func strings(_ node: Node, _ field: String) throws(ConfigurationError) -> [String] {
    if case .scalar = node, let single = node.string { return [single] }
    guard let list = node.sequence else { throw fail(node, field, "expected a list") }
    var result: [String] = []
    for item in list {
      guard let text = item.string else { throw fail(item, field, "expected text") }
      result.append(text)
    }
    return result
  }

  /// A whole number that `setting` takes; anything else (a fraction, text, a number past 64
  /// bits) is an error that states the range, in the command line's words.
  func count(_ node: Node, _ setting: NumericSetting) throws(ConfigurationError) -> Int {
    do {
      return try setting.check(count: node.int, text: node.string ?? "")
    } catch {
      throw fail(node, setting.field, error.description)
    }
  }

  func duration(_ node: Node, _ setting: NumericSetting) throws(ConfigurationError)
    -> TimeInterval
  {
    guard let text = node.string else {
      throw fail(node, setting.field, "expected a duration such as 30s, 15m, 12h or 7d")
    }
    do {
      return try setting.check(seconds: try parseDurationValue(text), text: text)
    } catch {
      throw fail(node, setting.field, error.description)
    }
  }

  func byteCount(_ node: Node, _ field: String) throws(ConfigurationError) -> UInt64 {
    guard let text = node.string else {
      throw fail(node, field, "expected a size such as 500MB or 2GiB")
    }
    do {
      return try parseByteCount(text)
    } catch {
      throw fail(node, field, error.description)
    }
  }

  func choice<T: RawRepresentable & CaseIterable>(_ node: Node, _ field: String, _ type: T.Type)
    throws(ConfigurationError) -> T
  where T.RawValue == String {
    guard let text = node.string, let value = T(rawValue: text) else {
      throw fail(
        node, field, "expected one of " + T.allCases.map(\.rawValue).joined(separator: ", "))
    }
    return value
  }

  /// A node as JSON, for the context (shared with manifest lines).
  func json(_ node: Node) throws(ConfigurationError) -> JSONValue {
    switch node {
    case .mapping(let mapping):
      var object: [String: JSONValue] = [:]
      for (key, value) in mapping {
        guard let name = key.string else { throw fail(key, "context", "keys must be text") }
        object[name] = try json(value)
      }
      return .object(object)
    case .sequence(let sequence):
      var array: [JSONValue] = []
      for item in sequence { array.append(try json(item)) }
      return .array(array)
    case .scalar(let scalar):
      if scalar.style == .plain {
        if ["null", "~", "Null", "NULL"].contains(scalar.string) { return .null }
        if let value = node.int { return .number(Double(value)) }
        if let value = node.float, value.isFinite { return .number(value) }
        if let value = node.bool { return .bool(value) }
      }
      return .string(scalar.string)
    case .alias:
      throw fail(node, "context", "aliases are not supported")
    }
  }

  /// `path` made absolute: relative to the job file's folder, which is relative to the working
  /// directory when the job file was named that way (reports name absolute paths).
  func resolve(_ path: String) -> String {
    let expanded = (path as NSString).expandingTildeInPath
    guard !expanded.hasPrefix("/") else { return expanded }
    var base = directory
    if !base.hasPrefix("/") {
      base = (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(base)
    }
    return URL(fileURLWithPath: (base as NSString).appendingPathComponent(expanded))
      .standardizedFileURL.path
  }
}

/// Finds YAML anchors (`&name`) and aliases (`*name`) by reading the text, not by composing it
/// (SPEC section 10). A `&` or `*` counts where a node can start (at a line's start, or after
/// `:`, `-`, `?`, `,`, `[` or `{` and spaces), outside quoted scalars and comments, so that
/// `a&b` in a URL or `*` inside quotes is text.
enum YAMLAnchorScanner {
  /// The 1-based line of the first anchor or alias, or `nil`.
  static func firstAnchorOrAlias(in text: String) -> Int? {
    let bytes = Array(text.utf8)
    var line = 1
    var atNodeStart = true
    var index = 0
    func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
    while index < bytes.count {
      let byte = bytes[index]
      switch byte {
      case UInt8(ascii: "\n"):
        line += 1
        atNodeStart = true
      case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
        break
      case UInt8(ascii: "#") where index == 0 || isSpace(bytes[index - 1]) || atNodeStart:
        while index < bytes.count && bytes[index] != UInt8(ascii: "\n") { index += 1 }
        continue
      case UInt8(ascii: "&"), UInt8(ascii: "*"):
        // (A `where` clause would apply to the last pattern only: hence the `if`.)
        if atNodeStart, index + 1 < bytes.count, !isSpace(bytes[index + 1]),
          bytes[index + 1] != UInt8(ascii: "\n")
        {
          return line
        }
        atNodeStart = false
      case UInt8(ascii: "\""), UInt8(ascii: "'"):
        guard atNodeStart else {
          atNodeStart = false
          break
        }
        // A quoted scalar, possibly over several lines; `\"` escapes in double quotes, `''` in
        // single quotes.
        index += 1
        while index < bytes.count {
          if bytes[index] == UInt8(ascii: "\n") { line += 1 }
          if byte == UInt8(ascii: "\"") && bytes[index] == UInt8(ascii: "\\") {
            index += 2
            continue
          }
          if bytes[index] == byte {
            if byte == UInt8(ascii: "'") && index + 1 < bytes.count && bytes[index + 1] == byte {
              index += 2
              continue
            }
            break
          }
          index += 1
        }
        atNodeStart = false
      case UInt8(ascii: ":"), UInt8(ascii: "-"), UInt8(ascii: "?"), UInt8(ascii: ","),
        UInt8(ascii: "["), UInt8(ascii: "{"):
        // An indicator when a space, a line end or a flow bracket follows (`a:b` is text).
        let next = index + 1 < bytes.count ? bytes[index + 1] : UInt8(ascii: "\n")
        atNodeStart =
          isSpace(next) || next == UInt8(ascii: "\n") || byte == UInt8(ascii: "[")
          || byte == UInt8(ascii: "{") || byte == UInt8(ascii: ",")
      default:
        atNodeStart = false
      }
      index += 1
    }
    return nil
  }
}
