import CCurl
import Core
import Foundation

/// One download as the transfer thread sees it, from the first request to the last redirect:
/// what to send on each hop, what came back, and how it ends in SD's terms.
final class Transfer: @unchecked Sendable {
  let request: DownloadRequest
  /// The largest body kept, after decompression.
  let limit: Int
  let idleTimeout: TimeInterval
  private let deadlineSeconds: TimeInterval
  /// When the whole download must be over, on the monotonic clock: set when the loop starts
  /// it, not while it waits for room in the limits (a redirect's next hop waits within it).
  private(set) var deadline: UInt64 = .max
  /// The origin (scheme, host and port) the loop's per-host limits, rate and back-off count
  /// its current hop against: each hop waits for room under the limits of the origin it goes
  /// to, as NSURLSession's per-host limit holds for every host a load reaches (a redirect's
  /// target is limited as itself, however many origins lead there). Keyed as libcurl and
  /// NSURLSession key their connections, so that a stalling port of a host does not hold back
  /// another.
  var origin: Origin
  /// The addresses its connections may not be opened to.
  let addressRules: AddressRules
  /// The CA certificates and proxy its requests use: failures name the proxy.
  private let connection: Connection
  /// How long, about, a host that refused a stream is held back (the first retry's wait).
  private let refusalBackoff: TimeInterval
  /// Set before the transfer is queued; called once, on the loop thread, when it ends.
  var completion: (@Sendable (Result<DownloadResponse, DownloadFailure>) -> Void)?
  /// Set before the transfer is queued; asked on the loop thread when its turn to start comes.
  var startsIf: (@Sendable () -> Bool)?

  /// The first hop's request headers, worked out when the transfer is made: on the thread
  /// that starts it, not the transfer thread, which every transfer goes through.
  private let firstHopHeaders: [String]

  // From here on, only the loop thread reads and writes.
  var easy: EasyHandle?
  var phase = Phase.unseen(cancelRequested: false)
  /// The run's bandwidth budget that its bodies draw on, when there is a cap.
  var bandwidth: BandwidthBudget?
  /// Where the loop hears that a perform delivered data.
  var activity: PerformActivity?
  /// When the current hop last received a byte (or was sent), on the monotonic clock: the
  /// idle timeout counts from it.
  var lastProgress: UInt64 = 0
  /// Paused by the bandwidth cap: waiting for the run's budget, not for its server.
  var pausedForBandwidth = false
  /// The server refused the current hop's HTTP/2 stream (RST_STREAM REFUSED_STREAM) before
  /// answering: libcurl's immediate resend is stopped, and the hop ends as a refusal.
  var refusedStream = false
  /// The address a connection of the current hop was refused, and the rule that refused it.
  var deniedAddress: (address: String, rule: String)?
  /// Its origin's adaptive limit's epoch when its hop started: what its answer says of that
  /// limit.
  var epoch = 0
  /// How long, at the least, its last hop's first byte waited in the kernel before the loop
  /// read it (``ReadLag``), nanoseconds: the client's lag, not the origin's time.
  var unread: UInt64 = 0
  /// When the loop read the first status line of the current hop (uptime nanoseconds, as
  /// ``lastProgress`` stamped it; 0: none yet): the time its first byte was read.
  var firstLineRead: UInt64 = 0
  /// Transfers under way to its origin when it started, itself among them: what the origin
  /// had to take when it came (a refusal of it with more than the origin served answers a
  /// probe). Counted when the refusal is read instead, answers that came in the same pass
  /// made a probe's refusal look like an outage's: the host was held a second, and the
  /// refusal not remembered.
  var sentWith = 0

  enum Phase {
    /// Not seen by the loop yet; `cancelRequested` when a cancel overtook the start.
    case unseen(cancelRequested: Bool)
    /// Waiting for room in the loop's limits.
    case waiting
    /// Holding a place in the limits, from its first request to its last hop.
    case running
    case finished
  }
  /// The current hop.
  private(set) var hop: Hop
  /// The URL of the current hop.
  var url: URL { hop.url }
  /// Where the redirects lead and which headers go with each hop.
  private var redirects: RedirectChain
  private var status = 0
  private var body = Data()
  private var etag: String?
  private var lastModified: String?
  private var retryAfter: String?
  private var location: String?
  /// Bytes of a non-2xx answer's body read and dropped (so that the connection can be reused).
  private var drained = 0
  private var abort: Abort?
  /// Bytes of the current answer's header lines, the status line included.
  private var headerBytes = 0
  /// Sent over HTTP/1.1 on a connection of its own: an HTTP/2 connection it was on failed in
  /// libcurl's header handling, which takes every stream of the connection down with the one
  /// at fault. Alone, the one at fault fails as ``Abort/headerTooLarge`` and the others are
  /// fetched; the second request is not an attempt of the URL's (SPEC section 5).
  private(set) var isolated = false
  /// Bytes of the body written to ``DownloadRequest/bodyFile`` or to the spill file.
  private var written = 0
  /// The temporary file the body went to once it passed ``memoryBuffer``, still open.
  private var spill: (descriptor: Int32, body: SpilledBody)?

  private enum Abort: Equatable {
    /// The body passed the size limit.
    case tooLarge
    /// A redirect's or an error's body passed 64 KiB: not worth reading to the end.
    case drainedEnough
    /// The body could not be written to its file: why.
    case writeFailed(String)
    /// The answer's header lines passed ``maxHeaderBytes``.
    case headerTooLarge
  }

  /// The most of a redirect's or an error's body read to keep its connection.
  static let maxDrained = 64 * 1024

  /// The most of a body held in memory when the request names a ``DownloadRequest/spillFolder``
  /// (SPEC section 12): most images fit, and a larger body goes to its file as it arrives, so
  /// that memory follows the number of transfers, not what origins send.
  static let memoryBuffer = 256 * 1024

  /// The most header bytes one answer may send: libcurl 7.88's limit on one HTTP/1.1 header
  /// line, and under its 128 KiB for an HTTP/2 header block, past which nghttp2's session
  /// fails with every stream on the connection. A block between the two is refused here, for
  /// its stream alone; a larger one is told apart by ``isolated``.
  static let maxHeaderBytes = 100 * 1024

  init(request: DownloadRequest, configuration: DownloaderConfiguration) {
    self.request = request
    hop = Hop(request.url)
    var validators: [RedirectChain.Header] = []
    if let etag = request.validators?.etag { validators.append(("If-None-Match", etag)) }
    if let lastModified = request.validators?.lastModified {
      validators.append(("If-Modified-Since", lastModified))
    }
    redirects = RedirectChain(
      request.url, maxRedirects: configuration.maxRedirects,
      defaults: [("Accept", request.accept), ("User-Agent", configuration.userAgent)],
      headers: request.headers, trustedOrigins: request.trustedOrigins, overrides: validators)
    firstHopHeaders = redirects.headerLines()
    limit = Int(clamping: configuration.maxResponseSize)
    idleTimeout = request.timeout ?? configuration.timeout
    deadlineSeconds = configuration.deadline
    origin = Origin(request.url)
    addressRules = configuration.connection.addressRules
    connection = configuration.connection
    refusalBackoff = configuration.retryBaseDelay
  }

  /// Whether its current hop is a redirect's.
  var followedRedirect: Bool { redirects.count > 0 }

  /// Whether its first request was sent: a transfer waiting with a handle waits to send a
  /// redirect's next hop.
  var hasStarted: Bool { easy != nil }

  /// Starts the deadline's clock: the loop is sending the first request.
  func startClock() {
    deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, deadlineSeconds) * 1e9)
  }

  /// What is left of the deadline, or `nil` once it has passed.
  var remainingMilliseconds: Int? {
    let now = DispatchTime.now().uptimeNanoseconds
    guard now < deadline else { return nil }
    return max(1, Int((deadline - now) / 1_000_000))
  }

  /// What was left of the deadline when the current hop was sent, milliseconds: libcurl's
  /// timeout of the hop.
  var hopTimeoutMilliseconds = Int.max
  /// Whether the current hop ended as the deadline ran out: unsent, or timed out by libcurl on
  /// the deadline's time, not on the idle timeout's (connecting, or receiving nothing).
  var ranOutOfDeadline = false

  /// Whether libcurl's timeout of the current hop was the deadline's: what was left of it was
  /// under the idle timeout, which the connect and low-speed timeouts take, so neither could
  /// fire first; or it has passed (libcurl's timer can fire some milliseconds early, so the
  /// clock alone does not tell).
  private var timedOutOnDeadline: Bool {
    Double(hopTimeoutMilliseconds) < idleTimeout * 1000 || remainingMilliseconds == nil
  }

  /// When the transfer is idle for its ``idleTimeout``, on the monotonic clock; `.max` while
  /// the bandwidth cap holds it.
  var idleDeadline: UInt64 {
    pausedForBandwidth ? .max : lastProgress + UInt64(max(0, idleTimeout) * 1e9)
  }

  var idleFailure: DownloadFailure {
    DownloadFailure(
      .network(
        .timedOut,
        message: "no data from the server for \(idleTimeout) s (the idle timeout, --timeout)"))
  }

  var deadlineFailure: DownloadFailure {
    DownloadFailure(
      .network(
        .timedOut, message: "the download took longer than its \(deadlineSeconds) s deadline"))
  }

  /// The request headers of the current hop: SD's defaults, then the job's and the line's
  /// (replacing a default of the same name) where they go, then the validators of a
  /// revalidation.
  func headerLines() -> [String] {
    redirects.count == 0 ? firstHopHeaders : redirects.headerLines()
  }

  /// Forgets the previous hop's answer.
  func resetResponse() {
    status = 0
    body = Data()
    releaseSpill()
    etag = nil
    lastModified = nil
    retryAfter = nil
    location = nil
    drained = 0
    abort = nil
    written = 0
    headerBytes = 0
    deniedAddress = nil
    refusedStream = false
  }

  /// A piece of the body; `false` stops the transfer.
  func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard (200...299).contains(status) else {
      drained += bytes.count
      if drained > Self.maxDrained {
        abort = .drainedEnough
        return false
      }
      return true
    }
    // The count is of what the write callback gets: after decompression, as it is produced.
    guard body.count + written + bytes.count <= limit else {
      abort = .tooLarge
      return false
    }
    guard
      request.bodyFile != nil || spill != nil
        || (request.spillFolder != nil && body.count + bytes.count > Self.memoryBuffer)
    else {
      body.append(bytes.assumingMemoryBound(to: UInt8.self))
      return true
    }
    do {
      let file = try request.bodyFile ?? spillFile()
      try FileSystem.writeAll(bytes, to: file, path: "temporary file of \(url.absoluteString)")
    } catch {
      abort = .writeFailed("\(error)")
      return false
    }
    written += bytes.count
    return true
  }

  /// The spill file's descriptor, made at the first byte over the memory buffer with what the
  /// buffer held written to it, and the buffer freed.
  private func spillFile() throws(FileSystemError) -> Int32 {
    if let spill { return spill.descriptor }
    let (descriptor, path) = try FileSystem.createTemporaryFile(
      in: request.spillFolder ?? ".", for: "download")
    spill = (descriptor, SpilledBody(path: path))
    try FileSystem.writeAll(body, to: descriptor, path: path)
    written = body.count
    body = Data()
    return descriptor
  }

  /// Closes the spill file, which its body then removes unless a response kept it.
  func releaseSpill() {
    guard let spill else { return }
    close(spill.descriptor)
    self.spill = nil
  }

  /// The 2xx body for the response: the memory buffer, or the spill file closed and mapped.
  private func finishedBody() throws(FileSystemError) -> (Data, SpilledBody?) {
    guard let spill else { return (body, nil) }
    defer { releaseSpill() }
    let data = try SpilledBody.map(
      descriptor: spill.descriptor, count: written, path: spill.body.path)
    return (data, spill.body)
  }

  /// One header line (the status line included) of the current answer; `false` stops the
  /// transfer, whose headers are over ``maxHeaderBytes``. Parsed as bytes: it runs for every
  /// header of every response, and only five names matter.
  func receiveHeader(_ line: UnsafeRawBufferPointer) -> Bool {
    defer { headerBytes += line.count }
    guard headerBytes + line.count <= Self.maxHeaderBytes else {
      abort = .headerTooLarge
      return false
    }
    if line.starts(with: Self.statusPrefix) {
      if firstLineRead == 0 { firstLineRead = lastProgress }
      // A new answer (after an interim 1xx, the final one): only its headers count.
      resetResponse()
      var digits = line.drop { $0 != UInt8(ascii: " ") }.dropFirst().prefix(3)
      status = 0
      while let digit = digits.popFirst(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) {
        status = status * 10 + Int(digit - UInt8(ascii: "0"))
      }
      return true
    }
    guard let colon = line.firstIndex(of: UInt8(ascii: ":")),
      let header = Self.interesting.first(where: { Self.equalIgnoringCase(line[..<colon], $0.name) }
      )
    else { return true }
    let raw = line[(colon + 1)...].drop(while: Self.isBlank)
    let end = raw.lastIndex { !Self.isBlank($0) }.map { $0 + 1 } ?? raw.startIndex
    let value = String(decoding: raw[raw.startIndex..<end], as: UTF8.self)
    switch header.field {
    case .etag: etag = value
    case .lastModified: lastModified = value
    case .retryAfter: retryAfter = value
    case .location: location = value
    case .contentLength:
      if (200...299).contains(status), request.bodyFile == nil, let declared = Int(value),
        declared <= (request.spillFolder == nil ? limit : Self.memoryBuffer)
      {
        body.reserveCapacity(declared)
      }
    }
    return true
  }

  private static let statusPrefix = Array("HTTP/".utf8)

  /// Space, tab, CR or LF: what surrounds a header value.
  private static func isBlank(_ byte: UInt8) -> Bool {
    byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
  }

  private enum Field { case etag, lastModified, retryAfter, location, contentLength }

  private static let interesting: [(name: [UInt8], field: Field)] = [
    (Array("etag".utf8), .etag), (Array("last-modified".utf8), .lastModified),
    (Array("retry-after".utf8), .retryAfter), (Array("location".utf8), .location),
    (Array("content-length".utf8), .contentLength),
  ]

  /// Whether `name` is `lowercase` in any case (ASCII).
  private static func equalIgnoringCase(_ name: Slice<UnsafeRawBufferPointer>, _ lowercase: [UInt8])
    -> Bool
  {
    name.count == lowercase.count
      && zip(name, lowercase).allSatisfy { ($0 | 0x20) == $1 || $0 == $1 }
  }

  enum Conclusion {
    /// Send the next hop.
    case redirect
    /// Send the same hop again, ``isolated``.
    case again
    case done(Result<DownloadResponse, DownloadFailure>)
  }

  /// How the current hop ended, given curl's result code.
  func conclude(_ code: CURLcode) -> Conclusion {
    guard let easy else { return .done(.failure(.init(.cancelled))) }
    if abort == .tooLarge {
      return .done(
        .failure(
          .init(
            .network(
              .responseTooLarge, message: "the body is over the \(limit)-byte limit"))))
    }
    if abort == .headerTooLarge {
      return .done(
        .failure(
          .init(
            .network(
              .responseHeaderTooLarge,
              message: "the response's headers are over \(Self.maxHeaderBytes / 1024) KiB"))))
    }
    if case .writeFailed(let reason) = abort {
      return .done(
        .failure(.init(.localFailure(reason: "cannot write a temporary file: \(reason)"))))
    }
    // nghttp2's session failed in a libcurl callback (a header block over libcurl's limit):
    // which stream was at fault, libcurl does not say.
    if !isolated, code == CURLE_RECV_ERROR || code == CURLE_HTTP2,
      easy.errorMessage.contains("returned -902")
    {
      isolated = true
      return .again
    }
    if code != CURLE_OK, refusedStream {
      var failure = DownloadFailure(
        .network(
          .networkConnectionLost,
          message: "the server refused the HTTP/2 stream (REFUSED_STREAM) before answering"))
      // The host is held back a moment, as after a 429: every stream refused at once is not
      // sent again at once.
      failure.retryAfter = refusalBackoff * Double.random(in: 0.5...1.5)
      failure.refusedStream = true
      return .done(.failure(failure))
    }
    if code != CURLE_OK, let denied = deniedAddress {
      return .done(
        .failure(
          .init(
            .network(
              .addressDenied,
              message: "the connection for \(url.host ?? "the host") to \(denied.address) is "
                + "refused by the address rule \(denied.rule) (--deny-addresses, "
                + "prefetch.denyAddresses; link-local: --allow-link-local)"))))
    }
    guard code == CURLE_OK || abort == .drainedEnough else {
      var message = easy.errorMessage
      if code == CURLE_OPERATION_TIMEDOUT && timedOutOnDeadline {
        ranOutOfDeadline = true
        message = deadlineFailure.error.message + " (\(message))"
      }
      var error = CurlFailure.error(
        for: code, detail: message, osErrno: Int32(easy.info(CURLINFO_OS_ERRNO)))
      if case .invalidURL(_, let reason) = error {
        error = .invalidURL(url.absoluteString, reason: reason)
      }
      error = namingProxy(error, code: code, curlMessage: message)
      var failure = DownloadFailure(namingHop(error))
      failure.ownCertificateAuthorities = connection.namesCertificateAuthorities
      return .done(.failure(failure))
    }
    let status = easy.info(CURLINFO_RESPONSE_CODE)
    if RedirectChain.redirectStatuses.contains(status), let location {
      return redirect(to: easy.stringInfo(CURLINFO_REDIRECT_URL) ?? location)
    }
    if (200...299).contains(status) || (status == 304 && request.validators != nil) {
      let finished: (Data, SpilledBody?)
      do {
        finished = status == 304 ? (Data(), nil) : try finishedBody()
      } catch {
        return .done(
          .failure(.init(.localFailure(reason: "cannot read a temporary file: \(error)"))))
      }
      return .done(
        .success(
          DownloadResponse(
            status: status, body: finished.0, spilledBody: finished.1, etag: etag,
            lastModified: lastModified, url: url)))
    }
    return .done(
      .failure(
        DownloadFailure(
          .invalidDownloadStatusCode(status), retryAfter: Downloader.retryAfter(retryAfter))))
  }

  /// `error` saying that the proxy, not the origin, could not be found or reached, and which
  /// setting named it: libcurl's words name a host and port, and only the failure class
  /// (`cannotConnectToHost`, `cannotFindHost`) would otherwise read as the origin's. The proxy
  /// is the one libcurl took, from the run's setting or the environment as libcurl reads it
  /// now; shown without its credentials.
  private func namingProxy(_ error: ImageCacheError, code: CURLcode, curlMessage: String)
    -> ImageCacheError
  {
    guard case .network(let failure, let message) = error,
      code == CURLE_COULDNT_RESOLVE_PROXY || code == CURLE_COULDNT_CONNECT,
      let proxy = connection.proxy(
        forScheme: url.scheme ?? "http", environment: ProcessInfo.processInfo.environment),
      code == CURLE_COULDNT_RESOLVE_PROXY || proxy.refusedConnection(curlMessage)
    else { return error }
    let what = code == CURLE_COULDNT_RESOLVE_PROXY ? "found" : "reached"
    return .network(
      failure,
      message: "the proxy \(proxy.url) (\(proxy.setBy)) could not be \(what), so "
        + "\(url.host ?? "the origin") was not tried: \(message); start the proxy or correct "
        + "\(proxy.setBy)")
  }

  /// `error` naming the hop it happened on, when that is not the URL asked for: a redirect's
  /// target has its own host, certificate and connection (SPEC section 5).
  private func namingHop(_ error: ImageCacheError) -> ImageCacheError {
    guard redirects.count > 0, case .network(let failure, let message) = error else {
      return error
    }
    return .network(
      failure,
      message: "at \(url.absoluteString) (after \(redirects.count) "
        + "redirect\(redirects.count == 1 ? "" : "s")): \(message)")
  }

  private func redirect(to location: String) -> Conclusion {
    do throws(ImageCacheError) {
      hop = Hop(try redirects.follow(location))
      return .redirect
    } catch {
      return .done(.failure(.init(error)))
    }
  }
}

/// One request's URL with what the transfer thread asks of it, worked out once: the first
/// hop's when the transfer is made, off that thread.
struct Hop {
  let url: URL
  /// As curl is given it.
  let string: String
  /// Over TLS, where HTTP/2 may multiplex.
  let isHTTPS: Bool

  init(_ url: URL) {
    self.url = url
    string = url.absoluteString
    isHTTPS = url.scheme?.lowercased() == "https"
  }
}
