import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import Runner
import TestSupport
import XCTest

/// A property over every number a user or another system gives (issue 27 item 1): flags, job
/// fields and report fields with random huge, negative, NaN and overflowing values are taken
/// in range or refused as a usage error (exit 2) naming what was wrong, never a trap.
///
/// A seeded generator in XCTest rather than swift-property-based: that library runs under Swift
/// Testing, and this suite runs XCTest alone (`--disable-swift-testing`). Set
/// IMAGECACHE_PROPERTY_SEED to replay or vary a run; every failure names its seed and case.
final class NumberPropertyTests: TemporaryFolderTestCase {
  let seed = UInt64(ProcessInfo.processInfo.environment["IMAGECACHE_PROPERTY_SEED"] ?? "") ?? 27

  static let edges = [
    "0", "-0", "1", "-1", "nan", "NaN", ".nan", "inf", "-inf", ".inf", "infinity", "1e308",
    "-1e308", "1e400", "-1e400", "4.9e-324", "1e-400", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "18446744073709551615",
    "18446744073709551616", "4611686018427387904", "99999999999999999999999", "2^63",
    "0x7fffffffffffffff", "1e30GB", "1e308w", "200000d", "8388608TiB", "",
  ]
  static let suffixes = [
    "", "", "ms", "s", "m", "h", "d", "w", "B", "KB", "MB", "GB", "TB", "KiB", "GiB", "TiB",
  ]

  /// A value from the edges, or a random decimal: any sign, up to 25 digits, a fraction, an
  /// exponent up to 400, a unit.
  static func value(_ random: inout SeededRandom) -> String {
    if Bool.random(using: &random) { return edges.randomElement(using: &random)! }
    var text = ["", "-", "+"].randomElement(using: &random)!
    let digits = Int.random(in: 1...25, using: &random)
    text += String((0..<digits).map { _ in "0123456789".randomElement(using: &random)! })
    if Bool.random(using: &random) { text += ".\(Int.random(in: 0...999, using: &random))" }
    if Bool.random(using: &random) {
      text += "e\(["", "-", "+"].randomElement(using: &random)!)"
      text += "\(Int.random(in: 0...400, using: &random))"
    }
    return text + suffixes.randomElement(using: &random)!
  }

  func testUnitsAreInRangeOrAnErrorForAnyValue() {
    var random = SeededRandom(seed: seed)
    let ranges: [DurationRange] = [.positive, .nonNegative, .age]
    for round in 0..<300 {
      let text = Self.value(&random)
      for range in ranges {
        if let seconds = try? parseDuration(text, allowed: range) {
          XCTAssertTrue(range.contains(seconds), "seed \(seed) round \(round): \(text)")
        }
      }
      if let bytes = try? parseByteCount(text) {
        XCTAssertLessThanOrEqual(bytes, UInt64(Int64.max), "seed \(seed) round \(round): \(text)")
      }
    }
  }

  static let jobFields: [(path: [String], field: String)] = [
    (["cache", "maxDiskAge"], "cache.maxDiskAge"), (["cache", "maxDiskSize"], "cache.maxDiskSize"),
    (["prefetch", "concurrency"], "prefetch.concurrency"),
    (["prefetch", "perHostConcurrency"], "prefetch.perHostConcurrency"),
    (["prefetch", "perHostStreams"], "prefetch.perHostStreams"),
    (["prefetch", "retries"], "prefetch.retries"), (["prefetch", "timeout"], "prefetch.timeout"),
    (["prefetch", "deadline"], "prefetch.deadline"),
    (["prefetch", "maxResponseSize"], "prefetch.maxResponseSize"),
    (["prefetch", "maxPixels"], "prefetch.maxPixels"),
    (["prefetch", "blacklistTTL"], "prefetch.blacklistTTL"),
    (["context", "downloadTimeout"], "context.downloadTimeout"),
  ]

  /// A job file whose one field holds `value` (plain or quoted, as YAML reads either).
  private func jobText(_ path: [String], _ value: String, quoted: Bool) -> String {
    let scalar = quoted ? "\"\(value)\"" : (value.isEmpty ? "''" : value)
    var text = "cache:\n  directory: \(temporary.appending("cache"))\n"
    if path[0] == "cache" { return text + "  \(path[1]): \(scalar)\n" }
    text += "\(path[0]):\n  \(path[1]): \(scalar)\n"
    return text
  }

  func testJobFieldsAreInRangeOrAnErrorNamingTheLineAndFieldForAnyValue() throws {
    var random = SeededRandom(seed: seed)
    let file = temporary.appending("job.yaml")
    for round in 0..<300 {
      let (path, field) = Self.jobFields.randomElement(using: &random)!
      let value = Self.value(&random)
      try jobText(path, value, quoted: Bool.random(using: &random)).write(
        toFile: file, atomically: true, encoding: .utf8)
      let label = "seed \(seed) round \(round): \(field): \(value)"
      do {
        let job = try Job.load(path: file)
        XCTAssertTrue(DurationRange.age.contains(job.cleanup.maxDiskAge), label)
        XCTAssertLessThanOrEqual(job.cleanup.maxDiskSize, UInt64(Int64.max), label)
        XCTAssertLessThanOrEqual(job.prefetch.maxResponseSize, UInt64(Int64.max), label)
        XCTAssertTrue(
          DownloaderConfiguration.concurrencyRange.contains(job.prefetch.concurrency), label)
        XCTAssertTrue(PrefetchConfiguration.retriesRange.contains(job.prefetch.retries), label)
        XCTAssertTrue(PipelineConfiguration.maxPixelsRange.contains(job.prefetch.maxPixels), label)
        for seconds in [job.prefetch.timeout, job.prefetch.deadline]
          + [job.prefetch.blacklistTTL, job.context.downloadTimeout].compactMap({ $0 })
        {
          XCTAssertTrue(DurationRange.positive.contains(seconds), label)
        }
      } catch {
        XCTAssertEqual(error.source, file, label)
        XCTAssertEqual(error.field, field, "\(label): \(error)")
        XCTAssertNotNil(error.line, "\(label): \(error)")
      }
    }
  }

  /// A report whose field `name` holds `value` as raw JSON text (which may not be JSON at all).
  private func report(_ name: String, _ value: String, maintenance: Bool) throws -> Data {
    let marker = "\u{1}marker\u{1}"
    let json = try ReportFixture.json(
      counts: maintenance ? [:] : [name: marker],
      maintenance: maintenance ? [name: marker] : nil)
    let text = String(decoding: json, as: UTF8.self)
      .replacingOccurrences(of: "\"\\u0001marker\\u0001\"", with: value)
    return Data(text.utf8)
  }

  static let reportFields =
    ReportFixture.countNames.map { ($0, false) } + [("durationSeconds", false)]
    + ["filesRemoved", "filesMoved", "bytesFreed"].map { ($0, true) }

  func testReportFieldsMergeOrAreRefusedNamingTheFileForAnyValue() throws {
    var random = SeededRandom(seed: seed)
    for round in 0..<100 {
      var paths: [String] = []
      var label = "seed \(seed) round \(round):"
      for index in 0..<Int.random(in: 1...3, using: &random) {
        let (name, maintenance) = Self.reportFields.randomElement(using: &random)!
        let value = Self.value(&random).lowercased().filter { !$0.isLetter || $0 == "e" }
        let path = temporary.appending("shard-\(index).json")
        try report(name, value.isEmpty ? "0" : value, maintenance: maintenance).write(
          to: URL(fileURLWithPath: path))
        paths.append(path)
        label += " \(name)=\(value)"
      }
      do {
        _ = try ReportMerge.merge(
          paths, into: [temporary.appending("merged.json")], standardOutput: false)
        let merged = try RunReport.load(path: temporary.appending("merged.json"))
        XCTAssertNil(merged.rangeProblem(), label)
      } catch let error as ConfigurationError {
        XCTAssertTrue(paths.contains(error.source), "\(label): \(error)")
      }
    }
  }

  /// The built binary, a few dozen times: random values in random flags of `prefetch` (of one
  /// image on loopback) and `maintain --dry-run`, in a job file for `run`, and in reports for `report
  /// merge` and `report html`.
  func testTheBinaryExitsZeroOneOrTwoAndNeverDiesOfASignal() throws {
    var random = SeededRandom(seed: seed)
    let cache = temporary.appending("cache")
    try FileSystem.createDirectory(path: CacheLocation(directory: cache).diskCachePath)
    // One image on loopback: a timeout or a limit is used, not only parsed.
    let server = try LoopbackServer(routes: [
      "/a.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") }
    ])
    defer { server.shutdown() }
    let manifest = temporary.appending("urls.txt")
    try server.url("/a.jpg").write(toFile: manifest, atomically: true, encoding: .utf8)
    let prefetchFlags = [
      "--timeout", "--deadline", "--blacklist-ttl", "--wait-timeout", "--concurrency",
      "--per-host-concurrency", "--per-host-streams", "--retries", "--max-pixels",
      "--max-response-size", "--shards",
      "--shard",
    ]
    let job = temporary.appending("job.yaml")
    for round in 0..<40 {
      let value = Self.value(&random)
      var arguments: [String]
      var environment: [String: String]? = nil
      switch round % 4 {
      case 0:
        let flag = prefetchFlags.randomElement(using: &random)!
        let given = flag == "--shard" ? "\(value)/\(Self.value(&random))" : value
        arguments = ["prefetch", manifest, "--cache", cache, "\(flag)=\(given)"]
        if flag == "--shards" {
          environment = ["JOB_COMPLETION_INDEX": Self.value(&random)]
        }
      case 1:
        let flag = ["--max-age", "--max-size"].randomElement(using: &random)!
        arguments = ["maintain", "--cache", cache, "--dry-run", "\(flag)=\(value)"]
      case 2:
        let (path, _) = Self.jobFields.randomElement(using: &random)!
        try (jobText(path, value, quoted: false) + "manifests: [\(manifest)]\n").write(
          toFile: job, atomically: true, encoding: .utf8)
        arguments = ["run", job]
      default:
        let (name, maintenance) = Self.reportFields.randomElement(using: &random)!
        let path = temporary.appending("report.json")
        try report(name, value.isEmpty ? "0" : value, maintenance: maintenance).write(
          to: URL(fileURLWithPath: path))
        arguments =
          Bool.random(using: &random)
          ? ["report", "merge", path, path, "--report", temporary.appending("merged.json")]
          : ["report", "html", path, "--output", temporary.appending("page.html")]
      }
      let (process, stdout, stderr) = try ImageCacheBinary.start(
        arguments, environment: environment)
      let result = ImageCacheBinary.finish(process, stdout, stderr)
      let label = "seed \(seed) round \(round): \(arguments): \(result.stderr)"
      XCTAssertEqual(process.terminationReason, .exit, label)
      XCTAssertTrue([0, 1, 2].contains(result.status), label)
    }
  }
}
