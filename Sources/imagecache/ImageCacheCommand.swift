import ArgumentParser
import Core
import Foundation
import HTTP
import Imaging
import Prefetcher
import Runner

#if canImport(Glibc)
  import Glibc
#endif

/// The first line of `--version`: "imagecache 0.1.0 (4a4bfc9, built 2026-11-29T06:00:00Z)", or
/// "(unknown commit)" from a build without scripts/build-release.
let versionLine =
  "imagecache \(ImageCacheVersion.current) (\(BuildStamp.commit)"
  + (BuildStamp.date.isEmpty ? "" : ", built \(BuildStamp.date)") + ")"

/// `--version`: ours, then the libraries that do the work, as this build loads them; with
/// `--verbose`, what the release was built from (its BUILD-INFO).
func versionText(verbose: Bool) -> String {
  let loaded = """
    \(versionLine)
    \(Downloader.libcurlVersion)
    \(ImageValidator.libraryVersions), \(sitemapLibraryVersions)
    """
  guard verbose else { return loaded }
  let built =
    BuildStamp.buildInfo.isEmpty
    ? "built without scripts/build-release: no record of the package versions"
    : BuildStamp.buildInfo
  return loaded + "\n\n" + built
}

@main
struct ImageCacheCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "imagecache",
    abstract: "Warm, maintain, migrate and report on SDWebImage disk caches.",
    discussion: """
      The cache is laid out exactly as SDWebImage 5 lays it out: --cache names the disk cache \
      directory (the folder that holds namespaces, by default \
      $XDG_CACHE_HOME/com.hackemist.SDImageCache) and --namespace the folder inside it \
      (default "default"). What a command exists to print goes to stdout (blacklist list, \
      stats, key, --json, a dry run's plan); progress, warnings and summaries go to stderr. \
      The JSON report goes to --report FILE or, with --json, to stdout. A misspelt command or \
      option (long or short) is named with a suggestion (exit 2). -V is --version.

      Exit codes: 0 success, 1 some URLs failed or the blacklist refused every URL (0 with \
      --allow-url-failures on run and prefetch) or some manifests or sitemaps failed as a \
      whole (not fetched, not readable, refused; skipped lines alone do not make it 1) or \
      maintenance could not remove a file or verify found bad files or the run reached \
      --max-run-time, 2 usage or \
      configuration error (an image or binary file given as a manifest too), 3 another run \
      holds the cache lock, 4 fatal I/O error (disk full, out of file descriptors, the lock \
      cannot be opened, an entry verify could not read: the report is still written where it \
      can be), 130/143/129 (128 + SIGINT, SIGTERM or SIGHUP) or 138/140/152 (SIGUSR1, SIGUSR2 \
      or SIGXCPU, job engines' warnings) interrupted; EXIT STATUS in man imagecache says more.
      """,
    // The libraries' versions cost a few hundred microseconds of calls into them at every
    // start: asked for only when `--version` is given (any text shows the flag in the help).
    version: CommandLine.arguments.dropFirst().contains("--version")
      || CommandLine.arguments.dropFirst().first == "-V"
      ? versionText(verbose: CommandLine.arguments.dropFirst().contains("--verbose"))
      : versionLine,
    subcommands: [
      RunCommand.self, PrefetchCommand.self, MaintainCommand.self, MigrateCommand.self,
      VerifyCommand.self,
      StatsCommand.self, BlacklistCommand.self, RefusalsCommand.self, ReportCommand.self,
      KeyCommand.self,
    ]
  )

  /// Runs the command line and maps every failure to the exit codes of SPEC section 6
  /// (argument-parser's own usage errors would otherwise exit 64).
  static func main() async {
    // A closed pipe on stdout or stderr is a failed write, never the end of the run.
    signal(SIGPIPE, SIG_IGN)
    // Before any thread allocates: a thread's arena is chosen at its first allocation.
    ProcessMemory.capArenas()
    ProcessMemory.keepFreedMemory()
    LibraryCleanup.skipOpenSSLCleanupAtExit()
    var command: ParsableCommand
    // `-V`, as curl, wget and rsync spell `--version`.
    let arguments = CommandLine.arguments.dropFirst()
    let parsed = arguments.first == "-V" && arguments.count == 1 ? ["--version"] : Array(arguments)
    do {
      command = try parseAsRoot(parsed)
    } catch {
      // `--version` (`--verbose` too, which only the subcommands declare) is argument-parser's
      // to print.
      if !parsed.contains("--version"),
        let unknown = unknownSubcommand(parsed) ?? unknownOption(parsed)
      {
        Console.standard.say(unknown + "\n" + usage(parsed), severity: .error)
        Foundation.exit(ExitStatus.usage.rawValue)
      }
      fail(with: error, arguments: parsed)
    }
    do {
      if var asyncCommand = command as? AsyncParsableCommand {
        try await asyncCommand.run()
      } else {
        try command.run()
      }
    } catch {
      fail(with: error, arguments: parsed)
    }
  }

  /// The command that `arguments` name (`imagecache prefetch`, `imagecache report merge`): the
  /// leading words that are subcommands.
  static func command(named arguments: [String]) -> (type: ParsableCommand.Type, words: [String]) {
    var type: ParsableCommand.Type = Self.self
    var words = [configuration.commandName ?? "imagecache"]
    for argument in arguments {
      guard
        let next = type.configuration.subcommands.first(where: { $0._commandName == argument })
      else { break }
      type = next
      words.append(argument)
    }
    return (type, words)
  }

  /// The usage line of the command that `arguments` name and where its help is, said after
  /// an error in the command line's syntax (a value a flag does not take, an unknown option,
  /// a missing argument), and after no other error: a missing file or a bad job file is not
  /// helped by the usage.
  static func usage(_ arguments: [String]) -> String {
    let (type, words) = command(named: arguments)
    return "Usage: \(usageString(for: type))\nSee '\(words.joined(separator: " ")) --help'."
  }

  static var subcommandNames: [String] {
    configuration.subcommands.map { $0._commandName } + ["help"]
  }

  /// "unknown command 'maintian', did you mean 'maintain'?" when the first argument is not an
  /// option and names no subcommand.
  static func unknownSubcommand(_ arguments: [String] = Array(CommandLine.arguments.dropFirst()))
    -> String?
  {
    guard let first = arguments.first, !first.hasPrefix("-"), !subcommandNames.contains(first)
    else { return nil }
    let commands = subcommandNames.dropLast().joined(separator: ", ")
    let nearest = subcommandNames.map { ($0, editDistance(first.lowercased(), $0)) }
      .min { $0.1 < $1.1 }
    guard let (name, distance) = nearest, distance <= max(2, first.count / 3) else {
      return "imagecache: unknown command '\(first)' (commands: \(commands))"
    }
    return "imagecache: unknown command '\(first)', did you mean '\(name)'? (commands: \(commands))"
  }

  /// "unknown option '--concurency', did you mean '--concurrency'?" for a long option that the
  /// subcommand named does not have. argument-parser names an unknown option only once the
  /// command is decoded and validated, by which time the option's value (`--concurency 8`)
  /// has been taken for a manifest and the error is about that.
  static func unknownOption(_ arguments: [String] = Array(CommandLine.arguments.dropFirst()))
    -> String?
  {
    // The names come from argument-parser's own description of the commands: only on this
    // error path, and never out of step with the options declared. Without them,
    // argument-parser's own message stands: only the suggestion is lost.
    guard
      let json = try? JSONSerialization.jsonObject(with: Data(_dumpHelp().utf8)),
      var command = (json as? [String: Any])?["command"] as? [String: Any]
    else { return nil }
    for argument in arguments.prefix(while: { !$0.hasPrefix("-") }) {
      let subcommands = command["subcommands"] as? [[String: Any]] ?? []
      guard let next = subcommands.first(where: { $0["commandName"] as? String == argument })
      else { break }
      command = next
    }
    let known =
      names(of: command, kind: "long")
      + ["help", "version", "experimental-dump-help", "generate-completion-script"]
    if let short = unknownShortOption(arguments, known: names(of: command, kind: "short") + ["h"]) {
      // The habits of other tools: make's and xargs' -j, aria2's and GNU parallel's -c.
      let habit = ["c": "concurrency", "j": "concurrency"][short].flatMap {
        known.contains($0) ? ", did you mean '--\($0)'?" : nil
      }
      return "imagecache: unknown option '-\(short)'\(habit ?? "")"
    }
    for argument in arguments.prefix(while: { $0 != "--" }) where argument.hasPrefix("--") {
      let name = String(argument.dropFirst(2).prefix { $0 != "=" })
      guard !known.contains(name) else { continue }
      let nearest = known.map { ($0, editDistance(name.lowercased(), $0)) }.min { $0.1 < $1.1 }
      guard let (match, distance) = nearest, distance <= max(2, name.count / 3) else {
        return "imagecache: unknown option '--\(name)'"
      }
      return "imagecache: unknown option '--\(name)', did you mean '--\(match)'?"
    }
    return nil
  }

  /// The names of `kind` (`long`, `short`) of a command as argument-parser describes it.
  private static func names(of command: [String: Any], kind: String) -> [String] {
    (command["arguments"] as? [[String: Any]] ?? []).flatMap {
      ($0["names"] as? [[String: Any]] ?? []).compactMap { name in
        name["kind"] as? String == kind ? name["name"] as? String : nil
      }
    }
  }

  /// The first letter of a short option (`-c`, or one of a cluster such as `-vq`) that is not
  /// in `known`. Without this, argument-parser takes `-c 8`'s value for a manifest, and says
  /// "manifest 8: no such file". `-` (standard input) and negative numbers (`--max-age -1`)
  /// are values, not options.
  static func unknownShortOption(_ arguments: [String], known: [String]) -> String? {
    for argument in arguments.prefix(while: { $0 != "--" })
    where argument.hasPrefix("-") && !argument.hasPrefix("--") && argument.count > 1 {
      let letters = argument.dropFirst()
      if letters.first?.isNumber == true || letters.first == "." { continue }
      if let unknown = letters.first(where: { !known.contains(String($0)) }) {
        return String(unknown)
      }
    }
    return nil
  }

  /// Levenshtein distance, with a swap of two neighbours counting as one edit.
  static func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
    var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
    for i in 0...a.count { table[i][0] = i }
    for j in 0...b.count { table[0][j] = j }
    for i in 1...a.count {
      for j in 1...b.count {
        let cost = a[i - 1] == b[j - 1] ? 0 : 1
        table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
        if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
          table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
        }
      }
    }
    return table[a.count][b.count]
  }

  /// Says `error` in the one style of every error, `imagecache: ` and what is wrong, with the
  /// usage line only for a mistake in the command line's syntax (argument-parser's own errors
  /// and the commands' `ValidationError`s), and exits with its code (SPEC section 6): our own
  /// errors name theirs (``ExitStatusProviding``).
  static func fail(with error: Error, arguments: [String]) -> Never {
    if error is ExitCode || exitCode(for: error).isSuccess {
      exit(withError: error)  // help, --version and explicit exit codes
    }
    if let error = error as? any ExitStatusProviding {
      Console.standard.say("imagecache: \(error)", severity: .error)
      Foundation.exit(error.exitStatus.rawValue)
    }
    // Usage and validation errors exit 2; anything else is a failure of the machinery: 4.
    let syntax = exitCode(for: error) == .validationFailure
    Console.standard.say(
      "imagecache: " + asClause(message(for: error)) + (syntax ? "\n" + usage(arguments) : ""),
      severity: .error)
    Foundation.exit((syntax ? ExitStatus.usage : .fatalIO).rawValue)
  }
}

/// argument-parser's message as the rest of a line after `imagecache: `, as every other error
/// is written: its first word lowercased when it starts a sentence ("The value 'x' is
/// invalid...", "Missing expected argument..."); anything else (a flag, a value, a name in
/// capitals) as it is.
func asClause(_ message: String) -> String {
  guard let word = message.split(separator: " ", maxSplits: 1).first, word.count > 1,
    word.first?.isUppercase == true, word.dropFirst().allSatisfy(\.isLowercase)
  else { return message }
  return message.prefix(1).lowercased() + message.dropFirst()
}

extension RunOutcome {
  /// 128 + the signal when interrupted, 4 when verify could not read every entry, 1 when URLs
  /// (unless the job allows it) or whole inputs failed, maintenance could not remove a file or
  /// verify found bad files, else 0 (SPEC sections 6 and 11).
  /// Skipped lines alone do not make it 1.
  func exit() throws {
    if let signal { throw ExitCode(128 + signal) }
    if exitStatus != .success { throw ExitCode(exitStatus.rawValue) }
  }

  /// The exit status of a run that no signal stopped: what ``exit()`` ends with, and what
  /// `run` weighs across its jobs.
  var exitStatus: ExitStatus {
    if notManifests > 0 { return .usage }
    // An audit that could not read every entry is incomplete: not a verdict on the cache.
    if entriesNotRead > 0 { return .fatalIO }
    return failed ? .someURLsFailed : .success
  }

  /// Some URLs failed, or the blacklist refused every URL so that nothing was tried, and the
  /// job does not allow it (`--allow-url-failures`); or some whole manifests or sitemaps
  /// failed, or files that maintenance meant to remove are still there (never allowed:
  /// neither is a URL's failure); or the run's time limit stopped it before it got through
  /// its URLs (not a success either).
  var failed: Bool {
    ((failedURLs > 0 || refusedEverything) && !urlFailuresAllowed) || failedInputs > 0
      || filesNotRemoved > 0 || timeLimitReached || badFiles > 0
  }
}
