import Foundation
import TestSupport
import XCTest

/// `cron/imagecache-cron` and the systemd unit (issue 13, items 1-4): pruning, exit codes and
/// the mail, with a stand-in for the binary that writes what the real one would.
final class CronWrapperTests: XCTestCase {
  var temporary: TemporaryDirectory!
  var fake: String!
  var job: String!

  static let repository = URL(fileURLWithPath: Fixtures.directory).deletingLastPathComponent()
    .deletingLastPathComponent()
  static var wrapper: String { repository.appendingPathComponent("cron/imagecache-cron").path }

  override func setUpWithError() throws {
    temporary = try TemporaryDirectory()
    // Writes the --report file and the job's own report, prints what `run` prints, and exits
    // with FAKE_STATUS.
    fake = temporary.appending("fake-imagecache")
    try """
    #!/usr/bin/env bash
    job=$2
    report=$4
    echo '{}' > "$report"
    mkdir -p "$(dirname "$job")/own"
    touch "$(dirname "$job")/own/nightly-$(date +%s%N)-run.json"
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

  override func tearDown() {
    temporary.remove()
  }

  private func wrap(
    _ arguments: [String], binary: String? = nil, status: Int32 = 0
  ) throws -> (status: Int32, stderr: String) {
    var environment = ProcessInfo.processInfo.environment
    environment["IMAGECACHE"] = binary ?? fake
    environment["FAKE_STATUS"] = "\(status)"
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
    XCTAssertEqual(files("state/reports").count, 2, "\(files("state/reports"))")
    XCTAssertEqual(files("state/logs").count, 2)
    XCTAssertEqual(files("jobs/own").count, 2, "the job's own {date}-{time} reports too")
    XCTAssertTrue(files("state/reports").allSatisfy { $0.hasPrefix("nightly-") })
  }

  func testTwoRunsInOneSecondKeepBothReports() throws {
    let state = temporary.appending("state")
    XCTAssertEqual(try wrap([job, state]).status, 0)
    XCTAssertEqual(try wrap([job, state]).status, 0)
    XCTAssertEqual(files("state/reports").count, 2)
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
    else { throw XCTSkip("systemd-analyze is not installed") }
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
}
