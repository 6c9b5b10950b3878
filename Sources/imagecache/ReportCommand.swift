import ArgumentParser
import Core
import Foundation
import Runner

struct ReportCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "report",
    abstract: "Work with reports: merge a sharded run's reports, or render them as a web page.",
    subcommands: [Merge.self, Page.self])

  struct Page: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "html",
      abstract: "Render reports as one self-contained HTML page.",
      discussion: """
        The summary (a completed run with failed URLs says what share failed, in amber), \
        failures by host and by error (inline SVG bar charts), the failure table grouped by \
        host and sorted by error, blacklisted URLs, and the maintenance passes with their \
        limits and the cache's size before and after, and a verify audit's files by outcome \
        and its bad files (name, size, reason); one section per report. Nothing is fetched \
        and no script runs (the page's \
        Content-Security-Policy allows neither); everything that came from a URL or a server \
        is escaped.

        Example:
          imagecache report html run.json --output run.html
        """)

    @Argument(
      help: ArgumentHelp("Reports (JSON).", valueName: "report"),
      completion: .file(extensions: ["json"]))
    var reports: [String]

    @Option(
      name: .long, help: ArgumentHelp("Write the page here (default: stdout).", valueName: "file"),
      completion: .file())
    var output: String?

    func run() throws {
      let destination = try output.map { path throws(FileSystemError) in try OutputFile(path: path)
      }
      var loaded: [(name: String, report: RunReport)] = []
      for path in reports { loaded.append((path, try RunReport.load(path: path))) }
      let page = ReportPage.render(loaded)
      if let output, let destination {
        try destination.write(Array(page.utf8))
        Console.standard.say("report page written to \(output)")
      } else {
        // The page is this command's whole work: a stdout that cannot take it is exit 4.
        try FileSystem.writeAll(Array(page.utf8), to: STDOUT_FILENO, path: "stdout")
      }
    }
  }

  struct Merge: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "merge",
      abstract: "Merge the reports of one run's shards into one report of the whole run.",
      discussion: """
        Counts are summed, lists joined (each blacklisted URL once), maintenance passes of \
        one kind combined; the run starts at the earliest start, ends at the latest end and \
        has the worst status (failed, then interrupted, then completed). The reports must be \
        of one cache. The shards' verify audits (each of its own files) are merged the same \
        way: counts summed, bad and noted files joined. Exit code as if the merged report \
        were one run: 0, 1 when URLs failed, the blacklist refused every URL, a \
        maintenance pass could not remove a file or verify found bad files, 4 when a shard failed \
        or an audit could not read an entry, 130 when one was interrupted; each shard that \
        did not complete is named on stderr with its index and status. Failed URLs alone are \
        exit 0 \
        with --allow-url-failures, or when every report was of a run that allowed them \
        (--allow-url-failures or allowURLFailures: true, recorded in its report), so that an \
        engine's success gate (Slurm afterok, a Kubernetes Job, a Snakemake rule) passes an \
        ordinary night with a few 404s; a manifest that failed as a whole, a missing, \
        interrupted or failed shard never passes.

        Shards' reports (they record their shard) must be shards 0 to N-1 of one run, each \
        once: the same N, the same runID and, for those that completed, the same number of \
        manifest entries read. Otherwise nothing is written and the merge exits 2 naming \
        what is missing, repeated or inconsistent; with --partial it merges them anyway \
        with the status incomplete (exit 1, or worse when a shard failed or was \
        interrupted). Unsharded reports are merged as they are. A maintenance pass's \
        cacheBytesBefore and cacheBytesAfter (each shard's of its own files) are summed when \
        the reports are one whole run's shards and each has them, else left out.

        A shard rerun with the same run ID and report path counts its earlier attempts \
        (previousAttempts in its report): the merged report's counts and URLs are each \
        shard's last attempt's, its night the traffic of every attempt (attempts, \
        downloaded, bytesDownloaded), and each shard that ran more than once is named on \
        stderr with its number of attempts.

        Example:
          imagecache report merge shard-*.json --report run.json
        """)

    @Argument(
      help: ArgumentHelp("The shards' reports.", valueName: "report"),
      completion: .file(extensions: ["json"]))
    var reports: [String]

    @Option(
      name: .long, help: ArgumentHelp("Write the merged report here.", valueName: "file"),
      completion: .file())
    var report: String?

    @Flag(name: .long, help: "Print the merged report on stdout.")
    var json = false

    @Flag(
      name: .long,
      help: ArgumentHelp(
        "Merge shard reports that are not one whole run (missing, repeated, inconsistent) "
          + "as status incomplete, instead of refusing them (exit 2)."))
    var partial = false

    @Flag(
      name: .long,
      help: ArgumentHelp(
        "Exit 0, not 1, when the only problem is URLs that failed (the merged report and "
          + "metrics still count them), as the shards' own --allow-url-failures does."))
    var allowURLFailures = false

    func run() throws {
      let outcome = try ReportMerge.merge(
        reports, into: report.map { [$0] } ?? [], standardOutput: json || report == nil,
        partial: partial)
      if report != nil {
        Console.standard.say(
          "merged \(reports.count) reports (\(outcome.status.rawValue), "
            + "\(outcome.failedURLs) failed URLs) into \(report!)")
      }
      for report in outcome.rerun {
        Console.standard.say("rerun: \(report)")
      }
      for report in outcome.unfinished {
        Console.standard.say("warning: did not complete: \(report)", severity: .warning)
      }
      let urlFailuresAllowed = allowURLFailures || outcome.urlFailuresAllowed
      switch outcome.status {
      case .failed: throw ExitCode(ExitStatus.fatalIO.rawValue)
      case .interrupted: throw ExitCode(130)
      case .incomplete: throw ExitCode(ExitStatus.someURLsFailed.rawValue)
      case .completed:
        // An audit that could not read every entry is no verdict on the cache, as in one run.
        if outcome.entriesNotRead > 0 { throw ExitCode(ExitStatus.fatalIO.rawValue) }
        if ((outcome.failedURLs > 0 || outcome.refusedEverything) && !urlFailuresAllowed)
          || outcome.failedInputs > 0 || outcome.badFiles > 0 || outcome.filesNotRemoved > 0
        {
          throw ExitCode(ExitStatus.someURLsFailed.rawValue)
        }
      }
    }
  }
}
