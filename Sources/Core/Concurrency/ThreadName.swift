import CFileStat

/// Names the calling thread as `top -H`, `ps -L` and `/proc/PID/task/*/comm` show it.
/// Foundation's `Thread.name`, set before the thread starts, never reaches the kernel on Linux.
package enum ThreadName {
  /// At most 15 bytes (the kernel's limit); a longer name is cut, at a byte.
  package static func set(_ name: String) {
    var bytes = Array(name.utf8.prefix(15))
    bytes.append(0)
    _ = bytes.withUnsafeBufferPointer { buffer in
      buffer.withMemoryRebound(to: CChar.self) { ic_set_thread_name($0.baseAddress!) }
    }
  }
}
