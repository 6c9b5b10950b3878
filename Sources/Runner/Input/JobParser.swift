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
      cache,
      known: ["directory", "namespace", "maxDiskAge", "maxDiskSize", "expireType", "maxDelete"],
      prefix: "cache.")
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
    if let age = cache["maxDiskAge"] {
      job.cleanup.maxDiskAge = try duration(age, .maxDiskAge)
    }
    if let size = cache["maxDiskSize"] {
      job.cleanup.maxDiskSize = try byteCount(size, "cache.maxDiskSize")
    }
    if let type = cache["expireType"] {
      job.cleanup.expireType = try choice(type, "cache.expireType", ExpireType.self)
    }
    if let limit = cache["maxDelete"] {
      guard let text = limit.scalar?.string, let parsed = DeletionLimit(parsing: text) else {
        throw fail(limit, "cache.maxDelete", "expected a number of files (500) or a share (10%)")
      }
      job.cleanup.maxDelete = parsed
    }

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
      if let pages = mapping["pages"] {
        guard let value = pages.bool else {
          throw fail(pages, "sitemap.pages", "expected true or false")
        }
        job.sitemap.pages = value
      }
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
    if let prefetch = top["prefetch"] { try apply(prefetch, to: &job.prefetch) }
    if let maintenance = top["maintenance"] {
      job.passes = try strings(maintenance, "maintenance").map { name throws(ConfigurationError) in
        guard let pass = JobPass(rawValue: name) else {
          throw fail(
            maintenance, "maintenance",
            "unknown pass \(name.debugDescription) (known: migrate, expire, trim, verify)")
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
      guard let value = allow.bool else {
        throw fail(allow, "allowURLFailures", "expected true or false")
      }
      job.allowURLFailures = value
    }
    job.report = try string(top["report"], "report").map(resolve)
    job.metrics = try string(top["metrics"], "metrics").map(resolve)
    return job
  }

  /// The `verify` pass's settings (`verify: {level, repair}`): the `verify` command's defaults,
  /// a report only unless `repair` says otherwise, guarded by `cache.maxDelete`.
  func verifyConfiguration(_ node: Node?, maxDelete: DeletionLimit?) throws(ConfigurationError)
    -> VerifyConfiguration
  {
    var configuration = VerifyConfiguration()
    configuration.maxDelete = maxDelete
    guard let node else { return configuration }
    guard let mapping = node.mapping else {
      throw fail(node, "verify", "expected a mapping (level, repair)")
    }
    try checkKeys(mapping, known: ["level", "repair"], prefix: "verify.")
    if let level = mapping["level"] {
      configuration.level = try choice(level, "verify.level", VerifyLevel.self)
    }
    if let repair = mapping["repair"] {
      configuration.repair = try choice(repair, "verify.repair", VerifyRepair.self)
    }
    return configuration
  }

  /// The `prefetch:` settings, over the defaults of ``PrefetchConfiguration``.
  func apply(_ node: Node, to limits: inout PrefetchConfiguration) throws(ConfigurationError) {
    guard let mapping = node.mapping else { throw fail(node, "prefetch", "expected a mapping") }
    try checkKeys(
      mapping,
      known: [
        "concurrency", "perHostConcurrency", "perHostStreams", "timeout", "deadline",
        "maxResponseSize", "retries",
        "validate", "maxPixels", "blacklistTTL", "fleetPerHostConcurrency", "caBundle", "proxy",
        "noProxy", "rate", "maxBandwidth", "hostBackoff", "maxRunTime", "denyAddresses",
        "allowLinkLocal",
      ],
      prefix: "prefetch.")
    if let value = mapping["concurrency"] {
      limits.concurrency = try count(value, .concurrency)
    }
    if let value = mapping["perHostConcurrency"] {
      limits.perHostConcurrency = try count(value, .perHostConcurrency)
    }
    if let value = mapping["perHostStreams"] {
      limits.perHostStreams = try count(value, .perHostStreams)
    }
    if let value = mapping["fleetPerHostConcurrency"] {
      limits.fleetPerHostConcurrency = try count(value, .fleetPerHostConcurrency)
    }
    if let value = mapping["retries"] {
      limits.retries = try count(value, .retries)
    }
    if let value = mapping["timeout"] {
      limits.timeout = try duration(value, .timeout)
    }
    if let value = mapping["deadline"] {
      limits.deadline = try duration(value, .deadline)
    }
    if let value = mapping["maxResponseSize"] {
      limits.maxResponseSize = try byteCount(value, "prefetch.maxResponseSize")
    }
    if let value = mapping["validate"] {
      limits.validation = try choice(value, "prefetch.validate", ValidationLevel.self)
    }
    if let value = mapping["maxPixels"] {
      limits.maxPixels = try count(value, .maxPixels)
    }
    if let value = mapping["maxRunTime"] {
      limits.maxRunTime = try duration(value, .maxRunTime)
    }
    if let value = mapping["blacklistTTL"] {
      limits.blacklistTTL = try duration(value, .blacklistTTL)
    }
    if let value = mapping["rate"] {
      limits.requestsPerSecondPerHost = try unit(value, "prefetch.rate", parseRequestRate)
    }
    if let value = mapping["maxBandwidth"] {
      limits.maxBytesPerSecond = try unit(value, "prefetch.maxBandwidth", parseBandwidth)
    }
    if let value = mapping["hostBackoff"] {
      guard let enabled = value.bool else {
        throw fail(value, "prefetch.hostBackoff", "expected true or false")
      }
      limits.hostBackoff = enabled
    }
    try apply(mapping, to: &limits.connection)
  }

  /// `prefetch.caBundle` (relative to the job file), `prefetch.proxy` and `prefetch.noProxy`
  /// (text, or a list of hosts), `prefetch.denyAddresses` (text, or a list of rules) and
  /// `prefetch.allowLinkLocal`.
  func apply(_ mapping: Node.Mapping, to connection: inout Connection) throws(ConfigurationError) {
    if let value = mapping["caBundle"], let path = try string(value, "prefetch.caBundle") {
      let resolved = resolve(path)
      if let problem = Connection.caBundleProblem(resolved) {
        throw fail(value, "prefetch.caBundle", problem)
      }
      connection.caBundle = resolved
    }
    if let value = mapping["proxy"], let proxy = try string(value, "prefetch.proxy") {
      if let problem = Connection.proxyProblem(proxy) {
        throw fail(value, "prefetch.proxy", problem)
      }
      connection.proxy = proxy
    }
    if let value = mapping["noProxy"] {
      let hosts = try strings(value, "prefetch.noProxy").joined(separator: ",")
      if let problem = Connection.noProxyProblem(hosts) {
        throw fail(value, "prefetch.noProxy", problem)
      }
      connection.noProxy = hosts
    }
    if let value = mapping["denyAddresses"] {
      switch AddressRules.parse(try strings(value, "prefetch.denyAddresses")) {
      case .success(let ranges): connection.addressRules.denied = ranges
      case .failure(let error): throw fail(value, "prefetch.denyAddresses", error.description)
      }
    }
    if let value = mapping["allowLinkLocal"] {
      guard let allowed = value.bool else {
        throw fail(value, "prefetch.allowLinkLocal", "expected true or false")
      }
      connection.addressRules.allowLinkLocal = allowed
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
