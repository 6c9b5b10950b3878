import ArgumentParser
import Core
import Foundation
import Runner

struct StatsCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "stats",
    abstract: "Count the cache's files and bytes, and find its oldest and newest files.",
    discussion: """
      Prints the number of files, their logical and allocated bytes, the oldest and newest \
      access and modification dates, and how many files still carry a legacy name (no \
      extension, or an extension with a query or a colon in it), on stdout. With --json, the \
      same as JSON. A state file that cannot be read leaves the blacklist's count unknown \
      (never 0): stats says which, and exits 4.

      Example:
        imagecache stats --cache /var/cache/images --namespace avatars
      """)

  @OptionGroup var cacheOptions: CacheOptions

  @Flag(name: .long, help: "Print the statistics as JSON on stdout.")
  var json = false

  func run() throws {
    try cacheOptions.requireExistingCache()
    let stats = try CacheStatistics.collect(location: cacheOptions.location) {
      Console.standard.say("stats: \($0)")
    }
    if json {
      try Console.printJSON(stats)
    } else {
      print(stats)
    }
    // A count it could not make is not a success, though the rest is printed.
    if !stats.unreadableStateFiles.isEmpty { throw ExitCode(ExitStatus.fatalIO.rawValue) }
  }

  private func print(_ stats: CacheStatistics) {
    func date(_ value: Date?) -> String {
      value.map { UTCTime($0).iso8601() } ?? "-"
    }
    let blacklisted =
      stats.blacklistedURLs.map { "\($0) URLs" }
      ?? "unknown: could not read \(stats.unreadableStateFiles.joined(separator: ", "))"
    Console.standard.output(
      """
      cache:           \(stats.path)
      files:           \(stats.files)
      logical bytes:   \(stats.logicalBytes) (\(formatBytes(stats.logicalBytes)))
      allocated bytes: \(stats.allocatedBytes) (\(formatBytes(stats.allocatedBytes)))
      access dates:    \(date(stats.oldestAccess)) .. \(date(stats.newestAccess))
      modified dates:  \(date(stats.oldestModification)) .. \(date(stats.newestModification))
      legacy names:    \(stats.legacyNames)
      temporary files: \(stats.temporaryFiles) (\(formatBytes(stats.temporaryBytes)))
      blacklisted:     \(blacklisted) (\(stats.stateFiles) state files)
      """)
  }
}
