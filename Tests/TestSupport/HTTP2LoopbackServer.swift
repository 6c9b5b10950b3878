import Foundation

/// An HTTPS server on 127.0.0.1 that speaks HTTP/2 only (ALPN `h2`), with the fixtures'
/// self-signed certificate: Python's `h2` (Debian's `python3-h2`, which `.ci/run` installs)
/// on asyncio. Every request gets
/// `body` after `delay` seconds, so that requests overlap and the server can count how many
/// streams a client keeps open at once, and on how many connections.
///
/// `oversizedHeaders` names a path whose answer carries 200 KB of header lines: over the
/// limits of libcurl 7.88, whose HTTP/2 session then fails with every stream on it. A client
/// that asks for HTTP/1.1 by ALPN gets the same answers over HTTP/1.1. `stalls` names a path
/// whose answer sends its headers and 2,000 of its 100,000 bytes over 2 s, then nothing
/// (over HTTP/2 only). `refuses` names a path whose streams are reset with REFUSED_STREAM before
/// any answer, as a server at its stream limit may (RFC 9113, section 8.7); each still counts
/// as a request.
public final class HTTP2LoopbackServer: Sendable {
  public let port: Int
  private let process: Process
  private let statsPath: String

  public func url(_ path: String) -> String { "https://127.0.0.1:\(port)\(path)" }

  /// What the server saw: requests, the most streams open at once, and connections.
  public struct Stats: Decodable, Sendable {
    public var requests: Int
    public var mostOpen: Int
    public var connections: Int
    /// Requests by path, over either protocol.
    public var paths: [String: Int]
  }

  public init(
    body: Data, delay: TimeInterval, root: String, oversizedHeaders: String = "",
    stalls: String = "", refuses: String = "", maxStreams: Int = 100
  ) throws {
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    let bodyPath = root + "/body"
    FileManager.default.createFile(atPath: bodyPath, contents: body)
    statsPath = root + "/stats.json"
    let script = """
      import asyncio, json, os, ssl, sys
      import h2.config, h2.connection, h2.errors, h2.events, h2.settings
      body_path, certs, delay, stats_path = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
      oversized, stalls, refuses, max_streams = sys.argv[5], sys.argv[6], sys.argv[7], int(sys.argv[8])
      body = open(body_path, "rb").read()
      stats = {"requests": 0, "mostOpen": 0, "connections": 0, "paths": {}}
      open_streams = 0
      big_headers = [("x-filler-%d" % i, "a" * 1000) for i in range(200)]

      def headers_for(path):
          if path == oversized:
              return [(":status", "200")] + big_headers
          return [(":status", "200"), ("content-type", "image/jpeg"),
                  ("content-length", str(len(body)))]

      def count(path):
          stats["paths"][path] = stats["paths"].get(path, 0) + 1

      def save():
          with open(stats_path + ".tmp", "w") as f:
              json.dump(stats, f)
          os.replace(stats_path + ".tmp", stats_path)

      async def serve_http1(reader, writer):
          while True:
              try:
                  head = await reader.readuntil(b"\\r\\n\\r\\n")
              except (asyncio.IncompleteReadError, ConnectionError):
                  break
              path = head.split(b" ")[1].decode()
              stats["requests"] += 1
              count(path)
              save()
              await asyncio.sleep(delay)
              lines = ["HTTP/1.1 200 OK"] + ["%s: %s" % h for h in headers_for(path)[1:]]
              if path == oversized:
                  lines.append("content-length: 0")
              writer.write(("\\r\\n".join(lines) + "\\r\\n\\r\\n").encode())
              if path != oversized:
                  writer.write(body)
              await writer.drain()
          writer.close()

      async def serve(reader, writer):
          global open_streams
          stats["connections"] += 1
          save()
          if writer.get_extra_info("ssl_object").selected_alpn_protocol() != "h2":
              return await serve_http1(reader, writer)
          connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
          # SETTINGS_MAX_CONCURRENT_STREAMS: the streams a connection may carry at once.
          connection.local_settings = h2.settings.Settings(
              client=False,
              initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: max_streams})
          connection.initiate_connection()
          writer.write(connection.data_to_send())

          async def respond(stream, path):
              global open_streams
              await asyncio.sleep(delay)
              open_streams -= 1
              if connection.state_machine.state == h2.connection.ConnectionState.CLOSED:
                  return
              if path == oversized:
                  connection.send_headers(stream, headers_for(path), end_stream=True)
              elif path == stalls:
                  connection.send_headers(stream, [(":status", "200"), ("content-length", "100000")])
                  for _ in range(20):
                      connection.send_data(stream, b"\\xff" * 100)
                      writer.write(connection.data_to_send())
                      await asyncio.sleep(0.1)
              else:
                  connection.send_headers(stream, headers_for(path))
                  connection.send_data(stream, body, end_stream=True)
              writer.write(connection.data_to_send())

          while True:
              try:
                  data = await reader.read(65536)
              except ConnectionError:
                  break
              if not data:
                  break
              for event in connection.receive_data(data):
                  if isinstance(event, h2.events.RequestReceived):
                      open_streams += 1
                      stats["requests"] += 1
                      stats["mostOpen"] = max(stats["mostOpen"], open_streams)
                      count(dict(event.headers)[b":path"].decode())
                      save()
                      path = dict(event.headers)[b":path"].decode()
                      if path == refuses:
                          open_streams -= 1
                          connection.reset_stream(
                              event.stream_id, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
                          continue
                      asyncio.ensure_future(respond(event.stream_id, path))
              writer.write(connection.data_to_send())
          writer.close()

      async def main():
          context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
          context.load_cert_chain(certs + "/cert.pem", certs + "/key.pem")
          context.set_alpn_protocols(["h2", "http/1.1"])
          server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
          save()
          print(server.sockets[0].getsockname()[1], flush=True)
          await server.serve_forever()

      asyncio.run(main())
      """
    // Debian's Python, where `python3-h2` installs (.ci/run), whatever `python3` is first
    // on the PATH.
    (process, port) = try LoopbackPython.start(
      script,
      arguments: [
        bodyPath, Fixtures.directory + "/tls", String(delay), statsPath, oversizedHeaders,
        stalls, refuses, String(maxStreams),
      ],
      python: "/usr/bin/python3")
  }

  /// What the server has seen so far.
  public func stats() throws -> Stats {
    try JSONDecoder().decode(Stats.self, from: Data(contentsOf: URL(fileURLWithPath: statsPath)))
  }

  public func shutdown() { LoopbackPython.stop(process) }
}
