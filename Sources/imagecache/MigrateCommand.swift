import ArgumentParser
import Core
import Foundation
import Maintenance
import Prefetcher

struct MigrateCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "migrate",
    abstract: "Bring a cache written by SDWebImage 3 or 4 into the current layout.",
    discussion: """
      Two steps, both without losing a file:
      1. Merge a legacy disk cache folder into the namespace: --from OLD_DIR, or, by default, \
      SDWebImage 3/4's folder beside the cache directory \
      (<parent>/default/com.hackemist.SDWebImageCache.<namespace>) when it exists.
      2. With --manifest, rename the files of the URLs it lists from legacy file names (no \
      extension; the raw string's extension, query included; the uncapped URL extension) to \
      the current name.
      On a name collision the newer file takes the name and the other is moved to \
      .imagecache/collisions/ and reported. Running it twice changes nothing.

      Examples:
        imagecache migrate --cache ~/.cache/com.hackemist.SDImageCache --dry-run
        imagecache migrate --cache /srv/cache --from /tmp/device/com.hackemist.SDWebImageCache.default
        imagecache migrate --cache /srv/cache --manifest jobs/urls.txt
      """)

  @OptionGroup var cacheOptions: CacheOptions
  @OptionGroup var reportOptions: ReportOptions

  @Option(
    name: .long,
    help: ArgumentHelp(
      "A legacy disk cache folder to merge into the namespace.", valueName: "old-dir"))
  var from: String?

  @Option(
    name: .long,
    help: ArgumentHelp(
      "A manifest whose URLs' legacy file names are renamed (repeatable).", valueName: "file"))
  var manifest: [String] = []

  @Flag(name: .customLong("dry-run"), help: "Print what would be moved and move nothing.")
  var dryRun = false

  @Flag(name: .shortAndLong, help: "List every file moved.")
  var verbose = false

  func validate() throws {
    if let from, !FileManager.default.fileExists(atPath: from) {
      throw ValidationError("--from \(from): no such folder")
    }
    for path in manifest where !FileManager.default.isReadableFile(atPath: path) {
      throw ValidationError("--manifest \(path): cannot read this file")
    }
  }

  func run() throws {
    let location = cacheOptions.location
    let lock = try RunLock(location: location, wait: reportOptions.wait)
    defer { withExtendedLifetime(lock) {} }
    var report = RunReport(job: "migrate", location: location, startedAt: Date())
    report.maintenance = try migrate(
      location: location, from: from, manifests: ManifestItems(paths: manifest), dryRun: dryRun,
      verbose: verbose)
    report.finishedAt = Date()
    try reportOptions.emit(report)
  }
}

/// The migrate pass of `migrate` and of `run`: merge a legacy folder (`from`, else SD 3/4's
/// folder beside the cache) when it exists, then rename the legacy file names of the manifests'
/// keys. Prints each pass and returns their reports.
func migrate(
  location: CacheLocation, from: String?, manifests: ManifestItems, dryRun: Bool, verbose: Bool
) throws -> [MaintenancePassReport] {
  let migrator = CacheMigrator(location: location)
  let now = Date()
  var passes: [MaintenancePassReport] = []
  let source = from ?? migrator.legacyDirectory
  if FileManager.default.fileExists(atPath: source) {
    passes.append(try migrator.mergeDirectory(from: source, dryRun: dryRun, now: now))
  } else {
    Console.say("migrate: no legacy folder at \(source)")
  }
  if !manifests.paths.isEmpty {
    var lineErrors: [String] = []
    var rename = migrator.renameLegacyFileNames(
      keys: manifests.cacheKeys { lineErrors.append($0.description) }, dryRun: dryRun, now: now)
    rename.errors += lineErrors
    passes.append(rename)
  }
  for pass in passes { describe(pass, verbose: verbose) }
  return passes
}
