import Foundation
import TestSupport
import XCTest

/// The mutation exercise's list (scripts/mutants.txt, docs/mutation-testing.md) follows the
/// code: a mutant whose text is no longer where the list says fails here, not months later when
/// someone runs the exercise. Only `--check`: nothing is built or changed.
final class MutantListTests: TemporaryFolderTestCase {
  private var script: String {
    DeployTests.repository.appendingPathComponent("scripts/mutants").path
  }

  private func check(_ list: String? = nil) throws -> CommandResult {
    try Command.run(
      "/usr/bin/env", ["python3", script, "--check"] + (list.map { ["--list", $0] } ?? []))
  }

  func testEveryMutantOfTheListIsWhereTheListSays() throws {
    let result = try check()
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertFalse(result.stdout.contains("moved from line"), result.stdout)
  }

  /// A mutant whose text is gone, or is on several lines near the one named, stops the exercise
  /// (exit 2) naming it; one that moved a few lines is found there, with a warning.
  func testAStaleMutantIsRefusedAndAMovedOneIsFoundAndNamed() throws {
    let file = "Sources/Core/Configuration/Shard.swift"
    let lines = try String(
      contentsOf: DeployTests.repository.appendingPathComponent(file), encoding: .utf8
    ).components(separatedBy: "\n")
    let at = try XCTUnwrap(lines.firstIndex { $0.contains("hex.prefix(16)") }) + 1
    let cases: [(String, Int32, String)] = [
      ("\(file):\(at): hex.prefix(16) => hex.suffix(16)", 0, "every one where the list says"),
      ("\(file):\(at + 3): hex.prefix(16) => hex.suffix(16)", 0, "moved from line \(at + 3)"),
      ("\(file):\(at): no such text => x", 2, "the list is stale"),
      ("\(file):\(at): return => x", 2, "the list is stale"),
    ]
    for (index, (line, status, said)) in cases.enumerated() {
      let list = temporary.appending("list-\(index).txt")
      try (line + "\n").write(toFile: list, atomically: true, encoding: .utf8)
      let result = try check(list)
      XCTAssertEqual(result.status, status, "\(line): \(result.stderr)")
      XCTAssertTrue((result.stdout + result.stderr).contains(said), "\(line): \(result.stderr)")
    }
  }
}
