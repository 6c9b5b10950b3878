import Foundation

/// An HTTP forward proxy on 127.0.0.1 that writes down what passes through it: Python's
/// `socketserver`, started by a test and stopped by it. It forwards `GET http://...` requests
/// and tunnels `CONNECT host:port`, to loopback addresses only (any other target is answered
/// 403 and never contacted: tests send no traffic off the machine).
public final class LoopbackProxy: Sendable {
  public let port: Int
  private let process: Process
  private let log: String

  /// `http://127.0.0.1:<port>`, for `--proxy`.
  public var url: String { "http://127.0.0.1:\(port)" }

  /// The request lines that came through, in order: `GET http://127.0.0.1:8080/a.jpg HTTP/1.1`
  /// or `CONNECT 127.0.0.1:8443 HTTP/1.1`. Each is written before the request is forwarded, so
  /// once the client has its answer, its line is here.
  public var requestLines: [String] {
    let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
    return text.split(separator: "\n").map(String.init)
  }

  /// Starts the proxy; it writes its log in `folder`.
  public init(folder: String) throws {
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    log = folder + "/proxy.log"
    FileManager.default.createFile(atPath: log, contents: Data())
    let script = """
      import select, socket, socketserver, sys, threading
      from urllib.parse import urlsplit
      LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
      lock = threading.Lock()
      def record(line):
          with lock, open(sys.argv[1], "a") as log:
              log.write(line + "\\n")
      def relay(a, b):
          sockets = [a, b]
          while True:
              readable, _, _ = select.select(sockets, [], [], 30)
              if not readable:
                  return
              for s in readable:
                  data = s.recv(65536)
                  if not data:
                      return
                  (b if s is a else a).sendall(data)
      class Handler(socketserver.StreamRequestHandler):
          def handle(self):
              line = self.rfile.readline(65536).decode("latin-1").rstrip("\\r\\n")
              headers = []
              while True:
                  header = self.rfile.readline(65536)
                  if header in (b"\\r\\n", b"\\n", b""):
                      break
                  headers.append(header)
              record(line)
              method, target, version = line.split(" ", 2)
              if method == "CONNECT":
                  host, port = target.rsplit(":", 1)
                  if host not in LOOPBACK:
                      return self.wfile.write(b"HTTP/1.1 403 Forbidden\\r\\n\\r\\n")
                  upstream = socket.create_connection((host.strip("[]"), int(port)))
                  self.wfile.write(b"HTTP/1.1 200 Connection established\\r\\n\\r\\n")
                  self.wfile.flush()
                  return relay(self.connection, upstream)
              parts = urlsplit(target)
              if parts.scheme != "http" or parts.hostname not in LOOPBACK:
                  return self.wfile.write(b"HTTP/1.1 403 Forbidden\\r\\nContent-Length: 0\\r\\n\\r\\n")
              upstream = socket.create_connection((parts.hostname, parts.port or 80))
              path = parts.path or "/"
              if parts.query:
                  path += "?" + parts.query
              request = f"{method} {path} {version}\\r\\n".encode("latin-1")
              for header in headers:
                  name = header.split(b":", 1)[0].strip().lower()
                  if name not in (b"connection", b"proxy-connection", b"keep-alive"):
                      request += header
              upstream.sendall(request + b"Connection: close\\r\\n\\r\\n")
              while True:
                  data = upstream.recv(65536)
                  if not data:
                      break
                  self.wfile.write(data)
              upstream.close()
      class Server(socketserver.ThreadingTCPServer):
          daemon_threads = True
          allow_reuse_address = True
      server = Server(("127.0.0.1", 0), Handler)
      print(server.server_address[1], flush=True)
      server.serve_forever()
      """
    (process, port) = try LoopbackPython.start(script, arguments: [log])
  }

  public func shutdown() { LoopbackPython.stop(process) }
}
