import Core
import DequeModule
import Foundation

/// One origin's state (scheme, host and port, as libcurl keys its connections), kept by the
/// transfer thread in the ``HostTable``.
struct HostState {
  /// Transfers under way to it (a redirect keeps its place between hops).
  var running = 0
  /// Whether its last answer came over HTTP/2 or later (`true`: it multiplexes), HTTP/1
  /// (`false`), or none came yet (`nil`).
  var multiplexes: Bool?
  /// The earliest its next download may start, by the rate (uptime nanoseconds).
  var nextStart: UInt64 = 0
  /// Held back by a `Retry-After` until then; 0: not held.
  var heldUntil: UInt64 = 0
  /// Its limit, found as the run goes (`--per-host-concurrency auto` for a host that answers
  /// over HTTP/1.1 or has not answered yet, `--per-host-streams auto` for one that answers over
  /// HTTP/2); `nil`: a fixed one.
  var adaptive: AdaptiveLimit?
  /// The epoch of what is sent to it while it has no adaptive limit after it dropped one: past
  /// every epoch of the dropped limit, and before every epoch of one made anew, which so takes
  /// nothing sent before it for its own.
  var droppedEpoch = 0
  /// Whether it answered a download (2xx or 304) in this run: its redirects are then no
  /// samples of its adaptive limit.
  var servedAnswer = false
}

/// The one home of what is per host, kept by the transfer thread where downloads start: each
/// origin's transfers under way, its protocol, its limit, its rate gate and its back-off
/// (SPEC section 5). The limit is stated here alone: per host, `perHostConcurrency`
/// (connections, and so transfers over HTTP/1.1) or, for a host that answered over HTTP/2,
/// `perHostStreams`, and the lower of the two before its first answer, each of them fixed or
/// adaptive (``AdaptiveLimit``, the default over HTTP/1.1); libcurl's connection
/// cap and what the prefetcher queues ahead are derived from it. The per-host rate
/// (``DownloaderConfiguration/requestsPerSecondPerHost``: starts to one host at least `1 / rate`
/// apart, no burst) and the host-wide back-off after a 429 or 503 with `Retry-After`
/// (``DownloaderConfiguration/hostBackoff``) hold a download back in the loop's queue, where it
/// already waits for room in the limits; other hosts go on.
struct HostTable {
  private var hosts: [Origin: HostState] = [:]
  /// The origins known past which a new one first makes the table forget the idle ones
  /// (``forgetIdleHosts(at:)``).
  private var forgetsPast = HostTable.idleHostsKept
  /// How many origins the table keeps before it forgets those with nothing under way, held
  /// back or waiting for the rate: a manifest or sitemap of ten million URLs on as many hosts
  /// (one origin's wildcard subdomains) kept each one's state, some 1 KB, to the run's end.
  /// A host forgotten and met again starts anew, as in the next run: its limit at its start,
  /// under the refusals remembered from earlier runs.
  static let idleHostsKept = 10_000
  /// Transfers at once to a host not known to multiplex: one a connection.
  let connectionsPerHost: Int
  /// libcurl's cap on the connections to any one host (`CURLMOPT_MAX_HOST_CONNECTIONS`, one
  /// number for every host). With a fixed limit, `connectionsPerHost`. With an adaptive one
  /// over HTTP/1.1, the most transfers at once that a host not known to multiplex has had,
  /// and at least SD's 6: a host over HTTP/2 needs few connections for its streams, and
  /// libcurl 7.88 does not wait for a connection being opened to a host whose connections are
  /// full of streams, so each transfer past what they carry opened one more (129 connections
  /// to an nginx that takes 128 streams a connection, where 2 carry them). It only grows.
  private(set) var connectionCap: Int
  /// Transfers at once to a host whose last answer came over HTTP/2: streams on its
  /// connections, which curl keeps within `connectionCap` connections and the server's
  /// `SETTINGS_MAX_CONCURRENT_STREAMS`.
  let streamsPerHost: Int
  /// Nanoseconds between two starts to one host; `nil`: no rate.
  private let interval: UInt64?
  /// The longest a host is held back: the cap on any wait.
  private let longestBackoff: TimeInterval
  private let backsOff: Bool
  /// The origins held back by a `Retry-After` now.
  private var held: Set<Origin> = []
  /// The most an adaptive limit may reach; `nil`: the limits are fixed.
  let adaptiveCeiling: Int?
  /// Whether the limit of a host that does not multiplex (or has not answered yet) is
  /// adaptive, and whether that of a host that multiplexes is.
  private let adaptsConnections: Bool
  private let adaptsStreams: Bool
  /// Earlier runs' refusals of probes, by origin (``OriginRefusal``): an adaptive limit stays
  /// under them.
  private let refusals: [Origin: OriginRefusal]

  /// What the report says of one host's back-offs.
  struct Record {
    var pauses = 0
    var nanoseconds: UInt64 = 0
    var until: UInt64 = 0
  }

  init(configuration: DownloaderConfiguration) {
    adaptsConnections = configuration.adaptivePerHost
    adaptsStreams = configuration.adaptiveStreams
    // An adaptive limit is the one that counts: connections, or streams, may reach it.
    let ceiling =
      configuration.adapts
      ? max(1, min(configuration.concurrency, configuration.maxPerHostConcurrency ?? .max)) : nil
    adaptiveCeiling = ceiling
    connectionsPerHost = configuration.perHostConcurrency.map { max(1, $0) } ?? ceiling ?? 1
    connectionCap =
      adaptsConnections
      ? min(connectionsPerHost, DownloaderConfiguration.sdPerHostConcurrency) : connectionsPerHost
    streamsPerHost = adaptsStreams ? ceiling ?? 1 : max(1, configuration.streamsPerHost)
    refusals = Dictionary(
      configuration.rememberedRefusals.map { ($0.origin, $0) }, uniquingKeysWith: { $1 })
    interval = configuration.requestsPerSecondPerHost.map { UInt64((1e9 / $0).rounded()) }
    longestBackoff = configuration.maxRetryDelay
    backsOff = configuration.hostBackoff
  }

  /// `origin` before its first transfer: with an adaptive limit at its start, if any.
  private func newHost(_ origin: Origin) -> HostState {
    var host = HostState()
    host.adaptive = newLimit(origin)
    return host
  }

  /// An adaptive limit for `origin` at its start, its first epoch `epoch`, under what an earlier
  /// run was refused at, if one was; `nil` when the limits are fixed.
  private func newLimit(_ origin: Origin, from epoch: Int = 0) -> AdaptiveLimit? {
    guard let ceiling = adaptiveCeiling else { return nil }
    return AdaptiveLimit(ceiling: ceiling, refusedWith: refusals[origin]?.inFlight, from: epoch)
  }

  /// Makes `origin`'s entry, as ``newHost(_:)`` would have it, unless it has one.
  private mutating func add(_ origin: Origin) {
    if hosts[origin] == nil { hosts[origin] = newHost(origin) }
  }

  /// The most transfers at once that any one host may be given, whatever it speaks.
  static func mostPerHost(_ configuration: DownloaderConfiguration) -> Int {
    let table = HostTable(configuration: configuration)
    return max(table.connectionsPerHost, table.streamsPerHost)
  }

  /// Transfers at once allowed to `origin`.
  func limit(for origin: Origin) -> Int {
    limit(hosts[origin] ?? newHost(origin))
  }

  private func limit(_ host: HostState) -> Int {
    let adaptive = host.adaptive?.limit
    let connections = adaptsConnections ? adaptive ?? connectionsPerHost : connectionsPerHost
    let streams = adaptsStreams ? adaptive ?? streamsPerHost : streamsPerHost
    switch host.multiplexes {
    case true?: return streams
    case false?: return connections
    case nil: return min(connections, streams)
    }
  }

  /// Whether a host that multiplexes (`true`), does not (`false`) or has not answered (`nil`)
  /// has an adaptive limit.
  private func adapts(_ multiplexes: Bool?) -> Bool {
    switch multiplexes {
    case true?: adaptsStreams
    case false?: adaptsConnections
    case nil: adaptsConnections || adaptsStreams
    }
  }

  /// Nothing to check but the limit: no rate, and no host held back. The common case, kept to
  /// one test so that a run without rate or back-off reads no clock per download.
  var isOpen: Bool { interval == nil && held.isEmpty }

  /// Forgets the back-offs that are over.
  mutating func prune(at now: UInt64) {
    for origin in held where hosts[origin, default: HostState()].heldUntil <= now {
      hosts[origin]?.heldUntil = 0
      held.remove(origin)
    }
  }

  /// Whether a transfer to `origin` may start: under its limit and, when `gated`, allowed by
  /// its rate and back-off at `now`; when only those hold it, lowers `wake` to when they will
  /// not.
  func allows(_ origin: Origin, gated: Bool, at now: UInt64, wake: inout UInt64) -> Bool {
    guard let host = hosts[origin] else { return true }
    guard host.running < limit(host) else { return false }
    guard gated else { return true }
    var earliest: UInt64 = 0
    if interval != nil { earliest = host.nextStart }
    earliest = max(earliest, host.heldUntil)
    guard earliest > now else { return true }
    wake = min(wake, earliest)
    return false
  }

  /// A transfer to `origin` started at `now` (0 when no clock was read: no rate). Returns its
  /// adaptive limit's epoch.
  @discardableResult
  mutating func started(_ origin: Origin, at now: UInt64) -> Int {
    if hosts[origin] == nil, hosts.count >= forgetsPast { forgetIdleHosts(at: now) }
    add(origin)
    hosts[origin]?.running += 1
    if let interval { hosts[origin]?.nextStart = now + interval }
    // A host that may not multiplex needs a connection for each transfer: the cap makes room
    // before libcurl looks for one.
    if let host = hosts[origin], host.multiplexes != true, host.running > connectionCap {
      connectionCap = host.running
    }
    return hosts[origin]?.adaptive?.epoch ?? hosts[origin]?.droppedEpoch ?? 0
  }

  /// Transfers under way to `origin`.
  func running(_ origin: Origin) -> Int { hosts[origin]?.running ?? 0 }

  /// The origins the table holds state of.
  var count: Int { hosts.count }

  /// Forgets the origins with nothing under way, not held back, not waiting for the rate at
  /// `now` (0 when no clock was read: no rate, and nothing held) and whose adaptive limit was
  /// never cut in this run; the next forgetting comes once as many again are known, so that each
  /// costs a new origin a constant share. An origin that refused or timed out keeps its cut
  /// limit: made anew, it climbed past the knee it refused at again, and this run's refusal,
  /// which the next run starts under, was forgotten at the new limit's first raise.
  private mutating func forgetIdleHosts(at now: UInt64) {
    hosts = hosts.filter { origin, host in
      host.running > 0 || host.heldUntil > now || host.nextStart > now || held.contains(origin)
        || host.adaptive?.cuts.isEmpty == false
    }
    forgetsPast = max(Self.idleHostsKept, hosts.count * 2)
  }

  /// A transfer to `origin` that was under way ended.
  mutating func ended(_ origin: Origin) {
    hosts[origin]?.running -= 1
  }

  /// `origin` answered over HTTP/2 or later (`multiplexes`), or over HTTP/1.
  mutating func learned(_ origin: Origin, multiplexes: Bool) {
    add(origin)
    hosts[origin]?.multiplexes = multiplexes
    // A host whose protocol has a fixed limit keeps no adaptive one (nor says one in the
    // report); one that turns to a protocol whose limit adapts starts its own, in epochs of its
    // own: what was sent before (under the dropped limit, or none) is no sample of it, and a
    // refusal of it no cut.
    if !adapts(multiplexes) {
      if let epoch = hosts[origin]?.adaptive?.epoch { hosts[origin]?.droppedEpoch = epoch + 1 }
      hosts[origin]?.adaptive = nil
    } else if hosts[origin]?.adaptive == nil {
      let adaptive = newLimit(origin, from: (hosts[origin]?.droppedEpoch ?? 0) + 1)
      hosts[origin]?.adaptive = adaptive
    }
  }

  /// `origin` answered (2xx or 304; or, `redirect`, a redirect) `nanoseconds` after the request
  /// was sent, in its adaptive limit's `epoch` (`nil`: the current one): a sample of that limit.
  /// Error answers are none: a fast failure never raises a limit. A redirect is one only while
  /// the origin has served no image in the run: an origin that only redirects (`http://` to
  /// `https://`) has no other, and one that serves images is judged by them, its redirects (a
  /// path's, some to a CDN) taking another time that would move a round's median with their
  /// share. Returns whether what the report says of it changed.
  mutating func answered(
    _ origin: Origin, after nanoseconds: UInt64, sentIn epoch: Int? = nil, redirect: Bool = false
  ) -> Bool {
    if redirect {
      guard hosts[origin]?.servedAnswer != true else { return false }
    } else {
      hosts[origin]?.servedAnswer = true
    }
    return hosts[origin]?.adaptive?.answered(after: nanoseconds, sentIn: epoch) ?? false
  }

  /// `origin` refused (429, 503, a refused stream) or timed out a transfer sent in its adaptive
  /// limit's `epoch` (`nil`: the current one): the limit is cut. Returns whether it was.
  /// `probe`: a refusal that answered a probe (``refusalIsProbe(_:sentIn:with:)``), sent with
  /// `inFlight` under way (`nil`: what is under way now, with the refused one).
  mutating func cut(
    _ origin: Origin, _ cause: AdaptiveLimit.Cut, sentIn epoch: Int? = nil, probe: Bool = false,
    inFlight: Int? = nil
  ) -> Bool {
    let inFlight = inFlight ?? (hosts[origin]?.running ?? 0) + 1
    return hosts[origin]?.adaptive?.failed(cause, sentIn: epoch, probe: probe, inFlight: inFlight)
      ?? false
  }

  /// Transfers under way when `origin` last refused at its adaptive limit's knee in this run
  /// (``AdaptiveLimit/refusedWith``), if it did and has not served as many cleanly since.
  func refusedWith(_ origin: Origin) -> Int? {
    hosts[origin]?.adaptive?.refusedWith
  }

  /// Whether `origin` refused at random in this run (``AdaptiveLimit/refusesBelowKnee``): what
  /// is remembered of its refusals, this run's or an earlier run's, is forgotten.
  func refusesAtRandom(_ origin: Origin) -> Bool {
    hosts[origin]?.adaptive?.refusesBelowKnee ?? false
  }

  /// Whether `origin`'s refusal of a transfer sent in `epoch` with `inFlight` under way to it,
  /// itself among them (``Transfer/sentWith``), answers a probe of its adaptive limit
  /// (``AdaptiveLimit/refusalIsProbe(inFlight:sentIn:)``): then the cut is the back-off, and the
  /// host is not held for the refusal's `Retry-After`.
  func refusalIsProbe(_ origin: Origin, sentIn epoch: Int, with inFlight: Int) -> Bool {
    guard let adaptive = hosts[origin]?.adaptive else { return false }
    return adaptive.refusalIsProbe(inFlight: inFlight, sentIn: epoch)
  }

  /// What the report says of `origin`'s adaptive limit, if it has one.
  func hostLimit(_ origin: Origin) -> HostLimit? {
    guard let adaptive = hosts[origin]?.adaptive else { return nil }
    let spread = adaptive.spread
    return HostLimit(
      host: origin.host, final: adaptive.limit, min: spread.min, median: spread.median,
      max: spread.max,
      cuts: Dictionary(uniqueKeysWithValues: adaptive.cuts.map { ($0.key.rawValue, $0.value) }),
      heldUnder: adaptive.remembered)
  }

  /// The adaptive limits of `limits`' origins for the report, by name: each origin named by its
  /// host, or by its host and port where other origins of its host have one too (two ports,
  /// http and https; by its scheme as well where they share the port), so that none hides
  /// another's figures.
  static func report(_ limits: [Origin: HostLimit]) -> [HostLimit] {
    let origins = Dictionary(grouping: limits.keys, by: \.host)
    return limits.map { origin, limit in
      let others = origins[origin.host, default: []].filter { $0 != origin }
      guard !others.isEmpty else { return limit }
      var named = limit
      let host = origin.host.contains(":") ? "[\(origin.host)]" : origin.host
      let scheme = others.contains { $0.port == origin.port } ? "\(origin.scheme)://" : ""
      named.host = "\(scheme)\(host):\(origin.port)"
      return named
    }.sorted { $0.host < $1.host }
  }

  /// `host` answered `failure`: a 429 or 503 with `Retry-After`, or a refused HTTP/2 stream
  /// (a short jittered wait), holds every download of it
  /// back until then, at most the cap on a wait (a longer wait fails the URL itself at once:
  /// its host is still spared for as long as the run waits for anything). Adds it to `log`.
  mutating func answered(
    _ host: Origin, _ failure: DownloadFailure, at now: UInt64, log: inout [String: Record]
  ) {
    guard backsOff, let asked = failure.retryAfter, asked > 0,
      failure.error.httpStatus == 429 || failure.error.httpStatus == 503
        || failure.refusedStream
    else { return }
    let until = now + UInt64(min(asked, longestBackoff) * 1e9)
    let previous = max(hosts[host]?.heldUntil ?? 0, now)
    add(host)
    // The report names hosts: two ports of one host that each asked to wait share a line.
    var record = log[host.host, default: Record()]
    record.pauses += 1
    if until > previous {
      hosts[host]?.heldUntil = until
      held.insert(host)
      // Overlapping waits count once: only what this one adds past the one under way.
      record.nanoseconds += until - previous
      record.until = until
    }
    log[host.host] = record
  }

  /// The back-offs so far, by host, each cut at `now` (the end of the run): a wait asked for
  /// but not over when the run ended held nothing back past it.
  static func report(_ log: [String: Record], at now: UInt64) -> [HostBackoff] {
    log.keys.sorted().map { host in
      let record = log[host]!
      let unserved = record.until > now ? record.until - now : 0
      return HostBackoff(
        host: host, pauses: record.pauses,
        seconds: Double(record.nanoseconds - min(unserved, record.nanoseconds)) / 1e9)
    }
  }
}
