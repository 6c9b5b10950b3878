import ArgumentParser
import Core
import Foundation
import HTTP
import Pipeline
import Prefetcher
import Runner

/// The settings of a job's `prefetch:` section, as flags of the same names (SPEC section 7),
/// declared once for the two commands that take them: `prefetch`, where a flag not given
/// leaves the default of ``PrefetchConfiguration``, and `run`, where it leaves the job file's
/// value and a flag given overrides the job's for this run only (the file is not changed).
/// Each flag's names and help are its ``JobSetting``'s.
struct PrefetchLimits: ParsableArguments {
  @Option(name: JobSetting.concurrency.names, help: JobSetting.concurrency.argumentHelp)
  var concurrency: Int?

  @Option(
    name: JobSetting.perHostConcurrency.names, help: JobSetting.perHostConcurrency.argumentHelp)
  var perHostConcurrency: CountOrAuto?

  @Option(name: JobSetting.perHostStreams.names, help: JobSetting.perHostStreams.argumentHelp)
  var perHostStreams: CountOrAuto?

  @Option(
    name: JobSetting.maxPerHostConcurrency.names,
    help: JobSetting.maxPerHostConcurrency.argumentHelp)
  var maxPerHostConcurrency: Int?

  @Option(
    name: JobSetting.fleetPerHostConcurrency.names,
    help: JobSetting.fleetPerHostConcurrency.argumentHelp)
  var fleetPerHostConcurrency: Int?

  @Option(name: JobSetting.timeout.names, help: JobSetting.timeout.argumentHelp)
  var timeout: Duration?

  @Option(name: JobSetting.deadline.names, help: JobSetting.deadline.argumentHelp)
  var deadline: Duration?

  @Option(name: JobSetting.maxResponseSize.names, help: JobSetting.maxResponseSize.argumentHelp)
  var maxResponseSize: ByteCount?

  @Option(name: JobSetting.retries.names, help: JobSetting.retries.argumentHelp)
  var retries: Int?

  @Option(name: JobSetting.validate.names, help: JobSetting.validate.argumentHelp)
  var validation: ValidationLevel?

  @Option(name: JobSetting.maxPixels.names, help: JobSetting.maxPixels.argumentHelp)
  var maxPixels: Int?

  @Option(name: JobSetting.blacklistTTL.names, help: JobSetting.blacklistTTL.argumentHelp)
  var blacklistTTL: Duration?

  @Option(name: JobSetting.maxRunTime.names, help: JobSetting.maxRunTime.argumentHelp)
  var maxRunTime: Duration?

  @Option(
    name: JobSetting.caBundle.names, help: JobSetting.caBundle.argumentHelp,
    completion: .file())
  var caBundle: String?

  @Option(name: JobSetting.proxy.names, help: JobSetting.proxy.argumentHelp)
  var proxy: String?

  @Option(name: JobSetting.noProxy.names, help: JobSetting.noProxy.argumentHelp)
  var noProxy: String?

  @Option(name: JobSetting.denyAddresses.names, help: JobSetting.denyAddresses.argumentHelp)
  var denyAddresses: String?

  @Flag(name: JobSetting.allowLinkLocal.names, help: JobSetting.allowLinkLocal.argumentHelp)
  var allowLinkLocal = false

  @Option(name: JobSetting.rate.names, help: JobSetting.rate.argumentHelp)
  var rate: RequestRate?

  @Option(name: JobSetting.maxBandwidth.names, help: JobSetting.maxBandwidth.argumentHelp)
  var maxBandwidth: Bandwidth?

  @Flag(
    name: JobSetting.hostBackoff.names, inversion: .prefixedNo,
    help: JobSetting.hostBackoff.argumentHelp)
  var hostBackoff: Bool?

  func validate() throws {
    if let concurrency { try checkCount(concurrency, .concurrency) }
    if case .fixed(let count) = perHostConcurrency { try checkCount(count, .perHostConcurrency) }
    if let maxPerHostConcurrency { try checkCount(maxPerHostConcurrency, .maxPerHostConcurrency) }
    if case .fixed(let count) = perHostStreams { try checkCount(count, .perHostStreams) }
    if let fleetPerHostConcurrency {
      try checkCount(fleetPerHostConcurrency, .fleetPerHostConcurrency)
    }
    if let retries { try checkCount(retries, .retries) }
    if let maxPixels { try checkCount(maxPixels, .maxPixels) }
    try timeout?.check(.timeout)
    try deadline?.check(.deadline)
    try blacklistTTL?.check(.blacklistTTL)
    try maxRunTime?.check(.maxRunTime)
    try maxResponseSize?.check(JobSetting.maxResponseSize.flag)
    try rate?.check(JobSetting.rate.flag)
    try maxBandwidth?.check(JobSetting.maxBandwidth.flag)
    var connection = Connection()
    do {
      // The CA file is read when the run applies the flags: a missing file is no mistake in
      // the command line's syntax, and gets no usage line.
      try applyConnection(to: &connection, checkingFiles: false)
    } catch {
      throw ValidationError(error.description)
    }
  }

  /// Puts the settings given on the command line in `limits`, and leaves the others as they
  /// are: the defaults for `prefetch`, the job file's for `run`. Returns those it set, each as
  /// its job file field and its value (`prefetch.concurrency`, `1`), for the run to say.
  @discardableResult
  func apply(to limits: inout PrefetchConfiguration) throws(ConfigurationError)
    -> [CommandLineSetting]
  {
    var given: [CommandLineSetting] = []
    func set<Value>(
      _ value: Value?, _ setting: JobSetting, _ text: (Value) -> String = { "\($0)" },
      _ store: (Value) -> Void
    ) {
      guard let value else { return }
      store(value)
      given.append((setting.field, text(value)))
    }
    set(concurrency, .concurrency) { limits.concurrency = $0 }
    set(perHostConcurrency, .perHostConcurrency) {
      switch $0 {
      case .fixed(let count): limits.perHostConcurrency = count
      case .auto: limits.perHostConcurrency = nil
      }
    }
    set(maxPerHostConcurrency, .maxPerHostConcurrency) { limits.maxPerHostConcurrency = $0 }
    set(perHostStreams, .perHostStreams) {
      switch $0 {
      case .fixed(let count):
        limits.perHostStreams = count
        limits.adaptiveStreams = false
      case .auto: limits.adaptiveStreams = true
      }
    }
    set(fleetPerHostConcurrency, .fleetPerHostConcurrency) {
      limits.fleetPerHostConcurrency = $0
    }
    set(timeout, .timeout) { limits.timeout = $0.seconds }
    set(deadline, .deadline) { limits.deadline = $0.seconds }
    set(maxResponseSize, .maxResponseSize) { limits.maxResponseSize = $0.bytes }
    set(retries, .retries) { limits.retries = $0 }
    set(validation, .validate, \.rawValue) { limits.validation = $0 }
    set(maxPixels, .maxPixels) { limits.maxPixels = $0 }
    set(blacklistTTL, .blacklistTTL) { limits.blacklistTTL = $0.seconds }
    set(maxRunTime, .maxRunTime) { limits.maxRunTime = $0.seconds }
    set(rate, .rate, \.text) {
      limits.requestsPerSecondPerHost = $0.perSecond
    }
    set(maxBandwidth, .maxBandwidth, \.text) {
      limits.maxBytesPerSecond = $0.bytesPerSecond
    }
    set(hostBackoff, .hostBackoff) { limits.hostBackoff = $0 }
    // The connection's settings are set, and checked, by applyConnection.
    set(caBundle, .caBundle) { _ in }
    set(proxy, .proxy, \.maskingURLPasswords) { _ in }
    set(noProxy, .noProxy) { _ in }
    set(denyAddresses, .denyAddresses) { _ in }
    set(allowLinkLocal ? true : nil, .allowLinkLocal) { _ in }
    try applyConnection(to: &limits.connection, checkingFiles: true)
    return given
  }

  /// `--cacert`, `--proxy`, `--no-proxy`, `--deny-addresses` and `--allow-link-local`, each
  /// checked as a job file's are; the CA file's contents only when `checkingFiles`.
  private func applyConnection(to connection: inout Connection, checkingFiles: Bool)
    throws(ConfigurationError)
  {
    func refuse(_ setting: JobSetting, _ problem: String?) throws(ConfigurationError) {
      guard let problem else { return }
      throw ConfigurationError(source: "command line", field: setting.flag, message: problem)
    }
    if let caBundle {
      if checkingFiles { try refuse(.caBundle, Connection.caBundleProblem(caBundle)) }
      connection.caBundle = caBundle
    }
    if let proxy {
      try refuse(.proxy, Connection.proxyProblem(proxy))
      connection.proxy = proxy
    }
    if let noProxy {
      try refuse(.noProxy, Connection.noProxyProblem(noProxy))
      connection.noProxy = noProxy
    }
    if let denyAddresses {
      switch AddressRules.parse(denyAddresses.split(separator: ",").map(String.init)) {
      case .success(let ranges): connection.addressRules.denied = ranges
      case .failure(let error): try refuse(.denyAddresses, error.description)
      }
    }
    if allowLinkLocal { connection.addressRules.allowLinkLocal = true }
  }
}

extension RequestRate {
  /// As the run says it: `20/s`, `0.5/s`.
  fileprivate var text: String {
    perSecond == perSecond.rounded() ? "\(Int(perSecond))/s" : "\(perSecond)/s"
  }
}

extension Bandwidth {
  /// As the run says it: `5.0 MB/s`.
  fileprivate var text: String { "\(formatBytes(bytesPerSecond))/s" }
}
