import CCurl
import Core
import Foundation

/// A libcurl easy handle and its error buffer, reused from transfer to transfer.
final class EasyHandle {
  let handle: UnsafeMutableRawPointer
  private let errorBuffer: UnsafeMutablePointer<CChar>
  private var headerList: UnsafeMutablePointer<curl_slist>?
  private var reused = false

  init?() {
    guard let handle = curl_easy_init() else { return nil }
    self.handle = handle
    errorBuffer = .allocate(capacity: Int(ic_error_size))
  }

  deinit {
    curl_easy_cleanup(handle)
    curl_slist_free_all(headerList)
    errorBuffer.deallocate()
  }

  /// curl's message for the last failure, when it wrote one.
  var errorMessage: String { String(cString: errorBuffer) }

  /// Sets what stays the same for every hop of `transfer`.
  func prepare(
    for transfer: Transfer, connection: Connection, cookies: UnsafeMutableRawPointer?
  ) {
    if reused { curl_easy_reset(handle) }
    reused = true
    errorBuffer[0] = 0
    let context = Unmanaged.passUnretained(transfer).toOpaque()
    ic_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer)
    ic_easy_setopt_write_function(handle, CURLOPT_WRITEFUNCTION, receiveBody)
    ic_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, context)
    ic_easy_setopt_write_function(handle, CURLOPT_HEADERFUNCTION, receiveHeader)
    ic_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, context)
    ic_easy_setopt_opensocket_function(handle, openSocket)
    ic_easy_setopt_pointer(handle, CURLOPT_OPENSOCKETDATA, context)
    // libcurl 7.88 resends a request whose HTTP/2 stream the server refused, up to five times
    // at once on fresh connections, with no back-off: only its verbose text says so. The
    // transfer is stopped at the resend instead (no new socket; on a connection it has, before
    // the request is sent), and the refusal is one attempt of the URL's, retried after a
    // back-off. Verbose is on only for the hops that may go over HTTP/2 (``setHop``).
    ic_easy_setopt_debug_function(handle, noticeRefusedStream)
    ic_easy_setopt_pointer(handle, CURLOPT_DEBUGDATA, context)
    ic_easy_setopt_prereq_function(handle, stopRefusedResend)
    ic_easy_setopt_pointer(handle, CURLOPT_PREREQDATA, context)
    Self.setLimits(
      handle, idleTimeout: transfer.idleTimeout, limit: transfer.limit, connection: connection,
      allowInvalidSSLCertificates: transfer.request.allowInvalidSSLCertificates)
    // Redirects are followed here, hop by hop, so that each one is checked (scheme, count,
    // credentials).
    ic_easy_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0)
    // curl(1)'s receive buffer: half the reads and write callbacks of the 16 KiB default.
    ic_easy_setopt_long(handle, CURLOPT_BUFFERSIZE, 100 * 1024)
    ic_easy_setopt_pointer(handle, CURLOPT_SHARE, cookies)
    if cookies != nil { ic_easy_setopt_string(handle, CURLOPT_COOKIEFILE, "") }
  }

  /// What every request sets, images and documents alike (SPEC sections 2 and 6): HTTP only,
  /// the connect timeout and the idle timeout (as "under 1 byte/s for that many seconds": a
  /// backstop, since that is a 5-second average; the loop ends an idle transfer on time),
  /// the size limit on a declared size (the streamed count is the write callback's, after
  /// decompression; "" accepts every encoding curl was built with), the CA certificates and
  /// proxy of `connection`, and the TLS option.
  private static func setLimits(
    _ handle: UnsafeMutableRawPointer, idleTimeout: TimeInterval, limit: Int,
    connection: Connection, allowInvalidSSLCertificates: Bool
  ) {
    ic_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
    ic_easy_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
    ic_easy_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(idleTimeout * 1000))
    ic_easy_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, 1)
    ic_easy_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, max(1, Int(idleTimeout.rounded(.up))))
    ic_easy_setopt_off(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(limit))
    ic_easy_setopt_string(handle, CURLOPT_ACCEPT_ENCODING, "")
    if let bundle = connection.caBundle { ic_easy_setopt_string(handle, CURLOPT_CAINFO, bundle) }
    if let folder = connection.caDirectory {
      ic_easy_setopt_string(handle, CURLOPT_CAPATH, folder)
    }
    if let proxy = connection.proxy { ic_easy_setopt_string(handle, CURLOPT_PROXY, proxy) }
    if let hosts = connection.noProxy { ic_easy_setopt_string(handle, CURLOPT_NOPROXY, hosts) }
    if allowInvalidSSLCertificates {
      ic_easy_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 0)
      ic_easy_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 0)
    }
  }

  /// Sets the URL, headers and remaining deadline of the transfer's next request.
  func setHop(for transfer: Transfer, timeoutMilliseconds: Int) {
    transfer.resetResponse()
    ic_easy_setopt_string(handle, CURLOPT_URL, transfer.hop.string)
    ic_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, timeoutMilliseconds)
    // Over TLS, wait for a connection being set up to say whether it multiplexes (HTTP/2)
    // rather than opening another.
    let multiplexes = transfer.hop.isHTTPS && !transfer.isolated
    ic_easy_setopt_long(handle, CURLOPT_PIPEWAIT, multiplexes ? 1 : 0)
    // Only an HTTP/2 stream can be refused: libcurl formats its verbose text for no other.
    ic_easy_setopt_long(handle, CURLOPT_VERBOSE, multiplexes ? 1 : 0)
    ic_easy_setopt_long(
      handle, CURLOPT_HTTP_VERSION, transfer.isolated ? ic_http_version_1_1 : ic_http_version_2tls)
    curl_slist_free_all(headerList)
    headerList = nil
    for line in transfer.headerLines() { headerList = curl_slist_append(headerList, line) }
    ic_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList)
    errorBuffer[0] = 0
  }

  /// Drops the request's header list once the transfer is over.
  func release() {
    ic_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, nil)
    curl_slist_free_all(headerList)
    headerList = nil
  }

  /// An integer the transfer reported (`CURLINFO_RESPONSE_CODE`...).
  func info(_ info: CURLINFO) -> Int {
    var value = 0
    ic_easy_getinfo_long(handle, info, &value)
    return value
  }

  /// A 64-bit count the transfer reported (`CURLINFO_STARTTRANSFER_TIME_T`, microseconds...).
  func offInfo(_ info: CURLINFO) -> Int64 {
    var value: curl_off_t = 0
    ic_easy_getinfo_off_t(handle, info, &value)
    return Int64(value)
  }

  /// The server's time to first byte of the last hop, in nanoseconds: from the request sent
  /// (the connection and TLS set up) to the answer's first byte, or `nil` when none came.
  var firstByteNanoseconds: UInt64? {
    let start = offInfo(CURLINFO_STARTTRANSFER_TIME_T)
    let sent = offInfo(CURLINFO_PRETRANSFER_TIME_T)
    guard start > 0, start >= sent else { return nil }
    return UInt64(start - sent) * 1000
  }

  /// Milliseconds since data last arrived on the transfer's connection, as the kernel counts
  /// them (``ReadLag``); `nil` when no connection is left open or the kernel does not say. Read
  /// while the handle is still in the multi handle, which keeps the connection.
  var connectionIdleMilliseconds: Int? {
    var socket = ic_socket_bad
    guard ic_easy_getinfo_socket(handle, &socket) == CURLE_OK, socket != ic_socket_bad else {
      return nil
    }
    let idle = ic_tcp_last_data_received(socket)
    return idle >= 0 ? idle : nil
  }

  /// A string the transfer reported (`CURLINFO_REDIRECT_URL`...), if any.
  func stringInfo(_ info: CURLINFO) -> String? {
    var value: UnsafeMutablePointer<CChar>?
    ic_easy_getinfo_string(handle, info, &value)
    return value.map { String(cString: $0) }
  }
}

/// Whether a perform delivered data to a transfer: written by the write callbacks and read by
/// the loop, on the loop thread alone.
final class PerformActivity: @unchecked Sendable {
  var delivered = false
}

private let receiveBody: curl_write_callback = { data, size, count, context in
  let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
  let length = size * count
  transfer.activity?.delivered = true
  transfer.lastProgress = DispatchTime.now().uptimeNanoseconds
  guard let data, length > 0 else { return length }
  if let bandwidth = transfer.bandwidth, !bandwidth.admit(length, for: transfer) {
    transfer.pausedForBandwidth = true
    return ic_writefunc_pause
  }
  return transfer.receiveBody(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
}

private let receiveHeader: curl_write_callback = { data, size, count, context in
  let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
  let length = size * count
  transfer.activity?.delivered = true
  transfer.lastProgress = DispatchTime.now().uptimeNanoseconds
  guard let data, length > 0 else { return length }
  return transfer.receiveHeader(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
}

/// Every connection libcurl opens, to an origin or a proxy, on every hop: the resolved address
/// is checked against the run's ``AddressRules`` before the socket exists. A refused address
/// is kept for the transfer's failure and libcurl is told that no socket could be made (it
/// tries the name's next address, if any, and otherwise fails as it cannot connect).
private let openSocket: curl_opensocket_callback = { context, _, address in
  guard let context, let address else { return ic_socket_bad }
  let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
  // libcurl's own resend of a refused stream: not on a new connection.
  if transfer.refusedStream { return ic_socket_bad }
  var bytes = [UInt8](repeating: 0, count: 16)
  let length = Int(ic_sockaddr_bytes(address, &bytes))
  if length > 0 {
    let ip = Array(bytes.prefix(length))
    if let rule = transfer.addressRules.rule(refusing: ip) {
      transfer.deniedAddress = (AddressRange.text(of: ip), rule)
      return ic_socket_bad
    }
  }
  return ic_open_socket(address)
}

/// libcurl's words when it is about to resend a request whose stream was refused on a
/// connection of its own (`Curl_retry_request`, 7.88), only ever said as verbose text. A
/// stream refused on a connection it shared is resent once as "Connection died", as are the
/// streams of a session that failed (a header block over libcurl's limit): that resend is
/// left to libcurl, which cannot tell the two apart, and the next refusal is stopped here.
private let refusedStreamText = Array("REFUSED_STREAM".utf8)

private let noticeRefusedStream: curl_debug_callback = { _, type, text, size, context in
  guard type == CURLINFO_TEXT, let text, let context, size >= refusedStreamText.count else {
    return 0
  }
  let bytes = UnsafeRawBufferPointer(start: text, count: refusedStreamText.count)
  if bytes.elementsEqual(refusedStreamText) {
    Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().refusedStream = true
  }
  return 0
}

/// Aborts a transfer that libcurl is resending after a refused stream, before the request
/// goes out on a connection it already has (a new one is refused in ``openSocket``).
private let stopRefusedResend: curl_prereq_callback = { context, _, _, _, _ in
  guard let context else { return ic_prereq_ok }
  let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
  return transfer.refusedStream ? ic_prereq_abort : ic_prereq_ok
}
