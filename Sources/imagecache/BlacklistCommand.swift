import ArgumentParser
import Core
import Foundation
import State

struct BlacklistCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "blacklist",
    abstract: "List, remove or clear the URLs on the failed-URL blacklist.",
    discussion: """
      A URL goes on the blacklist after a failure SDWebImage would blacklist it for (an \
      invalid URL, data that is not an image, a non-transient network error) and is then \
      refused without a request until it is removed, cleared, or fetched with the retryFailed \
      option. The blacklist lives in <cache>/<namespace>/.imagecache/state.sqlite.

      Examples:
        imagecache blacklist list --cache /var/cache/images
        imagecache blacklist remove https://example.com/a.png \\
          --cache /var/cache/images
        imagecache blacklist clear --cache /var/cache/images
      """,
    subcommands: [List.self, Remove.self, Clear.self])

  struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "list",
      abstract: "List the blacklisted URLs with why and when they failed.",
      discussion: """
        One URL a line on stdout, tab-separated: the URL, the error's name and code, the \
        number of failures, the last failure's date and the reason; the count goes to stderr.
        """)
    @OptionGroup var cacheOptions: CacheOptions
    @Flag(name: .long, help: "Print the entries as JSON on stdout.")
    var json = false

    func run() throws {
      try cacheOptions.requireExistingCache()
      // Read-only: a read-only state file (or a cache with no state yet) still lists.
      // Every state file: a sharded run keeps one per shard (SPEC section 9).
      let entries = try StateStore.blacklistOfEveryStateFile(location: cacheOptions.location)
      if json { return try Console.printJSON(entries) }
      for entry in entries {
        Console.standard.output(
          "\(entry.url)\t\(entry.name) (\(entry.code))\t\(entry.failureCount)x\tlast \(UTCTime(entry.lastFailedAt).iso8601())\t\(entry.reason)"
        )
      }
      // The count is a summary: on stderr, so that `list | wc -l` counts URLs.
      Console.standard.say("\(entries.count) URLs on the blacklist")
    }
  }

  struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "remove", abstract: "Take URLs off the blacklist.")
    @OptionGroup var cacheOptions: CacheOptions
    @Argument(
      help: ArgumentHelp("The URLs to remove, exactly as they were requested.", valueName: "url"))
    var urls: [String]

    func run() throws {
      try cacheOptions.requireExistingCache()
      let stores = try openStates(cacheOptions.location)
      try removeEach(urls, saying: { "removed \($0)" }, missing: { "not on the blacklist: \($0)" })
      {
        url in
        var removed = false
        for store in stores where try store.removeFromBlacklist(url: url) { removed = true }
        return removed
      }
    }
  }

  struct Clear: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "clear",
      abstract: "Remove every URL from the blacklist.")
    @OptionGroup var cacheOptions: CacheOptions

    func run() throws {
      try cacheOptions.requireExistingCache()
      let removed = try openStates(cacheOptions.location).reduce(0) { try $0 + $1.clearBlacklist() }
      Console.standard.say("removed \(removed) URLs from the blacklist")
    }
  }
}

/// Removes each of `items` with `remove` (true: it was there to remove), saying which were
/// and which were not; exit 1 when any was not, as `rm` of a missing file.
func removeEach<Item>(
  _ items: [Item], saying removed: (Item) -> String, missing: (Item) -> String,
  _ remove: (Item) throws -> Bool
) throws {
  var absent = 0
  for item in items {
    if try remove(item) {
      Console.standard.say(removed(item))
    } else {
      Console.standard.say(missing(item))
      absent += 1
    }
  }
  if absent > 0 { throw ExitCode(ExitStatus.someURLsFailed.rawValue) }
}

/// Opens the cache's state, printing any warning (such as a corrupt file moved aside).
/// Every state file of the cache, opened for writing: the unsharded one (created if need be)
/// and each shard's.
func openStates(_ location: CacheLocation) throws -> [StateStore] {
  var stores = [try StateStore(location: location)]
  for path in try StateStore.stateFiles(location: location)
  where (path as NSString).lastPathComponent != StateStore.fileName {
    stores.append(
      try StateStore(
        directory: location.stateDirectory, fileName: (path as NSString).lastPathComponent))
  }
  for warning in stores.flatMap(\.warnings) {
    Console.standard.report(.warning(.stateFile(warning)))
  }
  return stores
}
