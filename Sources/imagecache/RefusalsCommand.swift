import ArgumentParser
import Core
import Foundation
import State

/// The refusals the adaptive per-host limit remembers (issue 44): an origin that answered 429
/// or 503 when asked past its knee keeps every run under that for a week. An operator whose
/// origin has grown, or who knows the refusal for an outage's, lists and forgets them here.
struct RefusalsCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "refusals",
    abstract: "List or forget the origins whose adaptive limit is held under a refusal.",
    discussion: """
      With --per-host-concurrency auto (the default over HTTP/1.1), an origin that refuses \
      (429, 503, a refused HTTP/2 stream) when asked for more than it served is remembered \
      for a week, with the transfers that were under way: the runs of that week keep its \
      limit under that number ("held under" in -v, the report and the page). Forget one when \
      the origin has grown, or when the refusal was an outage's. The refusals live in \
      <cache>/<namespace>/.imagecache/state.sqlite (and each shard's state file).

      Examples:
        imagecache refusals list --cache /var/cache/images
        imagecache refusals remove https://img.example.com --cache /var/cache/images
        imagecache refusals clear --cache /var/cache/images
      """,
    subcommands: [List.self, Remove.self, Clear.self])

  struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "list",
      abstract:
        "List the origins held under a refusal, with when it came and when it is forgotten.",
      discussion: """
        One origin a line on stdout, tab-separated: the origin, "held under N" (the \
        transfers under way when it refused), the refusal's date and the date it is \
        forgotten; the count goes to stderr. A state file that cannot be read is named, and \
        the command exits 4.
        """)
    @OptionGroup var cacheOptions: CacheOptions
    @Flag(name: .long, help: "Print the refusals as JSON on stdout.")
    var json = false

    /// A refusal as `--json` prints it.
    struct Entry: Encodable {
      var origin: String
      var heldUnder: Int
      var since: Date
      var until: Date
    }

    func run() throws {
      try cacheOptions.requireExistingCache()
      let now = Date()
      // Read-only, every state file (a sharded run keeps one per shard); an origin refused in
      // several shards is listed once, with its latest refusal.
      var byOrigin: [Origin: OriginRefusal] = [:]
      var unreadable = false
      for path in try StateStore.stateFiles(location: cacheOptions.location) {
        do {
          for refusal in try StateStore.openForReading(path: path)?.refusals(at: now) ?? [] {
            if let known = byOrigin[refusal.origin], known.since >= refusal.since { continue }
            byOrigin[refusal.origin] = refusal
          }
        } catch {
          Console.standard.say("refusals: cannot read \(path): \(error)", severity: .error)
          unreadable = true
        }
      }
      let entries = byOrigin.values.map {
        Entry(
          origin: $0.origin.text, heldUnder: $0.inFlight, since: $0.since,
          until: $0.since.addingTimeInterval(OriginRefusal.lifetime))
      }.sorted { $0.origin < $1.origin }
      if json {
        try Console.printJSON(entries)
      } else {
        for entry in entries {
          Console.standard.output(
            "\(entry.origin)\theld under \(entry.heldUnder)\tsince "
              + "\(UTCTime(entry.since).iso8601())\tuntil \(UTCTime(entry.until).iso8601())")
        }
        // The count is a summary: on stderr, so that `list | wc -l` counts origins.
        Console.standard.say("\(entries.count) origins held under a refusal")
      }
      if unreadable { throw ExitCode(ExitStatus.fatalIO.rawValue) }
    }
  }

  struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "remove", abstract: "Forget the refusals of some origins.")
    @OptionGroup var cacheOptions: CacheOptions
    @Argument(
      help: ArgumentHelp(
        "The origins, as list prints them, or any http(s) URL of each.", valueName: "origin"))
    var origins: [String]

    func validate() throws {
      for text in origins where Origin(naming: text) == nil {
        throw ValidationError(
          "\(text.debugDescription) is not an http or https origin or URL "
            + "(such as https://img.example.com)")
      }
    }

    func run() throws {
      try cacheOptions.requireExistingCache()
      let stores = try openStates(cacheOptions.location)
      let now = Date()
      // Checked in validate(): each names an origin.
      try removeEach(
        origins.compactMap(Origin.init(naming:)),
        saying: { "forgot the refusal of \($0.text)" },
        missing: { "no refusal remembered for \($0.text)" }
      ) { origin in
        try stores.reduce(false) { try !$1.forgetRefusals(of: [origin], at: now).isEmpty || $0 }
      }
    }
  }

  struct Clear: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "clear", abstract: "Forget every origin's refusal.")
    @OptionGroup var cacheOptions: CacheOptions

    func run() throws {
      try cacheOptions.requireExistingCache()
      let now = Date()
      let origins = try openStates(cacheOptions.location).reduce(into: Set<Origin>()) {
        $0.formUnion(try $1.forgetRefusals(at: now))
      }
      Console.standard.say("forgot the refusals of \(origins.count) origins")
    }
  }
}

extension Origin {
  /// An origin as the command names it: `https://img.example.com:443`, an IPv6 host in
  /// brackets.
  var text: String {
    "\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)"
  }

  /// The origin `text` names: an origin (``init(parsing:)``) or any http(s) URL of it.
  init?(naming text: String) {
    if let origin = Origin(parsing: text) {
      self = origin
      return
    }
    guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
      scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty
    else { return nil }
    self.init(url)
  }
}
