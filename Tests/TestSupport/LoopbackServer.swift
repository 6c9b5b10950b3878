import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A request as the loopback server saw it.
public struct ServerRequest: Sendable {
  public var path: String
  public var query: String?
  public var headers: [(String, String)]
  /// 1 for the first request to this path, 2 for the second...
  public var attempt: Int
  /// When the whole request had arrived (on the monotonic clock: rates are measured from it).
  public var arrivedAt = ContinuousClock.now
  /// The requests the server was answering when it arrived, itself among them.
  public var inFlight = 0

  public func header(_ name: String) -> String? {
    headers.first { $0.0.lowercased() == name.lowercased() }?.1
  }
}

/// What the loopback server answers, and how slowly.
public struct ServerResponse: Sendable {
  public var status: Int
  public var headers: [(String, String)]
  public var body: Data
  /// Wait this long before sending the response head.
  public var headDelay: TimeAmount?
  /// Send the body in pieces of `dripChunk` bytes, one every `dripInterval`.
  public var dripInterval: TimeAmount?
  public var dripChunk = 1
  /// What happens to the connection once the body is written.
  public var ending = Ending.keepAlive

  public enum Ending: Sendable {
    /// As the request asked (HTTP/1.1: kept open).
    case keepAlive
    /// Closed: a body shorter than its Content-Length ends early.
    case close
    /// Reset (RST, SO_LINGER 0) instead of closed.
    case reset
  }

  public init(
    status: Int = 200, headers: [(String, String)] = [], body: Data = Data(),
    headDelay: TimeAmount? = nil, dripInterval: TimeAmount? = nil, dripChunk: Int = 1,
    ending: Ending = .keepAlive
  ) {
    self.status = status
    self.headers = headers
    self.body = body
    self.headDelay = headDelay
    self.dripInterval = dripInterval
    self.dripChunk = dripChunk
    self.ending = ending
  }

  public static func image(_ data: Data, type: String) -> ServerResponse {
    ServerResponse(headers: [("Content-Type", type)], body: data)
  }

  public static func redirect(to location: String, status: Int = 302) -> ServerResponse {
    ServerResponse(status: status, headers: [("Location", location)])
  }
}

public typealias Route = @Sendable (ServerRequest) -> ServerResponse

/// A small HTTP/1.1 server on 127.0.0.1 with scripted routes, started by a test and shut down
/// by it. It counts the requests to each path so that tests can check what reached it.
public final class LoopbackServer: Sendable {
  public let port: Int
  /// The loopback address it listens on.
  public let host: String
  private let group: MultiThreadedEventLoopGroup
  private let channel: any Channel
  private let log: RequestLog

  public var baseURL: String { "http://\(host):\(port)" }

  public func url(_ path: String) -> String { baseURL + path }

  /// Starts a server answering `routes` (exact paths; anything else is 404) on `host`, a
  /// loopback address (Linux answers on all of 127.0.0.0/8: 127.0.0.2 is a second address
  /// for tests of rules that are per address).
  public init(routes: [String: Route], host: String = "127.0.0.1") throws {
    let log = RequestLog()
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let bootstrap = ServerBootstrap(group: group)
      .serverChannelOption(.backlog, value: 512)
      .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
      .childChannelInitializer { channel in
        log.connectionAccepted()
        return channel.pipeline.configureHTTPServerPipeline().flatMap {
          channel.pipeline.addHandler(RouteHandler(routes: routes, log: log))
        }
      }
    channel = try bootstrap.bind(host: host, port: 0).wait()
    port = channel.localAddress!.port!
    self.host = host
    self.group = group
    self.log = log
  }

  /// How many requests reached `path`.
  public func requestCount(_ path: String) -> Int { log.count(path) }

  /// Every request to `path`, oldest first.
  public func requests(_ path: String) -> [ServerRequest] { log.requests(path) }

  /// How many body bytes the server has written so far in its answers to `path` (a dripped
  /// body counts as its pieces go out).
  public func bodyBytesSent(_ path: String) -> Int { log.bytesSent(path) }

  /// Every request to any path, in the order they arrived.
  public var allRequests: [ServerRequest] { log.all }

  /// How many connections clients opened to the server.
  public var connectionCount: Int { log.connections }

  /// The most requests the server was answering at once (from arrival to the end of the
  /// response).
  public var peakConcurrency: Int { log.peakInFlight }

  public func shutdown() {
    try? channel.close().wait()
    try? group.syncShutdownGracefully()
  }
}

final class RequestLog: Sendable {
  private struct State {
    var requests: [String: [ServerRequest]] = [:]
    var all: [ServerRequest] = []
    var inFlight = 0
    var peakInFlight = 0
    var bytesSent: [String: Int] = [:]
    var connections = 0
  }

  private let state = Mutex(State())

  func connectionAccepted() { state.withLock { $0.connections += 1 } }

  var connections: Int { state.withLock { $0.connections } }

  /// Returns the request's attempt and the requests in flight with it.
  func record(_ request: ServerRequest) -> (attempt: Int, inFlight: Int) {
    state.withLock { state in
      var request = request
      request.attempt = (state.requests[request.path]?.count ?? 0) + 1
      request.arrivedAt = .now
      state.inFlight += 1
      state.peakInFlight = max(state.peakInFlight, state.inFlight)
      // The log's copy says it too.
      request.inFlight = state.inFlight
      state.requests[request.path, default: []].append(request)
      state.all.append(request)
      return (request.attempt, state.inFlight)
    }
  }

  func complete() { state.withLock { $0.inFlight -= 1 } }

  func sent(_ count: Int, to path: String) {
    state.withLock { $0.bytesSent[path, default: 0] += count }
  }
  func bytesSent(_ path: String) -> Int { state.withLock { $0.bytesSent[path] ?? 0 } }

  func count(_ path: String) -> Int { state.withLock { $0.requests[path]?.count ?? 0 } }
  func requests(_ path: String) -> [ServerRequest] { state.withLock { $0.requests[path] ?? [] } }
  var peakInFlight: Int { state.withLock { $0.peakInFlight } }
  var all: [ServerRequest] { state.withLock { $0.all } }
}

final class RouteHandler: ChannelInboundHandler, @unchecked Sendable {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart

  let routes: [String: Route]
  let log: RequestLog
  private var head: HTTPRequestHead?

  init(routes: [String: Route], log: RequestLog) {
    self.routes = routes
    self.log = log
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch unwrapInboundIn(data) {
    case .head(let head):
      self.head = head
    case .body:
      break
    case .end:
      guard let head else { return }
      let parts = head.uri.split(separator: "?", maxSplits: 1)
      var request = ServerRequest(
        path: String(parts.first ?? ""), query: parts.count > 1 ? String(parts[1]) : nil,
        headers: head.headers.map { ($0.name, $0.value) }, attempt: 0)
      (request.attempt, request.inFlight) = log.record(request)
      let response =
        routes[request.path]?(request) ?? ServerResponse(status: 404, body: Data("not found".utf8))
      let keepAlive = head.isKeepAlive
      if let delay = response.headDelay {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: delay) {
          self.send(response, to: request.path, context: loopBound.value, keepAlive: keepAlive)
        }
      } else {
        send(response, to: request.path, context: context, keepAlive: keepAlive)
      }
    }
  }

  private func send(
    _ response: ServerResponse, to path: String, context: ChannelHandlerContext, keepAlive: Bool
  ) {
    var headers = HTTPHeaders(response.headers)
    if !headers.contains(name: "Content-Length") {
      headers.add(name: "Content-Length", value: "\(response.body.count)")
    }
    let head = HTTPResponseHead(
      version: .http1_1, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
    context.write(wrapOutboundOut(.head(head)), promise: nil)
    guard let interval = response.dripInterval, !response.body.isEmpty else {
      if !response.body.isEmpty {
        context.write(
          wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
        log.sent(response.body.count, to: path)
      }
      finish(context: context, keepAlive: keepAlive, ending: response.ending)
      return
    }
    drip(
      response.body[...], to: path, chunk: response.dripChunk, every: interval, context: context,
      keepAlive: keepAlive)
  }

  private func drip(
    _ remaining: Data.SubSequence, to path: String, chunk: Int, every interval: TimeAmount,
    context: ChannelHandlerContext, keepAlive: Bool
  ) {
    guard context.channel.isActive else { return }
    let piece = remaining.prefix(chunk)
    context.writeAndFlush(
      wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: piece)))), promise: nil)
    log.sent(piece.count, to: path)
    let rest = remaining.dropFirst(piece.count)
    if rest.isEmpty {
      finish(context: context, keepAlive: keepAlive)
      return
    }
    let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
    context.eventLoop.scheduleTask(in: interval) {
      self.drip(
        rest, to: path, chunk: chunk, every: interval, context: loopBound.value,
        keepAlive: keepAlive)
    }
  }

  private func finish(
    context: ChannelHandlerContext, keepAlive: Bool, ending: ServerResponse.Ending = .keepAlive
  ) {
    log.complete()
    let channel = context.channel
    context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
      switch ending {
      case .keepAlive:
        if !keepAlive { channel.close(promise: nil) }
      case .close:
        channel.close(promise: nil)
      case .reset:
        guard let socket = channel as? SocketOptionProvider else {
          return channel.close(promise: nil)
        }
        socket.setSoLinger(linger(l_onoff: 1, l_linger: 0))
          .whenComplete { _ in channel.close(promise: nil) }
      }
    }
  }
}

/// A TCP server on 127.0.0.1 that answers every connection with the same raw bytes (no HTTP
/// framing: for servers that do not speak HTTP, or that hang up at once) and then closes it.
public final class RawLoopbackServer: Sendable {
  public let port: Int
  private let group: MultiThreadedEventLoopGroup
  private let channel: any Channel

  public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

  public init(reply: Data) throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    channel = try ServerBootstrap(group: group)
      .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
      .childChannelInitializer { channel in
        channel.pipeline.addHandler(RawReplyHandler(reply: reply))
      }
      .bind(host: "127.0.0.1", port: 0).wait()
    port = channel.localAddress!.port!
    self.group = group
  }

  public func shutdown() {
    try? channel.close().wait()
    try? group.syncShutdownGracefully()
  }
}

final class RawReplyHandler: ChannelInboundHandler, Sendable {
  typealias InboundIn = ByteBuffer
  typealias OutboundOut = ByteBuffer
  let reply: Data

  init(reply: Data) { self.reply = reply }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    let channel = context.channel
    context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: reply))).whenComplete { _ in
      channel.close(promise: nil)
    }
  }
}
