import Foundation
import TestSupport
import XCTest

/// `cron/imagecache-cron` and the systemd unit (issue 13, items 1-4): pruning, exit codes and
/// the mail, with a stand-in for the binary that writes what the real one would.
final class CronWrapperTests: TemporaryFolderTestCase {
  var fake: String!
  var job: String!

  static let repository = URL(fileURLWithPath: Fixtures.directory).deletingLastPathComponent()
    .deletingLastPathComponent()
  static var wrapper: String { repository.appendingPathComponent("cron/imagecache-cron").path }

  override func setUpWithError() throws {
    try super.setUpWithError()
    // Writes the --report file, if given, and, like the real binary, the job's own `report:` with {date}
    // and {time} filled in from FAKE_NOW (seconds, default now), `-2`, `-3`... before the
    // extension when the name is taken; prints what `run` prints, and exits with FAKE_STATUS.
    // Its arguments go one a line to FAKE_ARGS, when set.
    fake = temporary.appending("fake-imagecache")
    try """
    #!/usr/bin/env bash
    [ -z "${FAKE_ARGS:-}" ] || printf '%s\\n' "$@" > "$FAKE_ARGS"
    job=$2
    report='' previous=''
    for argument in "$@"; do
      [ "$previous" != --report ] || report=$argument
      previous=$argument
    done
    [ -z "$report" ] || echo '{}' > "$report"
    own=$(sed -n 's/^report:[[:space:]]*//p' "$job" | head -1 | sed 's/[[:space:]]*#.*//')
    if [ -n "$own" ]; then
      [[ $own == /* ]] || own=$(dirname "$job")/$own
      now=${FAKE_NOW:-$(date +%s)}
      name=$(basename "$job")
      name=${name%.*}
      path=${own//"{job}"/$name}
      path=${path//"{shard}"/all}
      path=${path//"{date}"/$(date -u -d "@$now" +%Y-%m-%d)}
      path=${path//"{time}"/$(date -u -d "@$now" +%H%M%S)}
      mkdir -p "$(dirname "$path")"
      if [ "$path" != "$own" ]; then
        stem=$path ext=
        base=$(basename "$path")
        if [[ $base == *.* ]]; then ext=.${base##*.} stem=${path%.*}; fi
        candidate=$path n=1
        while [ -e "$candidate" ]; do n=$((n + 1)) candidate=$stem-$n$ext; done
        path=$candidate
      fi
      echo '{}' > "$path"
    fi
    echo "nightly: cache /srv/c/default"
    echo "  failed http://127.0.0.1/gone.jpg: invalidDownloadStatusCode 404 (blacklisted)"
    echo "nightly: 3 URLs: 2 downloaded, 0 hits, 0 not modified, 1 failed, 0 blacklisted, 0 skipped, 2 KB in 5 ms"
    exit ${FAKE_STATUS:-0}
    """.write(toFile: fake, atomically: true, encoding: .utf8)
    chmod(fake, 0o755)
    job = temporary.appending("jobs/nightly.yaml")
    try FileManager.default.createDirectory(
      atPath: temporary.appending("jobs"), withIntermediateDirectories: true)
    try "cache:\n  directory: /srv/c\nreport: own/nightly-{date}-{time}.json  # kept 14\n".write(
      toFile: job, atomically: true, encoding: .utf8)
  }

  private func wrap(
    _ arguments: [String], binary: String? = nil, status: Int32 = 0, now: Int? = nil
  ) throws -> (status: Int32, stderr: String) {
    var environment = ProcessInfo.processInfo.environment
    environment["IMAGECACHE"] = binary ?? fake
    environment["FAKE_STATUS"] = "\(status)"
    environment["FAKE_NOW"] = now.map { "\($0)" }
    let result = try Command.run("/bin/bash", [Self.wrapper] + arguments, environment: environment)
    return (result.status, result.stderr)
  }

  private func files(_ folder: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: temporary.appending(folder))) ?? [])
      .sorted()
  }

  func testKeepsTheNewestReportsLogsAndTheJobsOwnReports() throws {
    let state = temporary.appending("state")
    for _ in 0..<5 {
      XCTAssertEqual(try wrap([job, state, "2"]).status, 0)
    }
    XCTAssertEqual(files("state/reports"), [], "one report a run: the job's own")
    XCTAssertEqual(files("state/logs").count, 2)
    XCTAssertEqual(files("jobs/own").count, 2, "the job's own {date}-{time} reports")
    XCTAssertTrue(files("state/logs").allSatisfy { $0.hasPrefix("nightly-") })
  }

  func testAJobWithoutAReportOfItsOwnKeepsTheNewestReportsInTheStateFolder() throws {
    try "cache:\n  directory: /srv/c\n".write(toFile: job, atomically: true, encoding: .utf8)
    let state = temporary.appending("state")
    for _ in 0..<5 {
      XCTAssertEqual(try wrap([job, state, "2"]).status, 0)
    }
    XCTAssertEqual(files("state/reports").count, 2, "\(files("state/reports"))")
    XCTAssertTrue(files("state/reports").allSatisfy { $0.hasPrefix("nightly-") })
  }

  /// Writes a job file under `jobs/`.
  private func writeJob(_ name: String, report: String) throws -> String {
    let path = temporary.appending("jobs/\(name).yaml")
    try "cache:\n  directory: /srv/c\nreport: \(report)\n".write(
      toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  func testPruningTheJobsOwnReportsLeavesEveryOtherFileInTheirFolder() throws {
    let job = try writeJob("daily", report: "daily out/{date}.json")
    let folder = temporary.appending("jobs/daily out")
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    // Other tools' files, some named as this job's reports are: none of them came from its runs.
    let unrelated = [
      "notes.json", "other job.json", "2020-01-01.json", "2020-01-02-2.json", "a\nb.json",
      "x.json", "summary-2026-01-01.json", "2026-01-01.json.bak.json", "[x].json", "*.json",
    ]
    for name in unrelated {
      try "{}".write(toFile: folder + "/" + name, atomically: false, encoding: .utf8)
    }
    let state = temporary.appending("state")
    // One run a day, from 2026-01-01: {date} gives each its own name.
    for day in 0..<5 {
      XCTAssertEqual(try wrap([job, state, "2"], now: 1_767_268_800 + day * 86_400).status, 0)
    }
    XCTAssertEqual(
      files("jobs/daily out"), (unrelated + ["2026-01-04.json", "2026-01-05.json"]).sorted())
  }

  /// The files of the state's reports and logs and of `jobs/own` whose names start with `prefix`.
  private func history(_ prefix: String) -> [String] {
    ["state/reports", "state/logs", "jobs/own"].flatMap { folder in
      files(folder).filter { $0.hasPrefix(prefix) }.map { folder + "/" + $0 }
    }
  }

  func testTheJobsOwnReportsNamedWithJobAndShardArePruned() throws {
    let job = try writeJob("weekly", report: "own/{job}-{shard}-{date}-{time}.json")
    let state = temporary.appending("state")
    for _ in 0..<5 { XCTAssertEqual(try wrap([job, state, "2"]).status, 0) }
    XCTAssertEqual(history("weekly-").count, 4, "two logs and two reports: \(history("weekly-"))")
    XCTAssertTrue(
      files("jobs/own").allSatisfy { $0.hasPrefix("weekly-all-2") }, "\(files("jobs/own"))")
  }

  func testJobsWhoseNamesShareAPrefixKeepTheirOwnReportsAndLogs() throws {
    let state = temporary.appending("state")
    let europe = try writeJob("nightly-eu", report: "own/nightly-eu-{date}-{time}.json")
    for _ in 0..<3 { XCTAssertEqual(try wrap([europe, state, "3"]).status, 0) }
    let europes = history("nightly-eu-")
    XCTAssertEqual(europes.count, 6)
    for _ in 0..<5 { XCTAssertEqual(try wrap([job, state, "2"]).status, 0) }
    XCTAssertEqual(history("nightly-eu-"), europes)
    XCTAssertEqual(history("nightly-2").count, 4, "two of each of nightly's own")
  }

  func testJobFilesWithoutAnExtensionInADottedFolderKeepTheirOwnReportsAndLogs() throws {
    let state = temporary.appending("state")
    let folder = temporary.appending("jobs.d")
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    var jobs: [String] = []
    for name in ["nightly", "weekly"] {
      let path = folder + "/" + name
      try "cache:\n  directory: /srv/c\n".write(toFile: path, atomically: true, encoding: .utf8)
      jobs.append(path)
    }
    for _ in 0..<3 {
      for job in jobs { XCTAssertEqual(try wrap([job, state, "2"]).status, 0) }
    }
    XCTAssertEqual(history("nightly-").count, 4, "two logs and two reports: \(history("nightly-"))")
    XCTAssertEqual(history("weekly-").count, 4, "two logs and two reports: \(history("weekly-"))")
    XCTAssertEqual(history("jobs-"), [], "named after the folder")
  }

  func testAJobNamedLikeAGlobPrunesOnlyItsOwnFiles() throws {
    let state = temporary.appending("state")
    for _ in 0..<3 { XCTAssertEqual(try wrap([job, state, "3"]).status, 0) }
    let nightlys = history("nightly-")
    XCTAssertEqual(nightlys.count, 6)
    // As a glob, `nightl?` matches `nightly`.
    let glob = try writeJob("nightl?", report: "own/nightl?-{date}-{time}.json")
    for _ in 0..<5 { XCTAssertEqual(try wrap([glob, state, "2"]).status, 0) }
    XCTAssertEqual(history("nightly-"), nightlys)
    XCTAssertEqual(history("nightl?-").count, 4)
  }

  func testTwoRunsInOneSecondKeepBothReports() throws {
    let state = temporary.appending("state")
    XCTAssertEqual(try wrap([job, state]).status, 0)
    XCTAssertEqual(try wrap([job, state]).status, 0)
    XCTAssertEqual(files("jobs/own").count, 2)
    XCTAssertEqual(files("state/logs").count, 2)
  }

  func testAFailedRunMailsItsSummaryAndFailedURLsAndKeepsItsStatus() throws {
    let result = try wrap([job, temporary.appending("state")], status: 1)
    XCTAssertEqual(result.status, 1)
    XCTAssertTrue(result.stderr.contains("exited 1"), result.stderr)
    XCTAssertTrue(result.stderr.contains("nightly: 3 URLs: 2 downloaded"), result.stderr)
    XCTAssertTrue(result.stderr.contains("failed http://127.0.0.1/gone.jpg"), result.stderr)
    XCTAssertTrue(result.stderr.contains("log: \(temporary.appending("state/logs/"))"))
    XCTAssertEqual(try wrap([job, temporary.appending("state")], status: 4).status, 4)
    XCTAssertEqual(try wrap([job, temporary.appending("state")]).stderr, "", "quiet on success")
  }

  func testTheWrappersOwnFailuresExitFive() throws {
    let state = temporary.appending("state")
    let missing = try wrap([job, state], binary: temporary.appending("no-such-imagecache"))
    XCTAssertEqual(missing.status, 5)
    XCTAssertTrue(missing.stderr.contains("no imagecache binary"), missing.stderr)
    XCTAssertEqual(try wrap([temporary.appending("nope.yaml"), state]).status, 5)
    // A state directory under a regular file cannot be created, even by root.
    XCTAssertEqual(try wrap([job, fake + "/state"]).status, 5)
    XCTAssertEqual(try wrap([job, state, "zero"]).status, 5)
    XCTAssertEqual(try wrap([]).status, 5)
  }

  func testTheSystemdUnitsVerify() throws {
    guard
      let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first(where: {
        FileManager.default.isExecutableFile(atPath: $0)
      })
    else { try requireOrSkip("systemd-analyze is not installed (Debian: systemd)") }
    let units = temporary.appending("units")
    try FileManager.default.createDirectory(atPath: units, withIntermediateDirectories: true)
    for name in ["imagecache-nightly.service", "imagecache-nightly.timer"] {
      let text = try String(
        contentsOfFile: Self.repository.appendingPathComponent("cron/\(name)").path,
        encoding: .utf8)
      // The installed path does not exist here: point at the repository's wrapper.
      try text.replacingOccurrences(of: "/usr/local/bin/imagecache-cron", with: Self.wrapper)
        .write(toFile: units + "/" + name, atomically: true, encoding: .utf8)
    }
    let verified = try Command.run(
      analyze,
      [
        "verify", "--man=no", units + "/imagecache-nightly.service",
        units + "/imagecache-nightly.timer",
      ])
    let text = verified.stdout + verified.stderr
    XCTAssertEqual(verified.status, 0, text)
    XCTAssertEqual(text, "")
  }

  /// The unit's `Environment=` values and its optional `EnvironmentFile=`, as systemd reads
  /// them, and the example line of that file that its comments document.
  private func unitEnvironment() throws -> (
    environment: [String: String], file: String, documented: String
  ) {
    let unit = try String(
      contentsOfFile: Self.repository.appendingPathComponent(
        "cron/imagecache-nightly.service"
      ).path, encoding: .utf8)
    var environment: [String: String] = [:]
    var file: String?
    var documented: String?
    for line in unit.split(separator: "\n").map(String.init) {
      if line.hasPrefix("Environment=") {
        let assignment = line.dropFirst("Environment=".count).trimmingCharacters(
          in: CharacterSet(charactersIn: "\""))
        let parts = assignment.split(separator: "=", maxSplits: 1).map(String.init)
        environment[parts[0]] = parts.count > 1 ? parts[1] : ""
      } else if line.hasPrefix("EnvironmentFile=-") {
        file = String(line.dropFirst("EnvironmentFile=-".count))
      } else if line.hasPrefix("#   IMAGECACHE_METRICS=") {
        documented = String(line.dropFirst("#   ".count))
      }
    }
    return (
      environment, try XCTUnwrap(file, "an optional EnvironmentFile=-"),
      try XCTUnwrap(documented, "the unit documents the file's line")
    )
  }

  func testTheSystemdUnitPassesMetricsOnlyWhenItsEnvironmentFileNamesAFile() throws {
    let (unitValues, file, documented) = try unitEnvironment()
    XCTAssertTrue(file.hasPrefix("/etc/imagecache/"), file)
    XCTAssertFalse(
      unitValues.values.contains { $0.contains("--metrics") },
      "metrics on by default: \(unitValues)")
    let state = temporary.appending("state")
    let arguments = temporary.appending("arguments")
    func argumentsPassed(_ extra: [String: String]) throws -> [String] {
      var environment = ProcessInfo.processInfo.environment
      environment["IMAGECACHE_ARGS"] = nil
      environment["IMAGECACHE_METRICS"] = nil
      environment.merge(unitValues) { $1 }
      environment.merge(extra) { $1 }
      environment["IMAGECACHE"] = fake
      environment["FAKE_ARGS"] = arguments
      let result = try Command.run(
        "/bin/bash", [Self.wrapper, job, state], environment: environment)
      XCTAssertEqual(result.status, 0, result.stderr)
      return try String(contentsOfFile: arguments, encoding: .utf8).split(separator: "\n")
        .map(String.init)
    }

    let plain = try argumentsPassed([:])
    XCTAssertFalse(plain.contains("--metrics"), "\(plain)")
    XCTAssertTrue(plain.contains("--wait"), "\(plain)")

    // What the documented file line gives, and a path with a space, which stays one argument.
    let parts = documented.split(separator: "=", maxSplits: 1).map(String.init)
    for path in [parts[1], temporary.appending("text files/imagecache.prom")] {
      let passed = try argumentsPassed([parts[0]: path])
      let index = try XCTUnwrap(passed.firstIndex(of: "--metrics"), "\(passed)")
      XCTAssertEqual(passed[index + 1], path)
      XCTAssertTrue(passed.contains("--wait"), "\(passed)")
    }
  }

  /// Every node_exporter textfile folder the docs tell an operator to name in `IMAGECACHE_METRICS`
  /// (upstream's usual one, Debian's `prometheus-node-exporter`'s) is one the unit may write:
  /// under `ProtectSystem=strict` any other is read-only, and the metrics would never be written.
  func testTheSystemdUnitMayWriteEveryTextfileFolderTheDocsName() throws {
    let unit = try String(
      contentsOfFile: Self.repository.appendingPathComponent("cron/imagecache-nightly.service")
        .path, encoding: .utf8)
    let writable = Set(
      unit.split(separator: "\n").filter { $0.hasPrefix("ReadWritePaths=") }.flatMap {
        $0.dropFirst("ReadWritePaths=".count).split(separator: " ").map {
          String($0.hasPrefix("-") ? $0.dropFirst() : $0)
        }
      })
    let operations = try String(
      contentsOfFile: Self.repository.appendingPathComponent("docs/operations.md").path,
      encoding: .utf8)
    let section = try XCTUnwrap(
      operations.components(separatedBy: "## Metrics and alerts").dropFirst().first)
    let named = Set(
      section.matches(of: /\/var\/lib\/[A-Za-z0-9_\/.-]*node[-_]exporter[A-Za-z0-9_\/.-]*/).map {
        let path = String($0.output)
        return path.hasSuffix(".prom") ? (path as NSString).deletingLastPathComponent : path
      })
    XCTAssertTrue(named.contains("/var/lib/prometheus/node-exporter"), "\(named)")
    for folder in named {
      XCTAssertTrue(writable.contains(folder), "\(folder) is not in ReadWritePaths: \(writable)")
    }
  }
}
