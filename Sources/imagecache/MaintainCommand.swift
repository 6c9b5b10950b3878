import ArgumentParser
import Core
import Foundation
import Maintenance
import Runner

struct MaintainCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "maintain",
    abstract: "Expire files by age, then trim the cache to half its size limit, oldest first.",
    discussion: """
      SDWebImage's removeExpiredData: every file whose date (chosen by --expire-type) is at or \
      before now minus --max-age is deleted; then, if --max-size is set and the remaining \
      allocated size is above it, the oldest files are deleted until the total is below half \
      of it. Each pass runs only when its limit is given: --max-size alone only trims, and \
      with neither flag nothing is deleted. --max-delete guards against a limit that would \
      delete far more than meant: over it, nothing is deleted and the exit code is 2. Hidden entries and the tool's own .imagecache/ state are never touched. A \
      symbolic link counts by its own dates and size and an expired one is removed itself, \
      as SD does; links are never followed and their targets never touched. SIGINT or \
      SIGTERM stops after the file in hand and still writes the report, marked interrupted.

      Examples:
        imagecache maintain --cache /var/cache/images --max-age 30d --max-size 2GB
        imagecache maintain --cache /var/cache/images --max-age 0 --dry-run
      """)

  @OptionGroup var cacheOptions: CacheOptions
  @OptionGroup var reportOptions: ReportOptions
  @OptionGroup var shardOptions: ShardOptions

  @Option(
    name: JobSetting.maxDiskAge.names, parsing: .unconditional,
    help: JobSetting.maxDiskAge.argumentHelp)
  var maxAge: Duration?

  @Option(name: JobSetting.maxDiskSize.names, help: JobSetting.maxDiskSize.argumentHelp)
  var maxSize: ByteCount?

  @Option(name: JobSetting.maxDelete.names, help: JobSetting.maxDelete.argumentHelp)
  var maxDelete: DeletionLimit?

  @Option(name: JobSetting.expireType.names, help: JobSetting.expireType.argumentHelp)
  var expireType = CleanupConfiguration().expireType

  @Flag(
    name: .customLong("dry-run"),
    help: "Print what would be deleted and delete nothing (with --json, the plan is the report).")
  var dryRun = false

  @Flag(name: .shortAndLong, help: "List every file deleted, here and in the report.")
  var verbose = false

  func validate() throws {
    try maxAge?.check(.maxDiskAge)
    try maxSize?.check(JobSetting.maxDiskSize.flag)
  }

  func run() async throws {
    try cacheOptions.requireExistingCache()
    var job = Job(name: "maintain", location: cacheOptions.location)
    job.cleanup = CleanupConfiguration(
      maxDiskAge: maxAge?.seconds, maxDiskSize: maxSize?.bytes, expireType: expireType,
      maxDelete: maxDelete)
    // Only the passes whose limit was given (SPEC section 11): `--max-size` alone trims.
    job.passes = (maxAge != nil ? [.expire] : []) + (maxSize != nil ? [.trim] : [])
    if job.passes.isEmpty {
      reportOptions.console.say(
        "maintain: nothing to do: give --max-age (expire), --max-size (trim) or both "
          + "(SD's defaults: --max-age 7d, no size limit)")
    }
    try shardOptions.apply(to: &job)
    let outcome = try await JobRunner(
      job: job, settings: reportOptions.settings(dryRun: dryRun, verbose: verbose),
      console: reportOptions.console
    ).run()
    try outcome.exit()
  }
}

extension DeletionLimit: ExpressibleByArgument {
  public init?(argument: String) { self.init(parsing: argument) }
}
