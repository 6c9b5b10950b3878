import Core
@preconcurrency import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// SIGINT, SIGTERM and SIGHUP for the length of one scope (SPEC sections 5 and 10): the first
/// such signal sets ``stop`` (passes and the prefetcher finish the file or URL in hand and
/// start nothing new) and wakes ``waitForSignal()``; the signals' previous dispositions are
/// back when the scope ends, and after the first signal, so that a second Ctrl-C ends the
/// process at once. The scoped form of what swift-service-lifecycle's graceful shutdown does
/// for services.
///
/// One scope at a time per process: signal dispositions and the handler's pipe are
/// process-wide, and a second scope would take the signals from the first (whose run would
/// then never hear of one). A nested or concurrent scope is refused with
/// ``AlreadyActive``; the active one goes on unharmed.
public final class SignalScope: Sendable {
  /// A scope was asked for while another was active in the process.
  public struct AlreadyActive: Error, CustomStringConvertible {
    public var description: String {
      "signals are already handled by another run in this process: one run at a time per "
        + "process (run the jobs one after another, or in processes of their own)"
    }
  }

  /// The signals that stop a run; SIGHUP (a closed terminal) is treated like SIGTERM, and so
  /// are the warnings job engines send before they end a job: SIGUSR1 and SIGUSR2 (Grid
  /// Engine's `-notify` and soft run-time limit, Slurm's `--signal`) and SIGXCPU (a CPU-time
  /// limit, Grid Engine's `s_cpu`), whose default would end the process without its report.
  /// A signal the run was started with ignored (`nohup`, a shell's background job) stays
  /// ignored, as POSIX shells leave it.
  public static let stopSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGXCPU]

  /// How long a run has to stop after the first signal before the process exits anyway with
  /// 128 + the signal, without its report (issue 38): a run whose threads are stuck (an
  /// allocator out of address space, a thread that could not start) still ends, and frees
  /// the cache's lock. The alarm is the kernel's, so it fires whatever the process's threads do.
  public static let stopDeadlineSeconds: UInt32 = 2

  public let stop = StopFlag()
  private let received = Mutex<Int32?>(nil)
  private let timeLimit = Mutex(false)

  private init() {}

  /// The first signal received in the scope, if any.
  public var signal: Int32? { received.withLock { $0 } }

  /// Whether the run's time limit (``PrefetchConfiguration/maxRunTime``) stopped it.
  public var timeLimitReached: Bool { timeLimit.withLock { $0 } }

  /// Whether a signal or the time limit stopped the run: its report is marked interrupted.
  public var interrupted: Bool { signal != nil || timeLimitReached }

  /// Stops the run as a signal does, for its time limit.
  public func stopForTimeLimit() {
    let first = timeLimit.withLock { reached in
      defer { reached = true }
      return !reached && signal == nil
    }
    guard first else { return }
    stop.stop()
  }

  /// Runs `body` with the signals handled; restores them when it returns or throws. Throws
  /// ``AlreadyActive``, without running `body`, while another scope is active.
  public static func with<Result>(_ body: (SignalScope) async throws -> Result) async throws
    -> Result
  {
    guard
      scopeActive.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
        .exchanged
    else { throw AlreadyActive() }
    defer { scopeActive.store(false, ordering: .releasing) }
    let scope = SignalScope()
    let installation = try Installation(scope: scope)
    defer { installation.remove() }
    return try await body(scope)
  }

  /// Returns once a signal arrives (or the time limit is reached), or when the waiting task is
  /// cancelled: the wait of the one stop channel, ``stop``.
  public func waitForSignal() async {
    await stop.wait()
  }

  fileprivate func deliver(_ number: Int32) {
    let first = received.withLock { received in
      guard received == nil else { return false }
      received = number
      return true
    }
    guard first else { return }
    stop.stop()
  }

  /// A `sigaction` handler per signal that writes the signal's number to a pipe (the only
  /// async-signal-safe thing it does), and a dispatch read source on the pipe that delivers it.
  /// Dispatch's own signal sources are not used: they need the signal ignored, and an ignored
  /// process-directed signal is discarded by the kernel unless the thread it lands on blocks it.
  private final class Installation: @unchecked Sendable {
    private let source: any DispatchSourceRead
    private let descriptors: (read: Int32, write: Int32)
    private let previous: Mutex<[Int32: sigaction]>
    /// SIGALRM's disposition before the scope, back when it ends (not after the first signal:
    /// the alarm is the stop deadline).
    private var previousAlarm = sigaction()

    init(scope: SignalScope) throws(FileSystemError) {
      var fds: [Int32] = [-1, -1]
      guard pipe(&fds) == 0 else {
        throw FileSystemError("create", path: "signal pipe", errno: errno)
      }
      for fd in fds {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, O_NONBLOCK)
      }
      descriptors = (fds[0], fds[1])
      signalPipeWriteDescriptor.store(fds[1], ordering: .sequentiallyConsistent)
      var saved: [Int32: sigaction] = [:]
      for number in SignalScope.stopSignals {
        var inherited = sigaction()
        sigaction(number, nil, &inherited)
        // SIG_IGN is 1: ignored by whoever started the run, on purpose.
        guard unsafeBitCast(inherited.__sigaction_handler.sa_handler, to: Int.self) != 1 else {
          continue
        }
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { number in
          var byte = UInt8(truncatingIfNeeded: number)
          _ = write(signalPipeWriteDescriptor.load(ordering: .relaxed), &byte, 1)
          // Only async-signal-safe calls: a lock-free atomic and alarm(2).
          if firstStopSignal.compareExchange(expected: 0, desired: number, ordering: .relaxed)
            .exchanged
          {
            alarm(SignalScope.stopDeadlineSeconds)
          }
        }
        action.sa_flags = SA_RESTART
        sigemptyset(&action.sa_mask)
        var old = sigaction()
        sigaction(number, &action, &old)
        saved[number] = old
      }
      previous = Mutex(saved)
      var deadline = sigaction()
      deadline.__sigaction_handler.sa_handler = { _ in
        // An alarm before any stop signal is another process's, not the deadline's: ignored
        // (its default would end the run without its report).
        let signal = firstStopSignal.load(ordering: .relaxed)
        guard signal != 0 else { return }
        // A static string: nothing is allocated here (the allocator may be what is stuck).
        let message: StaticString =
          "imagecache: the run did not stop within 2 s of the signal; exiting without its report\n"
        _ = write(STDERR_FILENO, message.utf8Start, message.utf8CodeUnitCount)
        _exit(128 + signal)
      }
      deadline.sa_flags = SA_RESTART
      sigemptyset(&deadline.sa_mask)
      sigaction(SIGALRM, &deadline, &previousAlarm)
      source = DispatchSource.makeReadSource(fileDescriptor: fds[0], queue: .global())
      let readDescriptor = fds[0]
      source.setEventHandler { [weak scope, weak self] in
        var byte: UInt8 = 0
        while read(readDescriptor, &byte, 1) == 1 {
          scope?.deliver(Int32(byte))
          self?.restoreDispositions()
        }
      }
      source.resume()
    }

    /// Puts back what the signals did before the scope (a second signal then acts as usual).
    private func restoreDispositions() {
      let saved = previous.withLock { previous in
        defer { previous.removeAll() }
        return previous
      }
      for (number, var action) in saved { sigaction(number, &action, nil) }
    }

    func remove() {
      alarm(0)
      sigaction(SIGALRM, &previousAlarm, nil)
      firstStopSignal.store(0, ordering: .relaxed)
      restoreDispositions()
      source.cancel()
      close(descriptors.read)
      close(descriptors.write)
    }
  }
}

/// The first stop signal of the active scope (0: none yet), for the deadline's exit status.
private let firstStopSignal = Atomic<Int32>(0)

/// Whether a ``SignalScope`` is active in the process.
private let scopeActive = Atomic<Bool>(false)

/// Where the signal handler writes: a handler cannot capture context, so this one value is
/// process-wide (as signal dispositions are). Set by the scope that installs the handlers.
private let signalPipeWriteDescriptor = Atomic<Int32>(-1)
