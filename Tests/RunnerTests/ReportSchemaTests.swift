import Core
import Foundation
import Runner
import TestSupport
import XCTest

/// The report is declared three times (issue 43 item 3): the `Codable` model that reads it
/// (``RunReport``), the streaming writer that writes it (``ReportWriter``) and
/// docs/report-schema.json that users read. A report with every member the writer knows is
/// written, read back through the model and written again by it: the two must be the same JSON,
/// the schema must know every member and name no member they lack, and its word lists must be
/// the model's.
final class ReportSchemaTests: XCTestCase {
  var temporary: TemporaryDirectory!

  override func setUpWithError() throws { temporary = try TemporaryDirectory() }
  override func tearDown() { temporary.remove() }

  private static let started = Date(timeIntervalSince1970: 1_700_000_000.25)

  /// A report in which every member the writer can write is present, and every list has an
  /// entry with every member of its own.
  private func fullReport() throws -> Data {
    let path = temporary.appending("report.json")
    let writer = try ReportWriter(
      job: "nightly", location: CacheLocation(directory: "/srv/cache", namespace: "ns"),
      startedAt: Self.started, files: [path], standardOutput: false, runID: "run-7",
      shard: try XCTUnwrap(Shard(index: 1, count: 4)), allowsURLFailures: true,
      commandLineSettings: [(JobSetting.concurrency.field, "8")],
      previousAttempts: [try previousAttempt()])
    var sink = writer.prefetchRecorder
    sink.recordFailure(
      FailureReport(
        url: "https://x/a.png", code: 2001, name: "invalidDownloadStatusCode", httpStatus: 404,
        message: "unacceptable HTTP status 404", attempts: 1, blacklisted: true,
        source: "urls.txt:3"))
    sink.recordDownload(
      DownloadReport(
        url: "https://x/b.jpg", bytes: 1234, info: ImageInfo(format: .jpeg, width: 4, height: 3)))
    sink.recordVariant(
      VariantReport(
        url: "https://x/b.jpg", key: "thumb", format: .png, width: 2, height: 1, bytes: 10,
        originalBytes: false, skipped: "not smaller"))
    sink.recordLineError("urls.txt:9: not a URL")
    sink.recordInputFailure("gone.txt: no such file")
    writer.recordBlacklisted("https://x/a.png")
    writer.recordPlanned(
      PlannedURL(url: "https://x/c.png", action: .download, reason: "miss", source: "urls.txt:4"))

    try writer.beginVerify(level: .structure, repair: .quarantine, dryRun: true)
    writer.recordVerified(
      VerifiedFile(
        name: "abc.png", size: 10, modifiedAt: Self.started, outcome: .bad, reason: "truncated",
        notes: ["no IEND"], url: "https://x/abc.png"))
    writer.recordVerifyError("cannot read x: Permission denied")
    var verified = VerifyCounts()
    verified.count(.bad)
    writer.verifyCounts = verified

    // First: the members of the passes' entries are read from the first that has each, and
    // only a repair's actions carry a URL and a reason.
    var repair = try writer.beginPass(.repair, dryRun: false, listsActions: true)
    repair.recordDelete(path: "ghi.png", bytes: 4096, date: Self.started)
    repair.recordRefetch(path: "abc.png", url: "https://x/abc.png", bytes: 4096)
    repair.recordNotRefetched(path: "def.png", url: "https://x/def.png", reason: "HTTP 404")
    repair.recordMove(
      from: "def.png", to: ".imagecache/quarantine/2026-11-29/def.png", bytes: 4096,
      reason: "refetch failed (HTTP 404): quarantined")
    writer.endPass(repair)
    var expire = try writer.beginPass(.expire, dryRun: false, listsActions: true)
    expire.recordDelete(path: "a/b.jpg", bytes: 4096, date: Self.started)
    expire.recordMove(from: "c.jpg", to: "d.jpg", bytes: 1)
    expire.recordError("cannot remove x: Permission denied")
    expire.summary.filesNotRemoved = 1
    expire.summary.limits = CleanupLimits(
      maxDiskAge: 604_800.5, maxDiskSize: 1_000, expireType: .changeDate)
    expire.summary.cacheBytesBefore = 8192
    expire.summary.cacheBytesAfter = 4096
    writer.endPass(expire)

    var counts = try XCTUnwrap(
      RunReport.decode(
        ReportFixture.json(counts: [
          "total": 3, "downloaded": 1, "failed": 1, "skipped": 1, "derived": 1,
          "inputsFailed": 1, "otherShards": 5, "bytesDownloaded": 1234,
        ])
      ).prefetch?.counts)
    counts.hostBackoffs = [HostBackoff(host: "https://x", pauses: 2, seconds: 1.5)]
    counts.hostLimits = [
      HostLimit(
        host: "x", final: 8, min: 4, median: 8, max: 16,
        cuts: ["queue": 3, "refused": 1, "timeout": 1], heldUnder: 17)
    ]
    var plan = PrefetchPlanCounts()
    plan.count(.download)
    let merged = try RunReport.decode(ReportFixture.json())
    var night = RunReport.Night()
    night.attempts = 2
    try writer.finish(
      status: .failed, finishedAt: Self.started.addingTimeInterval(2), prefetch: counts,
      warnings: ["w"], error: "disk full",
      mergedFrom: [RunReport.MergedReport(file: "shard-0.json", report: merged)],
      metricsErrors: ["m.prom: Permission denied"], plan: plan, urlsListed: 9, night: night)
    return try XCTUnwrap(FileManager.default.contents(atPath: path))
  }

  private func previousAttempt() throws -> RunReport.Attempt {
    RunReport.Attempt(of: try RunReport.decode(ReportFixture.json(status: "interrupted")))
  }

  /// The model's JSON of a report, dates as the writer writes them.
  private static func encode(_ report: RunReport) throws -> Data {
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .custom { date, encoder in
      let formatter = ISO8601DateFormatter()
      formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
      var container = encoder.singleValueContainer()
      try container.encode(formatter.string(from: date))
    }
    return try encoder.encode(report)
  }

  /// Where two JSON values differ, by path.
  private static func differences(_ written: Any, _ model: Any, at path: String) -> [String] {
    switch (written, model) {
    case (let written as [String: Any], let model as [String: Any]):
      return Set(written.keys).union(model.keys).sorted().flatMap { key -> [String] in
        guard let left = written[key] else { return ["\(path).\(key): only the model writes it"] }
        guard let right = model[key] else { return ["\(path).\(key): only the writer writes it"] }
        return differences(left, right, at: "\(path).\(key)")
      }
    case (let written as [Any], let model as [Any]) where written.count == model.count:
      return zip(written, model).enumerated().flatMap { index, pair in
        differences(pair.0, pair.1, at: "\(path)[\(index)]")
      }
    default:
      return (written as? NSObject)?.isEqual(model) == true
        ? [] : ["\(path): the writer's \(written), the model's \(model)"]
    }
  }

  /// The members `schema` declares that `value` lacks, by path (a list's entries together):
  /// an empty list or a missing member leaves the schema's description of it unchecked.
  private static func undeclaredByExample(_ value: Any?, _ schema: [String: Any], at path: String)
    -> [String]
  {
    if let properties = schema["properties"] as? [String: [String: Any]] {
      let object = value as? [String: Any] ?? [:]
      return properties.keys.sorted().flatMap { name -> [String] in
        guard let member = object[name] else { return ["\(path).\(name)"] }
        return undeclaredByExample(member, properties[name] ?? [:], at: "\(path).\(name)")
      }
    }
    if let items = schema["items"] as? [String: Any] {
      guard let entries = value as? [Any], let first = entries.first else { return ["\(path)[]"] }
      let objects = entries.compactMap { $0 as? [String: Any] }
      let together: Any =
        objects.isEmpty ? first : objects.reduce(into: [:]) { $0.merge($1) { old, _ in old } }
      return undeclaredByExample(together, items, at: "\(path)[]")
    }
    return []
  }

  /// Every `enum` of `schema`, by path (`$.maintenance[].pass`).
  private static func enums(in schema: [String: Any], at path: String = "$") -> [String: [String]] {
    var found: [String: [String]] = [:]
    if let values = schema["enum"] as? [Any] { found[path] = values.map { "\($0)" } }
    for (name, member) in schema["properties"] as? [String: [String: Any]] ?? [:] {
      found.merge(enums(in: member, at: "\(path).\(name)")) { $1 }
    }
    if let items = schema["items"] as? [String: Any] {
      found.merge(enums(in: items, at: "\(path)[]")) { $1 }
    }
    return found
  }

  func testTheWriterAndTheModelWriteTheSameReport() throws {
    let data = try fullReport()
    let written = try JSONSerialization.jsonObject(with: data)
    let model = try JSONSerialization.jsonObject(with: Self.encode(RunReport.decode(data)))
    XCTAssertEqual(Self.differences(written, model, at: "$"), [])
  }

  func testTheSchemaDeclaresEveryMemberOfAFullReportAndNoOther() throws {
    let report = try JSONSerialization.jsonObject(with: fullReport())
    let schema = try SchemaValidator.reportSchema()
    XCTAssertEqual(SchemaValidator.validate(report, against: schema), [])
    XCTAssertEqual(
      Self.undeclaredByExample(report, schema, at: "$"), [],
      "members the schema declares that neither the writer nor the model writes")
  }

  func testTheSchemasWordListsAreTheModels() throws {
    func words<T: CaseIterable & RawRepresentable>(_ type: T.Type) -> [String]
    where T.RawValue == String { type.allCases.map(\.rawValue) }
    let statuses = words(RunReport.Status.self)
    // A shard's own status, never a merge's `incomplete`.
    let shardStatuses = statuses.filter { $0 != RunReport.Status.incomplete.rawValue }
    let expected: [String: [String]] = [
      "$.schemaVersion": RunReport.knownSchemaVersions.map(String.init),
      "$.status": statuses,
      "$.previousAttempts[].status": shardStatuses,
      "$.mergedFrom[].status": shardStatuses,
      "$.prefetch.downloads[].format": words(ImageFormat.self),
      "$.plan.urls[].action": words(PlannedAction.self),
      "$.verify.level": words(VerifyLevel.self),
      "$.verify.repair": words(VerifyRepair.self),
      // The files a report lists: those found wanting.
      "$.verify.files[].outcome": words(VerifyOutcome.self).filter {
        $0 != VerifyOutcome.ok.rawValue
      },
      "$.maintenance[].pass": words(MaintenancePassReport.Pass.self),
      "$.maintenance[].limits.expireType": words(ExpireType.self),
      "$.maintenance[].actions[].kind": words(MaintenanceAction.Kind.self),
    ]
    let schema = Self.enums(in: try SchemaValidator.reportSchema())
    for path in Set(schema.keys).union(expected.keys).sorted() {
      XCTAssertEqual(schema[path], expected[path], "docs/report-schema.json's \(path)")
    }
  }
}
