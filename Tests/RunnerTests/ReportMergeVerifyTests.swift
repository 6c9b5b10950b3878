import Core
import Foundation
import Runner
import TestSupport
import XCTest

/// `report merge` of the shards' `verify` audits (issue 45, SPEC section 9): each shard audits
/// its own files, so the merged section is one audit of the whole cache, its counts the sums,
/// its files and errors every shard's, and the repair pass's refetches counted over the fleet.
/// The shards' reports are written by the report writer, as a run writes them.
final class ReportMergeVerifyTests: TemporaryFolderTestCase {
  private let location = CacheLocation(directory: "/var/cache/images")

  /// What one shard's audit found and repaired.
  private struct ShardAudit {
    var level = VerifyLevel.structure
    var repair = VerifyRepair.refetch
    var dryRun = false
    var counts: (ok: Int, note: Int, bad: Int, errors: Int)
    var files: [VerifiedFile]
    var errors: [String] = []
    var refetched: [String] = []
    var notRefetched: [String] = []
  }

  /// Writes shard `index` of `count`'s report with `audit` as its verify section; its path.
  private func report(_ index: Int, of count: Int, _ audit: ShardAudit?) throws -> String {
    let path = temporary.appending("shard-\(index).json")
    let writer = try ReportWriter(
      job: "night", location: location, startedAt: Date(timeIntervalSince1970: 1_800_000_000),
      files: [path], standardOutput: false, runID: "night-1",
      shard: Shard(index: index, count: count))
    if let audit {
      try writer.beginVerify(level: audit.level, repair: audit.repair, dryRun: audit.dryRun)
      var counts = VerifyCounts()
      for (outcome, number) in [
        (VerifyOutcome.ok, audit.counts.ok), (.note, audit.counts.note), (.bad, audit.counts.bad),
      ] {
        for _ in 0..<number { counts.count(outcome) }
      }
      counts.errors = audit.counts.errors
      for file in audit.files { writer.recordVerified(file) }
      for error in audit.errors { writer.recordVerifyError(error) }
      writer.verifyCounts = counts
      if !audit.refetched.isEmpty || !audit.notRefetched.isEmpty {
        var pass = try writer.beginPass(.repair, dryRun: audit.dryRun, listsActions: true)
        for name in audit.refetched {
          pass.recordRefetch(path: name, url: "https://images.example/\(name)", bytes: 4096)
        }
        for name in audit.notRefetched {
          pass.recordNotRefetched(
            path: name, url: "https://images.example/\(name)", reason: "HTTP 404")
          pass.recordMove(
            from: name, to: ".imagecache/quarantine/2027-01-15/\(name)", bytes: 4096,
            reason: "refetch failed (HTTP 404): quarantined")
        }
        writer.endPass(pass)
      }
    }
    try writer.finish(
      status: .completed, finishedAt: Date(timeIntervalSince1970: 1_800_000_600), prefetch: nil,
      warnings: [])
    return path
  }

  private func bad(_ name: String, _ reason: String) -> VerifiedFile {
    VerifiedFile(
      name: name, size: 120, modifiedAt: Date(timeIntervalSince1970: 1_790_000_000),
      outcome: .bad, reason: reason, url: "https://images.example/\(name)")
  }

  private func merge(_ paths: [String]) throws -> (ReportMerge.Outcome, RunReport) {
    let output = temporary.appending("merged.json")
    let outcome = try ReportMerge.merge(paths, into: [output], standardOutput: false)
    return (outcome, try RunReport.load(path: output))
  }

  func testTheShardsAuditsMergeIntoOneWithSummedCountsEveryFileAndTheRefetchesCounted() throws {
    let legacy = VerifiedFile(
      name: "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f.jpg?w=1", size: 300,
      modifiedAt: Date(timeIntervalSince1970: 1_790_000_000), outcome: .note,
      notes: ["a legacy SD 3/4 name"])
    let paths = [
      try report(
        0, of: 2,
        ShardAudit(
          counts: (ok: 90, note: 1, bad: 2, errors: 1),
          files: [bad("c1.jpg", "jpeg: truncated"), legacy, bad("a1.png", "png: truncated")],
          errors: ["open file: /var/cache/images/default/x: Permission denied"],
          refetched: ["c1.jpg"], notRefetched: ["a1.png"])),
      try report(
        1, of: 2,
        ShardAudit(
          counts: (ok: 70, note: 0, bad: 1, errors: 0), files: [bad("b2.gif", "empty file")],
          refetched: ["b2.gif"])),
    ]

    let (outcome, merged) = try merge(paths)

    let verify = try XCTUnwrap(merged.verify, "the merged report has the verify section")
    XCTAssertEqual(verify.level, .structure)
    XCTAssertEqual(verify.repair, .refetch)
    XCTAssertFalse(verify.dryRun)
    XCTAssertEqual(
      [verify.counts.files, verify.counts.ok, verify.counts.note, verify.counts.bad],
      [164, 160, 1, 3], "summed: one unsharded audit's")
    XCTAssertEqual(verify.counts.errors, 1)
    XCTAssertEqual(
      verify.files.map(\.name), ["c1.jpg", legacy.name, "a1.png", "b2.gif"],
      "every shard's files, in the reports' order and each shard's walk's")
    XCTAssertEqual(verify.files.last, bad("b2.gif", "empty file"), "each file as its shard said")
    XCTAssertEqual(verify.errors, ["open file: /var/cache/images/default/x: Permission denied"])
    let repair = try XCTUnwrap(merged.maintenance.first { $0.pass == .repair })
    XCTAssertEqual(merged.maintenance.count, 1, "one repair pass of the fleet")
    XCTAssertEqual(repair.filesRefetched, 2)
    XCTAssertEqual(repair.filesNotRefetched, 1)
    XCTAssertEqual(repair.filesMoved, 1)
    XCTAssertEqual(repair.actions.map(\.kind), [.refetch, .move, .refetch])
    XCTAssertEqual(outcome.badFiles, 3, "the merge exits 1 as one audit finding them would")
    XCTAssertEqual(outcome.entriesNotRead, 1, "and 4 for the entry not read")
    XCTAssertTrue(merged.warnings.isEmpty, "\(merged.warnings)")
  }

  func testShardsThatAuditedDifferentlyMergeAtTheShallowestLevelWithAWarning() throws {
    let paths = [
      try report(
        0, of: 3,
        ShardAudit(level: .full, repair: .quarantine, counts: (5, 0, 0, 0), files: [])),
      try report(
        1, of: 3,
        ShardAudit(
          level: .header, repair: .none, dryRun: true, counts: (4, 0, 1, 0),
          files: [bad("d.jpg", "jpeg: corrupt")])),
      try report(2, of: 3, nil),
    ]

    let (outcome, merged) = try merge(paths)

    let verify = try XCTUnwrap(merged.verify)
    XCTAssertEqual(verify.level, .header, "every file was checked at least this deep")
    XCTAssertEqual(verify.repair, .quarantine, "the first report's")
    XCTAssertFalse(verify.dryRun, "one shard repaired for real")
    XCTAssertEqual(verify.counts.files, 10, "a shard without an audit adds nothing")
    XCTAssertEqual(outcome.badFiles, 1)
    XCTAssertEqual(
      merged.warnings,
      [
        "verify: the shards checked at different levels (full in \(paths[0]), header in "
          + "\(paths[1])): the merged level is header, the shallowest",
        "verify: the shards repaired differently (quarantine in \(paths[0]), none in "
          + "\(paths[1])): the merged repair is quarantine, the first report's; the repair "
          + "pass says what each did",
      ])
  }

  func testReportsWithoutAnAuditMergeWithoutAVerifySection() throws {
    let (outcome, merged) = try merge([try report(0, of: 2, nil), try report(1, of: 2, nil)])

    XCTAssertNil(merged.verify)
    XCTAssertEqual(outcome.badFiles, 0)
    XCTAssertEqual(outcome.entriesNotRead, 0)
  }
}
