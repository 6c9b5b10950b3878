import Foundation
import TestSupport
import XCTest

/// Every error is said in one style, `imagecache: ` and what is wrong (exit 2 here); a
/// mistake in the command line's syntax adds the usage line of the command meant and where
/// its help is, and no other error has a usage block.
final class ErrorStyleTests: TemporaryFolderTestCase {
  /// The error `arguments` make: its exit code and stderr's lines.
  private func error(_ arguments: [String]) throws -> [String] {
    let result = try ImageCacheBinary.run(arguments)
    XCTAssertEqual(result.status, 2, "\(arguments): \(result.stderr)")
    return result.stderr.split(separator: "\n").map(String.init)
  }

  func testASyntaxErrorIsOneLineThenTheCommandsUsageLineAndWhereItsHelpIs() throws {
    let manifest = try temporary.manifest(["https://cdn.example.com/a.jpg"])
    for (arguments, command) in [
      (["prefetch", manifest, "--concurrency", "lots"], "prefetch"),
      (["prefetch", manifest, "--concurrency", "0"], "prefetch"),
      (["prefetch", manifest, "--bogus"], "prefetch"),
      (["prefetch"], "prefetch"),
      (["run"], "run"),
      (["report", "merge"], "report merge"),
      (["maintian"], ""),
    ] {
      let lines = try error(arguments)
      XCTAssertEqual(lines.count, 3, "\(arguments): \(lines)")
      XCTAssertTrue(lines.first?.hasPrefix("imagecache: ") == true, "\(arguments): \(lines)")
      XCTAssertEqual(
        lines.first?.dropFirst("imagecache: ".count).first?.isUppercase, false,
        "a clause, as every error: \(lines)")
      let name = command.isEmpty ? "imagecache" : "imagecache \(command)"
      XCTAssertTrue(lines.dropFirst().first?.hasPrefix("Usage: \(name) ") == true, "\(lines)")
      XCTAssertEqual(lines.last, "See '\(name) --help'.", "\(arguments)")
    }
  }

  func testAnErrorInAFileOrTheCacheIsOneLineWithoutUsage() throws {
    let job = temporary.appending("nightly.yaml")
    try "cache: {directory: cache}\nmanifests: [urls.txt]\nbogus: 1\n".write(
      toFile: job, atomically: true, encoding: .utf8)
    let manifest = try temporary.manifest(["https://cdn.example.com/a.jpg"])
    for arguments in [
      ["prefetch", temporary.appending("missing.txt"), "--cache", temporary.appending("c")],
      ["prefetch", job, "--cache", temporary.appending("c")],
      ["prefetch", manifest, "--cacert", temporary.appending("missing.pem")],
      ["run", job],
      ["run", temporary.appending("missing.yaml")],
      ["stats", "--cache", temporary.appending("no-cache")],
      ["migrate", "--cache", temporary.appending("c"), "--from", manifest],
    ] {
      let lines = try error(arguments)
      XCTAssertEqual(lines.count, 1, "\(arguments): \(lines)")
      XCTAssertTrue(lines.first?.hasPrefix("imagecache: ") == true, "\(arguments): \(lines)")
    }
  }
}
