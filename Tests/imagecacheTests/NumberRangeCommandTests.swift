import Core
import Foundation
import TestSupport
import XCTest

/// The built binary given numbers too large, negative or contradictory (issue 27 items 1 and 7):
/// exit 2 naming the flag or file and the range, never a trap (SIGILL, exit 132, no report).
final class NumberRangeCommandTests: LoopbackTestCase {
  var cache: String!
  var manifest: String!

  override var routes: [String: Route] {
    [
      "/a.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") }
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    cache = temporary.appending("cache")
    try FileSystem.createDirectory(path: CacheLocation(directory: cache).diskCachePath)
    // One image on loopback: a timeout or a limit is used, not only parsed.
    manifest = temporary.appending("urls.txt")
    try server.url("/a.jpg").write(toFile: manifest, atomically: true, encoding: .utf8)
  }

  /// Runs the binary; a death by signal fails the test (Foundation reports the signal number as
  /// the status, which could pass for an exit code).
  private func run(_ arguments: [String], environment: [String: String]? = nil) throws
    -> CommandResult
  {
    let (process, stdout, stderr) = try ImageCacheBinary.start(arguments, environment: environment)
    let result = ImageCacheBinary.finish(process, stdout, stderr)
    XCTAssertEqual(
      process.terminationReason, .exit,
      "\(arguments) died of signal \(result.status): \(result.stderr)")
    return result
  }

  func testHugeFlagValuesAreUsageErrorsNamingTheFlagAndTheRange() throws {
    let prefetch = ["prefetch", manifest!, "--cache", cache!]
    let maintain = ["maintain", "--cache", cache!, "--dry-run"]
    let cases: [([String], String, String)] = [
      (maintain + ["--max-age", "2000000d"], "--max-age", "1000000d"),
      (maintain + ["--max-size", "1e30GB"], "--max-size", "9223372036854775807"),
      (maintain + ["--max-size", "9223372036854775808"], "--max-size", "9223372036854775807"),
      (prefetch + ["--timeout", "1e308"], "--timeout", "36500d"),
      (prefetch + ["--deadline", "1e308"], "--deadline", "36500d"),
      (prefetch + ["--blacklist-ttl", "1e308"], "--blacklist-ttl", "36500d"),
      (prefetch + ["--wait-timeout", "1e308"], "--wait-timeout", "36500d"),
      (prefetch + ["--concurrency", "4611686018427387904"], "--concurrency", "1 to 10000"),
      (prefetch + ["--per-host-concurrency", "0"], "--per-host-concurrency", "1 to 10000"),
      (
        prefetch + ["--max-per-host-concurrency", "0"], "--max-per-host-concurrency",
        "1 to 10000"
      ),
      (prefetch + ["--retries", "1000"], "--retries", "0 to 100"),
      (prefetch + ["--max-response-size", "1e30GB"], "--max-response-size", "2^63-1"),
    ]
    for (arguments, flag, range) in cases {
      let result = try run(arguments)
      XCTAssertEqual(result.status, 2, "\(arguments): \(result.stderr)")
      XCTAssertTrue(result.stderr.contains(flag), "\(arguments): \(result.stderr)")
      XCTAssertTrue(result.stderr.contains("out of range"), "\(arguments): \(result.stderr)")
      XCTAssertTrue(result.stderr.contains(range), "\(arguments): \(result.stderr)")
    }
  }

  func testAPracticallyNeverMaxAgeKeepsEveryFile() throws {
    let builder = CacheBuilder(root: CacheLocation(directory: cache).diskCachePath)
    // As old as a file date gets: 1970.
    try builder.file("old", accessTime: 0)
    let result = try run(["maintain", "--cache", cache, "--max-age", "200000d"])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(try builder.remainingFiles(), ["old"])

    let job = temporary.appending("job.yaml")
    try "cache:\n  directory: \(cache!)\n  maxDiskAge: 200000d\nmaintenance: [expire]\n".write(
      toFile: job, atomically: true, encoding: .utf8)
    let fromJob = try run(["run", job])
    XCTAssertEqual(fromJob.status, 0, fromJob.stderr)
    XCTAssertEqual(try builder.remainingFiles(), ["old"])
  }

  func testAJobFieldOutOfRangeNamesTheFileLineAndField() throws {
    let job = temporary.appending("job.yaml")
    try "cache:\n  directory: \(cache!)\nprefetch:\n  concurrency: 4611686018427387904\n".write(
      toFile: job, atomically: true, encoding: .utf8)
    let result = try run(["run", job])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(
      result.stderr.contains("\(job):4: field 'prefetch.concurrency'"), result.stderr)
    XCTAssertTrue(result.stderr.contains("from 1 to 10000"), result.stderr)
  }

  func testAJobFieldAndItsFlagAreRefusedInTheSameWords() throws {
    let job = temporary.appending("job.yaml")
    let cases: [(field: String, value: String, flag: String)] = [
      ("concurrency", "0", "--concurrency"), ("retries", "1000", "--retries"),
      ("timeout", "1e308", "--timeout"), ("blacklistTTL", "0s", "--blacklist-ttl"),
    ]
    for (field, value, flag) in cases {
      try "cache:\n  directory: \(cache!)\nprefetch:\n  \(field): \(value)\n".write(
        toFile: job, atomically: true, encoding: .utf8)
      let fromJob = try run(["run", job])
      let fromFlag = try run(["prefetch", manifest!, "--cache", cache!, flag, value])
      XCTAssertEqual(fromJob.status, 2, fromJob.stderr)
      XCTAssertEqual(fromFlag.status, 2, fromFlag.stderr)
      let jobPrefix = "\(job):4: field 'prefetch.\(field)': "
      let jobLine = try XCTUnwrap(
        fromJob.stderr.split(separator: "\n").first { $0.contains(jobPrefix) }, fromJob.stderr)
      let words = jobLine.components(separatedBy: jobPrefix)[1]
      XCTAssertTrue(fromFlag.stderr.contains("\(flag) \(words)"), "\(words)\n\(fromFlag.stderr)")
    }
  }

  func testAJobShardThatContradictsTheCommandLineIsRefusedNamingBoth() throws {
    let job = temporary.appending("job.yaml")
    try "cache:\n  directory: \(cache!)\nmanifests: [\(manifest!)]\nshard: 1/4\n".write(
      toFile: job, atomically: true, encoding: .utf8)
    let shards = try run(["run", job, "--shards", "8"], environment: ["JOB_COMPLETION_INDEX": "1"])
    XCTAssertEqual(shards.status, 2, shards.stderr)
    XCTAssertTrue(shards.stderr.contains("1/4"), shards.stderr)
    XCTAssertTrue(shards.stderr.contains("--shards 8"), shards.stderr)
    XCTAssertTrue(shards.stderr.contains("field 'shard'"), shards.stderr)

    let shard = try run(["run", job, "--shard", "2/4"])
    XCTAssertEqual(shard.status, 2, shard.stderr)
    XCTAssertTrue(shard.stderr.contains("1/4 contradicts --shard 2/4"), shard.stderr)

    // The same shard in both places is no contradiction.
    let same = try run(["run", job, "--shard", "1/4", "--json"])
    XCTAssertEqual(same.status, 0, same.stderr)
  }

  func testAnInvalidJobCompletionIndexIsCalledInvalidWithItsValue() throws {
    for value in ["abc", "-1", "8", "99999999999999999999"] {
      let result = try run(
        ["prefetch", manifest, "--cache", cache, "--shards", "8"],
        environment: ["JOB_COMPLETION_INDEX": value])
      XCTAssertEqual(result.status, 2, result.stderr)
      XCTAssertTrue(result.stderr.contains("JOB_COMPLETION_INDEX"), result.stderr)
      XCTAssertTrue(result.stderr.contains("\"\(value)\" is invalid"), result.stderr)
      XCTAssertTrue(result.stderr.contains("0 to 7"), result.stderr)
      XCTAssertFalse(result.stderr.contains("needs JOB_COMPLETION_INDEX"), result.stderr)
    }
  }

  func testKeyHelpSaysThumbnailsAndTransformersArePrefetched() throws {
    let help = try run(["key", "--help"]).stdout
    XCTAssertFalse(help.contains("not yet prefetched"), help)
    XCTAssertTrue(
      help.replacingOccurrences(of: "\n", with: " ").contains(
        "renders the image and stores it under the derived key"), help)
    // Only the examples' shell continuations end a line with a backslash.
    for line in help.components(separatedBy: "\n") where line.hasSuffix("\\") {
      XCTAssertTrue(line.hasPrefix("  imagecache "), line)
    }
  }

  func testReportMergeAndHtmlRefuseACorruptShardReportNamingIt() throws {
    let good = temporary.appending("shard-0.json")
    try ReportFixture.json(counts: ["total": 2]).write(to: URL(fileURLWithPath: good))
    let huge = temporary.appending("shard-1.json")
    try ReportFixture.json(counts: ["total": Int.max]).write(to: URL(fileURLWithPath: huge))
    let negative = temporary.appending("shard-2.json")
    try ReportFixture.json(counts: ["failed": -3]).write(to: URL(fileURLWithPath: negative))
    let later = temporary.appending("shard-3.json")
    try ReportFixture.json(schemaVersion: 2).write(to: URL(fileURLWithPath: later))
    for (bad, field) in [
      (huge, "prefetch.total"), (negative, "prefetch.failed"), (later, "schemaVersion"),
    ] {
      for command in [
        ["report", "merge", good, bad, bad],
        ["report", "html", good, bad, "--output", temporary.appending("page.html")],
      ] {
        let result = try run(command)
        XCTAssertEqual(result.status, 2, "\(command): \(result.stderr)")
        XCTAssertTrue(
          result.stderr.contains("\(bad): field '\(field)'"), "\(command): \(result.stderr)")
      }
    }
  }

  /// A shard whose wall clock an NTP step set back an hour mid-run, as imagecache before
  /// issue 38 reported it: it ended before it started, and its duration is negative. The
  /// fleet's reports still merge and render; the step is said, and nothing negative is written.
  func testReportMergeAndHtmlAcceptAShardWhoseClockSteppedBack() throws {
    let good = temporary.appending("shard-0.json")
    try ReportFixture.json(counts: ["total": 2]).write(to: URL(fileURLWithPath: good))
    let stepped = temporary.appending("shard-1.json")
    try ReportFixture.json(
      counts: ["total": 3, "durationSeconds": -3540.0], startedAt: "2026-01-01T01:00:00.000Z",
      finishedAt: "2026-01-01T00:01:00.000Z"
    ).write(to: URL(fileURLWithPath: stepped))
    let merged = temporary.appending("merged.json")
    let merge = try run(["report", "merge", good, stepped, "--report", merged])
    XCTAssertEqual(merge.status, 0, merge.stderr)
    let report = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: merged)))
    XCTAssertEqual(report.prefetch?.total, 5)
    XCTAssertGreaterThanOrEqual(report.finishedAt, report.startedAt)
    XCTAssertGreaterThanOrEqual(report.prefetch?.counts.durationSeconds ?? -1, 0)
    XCTAssertTrue(
      report.warnings.contains { $0.hasPrefix("\(stepped): clockStepped:") }, "\(report.warnings)")

    let page = try run(["report", "html", stepped, "--output", temporary.appending("page.html")])
    XCTAssertEqual(page.status, 0, page.stderr)
    let html = try String(contentsOfFile: temporary.appending("page.html"), encoding: .utf8)
    XCTAssertFalse(html.contains("-3540"), "no negative duration on the page")
  }
}
