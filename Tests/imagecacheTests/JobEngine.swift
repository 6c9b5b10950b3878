import Foundation
import XCTest

/// The real job engines that end-to-end tests run on this machine (a one-node Slurm cluster, a
/// one-node Grid Engine cell): where their tools are, and whether the tests can run here.
enum JobEngine {
  /// The path of an engine's tool: on PATH or in the sbin folders Debian installs daemons to.
  static func tool(_ name: String) throws -> String {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    for folder in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin"] {
      let candidate = folder + "/" + name
      if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw JobEngineError("no \(name)")
  }

  /// Skips when this machine cannot run `engine` (its daemons run as root, and every one of
  /// `tools` must be installed: `packages` says which Debian packages have them), or fails
  /// when CI says it must (`IMAGECACHE_REQUIRE_ENGINES=1`, set by `.ci/run`, which installs
  /// them).
  static func require(_ engine: String, tools: [String], packages: String) throws {
    var reason: String?
    if getuid() != 0 {
      reason = "the one-node \(engine) runs its daemons as root; this is uid \(getuid())"
    } else {
      let absent = tools.filter { (try? tool($0)) == nil }
      if !absent.isEmpty {
        reason =
          "no \(absent.joined(separator: ", ")): bash scripts/install-system-packages \(packages)"
      }
    }
    guard let reason else { return }
    if ProcessInfo.processInfo.environment["IMAGECACHE_REQUIRE_ENGINES"] == "1" {
      throw JobEngineError("IMAGECACHE_REQUIRE_ENGINES=1 but \(reason)")
    }
    throw XCTSkip("\(engine): \(reason)")
  }
}

/// What went wrong with an engine itself (it would not start, a job did not end), as opposed
/// to a failed expectation about imagecache.
struct JobEngineError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}
