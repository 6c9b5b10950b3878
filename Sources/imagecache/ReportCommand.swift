import ArgumentParser
import Core
import Foundation
import Runner

struct ReportCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "report",
    abstract: "Work with reports: merge the reports of a sharded run into one.",
    subcommands: [Merge.self])

  struct Merge: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Merge the reports of one run's shards into one report of the whole run.",
      discussion: """
        Counts are summed, lists joined (each blacklisted URL once), maintenance passes of \
        one kind combined; the run starts at the earliest start, ends at the latest end and \
        has the worst status (failed, then interrupted, then completed). The reports must be \
        of one cache. Exit code as if the merged report were one run: 0, 1 when URLs failed, \
        4 when a shard failed, 130 when one was interrupted.

        Example:
          imagecache report merge shard-*.json --report run.json
        """)

    @Argument(help: ArgumentHelp("The shards' reports.", valueName: "report"))
    var reports: [String]

    @Option(name: .long, help: ArgumentHelp("Write the merged report here.", valueName: "file"))
    var report: String?

    @Flag(name: .long, help: "Print the merged report on stdout.")
    var json = false

    func run() throws {
      let outcome = try ReportMerge.merge(
        reports, into: report.map { [$0] } ?? [], standardOutput: json || report == nil)
      if report != nil {
        Console.standard.say(
          "merged \(reports.count) reports (\(outcome.status.rawValue), "
            + "\(outcome.failedURLs) failed URLs) into \(report!)")
      }
      switch outcome.status {
      case .failed: throw ExitCode(ExitStatus.fatalIO.rawValue)
      case .interrupted: throw ExitCode(130)
      case .completed:
        if outcome.failedURLs > 0 { throw ExitCode(ExitStatus.someURLsFailed.rawValue) }
      }
    }
  }
}
