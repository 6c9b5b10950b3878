import Foundation
import XCTest

/// Whether every test must run (`IMAGECACHE_REQUIRE_ENGINES=1`, which `.ci/run` sets): CI has
/// what a developer's machine may lack (the test programs, root, a tmpfs to mount, `chattr +i`),
/// so there a test that cannot do what it checks is a failure, never a skip.
public var enginesAreRequired: Bool {
  ProcessInfo.processInfo.environment["IMAGECACHE_REQUIRE_ENGINES"] == "1"
}

/// Ends a test that this machine cannot run, saying why: a skip on a developer's machine, a
/// failure at the caller's line where ``enginesAreRequired``. A test that cannot provoke what it
/// checks ends here, never in a silent `return` or a printed note.
public func requireOrSkip(
  _ reason: String, file: StaticString = #filePath, line: UInt = #line
) throws -> Never {
  guard enginesAreRequired else { throw XCTSkip(reason, file: file, line: line) }
  XCTFail("IMAGECACHE_REQUIRE_ENGINES=1 but \(reason)", file: file, line: line)
  throw RequiredButUnavailable(reason: reason)
}

/// What ``requireOrSkip(_:file:line:)`` throws after its failure, to stop the test there. Not
/// an `XCTSkip`: CI's summary then counts no test as skipped.
public struct RequiredButUnavailable: Error, CustomStringConvertible {
  public var reason: String
  public var description: String { "cannot run here: \(reason)" }
}
