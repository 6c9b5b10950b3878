import ArgumentParser
import Core
import Foundation

/// The exit codes of SPEC section 6.
enum ExitStatus: Int32 {
  case success = 0
  case someURLsFailed = 1
  case usage = 2
  case locked = 3
  case fatalIO = 4
  case interrupted = 130
  case terminated = 143
}

@main
struct ImageCacheCommand: AsyncParsableCommand {
  static let version = "0.1.0"

  static let configuration = CommandConfiguration(
    commandName: "imagecache",
    abstract: "Warm, maintain, migrate and report on SDWebImage disk caches.",
    discussion: """
      The cache is laid out exactly as SDWebImage 5 lays it out: --cache names the disk cache \
      directory (the folder that holds namespaces, by default \
      $XDG_CACHE_HOME/com.hackemist.SDImageCache) and --namespace the folder inside it \
      (default "default"). Human output goes to stderr; the JSON report goes to --report FILE \
      or, with --json, to stdout.

      Exit codes: 0 success, 1 some URLs failed, 2 usage or configuration error, 3 another run \
      holds the cache lock, 4 fatal I/O error, 130/143 interrupted.
      """,
    version: version,
    subcommands: [
      RunCommand.self, PrefetchCommand.self, MaintainCommand.self, MigrateCommand.self,
      StatsCommand.self,
      BlacklistCommand.self,
    ]
  )

  /// Runs the command line and maps every failure to the exit codes of SPEC section 6
  /// (argument-parser's own usage errors would otherwise exit 64).
  static func main() async {
    do {
      var command = try parseAsRoot()
      if var asyncCommand = command as? AsyncParsableCommand {
        try await asyncCommand.run()
      } else {
        try command.run()
      }
    } catch {
      fail(with: error)
    }
  }

  static func fail(with error: Error) -> Never {
    let status: ExitStatus
    switch error {
    case _ where exitCode(for: error).isSuccess, is ExitCode:
      exit(withError: error)  // help, --version and explicit exit codes
    case RunLock.Failure.held:
      status = .locked
    case let failure as CommandFailure:
      status = failure.status
    case is ConfigurationError:
      status = .usage
    case is RunLock.Failure, is FileSystemError:
      status = .fatalIO
    default:
      // Usage and validation errors, and configuration errors, exit 2; anything else is a
      // failure of the machinery (the state database, the file system): 4.
      status = exitCode(for: error) == .validationFailure ? .usage : .fatalIO
    }
    let message =
      error is CommandFailure || error is RunLock.Failure || error is FileSystemError
        || error is ConfigurationError
      ? "imagecache: \(error)" : fullMessage(for: error)
    FileHandle.standardError.write(Data((message + "\n").utf8))
    Foundation.exit(status.rawValue)
  }
}

/// A failure that carries its own exit status and a message for people.
struct CommandFailure: Error, CustomStringConvertible {
  var status: ExitStatus
  var description: String
}
