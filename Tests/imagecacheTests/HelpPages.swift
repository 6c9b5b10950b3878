import Foundation
import TestSupport

/// The binary's `--help` pages, as a user finds them: from `imagecache --help` down each
/// SUBCOMMANDS list (`help` included), each page run once. For the tests that hold the pages
/// against the manual (HelpCoverageTests) and against docs/ (DocumentationTests).
enum HelpPages {
  struct Page {
    /// The command's words after `imagecache` (`[]` is the root).
    var path: [String]
    var result: CommandResult
    var help: String { result.stdout }
  }

  /// Every page, the root first; at most `limit` of them (a loop in the tree ends there).
  static func walk(limit: Int = 100) throws -> [Page] {
    var pages: [Page] = []
    var pending: [[String]] = [[]]
    while let path = pending.popLast(), pages.count < limit {
      let page = Page(path: path, result: try ImageCacheBinary.run(path + ["--help"]))
      pages.append(page)
      pending += subcommands(in: page.help).map { path + [$0] }
    }
    return pages
  }

  /// The lines of the help section `title` (`OPTIONS:`, `SUBCOMMANDS:`), up to the next
  /// section.
  static func section(_ title: String, of help: String) -> [Substring] {
    let lines = help.split(separator: "\n", omittingEmptySubsequences: false)
    guard let start = lines.firstIndex(where: { $0 == title }) else { return [] }
    return Array(lines[(start + 1)...].prefix { $0.isEmpty || $0.hasPrefix(" ") })
  }

  /// The subcommands a help page lists: the first word of each entry, up to the blank line
  /// before "See 'imagecache help <subcommand>'".
  static func subcommands(in help: String) -> [String] {
    section("SUBCOMMANDS:", of: help).prefix { !$0.isEmpty }.compactMap { line in
      guard line.hasPrefix("  "), !line.hasPrefix("   "),
        let word = line.split(separator: " ").first,
        word.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" })
      else { return nil }
      return String(word)
    }
  }

  /// The long options of a help page's OPTIONS entries (`--max-size, --max-disk-size <size>`
  /// gives both names; `--host-backoff/--no-host-backoff` both too), not flags its prose
  /// mentions.
  static func options(in help: String) -> Set<String> {
    var names = Set<String>()
    for line in section("OPTIONS:", of: help) where line.hasPrefix("  -") {
      let entry = line.dropFirst(2).components(separatedBy: "  ").first ?? ""
      for match in entry.matches(of: /--[a-z0-9][a-z0-9-]*/) { names.insert(String(match.0)) }
    }
    return names
  }
}
