import Foundation

/// An HTTPS server on 127.0.0.1 (by default with the self-signed certificate of
/// `Tests/Fixtures/tls`): Python's `http.server` behind `ssl`, serving the files of a folder,
/// started by a test and stopped by it. (The product has no TLS server code of its own, and the tests need none.)
public final class TLSLoopbackServer: Sendable {
  public let port: Int
  private let process: Process

  public func url(_ path: String) -> String { "https://127.0.0.1:\(port)\(path)" }

  /// Serves `files` (name to bytes) from a temporary folder under `root`, with the
  /// `cert.pem` and `key.pem` of `certificates` (default: the fixtures' self-signed pair).
  public init(
    files: [String: Data], root: String, certificates: String = Fixtures.directory + "/tls"
  ) throws {
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    for (name, data) in files {
      FileManager.default.createFile(atPath: root + "/" + name, contents: data)
    }
    let script = """
      import functools, http.server, ssl, sys
      handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
      handler.func.log_message = lambda *args: None
      server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
      context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
      context.load_cert_chain(sys.argv[2] + "/cert.pem", sys.argv[2] + "/key.pem")
      server.socket = context.wrap_socket(server.socket, server_side=True)
      print(server.server_address[1], flush=True)
      server.serve_forever()
      """
    (process, port) = try LoopbackPython.start(script, arguments: [root, certificates])
  }

  public func shutdown() { LoopbackPython.stop(process) }
}

/// A loopback server written in Python, which a test starts and stops.
enum LoopbackPython {
  /// Runs `script` with `arguments` and waits for the port it prints on its first line.
  static func start(_ script: String, arguments: [String], python: String = "python3") throws
    -> (Process, Int)
  {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [python, "-c", script] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    var line = Data()
    while !line.contains(UInt8(ascii: "\n")) {
      let chunk = output.fileHandleForReading.availableData
      if chunk.isEmpty { break }
      line += chunk
    }
    line.removeAll { $0 == UInt8(ascii: "\n") }
    guard let port = Int(String(decoding: line, as: UTF8.self)) else {
      process.terminate()
      throw CocoaError(
        .fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "the loopback server did not start"]
      )
    }
    return (process, port)
  }

  static func stop(_ process: Process) {
    // SIGKILL: a test process may hand its children a signal mask that blocks SIGTERM.
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
  }
}
