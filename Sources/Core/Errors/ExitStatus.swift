/// The exit codes of SPEC section 6 (128 + a signal aside, which interrupted runs exit with).
public enum ExitStatus: Int32, Sendable {
  case success = 0
  case someURLsFailed = 1
  case usage = 2
  case locked = 3
  case fatalIO = 4
}

/// An error of imagecache's own that ends a command: its ``exitStatus`` is the one place that
/// says which exit code it ends with (SPEC section 6), and its description is what the command
/// line says after `imagecache: `.
package protocol ExitStatusProviding: Error, CustomStringConvertible {
  var exitStatus: ExitStatus { get }
}
