import Foundation

/// Running out of file descriptors (`EMFILE`: this process's limit, `ulimit -n`; `ENFILE`:
/// the system's table). Every later download and store would fail the same way, one URL after
/// another, so it ends the run as a full disk does (exit 4), naming the limit and how to raise
/// it (issue 38).
public enum OpenFileLimit {
  /// Whether `errno` says the descriptors ran out.
  public static func isExhausted(errno: Int32) -> Bool { errno == EMFILE || errno == ENFILE }

  /// Whether a library's message (libcurl's, which keeps no errno) says they ran out.
  package static func isExhausted(message: String) -> Bool {
    [EMFILE, ENFILE].contains { message.contains(String(cString: strerror($0))) }
  }

  /// `EMFILE` or `ENFILE` when no descriptor can be opened now, else `nil`: for a failure that
  /// keeps no errno (libcurl's socket that could not be made is "Couldn't connect to server").
  package static func probe() -> Int32? {
    let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
    guard descriptor < 0 else {
      close(descriptor)
      return nil
    }
    let error = errno
    return isExhausted(errno: error) ? error : nil
  }

  /// Which limit was reached, and how to raise it.
  package static func advice(errno: Int32) -> String {
    guard errno != ENFILE else {
      return "the system's table of open files is full (fs.file-max); close files elsewhere "
        + "or raise it with sysctl"
    }
    var limit = rlimit()
    let current =
      getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0
      ? "\(limit.rlim_cur)" : "unknown"
    return "the process's limit on open files (RLIMIT_NOFILE) is \(current): raise it with "
      + "'ulimit -n' (LimitNOFILE= in a systemd unit), or lower --concurrency"
  }
}
