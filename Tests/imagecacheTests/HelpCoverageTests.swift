import Foundation
import TestSupport
import XCTest

/// SPEC section 7: every subcommand has `--help`, and what it offers is in the manual. The
/// command tree is walked as a user would, from `imagecache --help` down through each
/// SUBCOMMANDS list; each option a help page lists must have an entry in that command's part
/// of man/imagecache.1 (`scripts/generate-man` regenerates it), and every `--flag` the help
/// text names must be somewhere in the page.
final class HelpCoverageTests: XCTestCase {
  static let manPage = CronWrapperTests.repository.appendingPathComponent("man/imagecache.1").path

  /// The man page's option entries (`.It Fl -cache Ar dir`) by the command whose list holds
  /// them (`[]` is the root, `["blacklist", "list"]` a nested one), found from the nesting of
  /// its `.Bl` / `.El` lists and the `.It Em name` entries of subcommands.
  private func manOptions(_ page: String) -> [[String]: Set<String>] {
    var depth = 0
    var path: [String] = []
    var options: [[String]: Set<String>] = [:]
    for line in page.split(separator: "\n") {
      if line.hasPrefix(".Bl") {
        depth += 1
      } else if line.hasPrefix(".El") {
        depth -= 1
      } else if line.hasPrefix(".It Em ") {
        path = Array(path.prefix(depth - 1)) + [String(line.dropFirst(".It Em ".count))]
      } else if line.hasPrefix(".It Fl ") {
        let owner = Array(path.prefix(depth - 1))
        // mdoc's Fl adds one dash: `Fl -cache` is --cache, `Fl h` is -h.
        for match in line.matches(of: /(?:Fl |, )(-[a-z0-9][a-z0-9-]*)/) {
          options[owner, default: []].insert("-" + match.1)
        }
      }
    }
    return options
  }

  func testEverySubcommandHasHelpAndEveryOptionItListsIsInTheManPage() throws {
    let page = try String(contentsOfFile: Self.manPage, encoding: .utf8)
    let manual = manOptions(page)
    // The page's prose, with groff's escapes undone: `\%\-\-max\-size` is --max-size.
    let prose = page.replacingOccurrences(of: "\\%", with: "").replacingOccurrences(
      of: "\\-", with: "-")
    // `help` is argument-parser's own, which the manual does not document.
    let pages = try HelpPages.walk().filter { !$0.path.contains("help") }
    let visited = pages.map(\.path)
    for page in pages {
      let path = page.path
      let name = (["imagecache"] + path).joined(separator: " ")
      let result = page.result
      XCTAssertEqual(result.status, 0, "\(name) --help: \(result.stderr)")
      let help = page.help
      XCTAssertTrue(help.contains("USAGE:"), "\(name) --help prints no usage:\n\(help)")
      for option in HelpPages.options(in: help).sorted() {
        XCTAssertTrue(
          manual[path]?.contains(option) == true,
          "\(name) --help lists \(option), which man/imagecache.1 does not list under \(name) "
            + "(run scripts/generate-man)")
      }
      for mention in Set(help.matches(of: /--[a-z0-9][a-z0-9-]*/).map { String($0.0) }).sorted() {
        XCTAssertTrue(
          prose.contains(mention) || manual.values.contains { $0.contains(mention) },
          "\(name) --help names \(mention), which man/imagecache.1 never does")
      }
    }
    // The walk found the tree, not only the root.
    for expected in [["prefetch"], ["maintain"], ["blacklist", "list"], ["report", "merge"]] {
      XCTAssertTrue(visited.contains(expected), "\(expected) not reached: \(visited)")
    }
    // And the manual has no command the binary lacks.
    for documented in manual.keys where !documented.isEmpty {
      XCTAssertTrue(
        visited.contains(documented) || documented == ["help"],
        "man/imagecache.1 documents \(documented.joined(separator: " ")), which has no --help")
    }
  }
}
