import ArgumentParser
import Core
import Foundation
import Prefetcher

#if canImport(Glibc)
  import Glibc
#endif

/// The prefetch settings of a job, as flags (SPEC section 7: each job setting has a flag of the
/// same name).
struct PrefetchSettings: ParsableArguments {
  @Option(
    name: .customLong("option"),
    help: ArgumentHelp(
      "An SD option for every URL, e.g. retryFailed, refreshCached (repeatable).", valueName: "name"
    ))
  var options: [String] = []

  @Option(
    name: .customLong("header"),
    help: ArgumentHelp("A request header, \"Name: value\" (repeatable).", valueName: "header"))
  var headers: [String] = []

  @Option(
    name: .customLong("cache-key-filter"),
    help: ArgumentHelp(
      "url (default), stripQuery, or strip:NAME,NAME to drop those query parameters.",
      valueName: "filter"))
  var cacheKeyFilter: String?

  @Option(
    name: .customLong("store-cache-type"),
    help: ArgumentHelp("Where to store: none, disk, memory or all.", valueName: "type"))
  var storeCacheType: CacheType = .all

  @Option(
    name: .customLong("query-cache-type"),
    help: ArgumentHelp(
      "Where to look before downloading: none, disk, memory or all.", valueName: "type"))
  var queryCacheType: CacheType = .all

  @Option(help: "Downloads at once in total.")
  var concurrency = PrefetchLimits().concurrency

  @Option(name: .customLong("per-host-concurrency"), help: "Downloads at once to one host.")
  var perHostConcurrency = PrefetchLimits().perHostConcurrency

  @Option(help: ArgumentHelp("Connect and idle timeout of a download.", valueName: "duration"))
  var timeout = Duration(seconds: PrefetchLimits().timeout)

  @Option(help: ArgumentHelp("The most one download may take in total.", valueName: "duration"))
  var deadline = Duration(seconds: PrefetchLimits().deadline)

  @Option(
    name: .customLong("max-response-size"),
    help: ArgumentHelp("A larger response fails and is not kept.", valueName: "size"))
  var maxResponseSize = ByteCount(bytes: PrefetchLimits().maxResponseSize)

  @Option(
    help: "Further attempts after a transient failure (timeouts, connection errors, 429, 502-504).")
  var retries = PrefetchLimits().retries

  @Option(
    name: .customLong("validate"),
    help: ArgumentHelp("How downloads are checked: none, structure or full.", valueName: "level"))
  var validation = PrefetchLimits().validation

  @Option(
    name: .customLong("blacklist-ttl"),
    help: ArgumentHelp(
      "Forget a blacklisted URL this long after its last failure (default: never).",
      valueName: "duration"))
  var blacklistTTL: Duration?

  func validate() throws {
    guard concurrency > 0 else { throw ValidationError("--concurrency must be at least 1") }
    guard perHostConcurrency > 0 else {
      throw ValidationError("--per-host-concurrency must be at least 1")
    }
    guard retries >= 0 else { throw ValidationError("--retries cannot be negative") }
    guard timeout.seconds > 0, deadline.seconds > 0 else {
      throw ValidationError("--timeout and --deadline must be positive")
    }
    _ = try resolved()
  }

  /// The default options and context these flags give every URL.
  func resolved() throws -> (ImageOptions, ImageContext, warnings: [String]) {
    let (options, warnings): (ImageOptions, [String])
    do {
      (options, warnings) = try ImageOptions.parse(
        self.options, source: "command line", field: "--option")
    } catch {
      throw ValidationError(error.message + " (--option)")
    }
    var context = ImageContext()
    context.storeCacheType = storeCacheType
    context.queryCacheType = queryCacheType
    for header in headers {
      let parts = header.split(separator: ":", maxSplits: 1)
      guard parts.count == 2, !parts[0].trimmingCharacters(in: .whitespaces).isEmpty else {
        throw ValidationError("--header \(header.debugDescription) is not \"Name: value\"")
      }
      context.headers[parts[0].trimmingCharacters(in: .whitespaces)] = parts[1].trimmingCharacters(
        in: .whitespaces)
    }
    switch cacheKeyFilter {
    case nil, "url": break
    case "stripQuery": context.cacheKeyFilter = .stripQuery
    case let value? where value.hasPrefix("strip:"):
      let names = value.dropFirst(6).split(separator: ",").map(String.init)
      guard !names.isEmpty else {
        throw ValidationError("--cache-key-filter strip: needs parameter names")
      }
      context.cacheKeyFilter = .stripQueryParameters(names)
    case let value?:
      throw ValidationError(
        "--cache-key-filter \(value.debugDescription): expected url, stripQuery or strip:NAME,...")
    }
    return (options, context, warnings)
  }

  /// The limits these flags set.
  var limits: PrefetchLimits {
    var limits = PrefetchLimits()
    limits.concurrency = concurrency
    limits.perHostConcurrency = perHostConcurrency
    limits.timeout = timeout.seconds
    limits.deadline = deadline.seconds
    limits.maxResponseSize = maxResponseSize.bytes
    limits.retries = retries
    limits.validation = validation
    limits.blacklistTTL = blacklistTTL?.seconds
    return limits
  }
}

extension PrefetchLimits {
  var downloaderConfiguration: DownloaderConfiguration {
    var configuration = DownloaderConfiguration()
    configuration.timeout = timeout
    configuration.deadline = deadline
    configuration.maxResponseSize = Int(clamping: maxResponseSize)
    configuration.perHostConnections = perHostConcurrency
    configuration.userAgent = "imagecache/\(ImageCacheCommand.version)"
    return configuration
  }

  var prefetchConfiguration: PrefetchConfiguration {
    var configuration = PrefetchConfiguration()
    configuration.concurrency = concurrency
    configuration.perHostConcurrency = perHostConcurrency
    configuration.retries = retries
    return configuration
  }

  var managerConfiguration: ManagerConfiguration {
    var configuration = ManagerConfiguration()
    configuration.validation = validation
    configuration.blacklistTimeToLive = blacklistTTL
    return configuration
  }
}

extension CacheType: ExpressibleByArgument {}
extension ValidationLevel: ExpressibleByArgument {}

struct PrefetchCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "prefetch",
    abstract: "Download the images that manifests list into the cache, as SDWebImage would.",
    discussion: """
      Each URL goes through SDWebImage's pipeline: refused at once if it is on the failed-URL \
      blacklist (unless retryFailed), looked up in the cache, and otherwise downloaded, \
      validated and stored under SDWebImage's file name. A manifest is plain text (one URL a \
      line, # comments) or JSON Lines ({"url": ..., "options": [...], "context": {...}}); it \
      is read as needed, never loaded whole.

      Exit codes: 0 all URLs done, 1 some failed, 2 usage error, 3 another run holds the \
      cache lock, 130/143 interrupted (the report is still written, marked interrupted).

      Examples:
        imagecache prefetch urls.txt --cache /var/cache/images --concurrency 32
        imagecache prefetch a.jsonl b.txt --cache /srv/c --option retryFailed --report out.json
      """)

  @Argument(help: ArgumentHelp("Manifests to read.", valueName: "manifest"))
  var manifests: [String]

  @OptionGroup var cacheOptions: CacheOptions
  @OptionGroup var reportOptions: ReportOptions
  @OptionGroup var settings: PrefetchSettings

  func validate() throws {
    for path in manifests where !FileManager.default.isReadableFile(atPath: path) {
      throw ValidationError("manifest \(path): cannot read this file")
    }
  }

  func run() async throws {
    let location = cacheOptions.location
    let lock = try RunLock(location: location, wait: reportOptions.wait)
    defer { withExtendedLifetime(lock) {} }
    let (options, context, warnings) = try settings.resolved()
    var report = RunReport(job: "prefetch", location: location, startedAt: Date())
    report.warnings = warnings

    let outcome = try await PrefetchRun(
      location: location, manifests: manifests, options: options, context: context,
      limits: settings.limits
    ).execute(into: &report)
    report.finishedAt = Date()
    try reportOptions.emit(report)
    try outcome.exit()
  }
}

/// How a prefetch ended, for the exit code.
struct PrefetchOutcome {
  var signal: Int32?
  var failed: Int

  func exit() throws {
    if let signal {
      throw ExitCode(
        signal == SIGINT ? ExitStatus.interrupted.rawValue : ExitStatus.terminated.rawValue)
    }
    if failed > 0 { throw ExitCode(ExitStatus.someURLsFailed.rawValue) }
  }
}

/// One prefetch over manifests: the downloader, manager and prefetcher wired together, with
/// signal handling and progress. Shared by `prefetch` and `run`.
struct PrefetchRun {
  var location: CacheLocation
  var manifests: [String]
  var options: ImageOptions
  var context: ImageContext
  var limits: PrefetchLimits

  func execute(into report: inout RunReport) async throws -> PrefetchOutcome {
    let store = try openState(location)
    report.warnings += store.warnings
    let downloader = Downloader(configuration: limits.downloaderConfiguration)
    let manager = try ImageManager(
      location: location, downloader: downloader, store: store,
      configuration: limits.managerConfiguration)
    let prefetcher = Prefetcher(manager: manager, configuration: limits.prefetchConfiguration)
    let items = ManifestItems(paths: manifests, defaultOptions: options, defaultContext: context)
    let stop = StopFlag()
    let signals = SignalWatcher(stop: stop)
    let progress = ConsoleProgress(
      total: manifests.reduce(0) { $0 + ManifestReader(path: $1).count { _ in true } })

    let runID = try? store.beginRun(job: report.job, at: report.startedAt)
    let task = Task { await prefetcher.run(items, stop: stop, progress: progress) }
    signals.onSignal { task.cancel() }
    let prefetch = await task.value
    signals.cancel()
    await downloader.shutdown()
    do {
      try manager.flush()
    } catch {
      report.warnings.append("could not record ETag/Last-Modified validators: \(error)")
    }

    var result = prefetch
    result.blacklistedURLs = (try? manager.blacklistedURLs()) ?? []
    report.prefetch = result
    report.warnings += items.warnings
    for line in result.lineErrors { Console.say("skipped \(line)") }
    if let signal = signals.received {
      report.status = .interrupted
      Console.say("interrupted by signal \(signal): stopped starting new downloads")
    }
    if let runID {
      try? store.finishRun(
        id: runID, at: Date(), status: report.status.rawValue,
        summary: "total \(result.total), downloaded \(result.downloaded), failed \(result.failed)")
    }
    return PrefetchOutcome(signal: signals.received, failed: result.failed)
  }
}

/// SIGINT and SIGTERM: the first stops new work and cancels what is in flight (stores are
/// atomic, so nothing partial is left); the report is still written.
final class SignalWatcher: @unchecked Sendable {
  private let lock = NSLock()
  private var sources: [DispatchSourceSignal] = []
  private var signal: Int32?
  private var handler: (@Sendable () -> Void)?

  init(stop: StopFlag) {
    for number in [SIGINT, SIGTERM] {
      Glibc.signal(number, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
      source.setEventHandler { [weak self] in
        stop.stop()
        self?.fire(number)
      }
      source.resume()
      sources.append(source)
    }
  }

  func onSignal(_ handler: @escaping @Sendable () -> Void) {
    let alreadyFired = lock.withLock {
      self.handler = handler
      return signal != nil
    }
    if alreadyFired { handler() }
  }

  private func fire(_ number: Int32) {
    let handler = lock.withLock {
      if signal == nil { signal = number }
      return self.handler
    }
    handler?()
  }

  var received: Int32? { lock.withLock { signal } }

  func cancel() {
    for source in sources { source.cancel() }
  }
}

/// On a terminal, one status line rewritten in place; otherwise a log line every few seconds.
final class ConsoleProgress: PrefetchProgress, @unchecked Sendable {
  private let total: Int
  private let isTerminal = isatty(STDERR_FILENO) == 1
  private let lock = NSLock()
  private var lastPrinted = Date.distantPast

  init(total: Int) {
    self.total = total
  }

  func update(_ report: PrefetchReport, elapsed: TimeInterval) {
    let interval: TimeInterval = isTerminal ? 0.2 : 5
    let now = Date()
    guard
      lock.withLock({
        guard now.timeIntervalSince(lastPrinted) >= interval else { return false }
        lastPrinted = now
        return true
      })
    else { return }
    print(line(report, elapsed: elapsed), final: false)
  }

  func finish(_ report: PrefetchReport, elapsed: TimeInterval) {
    print(line(report, elapsed: elapsed), final: true)
  }

  private func line(_ report: PrefetchReport, elapsed: TimeInterval) -> String {
    let done = report.total
    let rate = elapsed > 0 ? Double(done) / elapsed : 0
    var text =
      "\(done)/\(total) done, \(report.memoryHits + report.diskHits) hits, \(report.downloaded) downloaded, "
      + "\(report.notModified) not modified, \(report.failed) failed, \(report.blacklisted) blacklisted, \(Int(rate))/s"
    if rate > 0 && total > done { text += ", ETA \(Int(Double(total - done) / rate))s" }
    return text
  }

  private func print(_ text: String, final: Bool) {
    if isTerminal {
      FileHandle.standardError.write(Data(("\r\u{1B}[K" + text + (final ? "\n" : "")).utf8))
    } else {
      Console.say(text)
    }
  }
}
