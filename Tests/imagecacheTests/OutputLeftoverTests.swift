import Core
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
  import Glibc
#endif

/// The temporary files that a killed run leaves beside its report, metrics file or page
/// (`.imagecache-tmp.NAME.TAG.XXXXXX`, renamed over NAME when the run ends): the next writer of
/// the same output removes those whose writer is dead, and never one a live writer may still
/// be writing (report folders are shared by jobs, shards and hosts).
final class OutputLeftoverTests: LoopbackTestCase {
  override var routes: [String: Route] {
    ["/slow.jpg": { _ in ServerResponse(body: Fixtures.jpeg, headDelay: .seconds(30)) }]
  }

  private func leftovers(in folder: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
      .filter { $0.hasPrefix(".imagecache-tmp.") }.sorted()
  }

  /// The reproduction: a run killed with SIGKILL (as the OOM killer or a lost node) left its
  /// report's and metrics file's temporary files for good. The next run writing them removes
  /// them, and leaves its own output in place.
  func testARunKilledWithSIGKILLLeavesTemporaryFilesThatTheNextRunRemoves() throws {
    let manifest = temporary.appending("urls.txt")
    try "\(server.url("/slow.jpg"))\n".write(toFile: manifest, atomically: true, encoding: .utf8)
    let reports = temporary.appending("reports")
    let arguments = [
      "prefetch", manifest, "--cache", temporary.appending("cache"), "--retries", "0",
      "--report", reports + "/night.json", "--metrics", reports + "/night.prom",
    ]
    let (process, stdout, stderr) = try ImageCacheBinary.start(arguments)
    // The report's temporary file is made before the run does any work; the metrics file's
    // only at its end, so only the report's is left here.
    waitUntil(timeout: 30, "the report's temporary file") {
      !leftovers(in: reports).isEmpty
    }
    kill(process.processIdentifier, SIGKILL)
    _ = ImageCacheBinary.finish(process, stdout, stderr)
    let left = leftovers(in: reports)
    XCTAssertEqual(left.count, 1, "\(left)")
    XCTAssertTrue(
      left[0].hasPrefix(".imagecache-tmp.night.json.\(process.processIdentifier)@"), left[0])

    // A fresh run on a manifest that needs no server.
    let empty = temporary.appending("empty.txt")
    XCTAssertTrue(FileManager.default.createFile(atPath: empty, contents: Data()))
    var again = arguments
    again[1] = empty
    let result = try ImageCacheBinary.run(again)
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(leftovers(in: reports), [], "the killed run's leftover is gone")
    XCTAssertEqual(
      try FileManager.default.contentsOfDirectory(atPath: reports).sorted(),
      ["night.json", "night.prom"])
  }

  /// What the sweep removes and what it leaves, by the rule the operator page states: a
  /// leftover of this output whose writer (same boot and PID namespace) is dead goes at once;
  /// one whose writer lives stays however old; one of another host, boot or container, or of
  /// an older version (untagged), goes once a week old; another output's leftovers and files
  /// that are not the tool's are never touched.
  func testTheSweepRemovesOnlyThisOutputsLeftoversWhoseWriterIsGone() throws {
    let reports = temporary.appending("reports")
    try FileManager.default.createDirectory(atPath: reports, withIntermediateDirectories: true)
    let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
      .filter(\.isHexDigit).prefix(12)
    let namespace = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")
      .filter(\.isNumber)
    let here = "host~\(boot)~\(namespace)"
    // A process that has come and gone: its id names no process now.
    let gone = try Command.start("/bin/true", [])
    gone.0.waitUntilExit()
    let dead = gone.0.processIdentifier
    XCTAssertNotEqual(kill(dead, 0), 0)
    let live = getpid()
    let now = Int64(Date().timeIntervalSince1970)
    let eightDaysAgo = now - 8 * 86_400
    let sixDaysAgo = now - 6 * 86_400
    let files: [(name: String, modified: Int64, removed: Bool)] = [
      (".imagecache-tmp.run.json.\(dead)@\(here).aB3dE9", now, true),
      (".imagecache-tmp.run.json.\(live)@\(here).Zz0000", eightDaysAgo, false),
      (".imagecache-tmp.run.json.\(dead)@other~0123456789ab~4026531836.x1y2z3", sixDaysAgo, false),
      (".imagecache-tmp.run.json.\(dead)@other~0123456789ab~4026531836.q1w2e3", eightDaysAgo, true),
      (".imagecache-tmp.run.json.Qw3rTy", sixDaysAgo, false),
      (".imagecache-tmp.run.json.As4dFg", eightDaysAgo, true),
      (".imagecache-tmp.other.json.\(dead)@\(here).aB3dE9", eightDaysAgo, false),
      (".imagecache-tmp.run.json.old.\(dead)@\(here).aB3dE9", eightDaysAgo, false),
      (".imagecache-tmp.other.json.Qw3rTy", eightDaysAgo, false),
      ("run.json.bak", eightDaysAgo, false),
    ]
    for file in files {
      let path = reports + "/" + file.name
      XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("{".utf8)))
      try FileSystem.setTimes(
        path: path, accessTime: file.modified * 1_000_000_000,
        modificationTime: file.modified * 1_000_000_000)
    }
    let cache = temporary.appending("cache")
    try FileManager.default.createDirectory(
      atPath: cache + "/default", withIntermediateDirectories: true)
    let result = try ImageCacheBinary.run([
      "maintain", "--cache", cache, "--max-age", "3650d", "--report", reports + "/run.json",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let remaining = Set(try FileManager.default.contentsOfDirectory(atPath: reports))
    for file in files {
      XCTAssertEqual(!remaining.contains(file.name), file.removed, file.name)
    }
    XCTAssertTrue(remaining.contains("run.json"))
  }
}
