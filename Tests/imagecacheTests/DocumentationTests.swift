import Foundation
import TestSupport
import XCTest

/// The documentation in `docs/` is the reference users read (issue 33): every flag the binary
/// accepts and every setting a job file may hold is described there, and no link in the README
/// or `docs/` leads nowhere. Each list is asked of the built binary, so that a flag or setting
/// added without its documentation fails here.
final class DocumentationTests: TemporaryFolderTestCase {
  private static var repository: URL { CronWrapperTests.repository }

  /// The Markdown pages of `docs/`, by path relative to the repository.
  private static func docsPages() throws -> [String] {
    try FileManager.default.contentsOfDirectory(
      atPath: repository.appendingPathComponent("docs").path
    ).filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
  }

  private static func read(_ relative: String) throws -> String {
    try String(contentsOf: repository.appendingPathComponent(relative), encoding: .utf8)
  }

  // MARK: Flags

  /// Whether `text` names `flag` as itself: `--shard` is not named by `--shards`.
  private static func names(_ text: String, flag: String) -> Bool {
    var searchRange = text.startIndex..<text.endIndex
    while let found = text.range(of: flag, range: searchRange) {
      let next = found.upperBound < text.endIndex ? text[found.upperBound] : " "
      if !(next.isLetter || next.isNumber || next == "-") { return true }
      searchRange = found.upperBound..<text.endIndex
    }
    return false
  }

  func testEveryFlagOfEveryCommandIsDocumentedInDocs() throws {
    let docs = try Self.docsPages().map(Self.read).joined(separator: "\n")
    // Every command path, so that a new subcommand is covered without being listed here.
    let pages = try HelpPages.walk()
    let commands = pages.map(\.path)
    XCTAssertTrue(commands.contains(["report", "merge"]), "\(commands)")
    XCTAssertTrue(commands.contains(["blacklist", "remove"]), "\(commands)")
    var checked: Set<String> = []
    for page in pages {
      let command = page.path
      for flag in HelpPages.options(in: page.help) where checked.insert(flag).inserted {
        XCTAssertTrue(
          Self.names(docs, flag: flag),
          "\(flag) (imagecache \(command.joined(separator: " ")) --help) is in no page of docs/")
      }
    }
    XCTAssertTrue(checked.contains("--max-bandwidth"), "\(checked.sorted())")
    XCTAssertTrue(checked.contains("--no-host-backoff"), "\(checked.sorted())")
  }

  // MARK: Job settings

  /// The settings the job parser knows, asked of the parser through the binary: a setting it
  /// does not know is refused with the list of those it does, at the top level and inside
  /// each mapping (named `mapping.setting`).
  private func jobSettings() throws -> [String] {
    let cache = "directory: \(temporary.appending("cache"))"
    func knownList(_ yaml: String, field: String) throws -> [String]? {
      let job = temporary.appending("settings.yaml")
      try yaml.write(toFile: job, atomically: true, encoding: .utf8)
      let run = try ImageCacheBinary.run(["run", "--dry-run", job])
      guard
        let match = run.stderr.firstMatch(
          of: try Regex<(Substring, Substring)>(
            "field '\(field)': unknown setting \\(known: ([^)]*)\\)"))
      else { return nil }
      return match.output.1.components(separatedBy: ", ")
    }
    let top = try XCTUnwrap(
      knownList("cache: {\(cache)}\nzzUnknown: 1\n", field: "zzUnknown"),
      "the parser no longer lists its settings")
    var settings: [String] = []
    for name in top {
      let yaml =
        name == "cache"
        ? "cache: {\(cache), zzUnknown: 1}\n"
        : "cache: {\(cache)}\n\(name): {zzUnknown: 1}\n"
      if let nested = try knownList(yaml, field: "\(name).zzUnknown") {
        settings += nested.map { "\(name).\($0)" }
      } else {
        settings.append(name)
      }
    }
    return settings
  }

  func testEveryJobSettingIsDocumentedInTheJobsPage() throws {
    let page = try Self.read("docs/jobs.md")
    let settings = try jobSettings()
    XCTAssertTrue(settings.contains("prefetch.hostBackoff"), "\(settings)")
    XCTAssertTrue(settings.contains("sitemap.order"), "\(settings)")
    XCTAssertTrue(settings.contains("allowURLFailures"), "\(settings)")
    for setting in settings {
      XCTAssertTrue(page.contains("`\(setting)`"), "\(setting) is not in docs/jobs.md")
    }
  }

  // MARK: Links

  /// GitHub's anchor for a heading: lowercased, punctuation other than `-` and `_` dropped,
  /// spaces made hyphens; a repeated heading gets `-1`, `-2`...
  private static func anchors(in markdown: String) -> Set<String> {
    var anchors: Set<String> = []
    var inFence = false
    for line in markdown.components(separatedBy: "\n") {
      if line.hasPrefix("```") { inFence.toggle() }
      guard !inFence, let heading = line.firstMatch(of: /^#{1,6} +(.*)$/) else { continue }
      let slug = String(
        heading.output.1.lowercased().unicodeScalars.compactMap { scalar -> Character? in
          if scalar == " " { return "-" }
          let character = Character(scalar)
          return character.isLetter || character.isNumber || scalar == "-" || scalar == "_"
            ? character : nil
        })
      var unique = slug
      var number = 0
      while anchors.contains(unique) {
        number += 1
        unique = "\(slug)-\(number)"
      }
      anchors.insert(unique)
    }
    return anchors
  }

  /// The targets of Markdown links `[text](target)` outside fenced code blocks.
  private static func linkTargets(in markdown: String) -> [String] {
    var targets: [String] = []
    var inFence = false
    for line in markdown.components(separatedBy: "\n") {
      if line.hasPrefix("```") { inFence.toggle() }
      guard !inFence else { continue }
      targets += line.matches(of: /\]\(([^)\s]+)\)/).map { String($0.output.1) }
    }
    return targets
  }

  func testEveryRelativeLinkInTheReadmeAndDocsResolves() throws {
    let pages = try ["README.md"] + Self.docsPages()
    var checked = 0
    for page in pages {
      let text = try Self.read(page)
      let folder = Self.repository.appendingPathComponent(page).deletingLastPathComponent()
      for target in Self.linkTargets(in: text)
      where !target.contains("://") && !target.hasPrefix("mailto:") {
        checked += 1
        let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(parts[0])
        let file =
          path.isEmpty
          ? Self.repository.appendingPathComponent(page) : folder.appendingPathComponent(path)
        guard FileManager.default.fileExists(atPath: file.path) else {
          XCTFail("\(page): the link \(target) leads to no file")
          continue
        }
        guard parts.count == 2, file.pathExtension == "md" else { continue }
        let anchor = String(parts[1])
        let headings = Self.anchors(in: try String(contentsOf: file, encoding: .utf8))
        XCTAssertTrue(
          headings.contains(anchor),
          "\(page): the link \(target) names no heading of \(file.lastPathComponent)")
      }
    }
    XCTAssertGreaterThan(checked, 20, "links were not found")
  }
}
