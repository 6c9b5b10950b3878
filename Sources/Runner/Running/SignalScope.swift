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
public final class SignalScope: Sendable {
  /// The signals that stop a run; SIGHUP (a closed terminal) is treated like SIGTERM.
  public static let stopSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP]

  public let stop = StopFlag()
  private let received = Mutex<Int32?>(nil)
  private let signals: AsyncStream<Int32>
  private let continuation: AsyncStream<Int32>.Continuation

  private init() {
    (signals, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
  }

  /// The first signal received in the scope, if any.
  public var signal: Int32? { received.withLock { $0 } }

  /// Runs `body` with the signals handled; restores them when it returns or throws.
  public static func with<Result>(_ body: (SignalScope) async throws -> Result) async rethrows
    -> Result
  {
    let scope = SignalScope()
    let installation = Installation(scope: scope)
    defer { installation.remove() }
    return try await body(scope)
  }

  /// Returns once a signal arrives, or when the waiting task is cancelled.
  public func waitForSignal() async {
    for await _ in signals { return }
  }

  fileprivate func deliver(_ number: Int32) {
    let first = received.withLock { received in
      guard received == nil else { return false }
      received = number
      return true
    }
    guard first else { return }
    stop.stop()
    continuation.yield(number)
  }

  /// The dispatch sources and the dispositions they replaced. The sources are set once, in
  /// `init`, and dispatch sources may be cancelled from any thread.
  private final class Installation: @unchecked Sendable {
    private let sources: [any DispatchSourceSignal]
    private let previous: Mutex<[Int32: sighandler_t?]>

    init(scope: SignalScope) {
      var previous: [Int32: sighandler_t?] = [:]
      var sources: [any DispatchSourceSignal] = []
      for number in SignalScope.stopSignals {
        // Dispatch sees the signal only once its default action (ending the process) is off.
        previous[number] = Glibc.signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        sources.append(source)
      }
      self.sources = sources
      self.previous = Mutex(previous)
      for (number, source) in zip(SignalScope.stopSignals, sources) {
        source.setEventHandler { [weak scope, weak self] in
          scope?.deliver(number)
          self?.restoreDispositions()
        }
        source.resume()
      }
    }

    /// Puts back what the signals did before the scope (a second signal then acts as usual).
    private func restoreDispositions() {
      let saved = previous.withLock { previous in
        defer { previous.removeAll() }
        return previous
      }
      for (number, handler) in saved { Glibc.signal(number, handler) }
    }

    func remove() {
      for source in sources { source.cancel() }
      restoreDispositions()
    }
  }
}
