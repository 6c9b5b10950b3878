import ArgumentParser
import Core
import Foundation

struct StatsCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "stats",
    abstract: "Count the cache's files and bytes, and find its oldest and newest files.",
    discussion: """
      Prints the number of files, their logical and allocated bytes, the oldest and newest \
      access and modification dates, and how many files still carry a legacy name (no \
      extension, or an extension with a query or a colon in it). With --json, the same as JSON.

      Example:
        imagecache stats --cache /var/cache/images --namespace avatars
      """)

  @OptionGroup var cacheOptions: CacheOptions

  @Flag(name: .long, help: "Print the statistics as JSON on stdout.")
  var json = false

  struct Statistics: Codable {
    var path: String
    var files = 0
    var logicalBytes: UInt64 = 0
    var allocatedBytes: UInt64 = 0
    var oldestAccess: Date?
    var newestAccess: Date?
    var oldestModification: Date?
    var newestModification: Date?
    var legacyNames = 0
  }

  func run() throws {
    let location = cacheOptions.location
    var stats = Statistics(path: location.diskCachePath)
    try CacheScanner(root: location.diskCachePath).forEachFile(onError: {
      Console.say("stats: \($0)")
    }) { file in
      let attributes = file.attributes
      stats.files += 1
      stats.logicalBytes += attributes.size
      stats.allocatedBytes += attributes.allocatedSize
      stats.oldestAccess = min(stats.oldestAccess ?? attributes.accessDate, attributes.accessDate)
      stats.newestAccess = max(stats.newestAccess ?? attributes.accessDate, attributes.accessDate)
      stats.oldestModification = min(
        stats.oldestModification ?? attributes.modificationDate, attributes.modificationDate)
      stats.newestModification = max(
        stats.newestModification ?? attributes.modificationDate, attributes.modificationDate)
      if Self.isLegacyName(file.name) { stats.legacyNames += 1 }
    }
    if json { return try Console.printJSON(stats) }
    func date(_ value: Date?) -> String {
      value.map { ISO8601DateFormatter().string(from: $0) } ?? "-"
    }
    Console.say(
      """
      cache:           \(stats.path)
      files:           \(stats.files)
      logical bytes:   \(stats.logicalBytes) (\(formatBytes(stats.logicalBytes)))
      allocated bytes: \(stats.allocatedBytes) (\(formatBytes(stats.allocatedBytes)))
      access dates:    \(date(stats.oldestAccess)) .. \(date(stats.newestAccess))
      modified dates:  \(date(stats.oldestModification)) .. \(date(stats.newestModification))
      legacy names:    \(stats.legacyNames)
      """)
  }

  /// A name SD 5 would not write: an MD5 with no extension (readable through SD's fallback, but
  /// the current name carries the URL's extension when it has one), or an extension holding
  /// query text or a colon.
  static func isLegacyName(_ name: String) -> Bool {
    let digest = name.prefix(32)
    guard digest.count == 32, digest.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else {
      return false
    }
    if name.count == 32 { return true }
    let ext = name.dropFirst(33)
    return ext.contains("?") || ext.contains(":") || ext.contains("&") || ext.contains("=")
  }
}
