import Foundation
import TestSupport
import XCTest
import Yams

/// `deploy/` (issue 11, item 7): the Kubernetes manifests parse, and the Indexed Job, its
/// --shards value and the README agree.
final class DeployTests: XCTestCase {
  static var repository: URL { CronWrapperTests.repository }

  private func load(_ path: String) throws -> [String: Any] {
    let text = try String(
      contentsOf: Self.repository.appendingPathComponent(path), encoding: .utf8)
    return try XCTUnwrap(try Yams.load(yaml: text) as? [String: Any], path)
  }

  private func container(_ job: [String: Any]) throws -> [String: Any] {
    let spec = try XCTUnwrap(job["spec"] as? [String: Any])
    let pod = try XCTUnwrap((spec["template"] as? [String: Any])?["spec"] as? [String: Any])
    return try XCTUnwrap((pod["containers"] as? [[String: Any]])?.first)
  }

  /// The pods' shell script: the shard, then the finish (issue 40, item 6).
  static func podScript(_ job: [String: Any]) throws -> String {
    let spec = try XCTUnwrap(job["spec"] as? [String: Any])
    let pod = try XCTUnwrap((spec["template"] as? [String: Any])?["spec"] as? [String: Any])
    let container = try XCTUnwrap((pod["containers"] as? [[String: Any]])?.first)
    XCTAssertEqual(container["command"] as? [String], ["/bin/sh", "-c"])
    return try XCTUnwrap((container["args"] as? [String])?.first)
  }

  func testTheIndexedJobRunsAsManyShardsAsItHasCompletions() throws {
    let job = try load("deploy/k8s/prefetch-job.yaml")
    XCTAssertEqual(job["kind"] as? String, "Job")
    let spec = try XCTUnwrap(job["spec"] as? [String: Any])
    XCTAssertEqual(spec["completionMode"] as? String, "Indexed")
    let completions = try XCTUnwrap(spec["completions"] as? Int)
    XCTAssertEqual(spec["parallelism"] as? Int, completions)
    let script = try Self.podScript(job)
    XCTAssertTrue(script.contains("--shards \(completions) "), "completions = --shards: \(script)")
    XCTAssertTrue(script.contains("| grep -qx \(completions) "), "the finish counts N reports")
    XCTAssertTrue(script.contains("shard-{shard}.json"))
    XCTAssertTrue(script.contains("--allow-url-failures"), "404s must not fail the pods")

    let readme = try String(
      contentsOf: Self.repository.appendingPathComponent("README.md"), encoding: .utf8)
    XCTAssertTrue(readme.contains("completions: \(completions)"), "the README names the same N")
    XCTAssertTrue(readme.contains("--shards \(completions)"))
  }

  /// Issue 40, item 6: a shard that fails is retried alone; exit 2 and 3, which a retry would
  /// meet again, fail its index at once; an eviction is not a failure.
  func testAFailedShardIsRetriedAloneButNeverOnExit2Or3() throws {
    let job = try load("deploy/k8s/prefetch-job.yaml")
    let spec = try XCTUnwrap(job["spec"] as? [String: Any])
    XCTAssertGreaterThan(try XCTUnwrap(spec["backoffLimitPerIndex"] as? Int), 0)
    XCTAssertNil(spec["backoffLimit"], "per index, not one budget that one shard can use up")
    let pod = try XCTUnwrap((spec["template"] as? [String: Any])?["spec"] as? [String: Any])
    XCTAssertEqual(pod["restartPolicy"] as? String, "Never", "podFailurePolicy needs Never")
    let containerName = try XCTUnwrap(try container(job)["name"] as? String)
    let rules = try XCTUnwrap(
      (spec["podFailurePolicy"] as? [String: Any])?["rules"] as? [[String: Any]])
    let failing = rules.filter { ["FailIndex", "FailJob"].contains($0["action"] as? String) }
    let codes = failing.compactMap { $0["onExitCodes"] as? [String: Any] }
    XCTAssertEqual(codes.count, 1, "\(rules)")
    XCTAssertEqual(codes.first?["operator"] as? String, "In")
    XCTAssertEqual(Set(codes.first?["values"] as? [Int] ?? []), [2, 3])
    XCTAssertEqual(codes.first?["containerName"] as? String, containerName)
    let ignored = rules.filter { $0["action"] as? String == "Ignore" }
      .flatMap { $0["onPodConditions"] as? [[String: Any]] ?? [] }
      .compactMap { $0["type"] as? String }
    XCTAssertEqual(ignored, ["DisruptionTarget"], "an evicted pod is not a failed shard")
  }

  func testTheContainerRecipeBuildsOnTheSwiftImageAndRunsOnSlimDebian() throws {
    let recipe = try String(
      contentsOf: Self.repository.appendingPathComponent("deploy/Containerfile"), encoding: .utf8)
    let stages = recipe.split(separator: "\n").filter { $0.hasPrefix("FROM ") }
    XCTAssertEqual(stages.count, 2)
    XCTAssertTrue(stages[0].contains("swift:"))
    XCTAssertTrue(stages[1].contains("debian:bookworm-slim"))
    // The runtime stage installs the C libraries the build links, and nothing to build with.
    let runtime = recipe.components(separatedBy: "FROM debian:bookworm-slim")[1]
    for library in [
      "libcurl4", "libturbojpeg0", "libpng16-16", "libdeflate0", "libgif7", "libwebp7", "libwebpdemux2",
      "libsqlite3-0", "libxml2",
    ] {
      XCTAssertTrue(runtime.contains(library), library)
    }
    XCTAssertFalse(runtime.contains("-dev"))
  }

  // MARK: - Issue 28 item 6: an image that has what the binary loads, pods that pass
  // the "restricted" Pod Security Standard, one user and group everywhere, a nightly trigger.

  /// The runtime stage: the text after its FROM, with continued lines joined.
  private func runtimeStage() throws -> String {
    let recipe = try String(
      contentsOf: Self.repository.appendingPathComponent("deploy/Containerfile"), encoding: .utf8)
    return recipe.components(separatedBy: "FROM debian:bookworm-slim")[1]
      .replacingOccurrences(of: "\\\n", with: " ")
  }

  /// The packages the runtime stage's `apt-get install` names.
  private func runtimePackages() throws -> Set<String> {
    let stage = try runtimeStage()
    let install = try XCTUnwrap(stage.range(of: "apt-get install"), "no apt-get install")
    let words = stage[install.upperBound...].prefix { $0 != "&" }.split(
      whereSeparator: \.isWhitespace)
    return Set(words.map(String.init).filter { !$0.hasPrefix("-") })
  }

  /// Runs a tool that every Debian has, or skips on a machine without it.
  private func debian(_ tool: String, _ arguments: [String]) throws -> CommandResult {
    let path = ["/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"].map { $0 + tool }
      .first { FileManager.default.isExecutableFile(atPath: $0) }
    guard let path else { try requireOrSkip("no \(tool): the package check needs Debian") }
    return try Command.run(path, arguments)
  }

  /// The library files `ldd` resolves for `file`.
  private func libraries(of file: String) throws -> [String] {
    let ldd = try debian("ldd", [file])
    XCTAssertEqual(ldd.status, 0, ldd.stderr)
    return ldd.stdout.split(separator: "\n").compactMap { line in
      guard let arrow = line.range(of: "=> /") else { return nil }
      return line[line.index(before: arrow.upperBound)...].split(separator: " ").first.map(
        String.init)
    }
  }

  /// The Debian package that owns each of `libraries` that one does, in one dpkg call (with
  /// /usr merged, dpkg may know a library by either path).
  private func owners(of libraries: [String]) throws -> [String: String] {
    let other = { (path: String) in
      path.hasPrefix("/usr/") ? String(path.dropFirst(4)) : "/usr" + path
    }
    let found = try debian("dpkg-query", ["-S"] + libraries + libraries.map(other))
    var owners: [String: String] = [:]
    for line in found.stdout.split(separator: "\n") {
      guard let separator = line.range(of: ": /") else { continue }
      let package = line[..<separator.lowerBound].split(separator: ":")[0]
      let path = String(line[line.index(before: separator.upperBound)...])
      owners[path] = String(package)
      owners[other(path)] = String(package)
    }
    return owners
  }

  /// `packages` and everything they depend on, as installed here (the image's Debian release).
  private func withDependencies(_ packages: Set<String>) throws -> Set<String> {
    var closure = packages
    var next = packages
    while !next.isEmpty {
      let shown = try debian(
        "dpkg-query", ["-W", "-f=${Depends}, ${Pre-Depends}\n"] + next.sorted())
      next = []
      for alternative in shown.stdout.split(whereSeparator: { ",|\n".contains($0) }) {
        guard let word = alternative.split(separator: " ").first else { continue }
        let name = String(word.split(separator: ":").first ?? word)
        if closure.insert(name).inserted { next.insert(name) }
      }
    }
    return closure
  }

  func testTheImageInstallsEveryLibraryTheBinaryLinksOrLoadsWithDlopen() throws {
    // What Sources/CImaging and Sources/CXML2 load at run time: cairo, for thumbnails and
    // transformers, and libxml2, for sitemaps.
    let opened = try ["Sources/CImaging/cairo_loader.c", "Sources/CXML2/xml_loader.c"].flatMap {
      try String(contentsOf: Self.repository.appendingPathComponent($0), encoding: .utf8)
        .matches(of: /dlopen\("([^"]+)"/).map { String($0.output.1) }
    }
    XCTAssertEqual(opened, ["libcairo.so.2", "libxml2.so.2"])
    let cache = try debian("ldconfig", ["-p"])
    var libraries = try libraries(of: ImageCacheBinary.path)
    for name in opened {
      let resolved = try XCTUnwrap(
        cache.stdout.split(separator: "\n").first {
          $0.contains("\(name) (") && $0.contains("x86-64")
        }?
        .components(separatedBy: " => ").last,
        "\(name) is not installed here (scripts/install-system-packages installs it)")
      libraries += [resolved] + (try self.libraries(of: resolved))
    }

    let installed = try withDependencies(try runtimePackages())
    let owners = try owners(of: Array(Set(libraries)))
    for library in Set(libraries).sorted() {
      guard let owner = owners[library] else {
        // The Swift runtime: the image's binary is built with --static-swift-stdlib.
        XCTAssertTrue(library.contains("/lib/swift/linux/"), "\(library) is in no package")
        continue
      }
      XCTAssertTrue(
        installed.contains(owner),
        "\(library) comes from \(owner), which deploy/Containerfile's runtime stage does not install"
      )
    }
    for package in ["libcairo2", "libxml2"] {
      XCTAssertTrue(try runtimePackages().contains(package), "dlopen'ed: named, not assumed")
    }
  }

  /// dpkg-shlibdeps finds what the binary links, not what it loads with dlopen: libxml2 (every
  /// sitemap) is named in the package's Depends, cairo (variants only) in its Recommends.
  func testThePackageDependsOnTheLibrariesItLoadsWithDlopen() throws {
    let control = try String(
      contentsOf: Self.repository.appendingPathComponent("deploy/debian/control"), encoding: .utf8)
    func field(_ name: String) throws -> [String] {
      let line = try XCTUnwrap(
        control.split(separator: "\n").first { $0.hasPrefix(name + ": ") }, name)
      return line.dropFirst(name.count + 2).split(separator: ",").map {
        String($0.split(separator: " ").first ?? "")
      }
    }
    XCTAssertTrue(try field("Depends").contains("libxml2"))
    XCTAssertTrue(try field("Recommends").contains("libcairo2"))
  }

  /// Every pod template in deploy/k8s, with the file it is in: a Job's, or a CronJob's Job's.
  private func podTemplates() throws -> [(String, [String: Any])] {
    let folder = Self.repository.appendingPathComponent("deploy/k8s")
    let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
      .filter { $0.hasSuffix(".yaml") }.sorted()
    XCTAssertTrue(files.contains("nightly-cronjob.yaml"), "a CronJob starts the nightly run")
    return try files.map { file in
      let object = try load("deploy/k8s/" + file)
      var spec = try XCTUnwrap(object["spec"] as? [String: Any], file)
      if object["kind"] as? String == "CronJob" {
        let job = try XCTUnwrap(spec["jobTemplate"] as? [String: Any], file)
        spec = try XCTUnwrap(job["spec"] as? [String: Any], file)
      }
      let template = try XCTUnwrap(spec["template"] as? [String: Any], file)
      return (file, try XCTUnwrap(template["spec"] as? [String: Any], file))
    }
  }

  func testEveryPodPassesTheRestrictedPodSecurityStandard() throws {
    let allowedVolumes: Set = [
      "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
      "projected", "secret", "name",
    ]
    for (file, pod) in try podTemplates() {
      let context = pod["securityContext"] as? [String: Any] ?? [:]
      XCTAssertEqual(context["runAsNonRoot"] as? Bool, true, file)
      XCTAssertNotEqual(context["runAsUser"] as? Int, 0, file)
      XCTAssertEqual(
        (context["seccompProfile"] as? [String: Any])?["type"] as? String, "RuntimeDefault", file)
      for key in ["hostNetwork", "hostPID", "hostIPC"] {
        XCTAssertNotEqual(pod[key] as? Bool, true, "\(file): \(key)")
      }
      for volume in pod["volumes"] as? [[String: Any]] ?? [] {
        XCTAssertTrue(Set(volume.keys).isSubset(of: allowedVolumes), "\(file): \(volume)")
      }
      let containers =
        (pod["containers"] as? [[String: Any]] ?? [])
        + (pod["initContainers"] as? [[String: Any]] ?? [])
      XCTAssertFalse(containers.isEmpty, file)
      for container in containers {
        let name = "\(file): \(container["name"] ?? "")"
        let own = container["securityContext"] as? [String: Any] ?? [:]
        XCTAssertEqual(own["allowPrivilegeEscalation"] as? Bool, false, name)
        XCTAssertNotEqual(own["privileged"] as? Bool, true, name)
        XCTAssertNotEqual(own["runAsNonRoot"] as? Bool, false, name)
        XCTAssertNotEqual(own["runAsUser"] as? Int, 0, name)
        let capabilities = own["capabilities"] as? [String: Any] ?? [:]
        XCTAssertEqual(capabilities["drop"] as? [String], ["ALL"], name)
        XCTAssertTrue(
          Set(capabilities["add"] as? [String] ?? []).isSubset(of: ["NET_BIND_SERVICE"]), name)
      }
    }
  }

  func testTheImageAndThePodsRunAsTheSameUserAndGroup() throws {
    let stage = try runtimeStage()
    let user = try XCTUnwrap(stage.firstMatch(of: /useradd[^\n]*--uid (\d+)/)?.output.1)
    let group = try XCTUnwrap(stage.firstMatch(of: /groupadd[^\n]*--gid (\d+)/)?.output.1)
    XCTAssertEqual(stage.firstMatch(of: /useradd[^\n]*--gid (\d+)/)?.output.1, group)
    XCTAssertEqual(stage.firstMatch(of: /\nUSER (\S+)/)?.output.1, "\(user):\(group)"[...])
    for (file, pod) in try podTemplates() {
      let context = try XCTUnwrap(pod["securityContext"] as? [String: Any], file)
      XCTAssertEqual(context["runAsUser"] as? Int, Int(user), file)
      XCTAssertEqual(context["runAsGroup"] as? Int, Int(group), file)
      XCTAssertEqual(context["fsGroup"] as? Int, Int(group), file)
    }
  }

  func testTheNightlyCronJobStartsTheIndexedJobAsWritten() throws {
    let cron = try load("deploy/k8s/nightly-cronjob.yaml")
    XCTAssertEqual(cron["kind"] as? String, "CronJob")
    let spec = try XCTUnwrap(cron["spec"] as? [String: Any])
    XCTAssertNotNil(spec["schedule"] as? String)
    XCTAssertEqual(spec["concurrencyPolicy"] as? String, "Forbid", "one night at a time")
    let started = try XCTUnwrap((spec["jobTemplate"] as? [String: Any])?["spec"] as? NSDictionary)
    let job = try XCTUnwrap(try load("deploy/k8s/prefetch-job.yaml")["spec"] as? NSDictionary)
    XCTAssertEqual(started, job, "the CronJob's Job is prefetch-job.yaml's, not a drifted copy")
    let folder = Self.repository.appendingPathComponent("deploy/k8s")
    XCTAssertEqual(
      try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted(),
      ["nightly-cronjob.yaml", "prefetch-job.yaml"],
      "the finish is the Job's last step: no other Job waits to be started by hand")
  }
}
