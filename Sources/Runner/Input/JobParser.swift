import Core
import Foundation
import HTTP
import Maintenance
import Pipeline
import Prefetcher
import Yams

/// Walks the node tree of a job file, so that every error can say where it is.
struct JobParser {
  let file: String
  var directory: String { (file as NSString).deletingLastPathComponent }

  func fail(_ node: Node?, _ field: String, _ message: String) -> ConfigurationError {
    ConfigurationError(
      source: file, line: node?.mark?.line, field: field.isEmpty ? nil : field, message: message)
  }

  func parse(_ root: Node) throws(ConfigurationError) -> Job {
    guard let top = root.mapping else {
      throw fail(root, "", "a job file is a mapping of settings")
    }
    try checkKeys(top, known: Job.knownKeys, prefix: "")
    let name =
      try string(top["name"], "name")
      ?? ((file as NSString).lastPathComponent as NSString).deletingPathExtension
    // The name becomes part of paths (`{job}` in report and metrics paths, the cron wrapper's
    // files): one path component, as a namespace (SPEC section 10).
    if let problem = CacheLocation.pathComponentProblem(name) {
      throw fail(
        top["name"] ?? root, "name",
        (top["name"] == nil ? "the job's name, taken from its file name, " : "")
          + "becomes a file name in {job} paths, and \(problem)")
    }

    guard let cacheNode = top["cache"], let cache = cacheNode.mapping else {
      throw fail(top["cache"] ?? root, "cache", "required: a mapping with at least 'directory'")
    }
    try checkKeys(
      cache, known: ["directory", "namespace"] + JobSetting.cache.map(\.name), prefix: "cache.")
    guard let directory = try string(cache["directory"], "cache.directory") else {
      throw fail(cacheNode, "cache.directory", "required")
    }
    let namespace =
      try string(cache["namespace"], "cache.namespace") ?? CacheLocation.defaultNamespace
    if let problem = CacheLocation.namespaceProblem(namespace) {
      throw fail(cache["namespace"], "cache.namespace", problem)
    }
    var job = Job(
      name: name, file: file,
      location: CacheLocation(directory: resolve(directory), namespace: namespace))
    try apply(JobSetting.cache, of: cache, to: &job)

    if let manifests = top["manifests"] {
      guard let list = manifests.sequence, !list.isEmpty else {
        throw fail(manifests, "manifests", "expected a list of manifest files")
      }
      for (index, item) in list.enumerated() {
        guard let path = item.string else {
          throw fail(item, "manifests[\(index)]", "expected a file path or an http(s) URL")
        }
        let named = ManifestItems.isRemote(path) || path == ManifestItems.standardInput
        job.manifests.append(named ? path : resolve(path))
      }
    }
    if let sitemap = top["sitemap"] {
      guard let mapping = sitemap.mapping else {
        throw fail(sitemap, "sitemap", "expected a mapping (pages, order)")
      }
      try checkKeys(mapping, known: ["pages", "order"], prefix: "sitemap.")
      if let pages = mapping["pages"] { job.sitemap.pages = try bool(pages, "sitemap.pages") }
      if let order = mapping["order"] {
        job.sitemap.order = try choice(order, "sitemap.order", SitemapOrder.self)
      }
    }
    if let shard = top["shard"] {
      guard let text = shard.string, let value = Shard(text) else {
        throw fail(shard, "shard", "expected K/N: shard K (from 0) of N, such as 0/4")
      }
      job.shard = value
    }
    if let options = top["options"] {
      let names = try strings(options, "options")
      let parsed = try ImageOptions.parse(
        names, source: file, line: options.mark?.line, field: "options")
      job.options = parsed.0
      job.warnings += parsed.warnings
    }
    if let context = top["context"] {
      guard case .object(let object) = try json(context) else {
        throw fail(context, "context", "expected a mapping of context keys")
      }
      job.context = try ImageContext().applying(object, source: file, line: context.mark?.line)
    }
    if let prefetch = top["prefetch"] {
      guard let mapping = prefetch.mapping else {
        throw fail(prefetch, "prefetch", "expected a mapping")
      }
      try checkKeys(mapping, known: JobSetting.prefetch.map(\.name), prefix: "prefetch.")
      try apply(JobSetting.prefetch, of: mapping, to: &job)
    }
    if let maintenance = top["maintenance"] {
      job.passes = try strings(maintenance, "maintenance").map { name throws(ConfigurationError) in
        guard let pass = JobPass(rawValue: name) else {
          throw fail(
            maintenance, "maintenance",
            "unknown pass \(name.debugDescription) (known: "
              + JobPass.allCases.map(\.rawValue).joined(separator: ", ") + ")")
        }
        return pass
      }
    }
    let verify = try verifyConfiguration(top["verify"], maxDelete: job.cleanup.maxDelete)
    if job.passes.contains(.verify) {
      job.verify = verify
    } else if let node = top["verify"] {
      throw fail(
        node, "verify", "'maintenance' does not list the verify pass these settings are for")
    }
    if let migrate = top["migrate"] {
      guard let mapping = migrate.mapping else {
        throw fail(migrate, "migrate", "expected a mapping")
      }
      try checkKeys(mapping, known: ["from"], prefix: "migrate.")
      job.migrateFrom = try string(mapping["from"], "migrate.from").map(resolve)
    }
    if let allow = top["allowURLFailures"] {
      job.allowURLFailures = try bool(allow, "allowURLFailures")
    }
    job.report = try string(top["report"], "report").map(resolve)
    job.metrics = try string(top["metrics"], "metrics").map(resolve)
    if let metrics = job.metrics, let problem = Job.metricsPathProblem(metrics) {
      throw fail(top["metrics"], "metrics", problem)
    }
    return job
  }

  /// The `verify` pass's settings (`verify: {level, repair, maxPixels}`): the `verify`
  /// command's defaults, a report only unless `repair` says otherwise, guarded by
  /// `cache.maxDelete`; `maxPixels` in the prefetch's range.
  func verifyConfiguration(_ node: Node?, maxDelete: DeletionLimit?) throws(ConfigurationError)
    -> VerifyConfiguration
  {
    var configuration = VerifyConfiguration()
    configuration.maxDelete = maxDelete
    guard let node else { return configuration }
    guard let mapping = node.mapping else {
      throw fail(node, "verify", "expected a mapping (level, repair, maxPixels)")
    }
    try checkKeys(mapping, known: ["level", "repair", "maxPixels"], prefix: "verify.")
    if let level = mapping["level"] {
      configuration.level = try choice(level, "verify.level", VerifyLevel.self)
    }
    if let repair = mapping["repair"] {
      configuration.repair = try choice(repair, "verify.repair", VerifyRepair.self)
    }
    if let maxPixels = mapping["maxPixels"] {
      do {
        configuration.maxPixels = try JobSetting.maxPixels.check(
          count: maxPixels.int, text: maxPixels.string ?? "")
      } catch {
        throw fail(maxPixels, "verify.maxPixels", error.description)
      }
    }
    return configuration
  }

  /// The `settings` that `mapping` (a section such as `cache:` or `prefetch:`) gives, over the
  /// defaults of ``CleanupConfiguration`` and ``PrefetchConfiguration``.
  func apply(_ settings: [JobSetting], of mapping: Node.Mapping, to job: inout Job)
    throws(ConfigurationError)
  {
    for setting in settings {
      guard let value = mapping[setting.name] else { continue }
      try apply(setting, value, to: &job)
    }
  }

  /// One setting, read and checked as its ``JobSetting`` declaration says.
  func apply(_ setting: JobSetting, _ value: Node, to job: inout Job) throws(ConfigurationError) {
    let field = setting.field
    switch setting {
    case .maxDiskAge: job.cleanup.maxDiskAge = try duration(value, setting)
    case .maxDiskSize: job.cleanup.maxDiskSize = try byteCount(value, field)
    case .expireType: job.cleanup.expireType = try choice(value, field, ExpireType.self)
    case .maxDelete:
      guard let text = value.scalar?.string, let parsed = DeletionLimit(parsing: text) else {
        throw fail(value, field, "expected a number of files (500) or a share (10%)")
      }
      job.cleanup.maxDelete = parsed
    case .concurrency: job.prefetch.concurrency = try count(value, setting)
    case .perHostConcurrency:
      // `auto`: each host's limit found as the run goes (issue 44).
      job.prefetch.perHostConcurrency =
        value.string == "auto" ? nil : try count(value, setting)
    case .maxPerHostConcurrency:
      job.prefetch.maxPerHostConcurrency = try count(value, setting)
    case .perHostStreams:
      job.prefetch.adaptiveStreams = value.string == "auto"
      if !job.prefetch.adaptiveStreams {
        job.prefetch.perHostStreams = try count(value, setting)
      }
    case .fleetPerHostConcurrency:
      job.prefetch.fleetPerHostConcurrency = try count(value, setting)
    case .retries: job.prefetch.retries = try count(value, setting)
    case .maxPixels: job.prefetch.maxPixels = try count(value, setting)
    case .timeout: job.prefetch.timeout = try duration(value, setting)
    case .deadline: job.prefetch.deadline = try duration(value, setting)
    case .blacklistTTL: job.prefetch.blacklistTTL = try duration(value, setting)
    case .maxRunTime: job.prefetch.maxRunTime = try duration(value, setting)
    case .maxResponseSize: job.prefetch.maxResponseSize = try byteCount(value, field)
    case .validate: job.prefetch.validation = try choice(value, field, ValidationLevel.self)
    case .rate: job.prefetch.requestsPerSecondPerHost = try unit(value, field, parseRequestRate)
    case .maxBandwidth: job.prefetch.maxBytesPerSecond = try unit(value, field, parseBandwidth)
    case .hostBackoff: job.prefetch.hostBackoff = try bool(value, field)
    case .caBundle, .proxy, .noProxy, .denyAddresses, .allowLinkLocal:
      try apply(setting, value, to: &job.prefetch.connection)
    }
  }

  /// `prefetch.caBundle` (relative to the job file), `prefetch.proxy` and `prefetch.noProxy`
  /// (text, or a list of hosts), `prefetch.denyAddresses` (text, or a list of rules) and
  /// `prefetch.allowLinkLocal`.
  func apply(_ setting: JobSetting, _ value: Node, to connection: inout Connection)
    throws(ConfigurationError)
  {
    let field = setting.field
    switch setting {
    case .caBundle:
      guard let path = try string(value, field) else { return }
      let resolved = resolve(path)
      if let problem = Connection.caBundleProblem(resolved) { throw fail(value, field, problem) }
      connection.caBundle = resolved
    case .proxy:
      guard let proxy = try string(value, field) else { return }
      if let problem = Connection.proxyProblem(proxy) { throw fail(value, field, problem) }
      connection.proxy = proxy
    case .noProxy:
      let hosts = try strings(value, field).joined(separator: ",")
      if let problem = Connection.noProxyProblem(hosts) { throw fail(value, field, problem) }
      connection.noProxy = hosts
    case .denyAddresses:
      switch AddressRules.parse(try strings(value, field)) {
      case .success(let ranges): connection.addressRules.denied = ranges
      case .failure(let error): throw fail(value, field, error.description)
      }
    case .allowLinkLocal: connection.addressRules.allowLinkLocal = try bool(value, field)
    default: preconditionFailure("\(field) is not a connection setting")
    }
  }

  /// A value in a unit (a rate, a bandwidth) read by `parse`, whose error says what is
  /// expected.
  func unit<T>(_ node: Node, _ field: String, _ parse: (String) throws(UnitParseError) -> T)
    throws(ConfigurationError) -> T
  {
    do {
      return try parse(node.string ?? "")
    } catch {
      throw fail(node, field, error.description)
    }
  }
}
