import ArgumentParser
import Core
import Foundation
import Runner

struct MigrateCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "migrate",
    abstract: "Bring a cache written by SDWebImage 3 or 4 into the current layout.",
    discussion: """
      Two steps, both without losing a file:
      1. Merge a legacy disk cache folder into the namespace: --from OLD_DIR, or, by default, \
      SDWebImage 3/4's folders of the namespace beside the cache directory, each that exists: \
      <parent>/<namespace>/com.hackemist.SDWebImageCache.<namespace> (SD 3.7.3 to 4.4) and \
      <parent>/com.hackemist.SDWebImageCache.<namespace> (SD 3.0 to 3.7.2). Files keep their \
      access and modification times, across file systems too.
      2. With --manifest, rename the files of the URLs it lists from legacy file names (no \
      extension; the raw string's extension, query included; the uncapped URL extension) to \
      the current name.
      On a name collision the newer file takes the name and the other is moved to \
      .imagecache/collisions/ and reported. The merged folder is removed once every file in it \
      has moved (a folder that still holds anything is kept, and the run says how many files \
      and bytes are left in it and why). Without --manifest, the run says how many files keep \
      a legacy name that SD 5 does not look up: give their URLs with --manifest to rename them. \
      Running it twice changes nothing: a --from folder that is gone is nothing to merge (exit \
      0). A dry run reports exactly what the real run then does, steps 1 and 2 together, into \
      a cache that does not exist yet too (the real run creates it).

      Examples:
        imagecache migrate --cache ~/.cache/com.hackemist.SDImageCache --dry-run
        imagecache migrate --cache /srv/cache \\
          --from /tmp/device/com.hackemist.SDWebImageCache.default
        imagecache migrate --cache /srv/cache --manifest jobs/manifests/urls.txt
      """)

  @OptionGroup var cacheOptions: CacheOptions
  @OptionGroup var reportOptions: ReportOptions
  @OptionGroup var shardOptions: ShardOptions

  @Option(
    name: .long,
    help: ArgumentHelp(
      "A legacy disk cache folder to merge into the namespace.", valueName: "old-dir"),
    completion: .directory)
  var from: String?

  @Option(
    name: .long,
    help: ArgumentHelp(
      "A manifest whose URLs' legacy file names are renamed (repeatable).", valueName: "file"),
    completion: .file())
  var manifest: [String] = []

  @Flag(name: .customLong("dry-run"), help: "Print what would be moved and move nothing.")
  var dryRun = false

  @Flag(name: .shortAndLong, help: "List every file moved.")
  var verbose = false

  /// Refuses a `--from` that is not a folder and `--manifest` files that are missing or
  /// unreadable (exit 2), before anything runs. In `run()`, not `validate()`: what is wrong is
  /// a file, not the command line's syntax, so the error comes without a usage line.
  private func checkInputs() throws(ConfigurationError) {
    // A missing --from is not an error: a finished migration removed it, and running it again
    // changes nothing (the run says there is nothing to merge). One that cannot be examined
    // is said by the migration's own read of it.
    if let from, let attributes = try? FileSystem.attributes(atPath: from),
      !attributes.isDirectory
    {
      throw ConfigurationError(source: "--from \(from)", message: "not a folder")
    }
    for path in manifest { try Job.checkManifest(path, what: "--manifest") }
    try Job.checkStreamsReadOnce(manifest, readTwice: false, what: "--manifest")
  }

  func run() async throws {
    try checkInputs()
    var job = Job(name: "migrate", location: cacheOptions.location)
    job.passes = [.migrate]
    job.migrateFrom = from
    job.manifests = manifest
    job.prefetchesManifests = false
    try shardOptions.apply(to: &job)
    let outcome = try await JobRunner(
      job: job, settings: reportOptions.settings(dryRun: dryRun, verbose: verbose),
      console: reportOptions.console
    ).run()
    try outcome.exit()
  }
}
