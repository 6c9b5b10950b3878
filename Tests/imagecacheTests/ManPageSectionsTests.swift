import Foundation
import Runner
import XCTest

/// imagecache(1)'s ENVIRONMENT and EXIT STATUS, which scripts/generate-man writes, name every
/// variable the sources read and every exit code they use (issue 39, item 10): a variable or a
/// code added without its line in the page fails here.
final class ManPageSectionsTests: XCTestCase {
  private static var repository: URL { CronWrapperTests.repository }

  /// The names `.It` lines of the section `name` of imagecache(1) give (`.It Ev A , B`).
  private static func items(ofSection name: String) throws -> [String] {
    let page = try String(
      contentsOf: repository.appendingPathComponent("man/imagecache.1"), encoding: .utf8)
    var inSection = false
    var items: [String] = []
    for line in page.components(separatedBy: "\n") {
      if line.hasPrefix(".Sh ") {
        inSection =
          line.dropFirst(4).trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
          == name
      } else if inSection, line.hasPrefix(".It ") {
        items += line.dropFirst(4).split(separator: " ").map(String.init).filter {
          $0 != "Ev" && $0 != ","
        }
      }
    }
    return items
  }

  /// The Swift files of Sources, with their text.
  private static func sources() throws -> [(path: String, text: String)] {
    let folder = repository.appendingPathComponent("Sources")
    let files = FileManager.default.enumerator(atPath: folder.path)?.compactMap { $0 as? String }
    return try (files ?? []).filter { $0.hasSuffix(".swift") }.sorted().map {
      ($0, try String(contentsOf: folder.appendingPathComponent($0), encoding: .utf8))
    }
  }

  /// The variables the sources read: in a file that reads the environment, every subscript of
  /// it by name and every name of the shape of a variable (`SLURM_ARRAY_TASK_MIN`, which the
  /// shard code reads through a table).
  private static func variablesReadInSources() throws -> Set<String> {
    var names: Set<String> = []
    for (_, text) in try sources()
    where text.contains("environment[") || text.contains("getenv(") {
      names.formUnion(
        text.matches(of: /environment\["([A-Za-z_][A-Za-z0-9_]*)"\]/).map {
          String($0.output.1)
        })
      names.formUnion(
        text.matches(of: /"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)"/).map {
          String($0.output.1)
        })
    }
    return names
  }

  /// What the libraries read on the tool's behalf: libcurl the proxy variables (as curl does,
  /// PrefetchConfiguration.swift says so), swift-argument-parser `COLUMNS` for `--help`.
  static let variablesReadByLibraries = [
    "http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy",
    "NO_PROXY", "COLUMNS",
  ]

  func testEveryEnvironmentVariableTheToolReadsIsInTheManPage() throws {
    let documented = Set(try Self.items(ofSection: "ENVIRONMENT"))
    let read = try Self.variablesReadInSources()
    for name in ["TMPDIR", "HOME", "XDG_CACHE_HOME", "SLURM_ARRAY_TASK_STEP", "JOB_UID"] {
      XCTAssertTrue(read.contains(name), "\(name) was not found in Sources: \(read.sorted())")
    }
    for name in read.union(Self.variablesReadByLibraries).sorted() {
      XCTAssertTrue(
        documented.contains(name),
        "\(name) is read but not in imagecache(1)'s ENVIRONMENT (scripts/generate-man)")
    }
  }

  /// The exit codes the sources use: `ExitStatus`'s cases, every `ExitCode(N)` and `exit(N)`
  /// with a number, and 128 + each signal that stops a run.
  private static func exitCodesInSources() throws -> Set<Int32> {
    var codes = Set(SignalScope.stopSignals.map { 128 + $0 })
    for (_, text) in try sources() {
      if let body = text.firstMatch(of: /enum ExitStatus: Int32, Sendable \{([^}]*)\}/) {
        codes.formUnion(
          body.output.1.matches(of: /case \w+ = ([0-9]+)/).compactMap {
            Int32($0.output.1)
          })
      }
      codes.formUnion(
        text.matches(of: /\b(?:ExitCode|exit)\(([0-9]+)\)/).compactMap {
          Int32($0.output.1)
        })
    }
    return codes
  }

  func testEveryExitCodeTheToolUsesIsInTheManPage() throws {
    let documented = Set(try Self.items(ofSection: "EXIT STATUS").compactMap { Int32($0) })
    let used = try Self.exitCodesInSources()
    XCTAssertTrue(used.isSuperset(of: [0, 1, 2, 3, 4, 129, 130, 143]), "\(used.sorted())")
    for code in used.sorted() {
      XCTAssertTrue(
        documented.contains(code),
        "exit \(code) is used but not in imagecache(1)'s EXIT STATUS (scripts/generate-man)")
    }
  }
}
