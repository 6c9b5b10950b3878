import Core
import Foundation
import NIOCore
import TestSupport
import XCTest

/// The progress display in a real terminal (issue 29, item 6): `imagecache prefetch` runs in a
/// tmux pane of a given width against a loopback server slow enough for several redraws, and
/// what the pane shows is read back with `capture-pane`, as a person would see it.
final class TerminalProgressTests: LoopbackTestCase {
  static let failing = 4
  static let succeeding = 16
  /// The downloads of a resumed run, slower than its thousands of hits.
  static let slow = 12

  override var routes: [String: Route] {
    var routes: [String: Route] = [:]
    // Slow answers, so that the status is redrawn many times while failures come in.
    for index in 0..<Self.succeeding {
      routes["/ok-\(index).jpg"] = { _ in
        ServerResponse(
          headers: [("Content-Type", "image/jpeg")], body: Fixtures.largeJPEG,
          headDelay: .milliseconds(150))
      }
    }
    for index in 0..<Self.slow {
      routes["/slow-\(index).jpg"] = { _ in
        ServerResponse(
          headers: [("Content-Type", "image/jpeg")], body: Fixtures.largeJPEG,
          headDelay: .milliseconds(400))
      }
    }
    for index in 0..<Self.failing {
      routes["/gone-\(index).jpg"] = { _ in
        ServerResponse(status: 404, headDelay: .milliseconds(150))
      }
    }
    return routes
  }

  /// A tmux server of the test's own (its own socket), so that nothing touches anyone's
  /// sessions; stopped by ``stop()``.
  struct Tmux {
    let socket: String
    let configuration: String

    init(in folder: TemporaryDirectory) throws {
      socket = folder.appending("tmux.sock")
      configuration = folder.appending("tmux.conf")
      // The pane stays once the command has exited, so that its last screen can be read.
      try "set-option -g remain-on-exit on\nset-option -g history-limit 1000\n".write(
        toFile: configuration, atomically: true, encoding: .utf8)
    }

    @discardableResult
    func run(_ arguments: [String]) throws -> CommandResult {
      let result = try Command.run(
        "/usr/bin/env", ["tmux", "-S", socket, "-f", configuration] + arguments)
      XCTAssertEqual(result.status, 0, "tmux \(arguments): \(result.stderr)")
      return result
    }

    /// Starts the server with a detached session `progress` of `columns` running `command`.
    /// Spawned and waited for here, not with `Process`: the server that the client forks
    /// keeps Foundation from noticing the client's exit. Its output goes to a file.
    func start(columns: Int, command: String) throws {
      let log = (socket as NSString).deletingLastPathComponent + "/tmux.log"
      let arguments = [
        "tmux", "-S", socket, "-f", configuration, "new-session", "-d", "-s", "progress", "-x",
        "\(columns)", "-y", "60", command,
      ]
      var actions = posix_spawn_file_actions_t()
      posix_spawn_file_actions_init(&actions)
      defer { posix_spawn_file_actions_destroy(&actions) }
      posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
      posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
      posix_spawn_file_actions_adddup2(&actions, 1, 2)
      let argv = arguments.map { strdup($0) } + [nil]
      defer { for pointer in argv { free(pointer) } }
      var pid: pid_t = 0
      let spawned = posix_spawnp(&pid, "tmux", &actions, nil, argv, environ)
      guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO) }
      var status: Int32 = 0
      while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
      XCTAssertEqual(
        status, 0, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "tmux failed")
    }

    /// The pane's text, history included, one line per line written: rows that a line too
    /// wide for the pane wrapped onto are joined again (`-J`), so that a status wider than
    /// the pane shows as one line too long, not as rows that each fit.
    func capture() throws -> [String] {
      let text = try run(["capture-pane", "-p", "-J", "-S", "-", "-t", "progress"]).stdout
      var rows = text.components(separatedBy: "\n").map {
        // -J keeps the trailing spaces of joined rows.
        String($0.reversed().drop(while: { $0 == " " }).reversed())
      }
      rows.removeAll { $0.hasPrefix("Pane is dead") }
      while rows.last?.isEmpty == true { rows.removeLast() }
      return rows
    }

    /// Whether tmux has read the pane's output to its end.
    var paneDead: Bool {
      get throws {
        try run(["display-message", "-p", "-t", "progress", "#{pane_dead}"]).stdout == "1\n"
      }
    }

    func stop() { _ = try? run(["kill-server"]) }
  }

  /// Runs a prefetch with failures in a pane `columns` wide, checking every screen seen while
  /// it runs and the last one.
  /// - Returns: the last status line.
  @discardableResult
  private func checkProgress(columns: Int, file: StaticString = #filePath, line: UInt = #line)
    throws -> String
  {
    guard (try? Command.run("/usr/bin/env", ["tmux", "-V"]))?.status == 0 else {
      try requireOrSkip("tmux is not installed: apt-get install tmux", file: file, line: line)
    }
    var urls = (0..<Self.succeeding).map { server.url("/ok-\($0).jpg") }
    for index in 0..<Self.failing {
      urls.insert(server.url("/gone-\(index).jpg"), at: index * 4 + 2)
    }
    let manifest = temporary.appending("urls.txt")
    try urls.joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
    let command = [
      ImageCacheBinary.path, "prefetch", manifest, "--cache", temporary.appending("cache"),
      "--concurrency", "2", "--retries", "0",
    ].map { "'\($0)'" }.joined(separator: " ")
    // The exit status goes to a file: tmux 3.3 does not always keep a dead pane's status.
    let statusFile = temporary.appending("status")
    let shell = "\(command); echo $? > '\(statusFile)'"

    let tmux = try Tmux(in: temporary)
    defer { tmux.stop() }
    try tmux.start(columns: columns, command: shell)

    var statusesSeen: Set<String> = []
    var rows: [String] = []
    var exitStatus: Int32?
    // The screen is looked at on every poll: each look is a sample of the redrawn status.
    let ended = try waitUntil(
      timeout: 60, "the prefetch to end:\n\(rows.joined(separator: "\n"))", every: 0.05,
      file: file, line: line
    ) {
      // Over once the command has exited and tmux has shown all it wrote.
      exitStatus =
        try tmux.paneDead
        ? (try? String(contentsOfFile: statusFile, encoding: .utf8)).flatMap {
          Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
        } : nil
      rows = try tmux.capture()
      check(rows, columns: columns, file: file, line: line)
      if let status = rows.first(where: { $0.contains(" done") }) { statusesSeen.insert(status) }
      return exitStatus != nil
    }
    guard ended else { return "" }
    XCTAssertEqual(exitStatus, 1, "exit code 1: some URLs failed", file: file, line: line)
    let screen = rows.joined(separator: "\n")
    XCTAssertGreaterThan(
      statusesSeen.count, 2, "the status redrawn while it ran: \(statusesSeen)", file: file,
      line: line)
    XCTAssertEqual(
      rows.filter { $0.contains("  failed ") }.count, Self.failing, screen, file: file,
      line: line)
    let statuses = rows.indices.filter { rows[$0].contains(" done") }
    XCTAssertEqual(statuses.count, 1, "the status once:\n\(screen)", file: file, line: line)
    guard let status = statuses.first else { return "" }
    XCTAssertTrue(
      rows[status].hasPrefix("\(urls.count)/\(urls.count) done"), rows[status], file: file,
      line: line)
    XCTAssertNotNil(
      rows[status].range(of: #"\d B/s|KB/s|MB/s"#, options: .regularExpression),
      "bytes/s in the status: \(rows[status])", file: file, line: line)
    XCTAssertTrue(rows[status].contains("URLs/s"), rows[status], file: file, line: line)
    return rows[status]
  }

  /// What every screen must show, while the prefetch runs and after: at most one status, no
  /// wider than the pane; each failure whole on a line of its own, above the status.
  private func check(_ rows: [String], columns: Int, file: StaticString, line: UInt) {
    let screen = rows.joined(separator: "\n")
    let statuses = rows.indices.filter { rows[$0].contains(" done") }
    XCTAssertLessThanOrEqual(statuses.count, 1, "one status:\n\(screen)", file: file, line: line)
    for index in statuses {
      XCTAssertLessThanOrEqual(
        rows[index].count, columns, "a status no wider than the pane:\n\(screen)", file: file,
        line: line)
    }
    for (index, row) in rows.enumerated() where row.contains("failed http") {
      XCTAssertNotNil(
        row.range(
          of: #"^  failed http://127\.0\.0\.1:\d+/gone-\d\.jpg: invalidDownloadStatusCode 404$"#,
          options: .regularExpression), "a whole failure line: \(row)\n\(screen)", file: file,
        line: line)
      XCTAssertLessThan(
        index, statuses.first ?? rows.count, "failures above the status:\n\(screen)",
        file: file, line: line)
    }
  }

  func testAtEightyColumnsTheStatusIsNarrowedAndFailuresPrintAboveIt() throws {
    let status = try checkProgress(columns: 80)
    XCTAssertTrue(status.contains("4 failed"), status)
  }

  func testAtTwoHundredColumnsTheStatusShowsEveryFieldAndFailuresPrintAboveIt() throws {
    let status = try checkProgress(columns: 200)
    for field in ["hits", "downloaded", "not modified", "4 failed", "blacklisted", "URLs/s"] {
      XCTAssertTrue(status.contains(field), "\(field) in \(status)")
    }
  }

  /// A resumed run: thousands of hits go by in a moment, then a few slow downloads. At 80
  /// columns every status still says the hits (the counts add up), no ETA shows while only
  /// hits have gone by, and the ETA is the downloads' time, not the hits' rate.
  func testAResumedRunAtEightyColumnsKeepsItsHitsAndTakesItsETAFromTheDownloads() throws {
    guard (try? Command.run("/usr/bin/env", ["tmux", "-V"]))?.status == 0 else {
      try requireOrSkip("tmux is not installed: apt-get install tmux")
    }
    let cache = temporary.appending("cache")
    let cached = (0..<3000).map { server.url("/cached-\($0).jpg") }
    let builder = CacheBuilder(root: cache + "/default")
    let now = Int64(Date().timeIntervalSince1970)
    for url in cached { try builder.file(CacheFileName.fileName(forKey: url), accessTime: now) }
    let urls = cached + (0..<Self.slow).map { server.url("/slow-\($0).jpg") }
    let manifest = temporary.appending("urls.txt")
    try urls.joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
    let command = [
      ImageCacheBinary.path, "prefetch", manifest, "--cache", cache, "--concurrency", "2",
    ].map { "'\($0)'" }.joined(separator: " ")
    let statusFile = temporary.appending("status")
    let tmux = try Tmux(in: temporary)
    defer { tmux.stop() }
    try tmux.start(columns: 80, command: "\(command); echo $? > '\(statusFile)'")

    var statusesSeen: Set<String> = []
    let ended = try waitUntil(timeout: 60, "the prefetch to end", every: 0.05) {
      let dead = try tmux.paneDead
      if let status = try tmux.capture().first(where: { $0.contains(" done") }) {
        statusesSeen.insert(status)
      }
      return dead && FileManager.default.fileExists(atPath: statusFile)
    }
    guard ended else { return }
    // The total shows once the lines are counted.
    let pattern = #"^(\d+)(?:/(\d+))? done, (\d+) hits, (\d+) downloaded"#
    var etasSeen = 0
    for status in statusesSeen {
      guard let match = status.firstMatch(of: try Regex(pattern)),
        let done = Int(match[1].substring ?? ""), let downloaded = Int(match[4].substring ?? "")
      else {
        XCTFail("the done, hits and downloaded counts in every status: \(status)")
        continue
      }
      guard let eta = status.firstMatch(of: try Regex(#"ETA (\d+)s"#)),
        let total = Int(match[2].substring ?? "")
      else { continue }
      XCTAssertGreaterThan(downloaded, 0, "no ETA while only hits have gone by: \(status)")
      // The downloads take 400 ms each, two at a time: at most 5 a second.
      let seconds = Int(eta[1].substring ?? "") ?? 0
      XCTAssertGreaterThanOrEqual(
        seconds * 10, total - done, "an ETA at the downloads' rate: \(status)")
      etasSeen += 1
    }
    XCTAssertGreaterThan(etasSeen, 0, "an ETA while the downloads ran: \(statusesSeen)")
  }

  /// Without a terminal (a log, a pipe), each progress line starts with the UTC time it was
  /// written, so that a night's log says when the run slowed.
  func testProgressLinesWrittenToALogStartWithTheirTime() throws {
    let manifest = temporary.appending("urls.txt")
    try server.url("/ok-0.jpg").write(toFile: manifest, atomically: true, encoding: .utf8)
    let result = try ImageCacheBinary.run([
      "prefetch", manifest, "--cache", temporary.appending("cache"),
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let lines = result.stderr.components(separatedBy: "\n").filter { $0.contains(" done, ") }
    XCTAssertFalse(lines.isEmpty, result.stderr)
    for line in lines {
      XCTAssertNotNil(
        line.range(
          of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ 1(/1)? done, "#, options: .regularExpression),
        line)
    }
  }
}
