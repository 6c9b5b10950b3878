import ArgumentParser
import Core
import Foundation
import Maintenance
import Runner

struct VerifyCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "verify",
    abstract:
      "Check every file of a cache before an app reads it; quarantine, delete or refetch the bad.",
    discussion: """
      Walks the namespace once, in bounded memory, under the cache lock (as maintain), and \
      judges every file. Bad: no image an app could read (empty, truncated, a broken chunk \
      or CRC, an HTML page or text saved as an image, an unknown format), each with its \
      reason. Notes: a legacy SD 3/4 name, an extension that contradicts the content (a PNG \
      named .jpg, which SD reads all the same), a temporary file of ours and its age, a \
      foreign file (never read), a symbolic link (never followed). Everything else is ok. \
      The report's verify section lists every bad and noted file, and a bad file's URL when \
      the cache's state knows it (imagecache's prefetch records each stored file's URL); \
      --metrics writes imagecache_verify_files by outcome. Nothing is changed unless \
      --repair says so; --dry-run says what a repair would do. --repair refetch downloads a \
      bad file again from that URL through the prefetch's pipeline (validated, then stored \
      atomically in its place); a file whose URL is unknown, or whose refetch fails, is \
      quarantined instead. --level full also decodes every JPEG, PNG, GIF and WebP, every \
      frame of them (libjpeg-turbo, libpng, giflib, libwebp), which finds damage inside their \
      compressed data; the other formats get the structure walk only. An image over \
      --max-pixels is not decoded: a note says so (never bad) and its structure is checked.

      In a job file, list verify in maintenance: (after expire and trim) and set \
      verify: {level, repair, maxPixels}; see docs/verify.md.

      Exit codes: 0 no bad file, 1 bad files found (also when repaired or refetched; or one \
      could not be repaired), 2 usage, \
      or more bad files than --max-delete allows a repair (nothing repaired), 3 another run \
      holds the cache lock, 4 an entry could not be read (the audit is incomplete) or another \
      fatal I/O error, 130/143 interrupted.

      Examples:
        imagecache verify --cache /var/cache/images --report verify.json
        imagecache verify --cache /var/cache/images --repair quarantine --max-delete 1% --dry-run
        imagecache verify --cache /var/cache/images --repair refetch --max-delete 1%
      """)

  @OptionGroup var cacheOptions: CacheOptions
  @OptionGroup var reportOptions: ReportOptions

  @Option(
    name: .long,
    help: ArgumentHelp(
      "How deep to look: header (magic bytes and header only), structure (the container "
        + "walked end to end, chunk CRCs included) or full (structure, then every JPEG, PNG, GIF "
        + "and WebP decoded).",
      valueName: "level"))
  var level = VerifyConfiguration().level

  @Option(
    name: .long,
    help: ArgumentHelp(
      "What to do with bad files: none (report only), quarantine (move into "
        + ".imagecache/quarantine/<date>/ by rename), delete, or refetch (download again from "
        + "the URL the state knows, else quarantine).",
      valueName: "action"))
  var repair = VerifyConfiguration().repair

  @Option(
    name: .customLong("max-delete"),
    help: ArgumentHelp(
      "Repair nothing if more files than this are bad: a number of files (50) or a share of "
        + "the files (1%); the run then exits 2.",
      valueName: "count|percent"))
  var maxDelete: DeletionLimit?

  @Option(
    name: .customLong("max-pixels"),
    help: ArgumentHelp(
      "With --level full, decode no image with more pixels (width x height) than this: it "
        + "gets a note and its structure is checked (default: 100000000, as the prefetch's).",
      valueName: "count"))
  var maxPixels = VerifyConfiguration().maxPixels

  @Option(
    name: .long,
    help: ArgumentHelp(
      "Files read and checked at once (default: the machine's cores).", valueName: "n"))
  var jobs = VerifyConfiguration().jobs

  @Flag(
    name: .customLong("dry-run"),
    help: "Say what --repair would do to each bad file, and change nothing.")
  var dryRun = false

  @Flag(
    name: .shortAndLong,
    help: ArgumentHelp(
      "List every bad file (not only the first 20), every file with notes and every repair "
        + "on the console."))
  var verbose = false

  func validate() throws {
    guard (1...256).contains(jobs) else { throw ValidationError("--jobs must be 1 to 256") }
    try checkCount(maxPixels, .maxPixels)
  }

  func run() async throws {
    try cacheOptions.requireExistingCache()
    var job = Job(name: "verify", location: cacheOptions.location)
    var verify = VerifyConfiguration()
    verify.level = level
    verify.repair = repair
    verify.maxDelete = maxDelete
    verify.maxPixels = maxPixels
    verify.jobs = jobs
    job.verify = verify
    let outcome = try await JobRunner(
      job: job, settings: reportOptions.settings(dryRun: dryRun, verbose: verbose),
      console: reportOptions.console
    ).run()
    try outcome.exit()
  }
}

extension VerifyLevel: ExpressibleByArgument {}
extension VerifyRepair: ExpressibleByArgument {}
