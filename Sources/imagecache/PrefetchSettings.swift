import ArgumentParser
import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import Runner

/// The settings of `prefetch` that a job file states outside its `prefetch:` section (options,
/// context, sitemap), as flags (SPEC section 7: each job setting has a flag of the same name),
/// and its `prefetch:` section's, ``PrefetchLimits``, which `run` takes too.
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
    name: .customLong("trusted-origin"),
    help: ArgumentHelp(
      "An origin, http(s)://host[:port], that a redirect may take the request's headers to "
        + "(repeatable): curl's --location-trusted, for that origin only. Other origins get none.",
      valueName: "origin"))
  var trustedOrigins: [String] = []

  @Option(
    name: .customLong("cache-key-filter"),
    help: ArgumentHelp(
      "url (default), stripQuery, or strip:NAME,NAME to drop those query parameters.",
      valueName: "filter"))
  var cacheKeyFilter: String?

  @Option(
    name: .customLong("store-cache-type"),
    help: ArgumentHelp("Where to store: none, disk, memory or all (default).", valueName: "type"))
  var storeCacheType: String?

  @Option(
    name: .customLong("query-cache-type"),
    help: ArgumentHelp(
      "Where to look before downloading: none, disk, memory or all (default).", valueName: "type"))
  var queryCacheType: String?

  @OptionGroup var limits: PrefetchLimits

  @Flag(
    name: .customLong("sitemap-pages"),
    help: "In sitemaps, also prefetch each page's own <loc> when it names an image.")
  var sitemapPages = false

  @Option(
    name: .customLong("sitemap-order"),
    help: ArgumentHelp(
      "document (default), or lastmod: each sitemap's newest <lastmod> first.", valueName: "order"))
  var sitemapOrder = SitemapOrder.document

  func validate() throws {
    var job = Job(name: "prefetch", location: CacheLocation(directory: "."))
    do {
      try applyOptionsAndContext(to: &job)
    } catch {
      throw ValidationError(error.description)
    }
  }

  /// Sets the job's options, context, prefetch configuration and sitemap settings from these
  /// flags.
  func apply(to job: inout Job) throws(ConfigurationError) {
    try applyOptionsAndContext(to: &job)
    try limits.apply(to: &job.prefetch)
    job.sitemap = SitemapSettings(pages: sitemapPages, order: sitemapOrder)
  }

  /// The options and the context flags, through the same parser as a job file's `context:`
  /// and a manifest line's.
  private func applyOptionsAndContext(to job: inout Job) throws(ConfigurationError) {
    let (options, warnings) = try ImageOptions.parse(
      self.options, source: "command line", field: "--option")
    job.options = options
    job.warnings += warnings
    job.context = try ImageContext().applying(try contextObject(), source: "command line")
  }

  /// `--cache-key-filter`'s text (`url`, `stripQuery`, `strip:a,b`) as the `cacheKeyFilter`
  /// value a job file's context holds, for the context parser shared with job files.
  static func cacheKeyFilterJSON(_ text: String) -> JSONValue {
    guard text.hasPrefix("strip:") else { return .string(text) }
    return .object([
      "stripQueryParameters": .array(
        text.dropFirst(6).split(separator: ",").map { .string(String($0)) })
    ])
  }

  /// The context flags as the JSON object a job file's `context:` would hold.
  private func ordinal(_ number: Int) -> String {
    switch number {
    case 1: "first"
    case 2: "second"
    case 3: "third"
    default: "\(number)th"
    }
  }

  private func contextObject() throws(ConfigurationError) -> [String: JSONValue] {
    var object: [String: JSONValue] = [:]
    if let storeCacheType { object["storeCacheType"] = .string(storeCacheType) }
    if let queryCacheType { object["queryCacheType"] = .string(queryCacheType) }
    if !headers.isEmpty {
      var fields: [String: JSONValue] = [:]
      for (index, header) in headers.enumerated() {
        let parts = header.split(separator: ":", maxSplits: 1)
        guard parts.count == 2 else {
          // Not echoed: a header without its colon is still a secret (`Authorization Bearer x`).
          throw ConfigurationError(
            source: "command line", field: "--header",
            message:
              "the \(ordinal(index + 1)) --header is not \"Name: value\" (its text is not shown: "
              + "it may hold a secret)")
        }
        fields[parts[0].trimmingCharacters(in: .whitespaces)] = .string(
          parts[1].trimmingCharacters(in: .whitespaces))
      }
      object["headers"] = .object(fields)
    }
    if let cacheKeyFilter { object["cacheKeyFilter"] = Self.cacheKeyFilterJSON(cacheKeyFilter) }
    if !trustedOrigins.isEmpty {
      object["trustedOrigins"] = .array(trustedOrigins.map(JSONValue.string))
    }
    return object
  }
}
