import Core
import Foundation
import TestSupport
import XCTest

/// The command line's conventions and promises (issue 13, items 5-11): what a sysadmin trips
/// over when a flag is mistyped, a run waits, or a migration is planned and then run.
final class OperationsTests: LoopbackTestCase {
  private func run(_ arguments: [String], in directory: String? = nil) throws -> CommandResult {
    try ImageCacheBinary.run(arguments, directory: directory)
  }

  private func tree(_ path: String) -> [String] {
    (FileManager.default.enumerator(atPath: path)?.allObjects as? [String] ?? []).sorted()
  }

  func testAMissingCacheIsAnErrorForEveryCommandThatOnlyReadsOrMaintainsOne() throws {
    let missing = temporary.appending("typo/cache")
    for command in [
      ["stats"], ["blacklist", "list"], ["blacklist", "clear"], ["maintain"],
      ["maintain", "--dry-run"],
    ] {
      let result = try run(command + ["--cache", missing])
      XCTAssertEqual(result.status, 2, "\(command): \(result.stderr)")
      XCTAssertTrue(result.stderr.contains("no cache at \(missing)/default"), result.stderr)
      XCTAssertFalse(result.stderr.contains("Usage:"), "no usage block for a missing cache")
    }
    XCTAssertFalse(FileManager.default.fileExists(atPath: temporary.appending("typo")))
    // prefetch creates a cache, and says so.
    let empty = temporary.appending("empty.txt")
    XCTAssertTrue(FileManager.default.createFile(atPath: empty, contents: Data()))
    let created = try run(["prefetch", empty, "--cache", missing])
    XCTAssertEqual(created.status, 0, created.stderr)
    XCTAssertTrue(
      created.stderr.contains("(new: it did not exist and was created)"), created.stderr)
  }

  /// A `--cache` (or a job's `cache: directory`) that names a FIFO or a file, or lies under a
  /// file, is the user's mistake: exit 2 naming it and what it is, never exit 4 "Not a
  /// directory"; nothing is read or written, and the FIFO stays a FIFO.
  func testACacheThatIsNotAFolderIsAUsageErrorNamingItForEveryCommand() throws {
    let fifo = temporary.appending("fifo")
    XCTAssertEqual(mkfifo(fifo, 0o644), 0)
    let file = temporary.appending("file")
    XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
    let urls = temporary.appending("urls.txt")
    try "http://127.0.0.1:9/a.png\n".write(toFile: urls, atomically: true, encoding: .utf8)
    let commands = [
      ["stats"], ["blacklist", "list"], ["blacklist", "remove", "http://127.0.0.1:9/a.png"],
      ["blacklist", "clear"], ["refusals", "list"], ["refusals", "remove", "http://127.0.0.1:9"],
      ["refusals", "clear"], ["maintain", "--max-age", "7d"], ["migrate"], ["verify"],
      ["prefetch", urls], ["prefetch", urls, "--dry-run"],
      // Reads nothing there, but prints paths under it that no app has.
      ["key", "http://127.0.0.1:9/a.png"],
    ]
    for (cache, named, what) in [
      (fifo, fifo, "a FIFO"), (file, file, "a file"), (file + "/cache", file, "a file"),
    ] {
      for command in commands {
        let result = try run(command + ["--cache", cache])
        XCTAssertEqual(result.status, 2, "\(command) --cache \(cache): \(result.stderr)")
        XCTAssertTrue(
          result.stderr.contains("use \(named): \(what) where "), "\(command): \(result.stderr)")
        XCTAssertFalse(result.stderr.contains("Not a directory"), result.stderr)
      }
      let job = temporary.appending("job.yaml")
      try "cache:\n  directory: \(cache)\nmanifests: [\(urls)]\n".write(
        toFile: job, atomically: true, encoding: .utf8)
      for extra in [[], ["--dry-run"]] {
        let result = try run(["run", job] + extra)
        XCTAssertEqual(result.status, 2, "run \(extra) \(cache): \(result.stderr)")
        XCTAssertTrue(result.stderr.contains("use \(named): \(what) where "), result.stderr)
      }
    }
    var info = stat()
    XCTAssertEqual(lstat(fifo, &info), 0)
    XCTAssertEqual(info.st_mode & S_IFMT, S_IFIFO, "the FIFO is left as it was")
    XCTAssertEqual(try String(contentsOfFile: file, encoding: .utf8), "x")
  }

  func testAJobNamedByARelativePathReportsAnAbsoluteCache() throws {
    try "cache:\n  directory: ./cache\nmaintenance: []\nmanifests: [urls.txt]\n".write(
      toFile: temporary.appending("job.yaml"), atomically: true, encoding: .utf8)
    XCTAssertTrue(
      FileManager.default.createFile(atPath: temporary.appending("urls.txt"), contents: Data()))
    let result = try run(["run", "job.yaml", "--json"], in: temporary.path)
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(
      try RunReport.decode(Data(result.stdout.utf8)).cache.path, temporary.appending("cache"))
  }

  func testDryRunsWriteNothing() throws {
    let cache = temporary.appending("cache")
    let builder = CacheBuilder(root: cache + "/default")
    let now = Int64(Date().timeIntervalSince1970)
    try builder.file("old.jpg", accessTime: now - 30 * 86_400)
    let before = tree(cache)
    // Limits that would delete the month-old file and trim the rest: the dry run plans it.
    for command in [
      ["maintain", "--dry-run", "--max-age", "7d", "--max-size", "1"], ["migrate", "--dry-run"],
      ["stats"], ["blacklist", "list"],
    ] {
      let result = try run(command + ["--cache", cache])
      XCTAssertEqual(result.status, 0, "\(command): \(result.stderr)")
      if command[0] == "maintain" {
        XCTAssertTrue(result.stderr.contains("would remove 1 files"), result.stderr)
      }
    }
    XCTAssertEqual(tree(cache), before, "not even the lock file or the state folder")
  }

  func testMaintainSaysItsLimitsBeforeEachPass() throws {
    let cache = temporary.appending("cache")
    try FileManager.default.createDirectory(
      atPath: cache + "/default", withIntermediateDirectories: true)
    let age = try run(["maintain", "--cache", cache, "--max-age", "7d"])
    XCTAssertEqual(age.status, 0, age.stderr)
    XCTAssertTrue(
      age.stderr.contains(
        "limits: expire: files whose accessDate is more than 7d old; trim: not run"),
      age.stderr)
    let set = try run(["maintain", "--cache", cache, "--max-age", "-1", "--max-size", "2GB"])
    XCTAssertTrue(set.stderr.contains("expire: off"), set.stderr)
    XCTAssertTrue(set.stderr.contains("trim: when over 2.0 GB"), set.stderr)
  }

  func testWaitTimeoutNamesTheHolderAndGivesUp() throws {
    let cache = temporary.appending("cache")
    try FileManager.default.createDirectory(
      atPath: cache + "/default/.imagecache", withIntermediateDirectories: true)
    // Another process holds the lock, as a running imagecache would, and says who it is.
    let lock = cache + "/default/.imagecache/lock"
    try "4242\n2026-11-23T03:17:00Z\n".write(toFile: lock, atomically: true, encoding: .utf8)
    let holder = try LockHolder.start(lock)
    defer { holder.terminate() }
    let started = Date()
    let result = try run(["maintain", "--cache", cache, "--wait-timeout", "1s"])
    XCTAssertEqual(result.status, 3, result.stderr)
    XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1)
    XCTAssertTrue(
      result.stderr.contains("waiting for the run of pid 4242 (started at 2026-11-23T03:17:00Z)"),
      result.stderr)
    XCTAssertTrue(
      result.stderr.contains(
        "another imagecache run (pid 4242, started at 2026-11-23T03:17:00Z) still held the "
          + "cache lock"),
      result.stderr)
    XCTAssertTrue(result.stderr.contains("after 1 s of waiting"), result.stderr)
  }

  func testPrefetchSaysWarningsASummaryAndTheFailedURLs() throws {
    let manifest = temporary.appending("lines.jsonl")
    try [
      "{\"url\": \"\(server.url("/a.jpg"))\", \"options\": [\"progressiveLoad\"]}",
      server.url("/gone.jpg"),
    ].joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
    let result = try run([
      "prefetch", manifest, "--cache", temporary.appending("cache"), "--retries", "0",
    ])
    XCTAssertEqual(result.status, 1)
    XCTAssertTrue(result.stderr.contains("warning: \(manifest):1: field 'options'"), result.stderr)
    XCTAssertTrue(result.stderr.contains("  failed \(server.url("/gone.jpg"))"), result.stderr)
    XCTAssertTrue(result.stderr.contains("prefetch: 2 URLs: 1 downloaded"), result.stderr)
    // The last progress line has the total, counted beside the run.
    XCTAssertTrue(result.stderr.contains("2/2 done, 0 hits, 1 downloaded"), result.stderr)
  }

  func testKeyPrintsTheDerivedKeyAndFiles() throws {
    let result = try run([
      "key", "https://a.com/p/x.jpg?w=1", "--thumbnail", "100x100", "--cache", temporary.path,
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let derived = "https://a.com/p/x-Thumbnail(%7B100.000000,100.000000%7D,1).jpg?w=1"
    XCTAssertTrue(result.stdout.contains("derived key:   \(derived)\n"), result.stdout)
    XCTAssertTrue(
      result.stdout.contains(
        "derived file:  \(temporary.path)/default/\(CacheFileName.fileName(forKey: derived))"),
      result.stdout)
    let braces = try run(["key", "https://a.com/p/x?w=1", "--thumbnail", "100x100"])
    XCTAssertTrue(braces.stdout.contains("on iOS before 17"), braces.stdout)
  }

  func testKeyPrintsTheKeyAndFileSDDerivesBeforeiOS17WhenTheChainDiverges() throws {
    let result = try run([
      "key", "https://a.com/x", "--thumbnail", "10x20", "--transformer",
      ##"{"blur": {"radius": 1}}"##, "--cache", temporary.path,
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let ios17 =
      "https://a.com/x-Thumbnail(%7B10.000000,20-SDImageBlurTransformer(1.000000).000000%7D,1)"
    let ios16 = "https:/a.com/x-Thumbnail({10.000000,20-SDImageBlurTransformer(1.000000).000000},1)"
    let folder = "\(temporary.path)/default/"
    XCTAssertTrue(result.stdout.contains("derived key:   \(ios17)\n"), result.stdout)
    XCTAssertTrue(
      result.stdout.contains(
        "derived file:  \(folder)\(CacheFileName.md5Hex(ios17)).000000},1)\n"), result.stdout)
    XCTAssertTrue(
      result.stdout.contains("derived key on iOS before 17: \(ios16)\n"), result.stdout)
    XCTAssertTrue(
      result.stdout.contains(
        "derived file on iOS before 17: \(folder)\(CacheFileName.md5Hex(ios16)).000000},1)\n"),
      result.stdout)
  }

  func testAMisspeltCommandGetsASuggestion() throws {
    let result = try run(["maintian"])
    XCTAssertEqual(result.status, 2)
    XCTAssertTrue(
      result.stderr.contains("unknown command 'maintian', did you mean 'maintain'?"), result.stderr)
    XCTAssertTrue(try run(["xyzzy"]).stderr.contains("unknown command 'xyzzy' (commands: run"))
  }

  func testVersionNamesTheLibraries() throws {
    for flag in ["--version", "-V"] {
      let result = try run([flag])
      XCTAssertEqual(result.status, 0, "\(flag): \(result.stderr)")
      for library in [
        "imagecache ", "libcurl ", "libjpeg-turbo ", "libpng ", "giflib ", "libwebp ", "libxml2 ",
      ] {
        XCTAssertTrue(result.stdout.contains(library), "\(flag): \(result.stdout)")
      }
    }
  }

  /// Issue 42: the first line names the commit scripts/build-release stamped in, or says a plain
  /// `swift build` (as the tests use) knows none; `--verbose` adds what it was built from.
  func testVersionNamesTheCommitAndVerboseTheBuildInfo() throws {
    let plain = try run(["--version"])
    XCTAssertEqual(plain.status, 0)
    XCTAssertTrue(
      plain.stdout.hasPrefix("imagecache \(ImageCacheVersion.current) (unknown commit)\n"),
      plain.stdout)
    let verbose = try run(["--version", "--verbose"])
    XCTAssertEqual(verbose.status, 0)
    XCTAssertTrue(
      verbose.stdout.hasPrefix(plain.stdout.trimmingCharacters(in: .newlines)), verbose.stdout)
    XCTAssertTrue(verbose.stdout.contains("built without scripts/build-release"), verbose.stdout)
  }

  func testAJobFileMistakeHasNoUsageBlock() throws {
    let job = temporary.appending("bad.yaml")
    try "cache:\n  directory: c\nprefetch:\n  concurrency: zero\n".write(
      toFile: job, atomically: true, encoding: .utf8)
    let result = try run(["run", job])
    XCTAssertEqual(result.status, 2)
    XCTAssertTrue(result.stderr.contains("bad.yaml:4: field 'prefetch.concurrency'"), result.stderr)
    XCTAssertFalse(result.stderr.contains("Usage:"), result.stderr)
  }

  func testSeveralJobsGiveOneJSONArrayAndOneReportEach() throws {
    var jobs: [String] = []
    for (name, path) in [("one", "/a.jpg"), ("two", "/b.png")] {
      let manifest = temporary.appending("\(name).txt")
      try server.url(path).write(toFile: manifest, atomically: true, encoding: .utf8)
      let job = temporary.appending("\(name).yaml")
      try "cache:\n  directory: cache-\(name)\nmanifests: [\(name).txt]\nmaintenance: []\n".write(
        toFile: job, atomically: true, encoding: .utf8)
      jobs.append(job)
    }
    let result = try run(["run"] + jobs + ["--json", "--report", temporary.appending("r.json")])
    XCTAssertEqual(result.status, 0, result.stderr)
    let array = try XCTUnwrap(
      try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
    XCTAssertEqual(array.map { $0["job"] as? String }, ["one", "two"])
    for name in ["one", "two"] {
      let data = try XCTUnwrap(
        FileManager.default.contents(atPath: temporary.appending("r-\(name).json")))
      XCTAssertEqual(try RunReport.decode(data).job, name)
    }
  }

  func testReportsCarryAbsoluteCachePathsAndQuietSaysOnlyTrouble() throws {
    let manifest = temporary.appending("urls.txt")
    try [server.url("/a.jpg"), server.url("/missing.jpg")].joined(separator: "\n").write(
      toFile: manifest, atomically: true, encoding: .utf8)
    let result = try run(
      ["prefetch", "urls.txt", "--cache", "relative-cache", "--json", "--quiet", "--retries", "0"],
      in: temporary.path)
    XCTAssertEqual(result.status, 1, result.stderr)
    let report = try RunReport.decode(Data(result.stdout.utf8))
    XCTAssertEqual(report.cache.path, temporary.appending("relative-cache"))
    let lines = result.stderr.split(separator: "\n")
    XCTAssertEqual(lines.count, 1, result.stderr)
    XCTAssertTrue(lines[0].hasPrefix("  failed \(server.url("/missing.jpg"))"), result.stderr)
  }

  /// `--quiet` keeps what is a warning, however its line is worded: the sweep of what a killed
  /// run left is one (the report lists it among its warnings), and its line starts with the
  /// job's name. What only informs, such as the limits the passes run with, goes.
  func testQuietKeepsAWarningWhateverItsWordingAndDropsInformation() throws {
    let cache = temporary.appending("cache")
    let builder = CacheBuilder(root: cache + "/default")
    try builder.file("kept.jpg", accessTime: Int64(Date().timeIntervalSince1970))
    func leaveStaleTemporaryFile() throws {
      let stale = cache + "/default/" + FileSystem.temporaryPrefix + "abc.jpg.x1"
      XCTAssertTrue(FileManager.default.createFile(atPath: stale, contents: Data(count: 10)))
      let twoHoursAgo = Date().addingTimeInterval(-7200)
      try FileSystem.setTimes(path: stale, access: twoHoursAgo, modification: twoHoursAgo)
    }
    let arguments = ["maintain", "--cache", cache, "--max-age", "30d"]

    try leaveStaleTemporaryFile()
    let quiet = try run(arguments + ["--quiet"])
    XCTAssertEqual(quiet.status, 0, quiet.stderr)
    let lines = quiet.stderr.split(separator: "\n")
    XCTAssertEqual(lines.count, 1, quiet.stderr)
    XCTAssertTrue(
      lines.first?.hasPrefix("maintain: removed 1 temporary file(s) (") == true, quiet.stderr)

    try leaveStaleTemporaryFile()
    let said = try run(arguments)
    XCTAssertEqual(said.status, 0, said.stderr)
    XCTAssertTrue(said.stderr.contains("maintain: removed 1 temporary file(s) ("), said.stderr)
    XCTAssertTrue(said.stderr.contains("limits: expire: files whose"), said.stderr)
  }

  func testAMigrateDryRunPlansExactlyWhatTheRunDoes() throws {
    // A legacy folder to merge, whose files carry pre-3.7.4 names (no extension), and a
    // manifest naming them: the real run merges, then renames.
    let cache = temporary.appending("cache")
    try FileManager.default.createDirectory(
      atPath: cache + "/default", withIntermediateDirectories: true)
    let legacy = CacheBuilder(root: temporary.appending("device"))
    let now = Int64(Date().timeIntervalSince1970)
    var urls: [String] = []
    for path in ["/a.jpg", "/b.png"] {
      let url = server.url(path)
      urls.append(url)
      try legacy.file(CacheFileName.md5Hex(url), size: 10, accessTime: now - 60)
    }
    // One more already in the cache under its legacy name, with a newer copy in the folder.
    let both = server.url("/c.gif")
    urls.append(both)
    try CacheBuilder(root: cache + "/default").file(
      CacheFileName.md5Hex(both), size: 5, accessTime: now - 3600)
    try legacy.file(CacheFileName.md5Hex(both), size: 7, accessTime: now - 60)
    let manifest = temporary.appending("urls.txt")
    try urls.joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)

    let arguments = [
      "migrate", "--cache", cache, "--from", temporary.appending("device"), "--manifest", manifest,
      "--json",
    ]
    let plan = try run(arguments + ["--dry-run"])
    XCTAssertEqual(plan.status, 0, plan.stderr)
    let done = try run(arguments)
    XCTAssertEqual(done.status, 0, done.stderr)
    func actions(_ json: String) throws -> [String] {
      try RunReport.decode(Data(json.utf8)).maintenance.flatMap { pass in
        // The collisions folder is named by the run's time, which differs between the two runs.
        pass.actions.map { "\($0.kind) \($0.path) \($0.destination ?? "")" }.map {
          $0.replacingOccurrences(
            of: #"collisions/[0-9T]+/"#, with: "collisions/TIME/", options: .regularExpression)
        }
      }
    }
    let planned = try actions(plan.stdout)
    XCTAssertFalse(planned.isEmpty)
    XCTAssertEqual(planned, try actions(done.stdout))
    XCTAssertFalse(FileManager.default.fileExists(atPath: temporary.appending("device")))
    XCTAssertTrue(done.stderr.contains("removed \(temporary.appending("device"))"), done.stderr)

    // Run again: the folder is gone, nothing to merge, nothing changes, exit 0.
    let again = try run(arguments)
    XCTAssertEqual(again.status, 0, again.stderr)
    XCTAssertTrue(again.stderr.contains("nothing to merge"), again.stderr)
    XCTAssertEqual(try actions(again.stdout), [])
  }

  static let commands = [
    [], ["run"], ["prefetch"], ["maintain"], ["migrate"], ["stats"], ["blacklist"],
    ["blacklist", "list"], ["blacklist", "remove"], ["blacklist", "clear"], ["report"],
    ["report", "merge"], ["report", "html"], ["key"],
  ]

  func testHelpExamplesFitAnEightyColumnTerminal() throws {
    for command in Self.commands {
      let lines = try ImageCacheBinary.run(command + ["--help"], environment: ["COLUMNS": "80"])
        .stdout.components(separatedBy: "\n")
      for (index, line) in lines.enumerated() where line.hasPrefix("  imagecache ") {
        XCTAssertLessThanOrEqual(line.count, 80, line)
        // A wrapped command would go on, unindented, on the next line.
        let next = index + 1 < lines.count ? lines[index + 1] : ""
        XCTAssertTrue(next.isEmpty || next.hasPrefix("  "), "\(command): \(line) / \(next)")
      }
    }
  }

  func testTheInstallScriptPutsCompletionsAndTheManPageInPlace() throws {
    let prefix = temporary.appending("prefix")
    let installed = try Command.run(
      "/bin/bash", [CronWrapperTests.repository.appendingPathComponent("scripts/install").path],
      environment: ProcessInfo.processInfo.environment.merging(
        ["PREFIX": prefix, "BINARY": ImageCacheBinary.path]
      ) { $1 })
    XCTAssertEqual(installed.status, 0)
    for file in [
      "bin/imagecache", "bin/imagecache-cron", "share/man/man1/imagecache.1",
      "share/zsh/site-functions/_imagecache", "share/fish/vendor_completions.d/imagecache.fish",
    ] {
      XCTAssertTrue(FileManager.default.fileExists(atPath: prefix + "/" + file), file)
    }
    let bash = try String(
      contentsOfFile: prefix + "/share/bash-completion/completions/imagecache", encoding: .utf8)
    for name in ["prefetch", "maintain", "migrate", "--wait-timeout", "--sitemap-order"] {
      XCTAssertTrue(bash.contains(name), name)
    }
  }

  func testTheManPageIsCurrent() throws {
    // Regenerated by scripts/generate-man: every command and flag of --help is in it.
    let page = try String(
      contentsOfFile: CronWrapperTests.repository.appendingPathComponent("man/imagecache.1").path,
      encoding: .utf8)
    for command in Self.commands where !command.isEmpty {
      let help = try ImageCacheBinary.run(command + ["--help"]).stdout
      let abstract = try XCTUnwrap(
        help.components(separatedBy: "\n").first?.dropFirst("OVERVIEW: ".count))
      XCTAssertTrue(page.contains(String(abstract)), "\(command): \(abstract)")
      // The command's own flags, from its option list (two spaces in): not a flag the prose
      // names, such as curl's --location-trusted.
      let optionLines = help.split(separator: "\n").filter { $0.hasPrefix("  -") }
      let words = optionLines.flatMap { $0.split(separator: " ").prefix { $0.hasPrefix("-") } }
      for flag in words.filter({ $0.hasPrefix("--") && $0.count > 3 }) {
        let name = flag.prefix { $0 == "-" || $0.isLetter }
        XCTAssertTrue(
          page.contains(" -" + name.dropFirst(2)), "\(command): \(name) (run scripts/generate-man)")
      }
    }
  }
}
