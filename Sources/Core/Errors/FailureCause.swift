/// The code a failed system call or library gave under one of our errors, kept as a number
/// so that callers and tests compare it instead of parsing the error's words.
public enum FailureCause: Sendable, Hashable {
  /// A file-system call's `errno`.
  case errno(Int32)
  /// SQLite's (extended) result code, from the state database.
  case sqlite(Int32)

  /// The cause `error` carries (``CauseProviding``), if it carries one.
  package init?(of error: any Error) {
    guard let cause = (error as? any CauseProviding)?.cause else { return nil }
    self = cause
  }
}

/// An error that knows the code under it, when there is one.
package protocol CauseProviding: Error {
  var cause: FailureCause? { get }
}
