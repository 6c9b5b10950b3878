import Core
import Foundation
import TestSupport
import XCTest

/// docs/fleets.md's GNU parallel recipe, as written there (issue 40, item 5), run with GNU
/// parallel against a loopback server: four workers fetch every URL once, the night's 404 does
/// not hold back the merge, and the merged report is of the whole night. A machine without
/// `parallel` skips it, unless `IMAGECACHE_REQUIRE_ENGINES=1` (`.ci/run`, which installs it).
final class ParallelRecipeTests: LoopbackTestCase {
  static let night = (0..<8).map { "/img/\($0).jpg" }

  override var routes: [String: Route] {
    var routes: [String: Route] = [:]
    for path in Self.night {
      routes[path] = { _ in .image(Fixtures.jpeg, type: "image/jpeg") }
    }
    routes["/gone.jpg"] = { _ in ServerResponse(status: 404, body: Data("gone".utf8)) }
    return routes
  }

  /// The recipe's lines in docs/fleets.md: from its `# GNU parallel` comment to the next
  /// comment or the end of the block.
  private func recipe() throws -> String {
    let text = try String(
      contentsOf: DeployTests.repository.appendingPathComponent("docs/fleets.md"),
      encoding: .utf8)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    let start = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("# GNU parallel") })
    let body = lines[(start + 1)...].prefix { !$0.hasPrefix("#") && !$0.hasPrefix("```") }
    return body.joined(separator: "\n")
  }

  func testTheGNUParallelRecipeFetchesEachURLOnceAndItsMergePassesANightWithA404() throws {
    let parallel = "/usr/bin/parallel"
    guard FileManager.default.isExecutableFile(atPath: parallel) else {
      try requireOrSkip("GNU parallel is not installed (Debian: parallel)")
    }
    let script = try recipe()
    XCTAssertTrue(script.contains("parallel -j4"), script)
    XCTAssertTrue(script.contains("report merge"), script)
    // The recipe's manifest and cache, here; everything else as the page says.
    let manifest = temporary.appending("urls.txt")
    try (Self.night + ["/gone.jpg"]).map { server.url($0) }.joined(separator: "\n")
      .write(toFile: manifest, atomically: true, encoding: .utf8)
    let cache = temporary.appending("c")
    let adapted = script.replacingOccurrences(of: "/srv/c", with: cache)
    let binaries = URL(fileURLWithPath: ImageCacheBinary.path).deletingLastPathComponent().path
    let result = try Command.run(
      "/bin/bash", ["-euo", "pipefail", "-c", adapted],
      environment: ["PATH": "\(binaries):/usr/bin:/bin", "HOME": temporary.path],
      directory: temporary.path)
    XCTAssertEqual(result.status, 0, "the merge passes a night with a 404: \(result.stderr)")

    for path in Self.night + ["/gone.jpg"] {
      XCTAssertEqual(server.requestCount(path), 1, "\(path): each URL fetched once by the fleet")
    }
    let merged = try RunReport.load(path: temporary.appending("run.json"))
    XCTAssertEqual(merged.status, .completed)
    XCTAssertEqual(merged.mergedFrom?.count, 4)
    XCTAssertEqual(Set((merged.mergedFrom ?? []).map(\.status)), [.completed])
    XCTAssertEqual(merged.allowURLFailures, true)
    XCTAssertEqual(merged.prefetch?.total, Self.night.count + 1)
    XCTAssertEqual(merged.prefetch?.downloaded, Self.night.count)
    XCTAssertEqual(merged.prefetch?.failures.map(\.httpStatus), [404])
    let runIDs = Set(merged.mergedFrom?.map(\.file) ?? []).map { file in
      (try? RunReport.load(path: temporary.appending(file)))?.runID
    }
    XCTAssertEqual(Set(runIDs).count, 1, "one run ID for the four workers")
  }
}
