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

  /// The lines of the help section `title` (`OPTIONS:`, `SUBCOMMANDS:`), up to the next
  /// section.
  private func section(_ title: String, of help: String) -> [Substring] {
    let lines = help.split(separator: "\n", omittingEmptySubsequences: false)
    guard let start = lines.firstIndex(where: { $0 == title }) else { return [] }
    return Array(lines[(start + 1)...].prefix { $0.isEmpty || $0.hasPrefix(" ") })
  }

  /// The subcommands a help page lists: the first word of each entry, up to the blank line
  /// before "See 'imagecache help <subcommand>'".
  private func subcommands(in help: String) -> [String] {
    section("SUBCOMMANDS:", of: help).prefix { !$0.isEmpty }.compactMap { line in
      guard line.hasPrefix("  "), !line.hasPrefix("   "),
        let word = line.split(separator: " ").first,
        word.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" })
      else { return nil }
      return String(word)
    }
  }

  /// The long options of a help page's OPTIONS entries (`--max-size, --max-disk-size <size>`
  /// gives both names; `--host-backoff/--no-host-backoff` both too).
  private func options(in help: String) -> Set<String> {
    var names = Set<String>()
    for line in section("OPTIONS:", of: help) where line.hasPrefix("  -") {
      let entry = line.dropFirst(2).components(separatedBy: "  ").first ?? ""
      for match in entry.matches(of: /--[a-z0-9][a-z0-9-]*/) { names.insert(String(match.0)) }
    }
    return names
  }

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
    var pending: [[String]] = [[]]
    var visited: [[String]] = []
    while let path = pending.popLast(), visited.count < 100 {
      visited.append(path)
      let name = (["imagecache"] + path).joined(separator: " ")
      let result = try ImageCacheBinary.run(path + ["--help"])
      XCTAssertEqual(result.status, 0, "\(name) --help: \(result.stderr)")
      let help = result.stdout
      XCTAssertTrue(help.contains("USAGE:"), "\(name) --help prints no usage:\n\(help)")
      for option in options(in: help).sorted() {
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
      pending += subcommands(in: help).filter { $0 != "help" }.map { path + [$0] }
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
