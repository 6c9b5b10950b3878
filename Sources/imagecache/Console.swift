import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import Runner
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Human output on stderr, so that stdout stays for the data: `--json`, lists, plans. Best
/// effort: a closed or full stderr or stdout loses the line, never the run (SPEC section 10).
struct Console: RunConsole {
  static let standard = Console()

  /// `--quiet`: only what reports something wrong.
  var quiet = false

  /// The least severity shown: `--quiet` keeps warnings (failed URLs, skipped lines, an
  /// interrupted run) and errors.
  var threshold: RunEvent.Severity { quiet ? .warning : .debug }

  func report(_ event: RunEvent) { say(event.wording, severity: event.severity) }

  /// A line of the command's own, shown if its severity reaches ``threshold``.
  func say(_ line: String, severity: RunEvent.Severity = .info) {
    if severity < threshold { return }
    // Every line for people comes through here: no URL password reaches a log.
    StatusLine.standardError.print(line.maskingURLPasswords + "\n")
  }

  func output(_ event: RunEvent) { output(event.wording) }

  /// What the command exists to print (a list, a dry run's plan) goes to stdout, as curl,
  /// rsync and git print theirs, so that it can be piped and grepped; `--quiet` keeps it.
  func output(_ line: String) {
    Self.write(line.maskingURLPasswords + "\n", to: STDOUT_FILENO)
  }

  func progress(total: @escaping @Sendable () -> Int?) -> (any PrefetchProgress)? {
    quiet ? nil : ConsoleProgress(total: total, console: self)
  }

  static func write(_ text: String, to descriptor: Int32) {
    // A console that cannot take a line (a reader that went away, a full disk under a
    // redirect) must not end the night's work: the report file is the record, and its own
    // write failures are errors. So the failure is dropped here, and only here.
    try? FileSystem.writeAll(text.utf8, to: descriptor, path: "the console")
  }

  /// Pretty, key-sorted JSON with ISO 8601 dates, on stdout.
  static func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    write(String(decoding: try encoder.encode(value), as: UTF8.self) + "\n", to: STDOUT_FILENO)
  }
}

/// The status line a terminal shows below the lines of a run, and every other line written to
/// stderr: a line said while the status is up is written over it (`\r`, erase to the end of
/// the line), and the status is drawn again below it, so that no line is ever glued to a
/// status or left half-erased. One for the process, as there is one stderr.
final class StatusLine: Sendable {
  static let standardError = StatusLine(descriptor: STDERR_FILENO)

  private let descriptor: Int32
  /// The status drawn at the bottom, without a newline; `nil` when none is. Its lock is held
  /// while writing, so that lines from two threads are never interleaved.
  private let shown = Mutex<String?>(nil)

  init(descriptor: Int32) { self.descriptor = descriptor }

  /// Writes `text` (whole lines) above the status, if one is shown.
  func print(_ text: String) {
    shown.withLock { shown in
      guard let shown else { return Console.write(text, to: descriptor) }
      Console.write(Self.eraseLine + text + shown, to: descriptor)
    }
  }

  /// Draws `status` in place of the one shown; `final` ends it with a newline, for good.
  func show(_ status: String, final: Bool) {
    shown.withLock { shown in
      shown = final ? nil : status
      Console.write(Self.eraseLine + status + (final ? "\n" : ""), to: descriptor)
    }
  }

  /// The terminal's width in columns, asked at each redraw so that a resized window is
  /// followed; 80 when the terminal does not say.
  var columns: Int {
    var size = winsize()
    guard ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
    return Int(size.ws_col)
  }

  private static let eraseLine = "\r\u{1B}[K"
}

/// On a terminal, one status line kept at the bottom and rewritten in place, never wider than
/// the terminal; otherwise a log line every few seconds.
final class ConsoleProgress: PrefetchProgress, Sendable {
  private let console: Console
  private let isTerminal = isatty(STDERR_FILENO) == 1
  private let statusLine = StatusLine.standardError
  private let lastPrinted = Mutex(Date.distantPast)
  /// The lines to go, once counted (never for sitemaps).
  private let counted = Mutex<Int?>(nil)
  private let countDone = DispatchSemaphore(value: 0)

  /// Counts the lines on a thread of its own: a manifest of millions of lines takes seconds to
  /// read, and the downloads start meanwhile (the total shows once it is known).
  init(total count: @escaping @Sendable () -> Int?, console: Console) {
    self.console = console
    OwnThread.start(name: "ic-line-count") { [self] in
      let total = count()
      counted.withLock { $0 = total }
      countDone.signal()
    }
  }

  private var total: Int? { counted.withLock { $0 } }

  /// When the run last had nothing but hits (and refusals) done: the download rate is
  /// measured from there, since hits go by in microseconds and a resumed run's first hour of
  /// them says nothing about how long its downloads take.
  private let hitsOnlyUntil = Mutex<TimeInterval>(0)

  func update(_ counts: PrefetchCounts, elapsed: TimeInterval) {
    if counts.downloaded + counts.notModified + counts.failed == 0 {
      hitsOnlyUntil.withLock { $0 = elapsed }
    }
    let interval: TimeInterval = isTerminal ? 0.2 : 5
    let now = Date()
    let due = lastPrinted.withLock { lastPrinted in
      guard now.timeIntervalSince(lastPrinted) >= interval else { return false }
      lastPrinted = now
      return true
    }
    if due { show(counts, elapsed: elapsed, final: false) }
  }

  func finish(_ counts: PrefetchCounts, elapsed: TimeInterval) {
    // A short run may end before its lines are counted: the last line says the total, unless
    // counting would hold the exit up (a huge manifest and an early signal).
    _ = countDone.wait(timeout: .now() + 0.2)
    show(counts, elapsed: elapsed, final: true)
  }

  /// One part of the status, and how much it matters when the terminal is too narrow for all:
  /// the least important go first.
  private struct Field {
    var text: String
    var importance: Int
  }

  /// The status's fields. Hits are never the first dropped: without them the counts on a
  /// narrow terminal do not add up to the done count.
  private func fields(_ counts: PrefetchCounts, elapsed: TimeInterval) -> [Field] {
    let done = counts.total
    let total = total
    let rate = elapsed > 0 ? Double(done) / elapsed : 0
    let bytesPerSecond = elapsed > 0 ? Double(counts.bytesDownloaded) / elapsed : 0
    var fields = [
      Field(text: "\(done)\(total.map { "/\($0)" } ?? "") done", importance: 9),
      Field(text: "\(counts.memoryHits + counts.diskHits) hits", importance: 7),
      Field(text: "\(counts.downloaded) downloaded", importance: 6),
      Field(text: "\(counts.notModified) not modified", importance: 1),
      Field(text: "\(counts.failed) failed", importance: 8),
      Field(text: "\(counts.blacklisted) blacklisted", importance: 2),
      Field(text: "\(Int(rate)) URLs/s", importance: 4),
      Field(text: "\(formatBytes(UInt64(bytesPerSecond)))/s", importance: 3),
    ]
    if let total, total > done, let eta = secondsLeft(counts, toGo: total - done, elapsed: elapsed)
    {
      fields.append(Field(text: "ETA \(eta)s", importance: 5))
    }
    return fields
  }

  /// The time the `toGo` URLs take at the rate of the URLs that went to the network
  /// (downloaded, not modified, failed) since hits stopped being all there was: what is left
  /// of a resumed or mostly cached run is what was not in the cache. `nil` while only hits
  /// have gone by, when there is no rate to tell.
  private func secondsLeft(_ counts: PrefetchCounts, toGo: Int, elapsed: TimeInterval) -> Int? {
    let fetched = counts.downloaded + counts.notModified + counts.failed
    let since = hitsOnlyUntil.withLock { $0 }
    guard fetched > 0, elapsed > since else { return nil }
    return Int((Double(toGo) * (elapsed - since) / Double(fetched)).rounded(.up))
  }

  /// The fields that fit in `width` columns, the least important dropped first; cut short
  /// only when the most important alone does not fit. A status that wrapped would leave a
  /// line behind at every redraw, since `\r` goes back to the start of the last row only.
  private static func fitting(_ fields: [Field], width: Int) -> String {
    var kept = fields
    var text = kept.map(\.text).joined(separator: ", ")
    while text.count > width, kept.count > 1,
      let least = kept.indices.min(by: { kept[$0].importance < kept[$1].importance })
    {
      kept.remove(at: least)
      text = kept.map(\.text).joined(separator: ", ")
    }
    return String(text.prefix(max(0, width)))
  }

  private func show(_ counts: PrefetchCounts, elapsed: TimeInterval, final: Bool) {
    let fields = fields(counts, elapsed: elapsed)
    if isTerminal {
      // One column spare: a line that fills the last column leaves some terminals waiting to
      // wrap, and the next `\r` would then go back to the wrong row.
      statusLine.show(Self.fitting(fields, width: statusLine.columns - 1), final: final)
    } else {
      // A log has no clock of its own: each line says when, so that a night's log shows
      // when the run slowed.
      console.say(UTCTime(Date()).iso8601() + " " + fields.map(\.text).joined(separator: ", "))
    }
  }
}
