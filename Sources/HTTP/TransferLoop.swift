import CCurl
import Core
import Foundation
import Synchronization

// One type over 350 lines: the loop's tables (transfers under way and waiting, limits, origin
// gates) are its thread's alone and private to it; split across files they would not be.

/// libcurl's process-wide set-up, done once before the first handle.
let curlInitialised: Bool = curl_global_init(ic_global_all) == CURLE_OK

/// One thread that owns a libcurl multi handle and drives every transfer on it: tasks hand it
/// transfers to start or cancel through an inbox (waking it with `curl_multi_wakeup`), it runs
/// `curl_multi_perform` and `curl_multi_poll`, and each finished transfer resumes its task's
/// completion (a task's continuation, or the prefetcher's queue of finished downloads). Validation
/// and the store happen there, off this thread. Easy handles
/// are kept and reused, so connections, TLS sessions and DNS answers are too.
///
/// The loop keeps the limits: at most `concurrency` transfers under way, and per host what its
/// ``HostTable`` says (its limit, rate and back-off). A transfer queued beyond them waits here
/// (by priority, then in order) and starts on this thread the moment one ends: the connections
/// stay busy however long the queuing task takes to hear of the end and queue more. It keeps
/// the run's bandwidth cap there too (``BandwidthBudget``), so that what is already queued in
/// it keeps to the limits as well.
final class TransferLoop: @unchecked Sendable {
  enum Command {
    case start(Transfer)
    case cancel(Transfer)
  }

  private struct Inbox {
    var commands: [Command] = []
    /// Whether the loop is waiting in `curl_multi_poll` with nothing queued: only then does a
    /// command need to wake it.
    var polling = false
    /// Whether every place in the limits was taken when the loop began to wait: a transfer
    /// queued then could not start anyway, and the loop takes it when one under way ends.
    var full = false
    var stopping = false
    var exited = false
    /// Who waits for the thread to end (a task in ``stop()``, a thread in ``stopAndWait()``):
    /// each is told once it has.
    var exitWaiters: [@Sendable () -> Void] = []
  }

  private let inbox = Mutex(Inbox())
  private let multi: UnsafeMutableRawPointer
  /// The cookie engine of `handleCookies`, shared by every transfer that asks for cookies
  /// during one run (and by no other).
  private let cookies: UnsafeMutableRawPointer

  // Owned by the loop thread.
  private var active: [UnsafeMutableRawPointer: Transfer] = [:]
  private var idle: [EasyHandle] = []
  /// Transfers waiting for room in the limits.
  private var waiting = StartQueue<Transfer>()
  /// Transfers under way, in all (a redirect's next hop waits for its turn as a transfer
  /// not yet sent does, first in line); per host, the table says.
  private var running = 0
  private let maxRunning: Int
  /// Set by the write callbacks when a perform delivered data: see ``stallGuardMilliseconds``.
  private let received = PerformActivity()
  private let connection: Connection
  /// Each host's transfers under way, protocol, limit, rate and back-off: which waiting
  /// transfers may start now.
  private var hosts: HostTable
  /// The soonest a transfer held back by a host's rate or back-off may start: the loop wakes
  /// for it.
  private var gateWake = UInt64.max
  /// What the loop's own lag added to the answers' times (``ReadLag``): an adaptive limit's
  /// samples leave it out.
  private let readLag = ReadLag()
  /// The run's bandwidth cap, when one is set.
  private let bandwidth: BandwidthBudget?
  /// The hosts that asked to wait, for the report; written on this thread, read at the end.
  let backoffLog = Mutex<[String: HostTable.Record]>([:])
  /// Each origin's adaptive limit, as of its last change: written on this thread, read for the
  /// report (``HostTable/report(_:)`` names them).
  let adaptiveLimits = Mutex<[Origin: HostLimit]>([:])
  /// The origins that refused at the knee of their adaptive limit in this run, and when (the
  /// last such refusal); none for one whose refusal was then served cleanly twice (the origin
  /// serves more now), and `nil` (to forget what the state holds of it) for one that refuses
  /// at random: written on this thread, read for the state.
  let refusals = Mutex<[Origin: OriginRefusal?]>([:])

  private let idleWaitMilliseconds: Int32
  /// The soonest a transfer under way can have been idle for its timeout: when the loop next
  /// looks for idle ones (an earlier time than the true one only makes it look early).
  private var idleCheckDue = UInt64.max
  /// The soonest deadline of a redirect's next hop waiting for its turn: then it ends as timed
  /// out, held back however long its target's limit, rate or back-off would hold it (an
  /// earlier time than the true one only makes the loop look early).
  private var hopDeadlineDue = UInt64.max

  /// The longest wait in `curl_multi_poll` after performs that delivered data. libcurl 7.88
  /// (Debian 12's) can leave HTTP/2 data it has already read from the socket unprocessed, with
  /// no socket event to report it: the transfers it belongs to then wait for the next timer,
  /// up to a second (the low-speed check's), and curl(1) stalls the same way. Such data is read
  /// only by a perform that reads data: after one that delivered some, the loop performs again
  /// at once, until one delivers none, and then waits at most this long as a safety net. A
  /// loop whose transfers all wait on their servers delivers nothing, and sleeps until a
  /// socket or one of curl's timers wakes it.
  static let stallGuardMilliseconds: Int32 = 10

  init(configuration: DownloaderConfiguration, idleWaitMilliseconds: Int32) {
    precondition(curlInitialised, "curl_global_init failed")
    self.idleWaitMilliseconds = idleWaitMilliseconds
    maxRunning = max(1, configuration.concurrency)
    connection = configuration.connection
    hosts = HostTable(configuration: configuration)
    bandwidth = configuration.maxBytesPerSecond.map {
      BandwidthBudget(bytesPerSecond: $0, now: DispatchTime.now().uptimeNanoseconds)
    }
    multi = curl_multi_init()
    ic_multi_setopt_long(multi, CURLMOPT_PIPELINING, ic_pipe_multiplex)
    ic_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.concurrency)
    // Kept for the next transfers: as many as may be open. libcurl's default, 4 per transfer
    // in the handle, shrinks as the loop removes the ones that ended, and a lull between
    // answers closed warm connections that the next transfers opened again.
    ic_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, configuration.concurrency)
    ic_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, hosts.connectionCap)
    // curl's own cap on streams a connection (100 by default) gives way to ours; the server's
    // SETTINGS_MAX_CONCURRENT_STREAMS still applies.
    ic_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, hosts.streamsPerHost)
    cookies = curl_share_init()
    ic_share_setopt_long(cookies, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_COOKIE.rawValue))
    OwnThread.start(name: "ic-transfers") { [self] in run() }
  }

  /// Queues `command` for the loop thread. A transfer started after ``stop()`` fails as
  /// cancelled at once.
  func submit(_ command: Command) {
    let accepted = inbox.withLock { inbox in
      guard !inbox.stopping else { return false }
      inbox.commands.append(command)
      // A wake-up only when the loop waits: one that is busy takes every queued command
      // before it waits again, and so does one woken already. Each wake-up makes the loop
      // thread runnable, which on a busy machine costs the caller its processor: once per
      // batch, not once per transfer; and none for a start while the limits are full. Under
      // the lock: the loop frees the multi handle only once `stopping` is set.
      var startsLater = false
      if inbox.full, case .start = command { startsLater = true }
      if inbox.polling && !startsLater {
        inbox.polling = false
        curl_multi_wakeup(multi)
      }
      return true
    }
    if !accepted, case .start(let transfer) = command {
      transfer.completion?(.failure(.cancelledBeforeStart))
      transfer.completion = nil
    }
  }

  /// Cancels every transfer in flight, frees the handles and ends the thread; returns once it
  /// has.
  func stop() async {
    await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
      requestStop(then: { waiter.resume() })
    }
  }

  /// ``stop()`` for a caller that is not a task: blocks the calling thread until the loop's
  /// thread has ended (it needs no other thread to get there).
  func stopAndWait() {
    let ended = DispatchSemaphore(value: 0)
    requestStop(then: { ended.signal() })
    ended.wait()
  }

  /// Asks the thread to stop and calls `exited` once it has ended (at once if it had).
  private func requestStop(then exited: @escaping @Sendable () -> Void) {
    let hasExited = inbox.withLock { inbox in
      guard !inbox.exited else { return true }
      inbox.exitWaiters.append(exited)
      Self.requestStop(&inbox, multi)
      return false
    }
    if hasExited { exited() }
  }

  /// What ``stop()`` does without waiting for the thread to end.
  func requestStop() {
    inbox.withLock { inbox in
      guard !inbox.exited else { return }
      Self.requestStop(&inbox, multi)
    }
  }

  /// Under the inbox's lock: the loop frees the multi handle only once `stopping` is set.
  private static func requestStop(_ inbox: inout Inbox, _ multi: UnsafeMutableRawPointer) {
    guard !inbox.stopping else { return }
    inbox.stopping = true
    curl_multi_wakeup(multi)
  }

  private func run() {
    var stillRunning: Int32 = 0
    // Whether a perform delivered data since the loop last waited.
    var deliveredSinceWait = false
    while true {
      let (commands, stopping) = inbox.withLock { inbox in
        defer { inbox.commands.removeAll(keepingCapacity: true) }
        return (inbox.commands, inbox.stopping)
      }
      for command in commands {
        switch command {
        case .start(let transfer): enqueue(transfer)
        case .cancel(let transfer): cancel(transfer)
        }
      }
      if stopping { break }
      startWaiting()
      let unpaused = resumePaused()
      received.delivered = false
      curl_multi_perform(multi, &stillRunning)
      let delivered = received.delivered
      collectFinished()
      let now = DispatchTime.now().uptimeNanoseconds
      if now >= idleCheckDue { endIdle(at: now) }
      if now >= hopDeadlineDue { endOverdueHops(at: now) }
      // What ended made room: the next ones are sent by the next perform, before any wait.
      if startWaiting() { continue }
      // A perform that delivered data may have read more than it handed over (see
      // `stallGuardMilliseconds`): the next one, at once, hands it over, and so on until one
      // delivers nothing. A burst of answers on one HTTP/2 connection is then taken whole,
      // and the requests that follow go out with no wait.
      if delivered {
        deliveredSinceWait = true
        continue
      }
      // Waits only with nothing queued; a command queued from here on wakes it.
      let waits = inbox.withLock { inbox in
        inbox.polling = inbox.commands.isEmpty && !inbox.stopping
        inbox.full = running >= maxRunning
        return inbox.polling
      }
      guard waits else { continue }
      var wait =
        deliveredSinceWait
        ? min(idleWaitMilliseconds, Self.stallGuardMilliseconds) : idleWaitMilliseconds
      deliveredSinceWait = false
      // A transfer held back by the rate, a back-off or the bandwidth cap is due then, one
      // under way may reach its idle timeout, and a redirect's hop waiting its deadline.
      let due = min(gateWake, unpaused ?? .max, idleCheckDue, hopDeadlineDue)
      if due != .max {
        let now = DispatchTime.now().uptimeNanoseconds
        let untilDue = due > now ? (due - now + 999_999) / 1_000_000 : 0
        wait = Int32(min(UInt64(wait), untilDue))
      }
      curl_multi_poll(multi, nil, 0, wait, nil)
      inbox.withLock { $0.polling = false }
    }
    dropWaiting()
    for transfer in Array(active.values) { cancel(transfer) }
    idle.removeAll()
    curl_multi_cleanup(multi)
    curl_share_cleanup(cookies)
    let waiters = inbox.withLock { inbox in
      inbox.exited = true
      return inbox.exitWaiters
    }
    for exited in waiters { exited() }
  }

  private func enqueue(_ transfer: Transfer) {
    guard case .unseen(let cancelRequested) = transfer.phase else { return }
    guard !cancelRequested else { return finish(transfer, .failure(.cancelledBeforeStart)) }
    transfer.phase = .waiting
    waiting.append(transfer, priority: transfer.request.priority)
  }

  /// Starts waiting transfers while the limits have room, the best priority first and in order
  /// within one (a transfer whose host is full lets the next one go first; one whose start
  /// condition says no ends unsent); returns whether it started any.
  @discardableResult
  private func startWaiting() -> Bool {
    var started = false
    // Without a rate or a back-off, the clock is not even read.
    let gated = !hosts.isOpen
    let now = gated ? DispatchTime.now().uptimeNanoseconds : 0
    var wake = UInt64.max
    if gated { hosts.prune(at: now) }
    while running < maxRunning,
      let transfer = waiting.takeFirst(where: {
        hosts.allows($0.origin, gated: gated, at: now, wake: &wake)
      })
    {
      if !transfer.hasStarted, let startsIf = transfer.startsIf, !startsIf() {
        finish(transfer, .failure(.cancelledBeforeStart))
        continue
      }
      // A hop whose deadline passed while it waited is not sent, nor counted against its
      // target (a start, a sample of its limit): the wait was the loop's.
      if transfer.hasStarted, transfer.remainingMilliseconds == nil {
        finish(transfer, .failure(transfer.deadlineFailure))
        continue
      }
      start(transfer, at: now)
      started = true
    }
    gateWake = wake
    return started
  }

  /// Unpauses the transfers the bandwidth budget can now pay for; returns when the next
  /// paused one can go.
  private func resumePaused() -> UInt64? {
    guard let bandwidth else { return nil }
    return bandwidth.resume(
      at: DispatchTime.now().uptimeNanoseconds,
      live: { transfer in
        guard case .running = transfer.phase, let easy = transfer.easy else { return false }
        return active[easy.handle] === transfer
      },
      unpause: { transfer in
        transfer.pausedForBandwidth = false
        transfer.lastProgress = DispatchTime.now().uptimeNanoseconds
        if let easy = transfer.easy { curl_easy_pause(easy.handle, ic_pause_cont) }
      })
  }

  /// Ends the transfers that received nothing for their idle timeout (`--timeout`, SPEC
  /// section 5) as timed out, to within the loop's wake-up: libcurl's own low-speed check
  /// averages over 5 seconds and fired up to 6 s late once bytes had flowed. Notes when the
  /// next may be due.
  private func endIdle(at now: UInt64) {
    var soonest = UInt64.max
    var idle: [(UnsafeMutableRawPointer, Transfer)] = []
    for (handle, transfer) in active {
      let deadline = transfer.idleDeadline
      if deadline <= now {
        idle.append((handle, transfer))
      } else {
        soonest = min(soonest, deadline)
      }
    }
    idleCheckDue = soonest
    for (handle, transfer) in idle {
      active.removeValue(forKey: handle)
      curl_multi_remove_handle(multi, handle)
      finish(transfer, .failure(transfer.idleFailure))
    }
  }

  /// Ends the redirects' next hops whose deadline passed while they waited for their turn, as
  /// timed out: unsent, they say nothing of their targets. Notes when the next may be due.
  private func endOverdueHops(at now: UInt64) {
    var soonest = UInt64.max
    let overdue = waiting.remove { transfer in
      guard transfer.hasStarted else { return false }
      guard transfer.deadline > now else { return true }
      soonest = min(soonest, transfer.deadline)
      return false
    }
    hopDeadlineDue = soonest
    for transfer in overdue { finish(transfer, .failure(transfer.deadlineFailure)) }
  }

  private func dropWaiting() {
    for transfer in waiting.removeAll() { finish(transfer, .failure(Self.unsent(transfer))) }
  }

  /// How a waiting transfer ends when it is cancelled: before its start, or, waiting to send
  /// a redirect's next hop, as one cancelled under way.
  private static func unsent(_ transfer: Transfer) -> DownloadFailure {
    transfer.hasStarted ? .init(.cancelled) : .cancelledBeforeStart
  }

  private func start(_ transfer: Transfer, at now: UInt64) {
    transfer.phase = .running
    running += 1
    let cap = hosts.connectionCap
    transfer.epoch = hosts.started(transfer.origin, at: now)
    transfer.sentWith = hosts.running(transfer.origin)
    if hosts.connectionCap != cap {
      ic_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, hosts.connectionCap)
    }
    // A redirect's next hop: the same download goes on, on its handle, within its deadline.
    if transfer.hasStarted { return send(transfer) }
    transfer.startClock()
    transfer.bandwidth = bandwidth
    transfer.activity = received
    guard let easy = idle.popLast() ?? EasyHandle() else {
      return finish(transfer, .failure(.init(.localFailure(reason: "curl_easy_init failed"))))
    }
    easy.prepare(
      for: transfer, connection: connection,
      cookies: transfer.request.handleCookies ? cookies : nil)
    transfer.easy = easy
    send(transfer)
  }

  /// Sends the request for the transfer's current URL: the first one, or the next hop of a
  /// redirect.
  private func send(_ transfer: Transfer) {
    guard let easy = transfer.easy else { return }
    guard let remaining = transfer.remainingMilliseconds else {
      transfer.ranOutOfDeadline = true
      return finish(transfer, .failure(transfer.deadlineFailure))
    }
    transfer.ranOutOfDeadline = false
    transfer.hopTimeoutMilliseconds = remaining
    easy.setHop(for: transfer, timeoutMilliseconds: remaining)
    transfer.lastProgress = DispatchTime.now().uptimeNanoseconds
    transfer.pausedForBandwidth = false
    idleCheckDue = min(idleCheckDue, transfer.idleDeadline)
    active[easy.handle] = transfer
    curl_multi_add_handle(multi, easy.handle)
  }

  private func cancel(_ transfer: Transfer) {
    switch transfer.phase {
    case .finished: return
    case .unseen:
      // Not seen yet: the start that follows in the inbox sees the flag.
      transfer.phase = .unseen(cancelRequested: true)
    case .waiting:
      _ = waiting.takeFirst { $0 === transfer }
      finish(transfer, .failure(Self.unsent(transfer)))
    case .running:
      if let easy = transfer.easy, active.removeValue(forKey: easy.handle) != nil {
        curl_multi_remove_handle(multi, easy.handle)
      }
      finish(transfer, .failure(.init(.cancelled)))
    }
  }

  private func collectFinished() {
    var queued: Int32 = 0
    while let message = curl_multi_info_read(multi, &queued) {
      guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else {
        continue
      }
      // Read before the handle is removed: removing it frees the message.
      let code = ic_message_result(message)
      if hosts.adaptiveCeiling != nil, let transfer = active[handle] { noteUnread(transfer) }
      curl_multi_remove_handle(multi, handle)
      guard let transfer = active.removeValue(forKey: handle) else { continue }
      learnProtocol(of: transfer)
      switch transfer.conclude(code) {
      case .redirect: redirected(transfer)
      case .again: send(transfer)
      case .done(let result): finish(transfer, result)
      }
    }
  }

  /// A hop answered with a redirect: an answer of the origin that sent it (a sample of its
  /// adaptive limit), and the end of the transfer's turn there. The next hop waits for room
  /// under the limits, rate and back-off of the origin it goes to, ahead of the downloads not
  /// yet started whatever their priority, behind the hops that waited before it: many origins
  /// that lead to one host do not open more than its limit to it.
  private func redirected(_ transfer: Transfer) {
    running -= 1
    hosts.ended(transfer.origin)
    if hosts.adaptiveCeiling != nil { _ = sample(transfer, .redirected) }
    transfer.origin = Origin(transfer.url)
    transfer.phase = .waiting
    waiting.appendAhead(transfer)
    hopDeadlineDue = min(hopDeadlineDue, transfer.deadline)
  }

  /// Notes how long the transfer's first byte waited unread (``ReadLag``): the loop's own lag,
  /// which its time to first byte would count as the origin's. Before the handle leaves the
  /// multi handle, which keeps the connection the kernel is asked of.
  private func noteUnread(_ transfer: Transfer) {
    let read = transfer.firstLineRead
    transfer.firstLineRead = 0
    transfer.unread = 0
    guard read > 0, let idle = transfer.easy?.connectionIdleMilliseconds else { return }
    transfer.unread = readLag.unread(
      idleMilliseconds: idle, sinceRead: DispatchTime.now().uptimeNanoseconds &- read)
  }

  /// Notes whether the host that answered the transfer's current hop answered over HTTP/2 (or
  /// later), which multiplexes, or over HTTP/1, which does not; a transfer that got no answer
  /// says nothing.
  private func learnProtocol(of transfer: Transfer) {
    // An isolated transfer's HTTP/1.1 says nothing of the host.
    guard let easy = transfer.easy, !transfer.isolated else { return }
    let version = easy.info(CURLINFO_HTTP_VERSION)
    guard version != 0 else { return }
    // The hop's own origin: a redirect's target's HTTP/2 is not its first hop's (an origin
    // over HTTP/1.1 that redirects to a CDN over HTTP/2 was given the CDN's 256 streams, as
    // connections of its own).
    hosts.learned(Origin(transfer.url), multiplexes: version >= ic_http_version_2_0)
  }

  /// How a hop ended, for its origin's adaptive limit.
  private enum HopEnd {
    /// An image or a 304: the origin's time to first byte is a sample.
    case answered
    /// A redirect: a sample too, while the origin has served no image or 304 in the run.
    case redirected
    case failed(DownloadFailure)
  }

  /// What an ended hop says of its origin's adaptive limit (the origin it was sent to, under
  /// whose limit it went): an answer's time to first byte, a refusal or a timeout. Error
  /// answers say nothing. Returns whether it was a refusal that answered a probe of the limit
  /// (the host is not held for it).
  private func sample(_ transfer: Transfer, _ end: HopEnd) -> Bool {
    let origin = transfer.origin
    let epoch = transfer.epoch
    let changed: Bool
    var probe = false
    switch end {
    case .answered, .redirected:
      guard let nanoseconds = transfer.easy?.firstByteNanoseconds else { return false }
      // The origin's time: without what the answer waited for the loop to read it.
      let answered = nanoseconds - min(nanoseconds, transfer.unread)
      var redirect = false
      if case .redirected = end { redirect = true }
      changed = hosts.answered(origin, after: answered, sentIn: epoch, redirect: redirect)
    case .failed(let failure):
      if failure.refusedStream || [429, 503].contains(failure.error.httpStatus) {
        probe = hosts.refusalIsProbe(origin, sentIn: epoch, with: transfer.sentWith)
        changed = hosts.cut(
          origin, .refused, sentIn: epoch, probe: probe, inFlight: transfer.sentWith)
      } else if case .network(.timedOut, _) = failure.error {
        // The deadline is the whole download's: a redirect's hop that ran out of it had what
        // the earlier hops and its wait for a turn left it, and says nothing of its origin.
        if transfer.followedRedirect, transfer.ranOutOfDeadline { return false }
        changed = hosts.cut(origin, .timeout, sentIn: epoch)
      } else {
        return false
      }
    }
    // Each host is in the report from its first answer, and kept as its limit changes: its
    // entry is made only then, not at every answer.
    adaptiveLimits.withLock { limits in
      guard changed || limits[origin] == nil, let limit = hosts.hostLimit(origin) else {
        return
      }
      limits[origin] = limit
    }
    if changed {
      let refusedWith = hosts.refusedWith(origin)
      let atRandom = hosts.refusesAtRandom(origin)
      refusals.withLock { refusals in
        // An origin that refuses at random has no knee to keep: an earlier run's refusal of
        // it, perhaps as random, is forgotten too (kept, it held the week's runs under it).
        if atRandom {
          refusals[origin] = .some(nil)
          return
        }
        let known = refusals[origin] ?? nil
        // A refusal of one transfer alone is an outage's, not a knee's: no limit is under 1,
        // and kept, it held the origin at 1 for a week (and said "held under 1").
        guard refusedWith != known?.inFlight, refusedWith != 1 else { return }
        guard let refusedWith else {
          // The run's own refusal, served cleanly since (or one of an origin that refuses at
          // random): forgotten. Kept under an earlier run's refusal, the run never served past
          // that one, which stays in the state (a row deleted here was asked past again).
          refusals[origin] = nil
          return
        }
        refusals[origin] = OriginRefusal(origin: origin, inFlight: refusedWith, since: Date())
      }
    }
    return probe
  }

  private func finish(_ transfer: Transfer, _ result: Result<DownloadResponse, DownloadFailure>) {
    var result = result
    if case .running = transfer.phase {
      running -= 1
      hosts.ended(transfer.origin)
      let probed: Bool
      switch result {
      case _ where hosts.adaptiveCeiling == nil: probed = false
      case .success: probed = sample(transfer, .answered)
      case .failure(let failure): probed = sample(transfer, .failed(failure))
      }
      if probed, case .failure(var failure) = result {
        failure.refusedProbe = true
        result = .failure(failure)
      }
      if case .failure(let failure) = result, failure.retryAfter != nil, !probed {
        // The host that answered (a redirect's target's, after a redirect).
        let now = DispatchTime.now().uptimeNanoseconds
        backoffLog.withLock { hosts.answered(transfer.origin, failure, at: now, log: &$0) }
      }
    }
    transfer.phase = .finished
    // A body that went to its file and ended in a failure or a cancel leaves nothing behind.
    transfer.releaseSpill()
    if let easy = transfer.easy {
      easy.release()
      idle.append(easy)
      transfer.easy = nil
    }
    transfer.completion?(result)
    transfer.completion = nil
  }
}
