import ArgumentParser
import Core
import Foundation

/// `--cache` and `--namespace`, the same on every subcommand (SPEC section 7).
struct CacheOptions: ParsableArguments {
  @Option(
    name: .long,
    help: ArgumentHelp(
      "The disk cache directory: the folder that holds namespaces.",
      discussion: "Default: $XDG_CACHE_HOME/com.hackemist.SDImageCache (else ~/.cache/...).",
      valueName: "dir"))
  var cache: String?

  @Option(
    name: .long,
    help: ArgumentHelp("The namespace folder inside the cache directory.", valueName: "ns"))
  var namespace: String = CacheLocation.defaultNamespace

  var location: CacheLocation {
    CacheLocation(directory: cache ?? CacheLocation.defaultDirectory(), namespace: namespace)
  }

  func validate() throws {
    guard !namespace.isEmpty, !namespace.contains("/"), namespace != ".", namespace != ".." else {
      throw ValidationError(
        "--namespace must be a single folder name, not \(namespace.debugDescription)")
    }
  }
}

/// `--report FILE` and `--json`, on every subcommand that does work.
struct ReportOptions: ParsableArguments {
  @Option(name: .long, help: ArgumentHelp("Write the JSON report to this file.", valueName: "file"))
  var report: String?

  @Flag(name: .long, help: "Print the JSON report on stdout.")
  var json = false

  @Flag(
    name: .long,
    help: "Wait for another run on the same cache to finish instead of exiting with code 3.")
  var wait = false

  /// Writes the report where the user asked (atomically for a file).
  func emit(_ report: RunReport) throws {
    guard self.report != nil || json else { return }
    let data = try report.jsonData()
    if let path = self.report { try FileSystem.writeAtomically(data, toPath: path) }
    if json { FileHandle.standardOutput.write(data) }
  }
}

/// Human output, on stderr so that stdout stays for `--json`.
enum Console {
  static func say(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
  }

  /// Pretty, key-sorted JSON with ISO 8601 dates, on stdout.
  static func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    FileHandle.standardOutput.write(try encoder.encode(value) + Data("\n".utf8))
  }
}

/// Parses `--max-age`-style values with the unit parsers of Core.
struct Duration: ExpressibleByArgument, CustomStringConvertible {
  var seconds: TimeInterval
  var description: String {
    seconds.truncatingRemainder(dividingBy: 86_400) == 0
      ? "\(Int(seconds) / 86_400)d" : "\(seconds)s"
  }
  init?(argument: String) {
    guard let seconds = try? parseDuration(argument) else { return nil }
    self.seconds = seconds
  }
  init(seconds: TimeInterval) { self.seconds = seconds }
}

/// Parses `--max-size`-style values.
struct ByteCount: ExpressibleByArgument, CustomStringConvertible {
  var bytes: UInt64
  var description: String { "\(bytes)" }
  init?(argument: String) {
    guard let bytes = try? parseByteCount(argument) else { return nil }
    self.bytes = bytes
  }
  init(bytes: UInt64) { self.bytes = bytes }
}

extension ExpireType: ExpressibleByArgument {}

/// Prints what a maintenance pass did (or, in a dry run, would do).
func describe(_ pass: MaintenancePassReport, verbose: Bool) {
  let verb = pass.dryRun ? "would " : ""
  if verbose || pass.dryRun {
    for action in pass.actions {
      switch action.kind {
      case .delete:
        Console.say(
          "\(pass.pass.rawValue): \(verb)delete \(action.path) (\(formatBytes(action.bytes)))")
      case .move:
        Console.say(
          "\(pass.pass.rawValue): \(verb)move \(action.path) -> \(action.destination ?? "")")
      case .keptAside:
        Console.say(
          "\(pass.pass.rawValue): \(verb)keep \(action.path) aside as \(action.destination ?? "") (name collision)"
        )
      }
    }
  }
  for error in pass.errors { Console.say("\(pass.pass.rawValue): error: \(error)") }
  let summary: String
  switch pass.pass {
  case .migrate:
    let aside = pass.actions.filter { $0.kind == .keptAside }.count
    summary =
      pass.dryRun
      ? "would move \(pass.filesMoved) files, would keep \(aside) aside after a name collision"
      : "moved \(pass.filesMoved) files, kept \(aside) aside after a name collision"
  case .expire, .trim:
    summary =
      pass.dryRun
      ? "would remove \(pass.filesRemoved) files, would free \(formatBytes(pass.bytesFreed))"
      : "removed \(pass.filesRemoved) files, freed \(formatBytes(pass.bytesFreed))"
  }
  Console.say(
    "\(pass.pass.rawValue)\(pass.dryRun ? " (dry run)" : ""): \(summary)\(pass.errors.isEmpty ? "" : ", \(pass.errors.count) errors")"
  )
}
