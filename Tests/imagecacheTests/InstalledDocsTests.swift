import Foundation
import TestSupport
import XCTest

/// What an installed host has to read (issue 29, item 9): man pages that render cleanly, a job
/// file reference naming every setting, and an install script that a package build can stage.
final class InstalledDocsTests: TemporaryFolderTestCase {
  private func repositoryPath(_ relative: String) -> String {
    CronWrapperTests.repository.appendingPathComponent(relative).path
  }

  static let pages = ["man/imagecache.1", "man/imagecache-cron.1", "man/imagecache-job.5"]

  /// Whether `tool` is installed.
  private func available(_ tool: String) -> Bool {
    (try? Command.run("/bin/sh", ["-c", "command -v \(tool)"]))?.status == 0
  }

  func testTheManPagesRenderWithoutWarningsOrHyphenation() throws {
    for page in Self.pages.map(repositoryPath) {
      let groff = try Command.run("/usr/bin/env", ["groff", "-ww", "-mandoc", "-z", page])
      XCTAssertEqual(groff.status, 0, groff.stderr)
      XCTAssertEqual(groff.stderr, "", "groff -ww on \(page)")
      let man = try Command.run(
        "/usr/bin/env", ["MANWIDTH=80", "man", "--warnings", "-l", page])
      XCTAssertEqual(man.status, 0, man.stderr)
      XCTAssertEqual(man.stderr, "", "man --warnings on \(page)")
      // A hyphen man adds at a line break (U+2010): in an option name, it cannot be copied.
      XCTAssertFalse(man.stdout.contains("\u{2010}"), "hyphenated words in \(page)")
      guard available("mandoc") else {
        try requireOrSkip("mandoc is not installed (Debian: mandoc): the pages are not linted")
      }
      let lint = try Command.run("/usr/bin/env", ["mandoc", "-T", "lint", "-W", "warning", page])
      XCTAssertEqual(lint.stdout + lint.stderr, "", "mandoc -T lint on \(page)")
    }
  }

  /// The settings the parser knows, asked of the parser itself: a job file with an unknown
  /// setting is refused with the list of known ones, at the top level and in each mapping (a
  /// mapping's settings are named `mapping.setting`, in place of the mapping's own name).
  private func knownSettings() throws -> [String] {
    func known(in yaml: String) throws -> (field: String, names: [String])? {
      let job = temporary.appending("probe.yaml")
      try yaml.write(toFile: job, atomically: true, encoding: .utf8)
      let result = try ImageCacheBinary.run(["run", job])
      XCTAssertEqual(result.status, 2, result.stderr)
      let pattern = #"field '([^']*)': unknown setting \(known: ([^)]*)\)"#
      guard let match = result.stderr.firstMatch(of: try Regex(pattern)),
        let field = match.output[1].substring, let list = match.output[2].substring
      else { return nil }
      return (String(field), list.components(separatedBy: ", "))
    }
    let cache = "cache: {directory: \(temporary.appending("cache"))"
    let top = try XCTUnwrap(try known(in: "\(cache)}\nnotASetting: 1\n")).names
    var settings: [String] = []
    for name in top {
      let yaml =
        name == "cache"
        ? "\(cache), notASetting: 1}\n" : "\(cache)}\n\(name): {notASetting: 1}\n"
      guard let nested = try known(in: yaml), nested.field == "\(name).notASetting" else {
        settings.append(name)
        continue
      }
      settings += nested.names.map { "\(name).\($0)" }
    }
    return settings
  }

  func testTheJobPageNamesEverySettingTheParserKnows() throws {
    let page = try String(contentsOfFile: repositoryPath("man/imagecache-job.5"), encoding: .utf8)
    let settings = try knownSettings()
    XCTAssertTrue(settings.contains("prefetch.concurrency"), "\(settings)")
    XCTAssertTrue(settings.contains("cache.maxDiskAge"), "\(settings)")
    for setting in settings {
      XCTAssertTrue(
        page.contains("\n.It Sy \(setting)\n"), "\(setting) has no entry in imagecache-job(5)")
    }
  }

  func testTheInstallScriptStagesEverythingUnderDestdirAndNothingOutside() throws {
    let stage = temporary.appending("stage")
    // A prefix nobody has: had anything been written outside the stage, it would be there.
    let prefix = "/opt/imagecache-install-test-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: prefix) }
    let installed = try Command.run(
      "/bin/bash", [repositoryPath("scripts/install")],
      environment: ProcessInfo.processInfo.environment.merging(
        ["DESTDIR": stage, "PREFIX": prefix, "BINARY": ImageCacheBinary.path]
      ) { $1 })
    XCTAssertEqual(installed.status, 0, installed.stderr)
    XCTAssertFalse(FileManager.default.fileExists(atPath: prefix), "written outside DESTDIR")

    let files = Set(
      (FileManager.default.enumerator(atPath: stage)?.allObjects as? [String] ?? [])
        .filter { path in
          var isDirectory: ObjCBool = false
          FileManager.default.fileExists(atPath: stage + "/" + path, isDirectory: &isDirectory)
          return !isDirectory.boolValue
        })
    let under = String(prefix.dropFirst()) + "/"
    XCTAssertEqual(
      files,
      Set(
        [
          "bin/imagecache", "bin/imagecache-cron",
          "share/man/man1/imagecache.1", "share/man/man1/imagecache-cron.1",
          "share/man/man5/imagecache-job.5",
          "share/bash-completion/completions/imagecache", "share/zsh/site-functions/_imagecache",
          "share/fish/vendor_completions.d/imagecache.fish",
          "lib/systemd/system/imagecache-nightly.service",
          "lib/systemd/system/imagecache-nightly.timer",
          "share/doc/imagecache/README.md", "share/doc/imagecache/report-schema.json",
          "share/doc/imagecache/example.yaml", "share/doc/imagecache/crontab.example",
          "share/doc/imagecache/imagecache.rules.yml",
        ].map { under + $0 }
          // The pages the README links to, where its links lead.
          + (try FileManager.default.contentsOfDirectory(atPath: repositoryPath("docs")))
          .filter { $0.hasSuffix(".md") || $0 == "report-schema.json" }
          .map { under + "share/doc/imagecache/docs/" + $0 }))
    // The unit and the crontab run the wrapper where it was installed.
    let unit = try String(
      contentsOfFile: stage + prefix + "/lib/systemd/system/imagecache-nightly.service",
      encoding: .utf8)
    XCTAssertTrue(unit.contains("ExecStart=\(prefix)/bin/imagecache-cron "), unit)
    let crontab = try String(
      contentsOfFile: stage + prefix + "/share/doc/imagecache/crontab.example", encoding: .utf8)
    XCTAssertTrue(crontab.contains(" \(prefix)/bin/imagecache-cron "), crontab)
    XCTAssertTrue(FileManager.default.isExecutableFile(atPath: stage + prefix + "/bin/imagecache"))
  }
}
