import Core
import Foundation

/// `imagecache report merge` (SPEC section 9): the reports of one run's shards as one report of
/// the whole run. Counts are summed, lists joined (blacklisted URLs once each), maintenance
/// passes of the same kind combined; the run starts at the earliest start, ends at the latest
/// end, and has the worst status. The shards' `verify` audits (each of its own files) make one:
/// counts summed, files and errors joined (``VerifyMerge``). The reports are read one at a time
/// and their lists streamed into the merged one: memory is that of the largest report, not of
/// all of them.
public enum ReportMerge {
  /// What the merged report says, for the exit code.
  public struct Outcome: Sendable, Equatable {
    public var status: RunReport.Status
    public var failedURLs: Int
    /// Distinct manifests and sitemaps that failed as a whole, in any shard.
    public var failedInputs = 0
    /// Files the shards' audits found bad, and entries they could not read (`verify`).
    public var badFiles = 0
    public var entriesNotRead = 0
    /// The blacklist refused every URL of the whole run: nothing was tried (exit 1, as in one
    /// run, unless URL failures are allowed).
    public var refusedEverything = false
    /// Files the shards' maintenance passes meant to remove and could not (exit 1).
    public var filesNotRemoved = 0
    public var files: [String]
    /// Every merged report was of a run that allowed failed URLs (`allowURLFailures`): the
    /// merge exits as those runs did, 0 for failed URLs alone.
    public var urlFailuresAllowed = false
    /// The reports that did not complete, each as `shard K of N (file): status` (or the file
    /// alone for an unsharded report), for the merge to name.
    public var unfinished: [String] = []
    /// The reports of shards that ran more than once, each as `shard K of N (file): M
    /// attempts`, for the merge to name.
    public var rerun: [String] = []
    /// Every attempt of every shard: the night's traffic.
    public var night = RunReport.Night()
  }

  /// Merges the reports at `paths` into `files` (and stdout with `standardOutput`). Shard
  /// reports must be one fleet run's shards 0 to N-1, each once (``fleetProblems(_:)``):
  /// otherwise the merge is refused, or with `partial` made with the status `incomplete`.
  public static func merge(
    _ paths: [String], into files: [String], standardOutput: Bool, partial: Bool = false
  ) throws -> Outcome {
    guard let firstPath = paths.first else {
      throw ConfigurationError(source: "report merge", message: "no reports to merge")
    }
    // First the totals, so that the merged report can start with them.
    var first: RunReport?
    var startedAt = Date.distantFuture
    var finishedAt = Date.distantPast
    var status = RunReport.Status.completed
    var counts: PrefetchCounts?
    var warnings: [String] = []
    var errors: [String] = []
    var sources: [RunReport.MergedReport] = []
    var members: [FleetMember] = []
    var urlFailuresAllowed = true
    // The URLs the shards' manifests list: a shard that got through its own listed what it
    // did. Written when a shard that did not finish counted them, for the URLs not tried.
    var urlsListed = 0
    var countsListed = false
    // Every attempt's traffic; the counts above are each shard's last attempt's.
    var night = RunReport.Night()
    var verify = VerifyMerge()
    for path in paths {
      let report = try RunReport.load(path: path)
      for attempt in report.attempts {
        night.attempts = try total(night.attempts, 1, "night.attempts", adding: path)
        night.downloaded = try total(
          night.downloaded, attempt.downloaded, "night.downloaded", adding: path)
        night.bytesDownloaded = try total(
          night.bytesDownloaded, attempt.bytesDownloaded, "night.bytesDownloaded", adding: path)
      }
      urlFailuresAllowed = urlFailuresAllowed && report.allowURLFailures == true
      sources.append(RunReport.MergedReport(file: path, report: report))
      members.append(FleetMember(path: path, report: report))
      if let first, first.cache != report.cache {
        throw ConfigurationError(
          source: path,
          message: "is a report of the cache \(report.cache.path) (\(report.cache.namespace)), "
            + "not \(first.cache.path) (\(first.cache.namespace)): not shards of one run")
      }
      first = first ?? report
      startedAt = min(startedAt, report.startedAt)
      finishedAt = max(finishedAt, report.finishedAt)
      status = worse(status, report.status)
      if let prefetch = report.prefetch {
        counts = try sum(counts ?? PrefetchCounts(), prefetch.counts, adding: path)
      }
      if let section = report.verify { try verify.add(section, of: path) }
      countsListed = countsListed || report.urlsListed != nil
      urlsListed = try total(
        urlsListed, report.urlsListed ?? report.prefetch?.total ?? 0, "urlsListed", adding: path)
      warnings += report.warnings.map { "\(path): \($0)" }
      if let error = report.error { errors.append("\(path): \(error)") }
    }
    guard let first else { throw ConfigurationError(source: firstPath, message: "no report") }
    let problems = fleetProblems(members)
    if !problems.isEmpty {
      guard partial else {
        throw ConfigurationError(
          source: "report merge",
          message: "not one whole fleet run: " + problems.joined(separator: "; ")
            + " (--partial merges them anyway, marked incomplete)")
      }
      status = worse(status, .incomplete)
      warnings += problems.map { "incomplete: \($0)" }
    }
    warnings += verify.differences
    let runIDs = Set(members.map(\.runID))
    let cache = CacheLocation(directory: first.cache.path, namespace: first.cache.namespace)
    let writer = try ReportWriter(
      job: first.job, location: cache, startedAt: startedAt, files: files,
      standardOutput: standardOutput, runID: runIDs.count == 1 ? runIDs.first! : nil,
      allowsURLFailures: urlFailuresAllowed)
    if let section = verify.section {
      try writer.beginVerify(level: section.level, repair: section.repair, dryRun: section.dryRun)
      writer.verifyCounts = section.counts
    }

    // Then the lists, one report at a time.
    var recorder = writer.prefetchRecorder
    var blacklisted: Set<String> = []
    // Every shard reads every input: one that failed is in each shard's report.
    var inputFailures: Set<String> = []
    var passes: [(key: String, sink: PassSink)] = []
    // How many reports have each pass: a cache size is summed only from all of them.
    var reportsWithPass: [String: Int] = [:]
    for path in paths {
      let report = try RunReport.load(path: path)
      if let prefetch = report.prefetch {
        for failure in prefetch.failures { recorder.recordFailure(failure) }
        for download in prefetch.downloads { recorder.recordDownload(download) }
        for variant in prefetch.variants { recorder.recordVariant(variant) }
        for line in prefetch.lineErrors { recorder.recordLineError(line) }
        for input in prefetch.inputFailures where inputFailures.insert(input).inserted {
          recorder.recordInputFailure(input)
        }
        for url in prefetch.blacklistedURLs where blacklisted.insert(url).inserted {
          writer.recordBlacklisted(url)
        }
      }
      if let section = report.verify {
        for file in section.files { writer.recordVerified(file) }
        for error in section.errors { writer.recordVerifyError(error) }
      }
      for pass in report.maintenance {
        let key = "\(pass.pass.rawValue) \(pass.dryRun)"
        let sink: PassSink
        let field = "maintenance (\(pass.pass.rawValue))"
        if let known = passes.first(where: { $0.key == key }) {
          sink = known.sink
          // Each shard's size is of its own files; a figure one report lacks leaves the sum out.
          func added(_ sum: UInt64?, _ own: UInt64?, _ name: String) throws -> UInt64? {
            guard let sum, let own else { return nil }
            return try total(sum, own, "\(field).\(name)", adding: path)
          }
          sink.summary.cacheBytesBefore = try added(
            sink.summary.cacheBytesBefore, pass.cacheBytesBefore, "cacheBytesBefore")
          sink.summary.cacheBytesAfter = try added(
            sink.summary.cacheBytesAfter, pass.cacheBytesAfter, "cacheBytesAfter")
          // The limits the passes ran with, when they all ran with the same.
          if sink.summary.limits != pass.limits { sink.summary.limits = nil }
        } else {
          sink = try writer.beginPass(pass.pass, dryRun: pass.dryRun, listsActions: true)
          passes.append((key, sink))
          sink.summary.cacheBytesBefore = pass.cacheBytesBefore
          sink.summary.cacheBytesAfter = pass.cacheBytesAfter
          sink.summary.limits = pass.limits
        }
        reportsWithPass[key, default: 0] += 1
        for action in pass.actions { sink.keep(action) }
        for error in pass.errors { sink.keep(error: error) }
        let summary = sink.summary
        sink.summary.filesRemoved = try total(
          summary.filesRemoved, pass.filesRemoved, "\(field).filesRemoved", adding: path)
        sink.summary.filesMoved = try total(
          summary.filesMoved, pass.filesMoved, "\(field).filesMoved", adding: path)
        sink.summary.bytesFreed = try total(
          summary.bytesFreed, pass.bytesFreed, "\(field).bytesFreed", adding: path)
        sink.summary.filesNotRemoved = try total(
          summary.filesNotRemoved, pass.filesNotRemoved ?? 0, "\(field).filesNotRemoved",
          adding: path)
        sink.summary.filesRefetched = try total(
          summary.filesRefetched, pass.filesRefetched ?? 0, "\(field).filesRefetched",
          adding: path)
        sink.summary.filesNotRefetched = try total(
          summary.filesNotRefetched, pass.filesNotRefetched ?? 0, "\(field).filesNotRefetched",
          adding: path)
        sink.summary.errorCount = try total(
          summary.errorCount, pass.errors.count, "\(field).errors", adding: path)
      }
    }
    // The shards' sizes add up to the cache's only when the reports are one whole fleet run's
    // shards (or a single report), each with the pass: a partial merge, or runs that each
    // measured the whole cache, would give a wrong number, so none is written.
    let partitionsCache =
      problems.isEmpty && (paths.count == 1 || members.allSatisfy { $0.shard != nil })
    for (key, sink) in passes {
      if !partitionsCache || reportsWithPass[key] != paths.count {
        sink.summary.cacheBytesBefore = nil
        sink.summary.cacheBytesAfter = nil
      }
      writer.endPass(sink)
    }
    counts?.inputsFailed = inputFailures.count
    try writer.finish(
      status: status, finishedAt: finishedAt, prefetch: counts, warnings: warnings,
      error: errors.isEmpty ? nil : errors.joined(separator: "; "), mergedFrom: sources,
      urlsListed: countsListed ? urlsListed : nil,
      night: counts == nil ? nil : night)
    return Outcome(
      status: status, failedURLs: counts?.failed ?? 0, failedInputs: inputFailures.count,
      badFiles: verify.section?.counts.bad ?? 0,
      entriesNotRead: verify.section?.counts.errors ?? 0,
      refusedEverything: counts.map(BlacklistRefusal.refusedEverything) ?? false,
      filesNotRemoved: passes.reduce(0) {
        $0 + ($1.sink.summary.dryRun ? 0 : $1.sink.summary.filesNotRemoved)
      }, files: writer.files,
      urlFailuresAllowed: urlFailuresAllowed,
      unfinished: members.filter { $0.status != .completed }.map(\.described),
      rerun: zip(members, sources).compactMap { member, source in
        guard let attempts = source.attempts, attempts > 1 else { return nil }
        return "\(member.name): \(attempts) attempts"
      }, night: night)
  }

  /// failed, then interrupted, then incomplete, then completed.
  static func worse(_ a: RunReport.Status, _ b: RunReport.Status) -> RunReport.Status {
    let order: [RunReport.Status] = [.completed, .incomplete, .interrupted, .failed]
    return order.firstIndex(of: a)! >= order.firstIndex(of: b)! ? a : b
  }

  /// The counts of two shards together, the second from the report at `path`. The duration is
  /// the longer one (shards run side by side); entries of other shards are nobody's once every
  /// shard is in. A sum past what a report holds is refused, naming the report that took it
  /// there.
  static func sum(_ a: PrefetchCounts, _ b: PrefetchCounts, adding path: String)
    throws(ConfigurationError) -> PrefetchCounts
  {
    var sum = PrefetchCounts()
    let fields: [(String, WritableKeyPath<PrefetchCounts, Int>)] = [
      ("total", \.total), ("memoryHits", \.memoryHits), ("diskHits", \.diskHits),
      ("downloaded", \.downloaded), ("notModified", \.notModified), ("failed", \.failed),
      ("blacklisted", \.blacklisted), ("skipped", \.skipped), ("derived", \.derived),
    ]
    for (name, field) in fields {
      sum[keyPath: field] = try total(a[keyPath: field], b[keyPath: field], name, adding: path)
    }
    sum.bytesDownloaded = try total(
      a.bytesDownloaded, b.bytesDownloaded, "bytesDownloaded", adding: path)
    sum.durationSeconds = max(a.durationSeconds, b.durationSeconds)
    // By host: every shard's pauses, and the longest wait (shards wait side by side).
    var backoffs = Dictionary(uniqueKeysWithValues: a.hostBackoffs.map { ($0.host, $0) })
    for backoff in b.hostBackoffs {
      var merged = backoffs[backoff.host] ?? HostBackoff(host: backoff.host, pauses: 0, seconds: 0)
      merged.pauses = try total(
        merged.pauses, backoff.pauses, "hostBackoffs (\(backoff.host)).pauses", adding: path)
      merged.seconds = max(merged.seconds, backoff.seconds)
      backoffs[backoff.host] = merged
    }
    sum.hostBackoffs = backoffs.keys.sorted().map { backoffs[$0]! }
    // By host: the fleet's limit there is its shards' together, each figure summed.
    var limits = Dictionary(uniqueKeysWithValues: a.hostLimits.map { ($0.host, $0) })
    for limit in b.hostLimits {
      guard var merged = limits[limit.host] else {
        limits[limit.host] = limit
        continue
      }
      let field = "hostLimits (\(limit.host))"
      let figures: [(String, WritableKeyPath<HostLimit, Int>)] = [
        ("final", \.final), ("min", \.min), ("median", \.median), ("max", \.max),
      ]
      for (name, figure) in figures {
        merged[keyPath: figure] = try total(
          merged[keyPath: figure], limit[keyPath: figure], "\(field).\(name)", adding: path)
      }
      for (cause, cuts) in limit.cuts {
        merged.cuts[cause] = try total(
          merged.cuts[cause] ?? 0, cuts, "\(field).cuts.\(cause)", adding: path)
      }
      // Held only where every shard's limit was: one shard held under 6 beside one free to
      // climb to 16 was no fleet held under 6.
      if let held = merged.heldUnder, let more = limit.heldUnder {
        merged.heldUnder = try total(held, more, "\(field).heldUnder", adding: path)
      } else {
        merged.heldUnder = nil
      }
      limits[limit.host] = merged
    }
    sum.hostLimits = limits.keys.sorted().map { limits[$0]! }
    return sum
  }

  /// `a + b`, or an error naming the report at `path` whose figure took the sum out of range.
  static func total<T: FixedWidthInteger>(_ a: T, _ b: T, _ field: String, adding path: String)
    throws(ConfigurationError) -> T
  {
    guard let total = RunReport.sum(a, b) else {
      throw ConfigurationError(
        source: path, field: field,
        message: "adding \(b) to the other reports' \(a) passes \(RunReport.largestCount), the "
          + "largest a report holds")
    }
    return total
  }
}

extension ReportMerge {
  /// The `verify` sections of a fleet run's shards as one audit of the whole cache (issue 45):
  /// each shard audits its own files (shard 0 also those no shard owns), so the counts are
  /// summed and equal one unsharded audit's. The files and errors are joined in the order of
  /// the reports, each shard's in its walk's order (sorting them would hold every shard's list
  /// at once). The shards of one run share their settings; when they do not, the merged level
  /// is the shallowest (every file was checked at least that deep), the repair the first
  /// report's, the dry run only if every shard's was, and each difference is a warning.
  struct VerifyMerge {
    /// The merged section's settings and counts; its lists are streamed from the reports.
    private(set) var section: VerifyReport?
    private var levels: [(VerifyLevel, String)] = []
    private var repairs: [(VerifyRepair, String)] = []

    mutating func add(_ shard: VerifyReport, of path: String) throws(ConfigurationError) {
      levels.append((shard.level, path))
      repairs.append((shard.repair, path))
      guard var merged = section else {
        section = VerifyReport(
          level: shard.level, repair: shard.repair, dryRun: shard.dryRun, counts: shard.counts)
        return
      }
      let order = VerifyLevel.allCases
      if order.firstIndex(of: shard.level)! < order.firstIndex(of: merged.level)! {
        merged.level = shard.level
      }
      merged.dryRun = merged.dryRun && shard.dryRun
      let fields: [(String, WritableKeyPath<VerifyCounts, Int>)] = [
        ("files", \.files), ("ok", \.ok), ("note", \.note), ("bad", \.bad), ("errors", \.errors),
      ]
      for (name, field) in fields {
        merged.counts[keyPath: field] = try total(
          merged.counts[keyPath: field], shard.counts[keyPath: field], "verify.counts.\(name)",
          adding: path)
      }
      section = merged
    }

    /// A warning for each setting the shards' audits did not share.
    var differences: [String] {
      var warnings: [String] = []
      if Set(levels.map(\.0)).count > 1, let section {
        warnings.append(
          "verify: the shards checked at different levels ("
            + levels.map { "\($0.0.rawValue) in \($0.1)" }.joined(separator: ", ")
            + "): the merged level is \(section.level.rawValue), the shallowest")
      }
      if Set(repairs.map(\.0)).count > 1, let section {
        warnings.append(
          "verify: the shards repaired differently ("
            + repairs.map { "\($0.0.rawValue) in \($0.1)" }.joined(separator: ", ")
            + "): the merged repair is \(section.repair.rawValue), the first report's; "
            + "the repair pass says what each did")
      }
      return warnings
    }
  }

  /// What a report says of its place in a fleet run.
  struct FleetMember {
    var path: String
    var shard: RunReport.ShardIdentity?
    var runID: String?
    var status: RunReport.Status
    var manifestEntries: Int?

    /// `shard K of N (file)`, or `file` for an unsharded report.
    var name: String { shard.map { "shard \($0.index) of \($0.count) (\(path))" } ?? path }

    /// `shard K of N (file): status`, or `file: status` for an unsharded report.
    var described: String { "\(name): \(status.rawValue)" }

    init(path: String, report: RunReport) {
      self.path = path
      shard = report.shard
      runID = report.runID
      status = report.status
      manifestEntries = report.manifestEntries?.total
    }
  }

  /// Why shard reports are not one whole fleet run, each problem naming the reports: a shard
  /// missing or repeated, different numbers of shards or run IDs, shards that read different
  /// numbers of manifest entries (an empty or truncated manifest on one worker). Entries are
  /// compared between completed shards only: a failed or interrupted one stopped reading, and
  /// its status already marks the merge. Reports without a shard (unsharded runs) are not
  /// checked.
  static func fleetProblems(_ members: [FleetMember]) -> [String] {
    let sharded = members.filter { $0.shard != nil }
    guard !sharded.isEmpty else { return [] }
    var problems: [String] = []
    let unsharded = members.filter { $0.shard == nil }
    if !unsharded.isEmpty {
      problems.append("not a shard's report (no shard): " + list(unsharded.map(\.path)))
    }
    let counts = grouped(sharded) { "\($0.shard!.count)" }
    if counts.count > 1 {
      problems.append(
        "different numbers of shards: "
          + counts.map { "\($0.key) in \(list($0.paths))" }.joined(separator: "; "))
    } else if let count = sharded.first?.shard?.count {
      let byIndex = Dictionary(grouping: sharded) { $0.shard!.index }
      let missing = (0..<count).filter { byIndex[$0] == nil }
      if !missing.isEmpty {
        problems.append(
          "missing shard\(missing.count == 1 ? "" : "s") "
            + missing.map(String.init).joined(separator: ", ") + " of \(count)")
      }
      for (index, reports) in byIndex.sorted(by: { $0.key < $1.key }) where reports.count > 1 {
        problems.append("shard \(index) of \(count) repeated: \(list(reports.map(\.path)))")
      }
    }
    let runs = grouped(members) { $0.runID.map { "runID \($0.debugDescription)" } ?? "no runID" }
    if runs.count > 1 {
      problems.append(
        "different runs: "
          + runs.map { "\($0.key) in \(list($0.paths))" }.joined(separator: "; "))
    }
    let entries = grouped(sharded.filter { $0.status == .completed && $0.manifestEntries != nil }) {
      "\($0.manifestEntries!)"
    }
    if entries.count > 1 {
      problems.append(
        "shards read different numbers of manifest entries: "
          + entries.map { "\($0.key) in \(list($0.paths))" }.joined(separator: "; "))
    }
    return problems
  }

  /// The members by `key`, in the order each key first appears.
  private static func grouped(_ members: [FleetMember], by key: (FleetMember) -> String)
    -> [(key: String, paths: [String])]
  {
    var groups: [(key: String, paths: [String])] = []
    for member in members {
      let name = key(member)
      if let index = groups.firstIndex(where: { $0.key == name }) {
        groups[index].paths.append(member.path)
      } else {
        groups.append((name, [member.path]))
      }
    }
    return groups
  }

  private static func list(_ paths: [String]) -> String { paths.joined(separator: ", ") }
}

extension RunReport {
  /// The largest report file `load(path:)` reads: far above a night's report with every URL
  /// failed, and a bound on the memory a wrong path can take.
  public static let maxFileSize = 1 << 30

  /// The report in the file at `path`; a file that cannot be read, is not a report, is of a
  /// schema this version does not know or holds a figure out of range is a
  /// ``ConfigurationError`` naming it (`report merge`, `report html`).
  public static func load(path: String) throws(ConfigurationError) -> RunReport {
    let data: Data
    do {
      data = try FileSystem.regularFileContents(atPath: path, limit: maxFileSize)
    } catch {
      throw ConfigurationError(
        source: path, message: "cannot read the report: \(error.namingWorkingDirectory())")
    }
    // The version first: a later schema's report may not decode as this one at all. One that
    // does not decode even this far is refused below, with the full decode's error.
    struct Version: Decodable { var schemaVersion: Int? }
    if let version = (try? JSONDecoder().decode(Version.self, from: data))?.schemaVersion,
      !knownSchemaVersions.contains(version)
    {
      throw ConfigurationError(
        source: path, field: "schemaVersion", message: unknownSchemaMessage(version))
    }
    var report: RunReport
    do {
      report = try RunReport.decode(data)
    } catch {
      throw ConfigurationError(source: path, message: "not an imagecache report: \(error)")
    }
    if let (field, message) = report.rangeProblem() {
      throw ConfigurationError(source: path, field: field, message: message)
    }
    report.absorbClockStep()
    return report
  }
}

extension RunReport {
  /// The attempts before this one of shard `shard` of the fleet run `runID` (issue 40, items 4
  /// and 5): a rerun with the same run ID writes its report where the earlier attempt wrote
  /// its, so a report found at one of `files` that is of the same shard of the same run is an
  /// earlier attempt, carried forward with its own earlier ones. Without a run ID or a shard
  /// nothing is: a report of another run (last night's), or one that is not a report at all, is
  /// replaced as before, not counted.
  public static func previousAttempts(in files: [String], runID: String?, shard: Shard?)
    -> [Attempt]
  {
    guard let runID, let shard else { return [] }
    for file in files {
      // Not found, not a regular file, not a report: nothing to carry, and the run replaces it.
      guard let report = try? load(path: file), report.runID == runID,
        report.shard == ShardIdentity(shard)
      else { continue }
      return report.attempts
    }
    return []
  }
}
