import Foundation
import TestSupport
import XCTest

/// The bash completion script that `imagecache --generate-completion-script bash` prints (and
/// scripts/install installs), sourced in a real bash and asked for candidates as bash asks
/// when Tab is pressed: file names where a file is meant, folder names where a folder is.
final class CompletionTests: TemporaryFolderTestCase {
  private var script: String!

  override func setUpWithError() throws {
    try super.setUpWithError()
    let generated = try ImageCacheBinary.run(["--generate-completion-script", "bash"])
    XCTAssertEqual(generated.status, 0, generated.stderr)
    script = temporary.appending("imagecache.bash")
    try generated.stdout.write(toFile: script, atomically: true, encoding: .utf8)
    let work = temporary.appending("work")
    for folder in ["cache-a", "reports"] {
      try FileManager.default.createDirectory(
        atPath: work + "/" + folder, withIntermediateDirectories: true)
    }
    for file in ["urls.txt", "nightly.yaml", "notes.md"] {
      try "".write(toFile: work + "/" + file, atomically: true, encoding: .utf8)
    }
  }

  /// What bash offers for the last of `words` (the word being completed, "" for none yet),
  /// the completion function called as `complete -F` calls it, in the folder of files and
  /// folders made above.
  private func candidates(_ words: [String]) throws -> Set<String> {
    func quoted(_ word: String) -> String { "'" + word + "'" }
    let line = words.joined(separator: " ")
    let result = try Command.run(
      "/bin/bash",
      [
        "--norc", "--noprofile", "-c",
        """
        source \(quoted(script))
        COMP_WORDS=(\(words.map(quoted).joined(separator: " ")))
        COMP_CWORD=\(words.count - 1)
        COMP_LINE=\(quoted(line))
        COMP_POINT=${#COMP_LINE}
        _imagecache imagecache \(quoted(words[words.count - 1])) \(quoted(words[words.count - 2]))
        printf '%s\\n' "${COMPREPLY[@]}"
        """,
      ], directory: temporary.appending("work"))
    XCTAssertEqual(result.status, 0, result.stderr)
    return Set(result.stdout.split(separator: "\n").map(String.init))
  }

  func testManifestsCompleteAsFileNames() throws {
    let offered = try candidates(["imagecache", "prefetch", ""])
    XCTAssertTrue(offered.isSuperset(of: ["urls.txt", "nightly.yaml", "reports"]), "\(offered)")
    XCTAssertEqual(try candidates(["imagecache", "prefetch", "ur"]), ["urls.txt"])
  }

  func testJobFilesCompleteAsYAMLAndJSONFilesAndFolders() throws {
    let offered = try candidates(["imagecache", "run", ""])
    XCTAssertTrue(offered.isSuperset(of: ["nightly.yaml", "reports", "cache-a"]), "\(offered)")
    XCTAssertFalse(offered.contains("urls.txt"), "not a job file: \(offered)")
  }

  func testReportAndMetricsFilesCompleteAsFileNames() throws {
    for option in ["--report", "--metrics"] {
      let offered = try candidates(["imagecache", "run", "nightly.yaml", option, ""])
      XCTAssertTrue(offered.isSuperset(of: ["urls.txt", "reports"]), "\(option): \(offered)")
    }
  }

  func testFolderOptionsOfferOnlyFolders() throws {
    for words in [
      ["imagecache", "prefetch", "urls.txt", "--cache", ""],
      ["imagecache", "stats", "--cache", ""],
      ["imagecache", "migrate", "--from", ""],
    ] {
      XCTAssertEqual(try candidates(words), ["cache-a", "reports"], "\(words)")
    }
  }
}
