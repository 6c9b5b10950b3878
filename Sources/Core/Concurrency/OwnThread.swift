import Foundation

/// A thread of the tool's own (the transfers, the manifest reader, the line count), started
/// with `pthread_create` and checked. Foundation's `Thread.start()` ignores a failure: under a
/// small address space (`ulimit -v`) the thread never ran and the run waited for it forever,
/// holding the cache's lock (issue 38). A thread that cannot start now ends the process with
/// exit 4, saying why. Its stack is smaller than the default (`ulimit -s`, 8 MiB), so that
/// the tool's threads reserve less of that space.
package enum OwnThread {
  /// Enough for libcurl and OpenSSL, libxml2's reader and the Swift code above them.
  package static let stackSize = 2 << 20

  private final class Start {
    let name: String
    let body: @Sendable () -> Void

    init(name: String, body: @escaping @Sendable () -> Void) {
      self.name = name
      self.body = body
    }
  }

  /// Runs `body` on a new detached thread named `name` (``ThreadName``).
  package static func start(name: String, _ body: @escaping @Sendable () -> Void) {
    let start = Unmanaged.passRetained(Start(name: name, body: body))
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setstacksize(&attributes, stackSize)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let result = pthread_create(
      &thread, &attributes,
      { context in
        let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
        ThreadName.set(start.name)
        start.body()
        return nil
      }, start.toOpaque())
    guard result == 0 else {
      start.release()
      let message =
        "imagecache: cannot start the thread \(name): \(String(cString: strerror(result))); "
        + "the process is short of memory or address space (ulimit -v) or of threads "
        + "(ulimit -u)\n"
      FileHandle.standardError.write(Data(message.utf8))
      exit(ExitStatus.fatalIO.rawValue)
    }
  }
}
