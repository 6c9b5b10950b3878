import Core
import Foundation
import Synchronization
import TestSupport
import XCTest
import Yams

/// deploy/k8s's night as its pods run it (issue 40, item 6): the pods' own shell script, taken
/// from prefetch-job.yaml, with the real binary on a loopback server. Plain Kubernetes starts
/// no Job after another, so the finish (merge, then trim) is the Job's last step: the pod whose
/// shard completes the night's set of reports runs it, and no other.
final class KubernetesNightTests: LoopbackTestCase {
  override var routes: [String: Route] {
    var routes = Self.images
    routes["/gone.jpg"] = { _ in ServerResponse(status: 404, body: Data("gone".utf8)) }
    routes["/slow.jpg"] = { _ in ServerResponse(body: Fixtures.jpeg, headDelay: .seconds(10)) }
    // A manifest (``list``) whose first request is refused: one shard's fetch of it fails.
    routes["/list.txt"] = { _ in
      let (first, text) = Self.list.withLock { list in
        list.requests += 1
        return (list.requests == 1, list.text)
      }
      return first ? ServerResponse(status: 503) : ServerResponse(body: Data(text.utf8))
    }
    return routes
  }

  /// `/list.txt`'s text, and the requests for it so far.
  private static let list = Mutex((requests: 0, text: ""))

  private var cache: String { temporary.appending("cache") }
  private var reports: String { temporary.appending("cache/reports") }

  /// prefetch-job.yaml's pod script with the pod's folders (the volume at /cache, the
  /// ConfigMap at /etc/imagecache) moved into the temporary folder.
  private func podScript() throws -> String {
    let text = try String(
      contentsOf: DeployTests.repository.appendingPathComponent("deploy/k8s/prefetch-job.yaml"),
      encoding: .utf8)
    let job = try XCTUnwrap(try Yams.load(yaml: text) as? [String: Any])
    return try DeployTests.podScript(job)
      .replacingOccurrences(of: "/etc/imagecache", with: temporary.appending("job"))
      .replacingOccurrences(of: "/cache", with: cache)
  }

  /// The pod of index `index` of the Job whose UID is `uid`, run to its end.
  private func pod(_ index: Int, of uid: String, script: String) throws -> CommandResult {
    let binaries = URL(fileURLWithPath: ImageCacheBinary.path).deletingLastPathComponent().path
    return try Command.run(
      "/bin/sh", ["-c", script],
      environment: [
        "PATH": "\(binaries):/usr/bin:/bin", "HOME": temporary.path,
        "JOB_COMPLETION_INDEX": "\(index)", "JOB_UID": uid, "JOB_NAME": "imagecache-prefetch",
      ])
  }

  private var runReport: String { reports + "/run.json" }

  func testThePodWhoseShardCompletesTheNightMergesAndTrims() throws {
    try FileManager.default.createDirectory(
      atPath: temporary.appending("job"), withIntermediateDirectories: true)
    let manifest = temporary.appending("job/urls.txt")
    try ["/a.jpg", "/b.png", "/c.gif", "/gone.jpg"].map { server.url($0) }
      .joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
    try """
    name: nightly
    cache: {directory: \(cache)}
    manifests: [\(manifest)]
    prefetch: {retries: 0}
    """.write(toFile: temporary.appending("job/nightly.yaml"), atomically: true, encoding: .utf8)
    let script = try podScript()
    let shards = 4

    for night in ["uid-night-1", "uid-night-2"] {
      let before = try? RunReport.load(path: runReport)
      for index in 0..<shards {
        let result = try pod(index, of: night, script: script)
        XCTAssertEqual(result.status, 0, "\(night) pod \(index): \(result.stderr)")
        guard index < shards - 1 else { break }
        // A night not yet whole is not merged, whatever the reports of the night before say.
        XCTAssertEqual(
          try? RunReport.load(path: runReport), before,
          "\(night): merged after \(index + 1) of \(shards) shards")
      }
      let merged = try RunReport.load(path: runReport)
      XCTAssertEqual(merged.runID, night)
      XCTAssertEqual(merged.status, .completed)
      XCTAssertEqual(merged.mergedFrom?.count, shards)
      XCTAssertEqual(merged.prefetch?.counts.failed, 1, "the night's 404 is in the merged report")
      let trim = try RunReport.load(path: reports + "/trim.json")
      XCTAssertEqual(trim.maintenance.map(\.pass), [.trim])
      XCTAssertGreaterThanOrEqual(trim.startedAt, merged.finishedAt, "the trim runs after")
    }
  }

  /// Kubernetes stops a pod (a drain, an eviction, the Job deleted) with SIGTERM to the
  /// container's first process, the pod's shell: it passes the signal on to the imagecache in
  /// hand, whose shard's report then says interrupted, and the pod exits as imagecache does.
  /// (As PID 1 the shell ignored it; imagecache ran on until the SIGKILL, with no report.)
  func testAPodStoppedBySIGTERMPassesItOnAndItsShardReportsInterrupted() throws {
    try FileManager.default.createDirectory(
      atPath: temporary.appending("job"), withIntermediateDirectories: true)
    let manifest = temporary.appending("job/urls.txt")
    // Enough that shard 1 of 4 has some, whatever the port does to their shards.
    try (0..<40).map { server.url("/slow.jpg?n=\($0)") }.joined(separator: "\n").write(
      toFile: manifest, atomically: true, encoding: .utf8)
    try "name: nightly\ncache: {directory: \(cache)}\nmanifests: [\(manifest)]\n".write(
      toFile: temporary.appending("job/nightly.yaml"), atomically: true, encoding: .utf8)
    let binaries = URL(fileURLWithPath: ImageCacheBinary.path).deletingLastPathComponent().path
    let (process, stdout, stderr) = try Command.start(
      "/bin/sh", ["-c", try podScript()],
      environment: [
        "PATH": "\(binaries):/usr/bin:/bin", "HOME": temporary.path,
        "JOB_COMPLETION_INDEX": "1", "JOB_UID": "uid-stopped", "JOB_NAME": "imagecache-prefetch",
      ])
    waitUntil(timeout: 30, "a download under way") { server.requestCount("/slow.jpg") > 0 }
    kill(process.processIdentifier, SIGTERM)
    let result = ImageCacheBinary.finish(process, stdout, stderr)
    XCTAssertEqual(process.terminationReason, .exit, "the shell passed it on: \(result.stderr)")
    XCTAssertEqual(result.status, 128 + SIGTERM, result.stderr)
    let shard = try RunReport.load(path: reports + "/shard-1.json")
    XCTAssertEqual(shard.status, .interrupted)
    XCTAssertFalse(FileManager.default.fileExists(atPath: runReport), "no finish after it")
  }

  /// A shard that exits 1 (its manifest could not be fetched) is retried by its index, though
  /// its report says completed: the night is finished (merged, then trimmed) only once every
  /// shard of the Job succeeded, by the pod of the last one. Counting the reports that say
  /// completed, the fourth pod merged the failed shard's with the others, the merge refused
  /// them (exit 2), and that exit failed its index for good.
  func testAShardThatFailedIsNotMergedUntilItsRetrySucceeds() throws {
    try FileManager.default.createDirectory(
      atPath: temporary.appending("job"), withIntermediateDirectories: true)
    let images = ["/a.jpg", "/b.png", "/c.gif"].map { server.url($0) }.joined(separator: "\n")
    Self.list.withLock { $0 = (0, images) }
    try """
    name: nightly
    cache: {directory: \(cache)}
    manifests: [\(server.url("/list.txt"))]
    prefetch: {retries: 0}
    """.write(toFile: temporary.appending("job/nightly.yaml"), atomically: true, encoding: .utf8)
    let script = try podScript()
    // Pod 0 meets the list's 503 and exits 1; the others read the list.
    let failed = try pod(0, of: "uid-retried", script: script)
    XCTAssertEqual(failed.status, 1, failed.stderr)
    for index in 1..<4 {
      let result = try pod(index, of: "uid-retried", script: script)
      XCTAssertEqual(result.status, 0, "pod \(index): \(result.stderr)")
    }
    XCTAssertFalse(FileManager.default.fileExists(atPath: runReport), "not merged: shard 0 failed")
    // Its index's retry succeeds, and finishes the night.
    let retried = try pod(0, of: "uid-retried", script: script)
    XCTAssertEqual(retried.status, 0, retried.stderr)
    let merged = try RunReport.load(path: runReport)
    XCTAssertEqual(merged.runID, "uid-retried")
    XCTAssertEqual(merged.status, .completed)
    XCTAssertEqual(merged.mergedFrom?.count, 4)
  }
}
