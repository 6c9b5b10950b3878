import ArgumentParser
import Core
import Foundation
import Runner

struct PrefetchCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "prefetch",
    abstract: "Download the images that manifests list into the cache, as SDWebImage would.",
    discussion: """
      Each URL goes through SDWebImage's pipeline: refused at once if it is on the failed-URL \
      blacklist (unless retryFailed), looked up in the cache, and otherwise downloaded, \
      validated and stored under SDWebImage's file name. A manifest is plain text (one URL a \
      line, # comments), JSON Lines ({"url": ..., "options": [...], "context": {...}}), or an \
      XML sitemap (its <image:loc> URLs; an index is followed to its sitemaps; gzip too). A \
      manifest may be a file, an http(s) URL, or - for standard input (a pipe or FIFO is read \
      once, as it comes); it is read as needed, never loaded whole.

      Exit codes: 0 all URLs done (skipped lines alone still 0), 1 some URLs failed or the \
      blacklist refused every URL (0 with --allow-url-failures: the report and metrics \
      still count them) or a manifest or sitemap failed as a whole (not fetched, not \
      readable, refused), 2 usage error (a manifest that is an image or binary data too), 3 \
      another run holds the cache lock, 4 fatal I/O error, 130/143 interrupted (the report \
      is still written, marked interrupted).

      As one of N workers: --shard K/N, or --shards N|auto (K from JOB_COMPLETION_INDEX, \
      Slurm's or Grid Engine's array task); {shard} and {shards} in --report and --metrics \
      become K and N. Each worker opens up to --per-host-concurrency connections to a host, \
      N times that in all: --fleet-per-host-concurrency M bounds the fleet's total.

      Examples:
        imagecache prefetch urls.txt --cache /var/cache/images --concurrency 32
        imagecache prefetch --url https://cdn.example.com/a.jpg --cache /srv/c
        imagecache prefetch a.jsonl b.txt --cache /srv/c --option retryFailed \\
          --report out.json
        imagecache prefetch https://example.com/sitemap.xml.gz --cache /srv/c \\
          --sitemap-order lastmod
        imagecache prefetch https://intranet.example/sitemap.xml --cache /srv/c \\
          --cacert /etc/ssl/corp-ca.pem --proxy http://proxy.example:3128
        imagecache prefetch urls.txt --cache /srv/c --dry-run | grep -c '^download '
      """)

  @Argument(
    help: ArgumentHelp(
      "Manifests to read: files, http(s) URLs, or - for standard input.", valueName: "manifest"),
    completion: .file())
  var manifests: [String] = []

  @Option(
    name: .customLong("url"),
    help: ArgumentHelp(
      "An image URL to prefetch, as a manifest's line (repeatable), as wget and aria2 take "
        + "URLs.",
      valueName: "url"))
  var urls: [String] = []

  @OptionGroup var cacheOptions: CacheOptions
  @OptionGroup var reportOptions: ReportOptions
  @OptionGroup var shardOptions: ShardOptions
  @OptionGroup var fleetOptions: FleetOptions
  @OptionGroup var settings: PrefetchSettings

  @Flag(
    name: .customLong("dry-run"),
    help: ArgumentHelp(
      "Print what each URL would do, and download, write or lock nothing (with --json, the "
        + "plan is the report).",
      discussion: """
        One line a URL on stdout: hit (in the cache, under its current or legacy name, or the \
        original of a variant), download, revalidate (refreshCached), blacklisted, invalid (not \
        an http(s) URL: a run would fail and blacklist it), miss (fromCacheOnly) or failed (a \
        namespace's state or the cache cannot be read: the run would fail it). Bad lines \
        and the counts go to stderr. Manifests and sitemaps given by URL are still fetched, to \
        list their URLs; no image is requested. The cache must exist; access times are left \
        alone.
        """))
  var dryRun = false

  @Flag(name: .shortAndLong, help: "Print every failed URL (not only the first 20).")
  var verbose = false

  func validate() throws {
    if manifests.isEmpty && urls.isEmpty {
      throw ValidationError(
        "give a manifest (a file, an http(s) URL, or - for standard input) or --url URL")
    }
  }

  /// Refuses manifests that are missing, unreadable, images, job files or streams named twice
  /// (exit 2). Checked here and not in `validate()`: what is wrong is a file, not the command
  /// line's syntax, so the error comes without a usage line.
  private func checkManifests() throws(ConfigurationError) {
    for path in manifests {
      try Job.checkManifest(path, what: "manifest")
      // Its YAML lines would be read as URLs, failed and blacklisted one by one.
      if !ManifestItems.isRemote(path) && !ManifestItems.isStream(path)
        && Job.looksLikeJobFile(path: path)
      {
        throw ConfigurationError(
          source: "manifest \(path)", message: "this is a job file: use `imagecache run \(path)`")
      }
    }
    try Job.checkStreamsReadOnce(manifests, readTwice: false, what: "manifest")
  }

  func run() async throws {
    var job = Job(name: "prefetch", location: cacheOptions.location)
    job.manifests = manifests
    job.urls = urls
    job.passes = []
    try settings.apply(to: &job)
    try shardOptions.apply(to: &job)
    fleetOptions.apply(to: &job, environment: ProcessInfo.processInfo.environment)
    let runner = JobRunner(
      job: job, settings: reportOptions.settings(dryRun: dryRun, verbose: verbose),
      console: reportOptions.console)
    do {
      try checkManifests()
    } catch {
      // A night whose manifest never arrived: its report and metrics say it failed.
      runner.reportCannotStart(error)
      throw error
    }
    // A dry run reads the cache it plans for: a typo in --cache is an error, not a plan of
    // downloads into a folder that does not exist.
    if dryRun { try cacheOptions.requireExistingCache() }
    try (try await runner.run()).exit()
  }
}
