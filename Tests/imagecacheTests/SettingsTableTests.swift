import Foundation
import Runner
import TestSupport
import XCTest

/// Each job setting is declared once, in ``JobSetting`` (issue 43 item 3): the binary's
/// `--help`, docs/jobs.md's tables and both man pages say what its declaration says (its field,
/// flag, range and default), so that none of them can drift from the parser and the flags.
final class SettingsTableTests: XCTestCase {
  private static func read(_ relative: String) throws -> String {
    try String(
      contentsOf: CronWrapperTests.repository.appendingPathComponent(relative), encoding: .utf8)
  }

  /// `text` with every run of white space made one space: help and man pages wrap lines.
  private static func flattened(_ text: String) -> String {
    text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
  }

  /// The rows of the Markdown table whose header row is `header`, as trimmed cells (`\|` is a
  /// cell's `|`).
  private static func rows(ofTable header: String, in markdown: String) -> [[String]] {
    let lines = markdown.components(separatedBy: "\n")
    guard let start = lines.firstIndex(of: header) else { return [] }
    return lines[(start + 2)...].prefix { $0.hasPrefix("|") }.map { line in
      line.replacingOccurrences(of: "\\|", with: "\u{0}")
        .split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
        .map {
          $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "\u{0}", with: "|")
        }
    }
  }

  /// The commands whose `--help` lists the setting's flag.
  private static func commands(of setting: JobSetting) -> [[String]] {
    setting.section == "prefetch" ? [["prefetch"], ["run"]] : [["maintain"]]
  }

  func testTheJobsPageListsEverySettingWithItsDefaultInTheTablesOrder() throws {
    let rows = Self.rows(
      ofTable: "| setting | default | meaning |", in: try Self.read("docs/jobs.md"))
    let fields = rows.map(\.[0])
    for setting in JobSetting.allCases {
      let row = try XCTUnwrap(
        rows.first { $0[0] == "`\(setting.field)`" }, "\(setting.field) is not in docs/jobs.md")
      XCTAssertTrue(
        row[1].hasPrefix(setting.defaultDocsText),
        "docs/jobs.md gives \(setting.field)'s default as \(row[1]), not \(setting.defaultDocsText)"
      )
    }
    let listed = Set(JobSetting.allCases.map { "`\($0.field)`" })
    XCTAssertEqual(fields.filter(listed.contains), JobSetting.allCases.map { "`\($0.field)`" })
  }

  func testTheJobsPageNamesEverySettingsFlagAndRange() throws {
    let page = try Self.read("docs/jobs.md")
    let flags = Self.rows(ofTable: "| job setting | flag |", in: page)
    let ranges = Self.rows(ofTable: "| kind | written | range |", in: page).map {
      $0.joined(separator: " ").replacingOccurrences(of: "`", with: "")
    }
    for setting in JobSetting.allCases {
      // A row names a section's further settings by their names alone.
      let row = flags.first {
        $0[0].contains("`\(setting.field)`") || $0[0].contains("`\(setting.name)`")
      }
      for flag in [setting.flag] + setting.declaration.aliases {
        XCTAssertTrue(
          row?[1].contains(flag) == true, "docs/jobs.md does not give \(setting.field)'s \(flag)")
      }
      guard let range = setting.rangeText else { continue }
      XCTAssertTrue(
        ranges.contains { $0.contains(range) },
        "docs/jobs.md's units do not give \(setting.field)'s range \(range)")
    }
  }

  func testTheHelpOfEveryCommandTakingASettingGivesItsDeclaredHelp() throws {
    var pages: [[String]: String] = [:]
    for setting in JobSetting.allCases {
      for command in Self.commands(of: setting) {
        if pages[command] == nil {
          pages[command] = Self.flattened(
            try ImageCacheBinary.run(command + ["--help"], environment: ["COLUMNS": "100"]).stdout)
        }
        let help = try XCTUnwrap(pages[command])
        let names = ([setting.flag] + setting.declaration.aliases).joined(separator: ", ")
        XCTAssertTrue(help.contains(names), "\(command) --help has no \(names)")
        XCTAssertTrue(
          help.contains(Self.flattened(setting.help)),
          "\(command) --help does not say: \(setting.help)")
        if let range = setting.rangeText { XCTAssertTrue(setting.help.contains(range)) }
      }
    }
  }

  func testTheManPageGivesEverySettingsDeclaredHelp() throws {
    let page = Self.flattened(
      try Self.read("man/imagecache.1").replacingOccurrences(of: "\\%", with: "")
        .replacingOccurrences(of: "\\-", with: "-"))
    for setting in JobSetting.allCases {
      XCTAssertTrue(page.contains(".It Fl \(setting.flag.dropFirst())"), "\(setting.flag)")
      XCTAssertTrue(
        page.contains(setting.help), "man/imagecache.1 does not say: \(setting.help)")
    }
  }

  /// The entry of `field` in man/imagecache-job.5, its macros' names dropped, flattened.
  private static func jobPageEntry(_ field: String) throws -> String? {
    let entries = try read("man/imagecache-job.5").components(separatedBy: ".It Sy \(field)\n")
    guard entries.count == 2 else { return nil }
    return flattened(
      entries[1].components(separatedBy: "\n.It ")[0].replacingOccurrences(of: ".Li ", with: "")
        .replacingOccurrences(of: ".Sy ", with: ""))
  }

  func testTheJobFilePageGivesEverySettingsDefault() throws {
    for setting in JobSetting.allCases {
      let entry = try XCTUnwrap(
        Self.jobPageEntry(setting.field), "man/imagecache-job.5 has no entry for \(setting.field)")
      let expected =
        if case .setting(let other) = setting.declaration.defaultValue {
          "the value of \(other.field)"
        } else {
          setting.defaultDocsText.replacingOccurrences(of: "`", with: "")
        }
      XCTAssertTrue(
        entry.replacingOccurrences(of: "$", with: "").contains("Default: \(expected)"),
        "man/imagecache-job.5 gives \(setting.field)'s default otherwise: \(entry)")
    }
  }

  func testTheJobsPageAndTheJobFilePageNameEveryPass() throws {
    let rows = Self.rows(
      ofTable: "| setting | default | meaning |", in: try Self.read("docs/jobs.md"))
    let row = try XCTUnwrap(rows.first { $0[0] == "`maintenance`" })
    let entry = try XCTUnwrap(Self.jobPageEntry("maintenance"))
    for pass in JobPass.allCases.map(\.rawValue) {
      XCTAssertTrue(row[2].contains("`\(pass)`"), "docs/jobs.md does not name the \(pass) pass")
      XCTAssertTrue(
        entry.contains(" \(pass) ") || entry.hasPrefix("\(pass) "),
        "man/imagecache-job.5 does not name the \(pass) pass: \(entry)")
    }
  }
}
