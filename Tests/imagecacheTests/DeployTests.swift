import Foundation
import TestSupport
import XCTest
import Yams

/// `deploy/` (issue 11, item 7): the Kubernetes manifests parse, and the Indexed Job, its
/// --shards value and the README agree.
final class DeployTests: XCTestCase {
  static var repository: URL { CronWrapperTests.repository }

  private func load(_ path: String) throws -> [String: Any] {
    let text = try String(
      contentsOf: Self.repository.appendingPathComponent(path), encoding: .utf8)
    return try XCTUnwrap(try Yams.load(yaml: text) as? [String: Any], path)
  }

  private func container(_ job: [String: Any]) throws -> [String: Any] {
    let spec = try XCTUnwrap(job["spec"] as? [String: Any])
    let pod = try XCTUnwrap((spec["template"] as? [String: Any])?["spec"] as? [String: Any])
    return try XCTUnwrap((pod["containers"] as? [[String: Any]])?.first)
  }

  func testTheIndexedJobRunsAsManyShardsAsItHasCompletions() throws {
    let job = try load("deploy/k8s/prefetch-job.yaml")
    XCTAssertEqual(job["kind"] as? String, "Job")
    let spec = try XCTUnwrap(job["spec"] as? [String: Any])
    XCTAssertEqual(spec["completionMode"] as? String, "Indexed")
    let completions = try XCTUnwrap(spec["completions"] as? Int)
    XCTAssertEqual(spec["parallelism"] as? Int, completions)
    let arguments = try XCTUnwrap(try container(job)["args"] as? [String])
    let shards = try XCTUnwrap(arguments.firstIndex(of: "--shards")).advanced(by: 1)
    XCTAssertEqual(Int(arguments[shards]), completions, "completions = parallelism = --shards")
    XCTAssertTrue(arguments.contains { $0.contains("shard-{shard}.json") })
    XCTAssertTrue(arguments.contains("--allow-url-failures"), "404s must not fail the pods")

    let finish = try load("deploy/k8s/finish-job.yaml")
    let script = try XCTUnwrap((try container(finish)["args"] as? [String])?.first)
    XCTAssertTrue(script.contains("imagecache report merge /cache/reports/shard-*.json"), script)
    XCTAssertTrue(script.contains("imagecache maintain"), script)

    let readme = try String(
      contentsOf: Self.repository.appendingPathComponent("README.md"), encoding: .utf8)
    XCTAssertTrue(readme.contains("completions: \(completions)"), "the README names the same N")
    XCTAssertTrue(readme.contains("--shards \(completions)"))
  }

  func testTheContainerRecipeBuildsOnTheSwiftImageAndRunsOnSlimDebian() throws {
    let recipe = try String(
      contentsOf: Self.repository.appendingPathComponent("deploy/Containerfile"), encoding: .utf8)
    let stages = recipe.split(separator: "\n").filter { $0.hasPrefix("FROM ") }
    XCTAssertEqual(stages.count, 2)
    XCTAssertTrue(stages[0].contains("swift:"))
    XCTAssertTrue(stages[1].contains("debian:bookworm-slim"))
    // The runtime stage installs the C libraries the build links, and nothing to build with.
    let runtime = recipe.components(separatedBy: "FROM debian:bookworm-slim")[1]
    for library in ["libcurl4", "libturbojpeg0", "libpng16-16", "libsqlite3-0", "libxml2"] {
      XCTAssertTrue(runtime.contains(library), library)
    }
    XCTAssertFalse(runtime.contains("-dev"))
  }
}
