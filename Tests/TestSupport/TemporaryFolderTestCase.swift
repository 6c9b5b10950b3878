import Foundation
import XCTest

/// A test with a temporary folder made before each test and removed after it (STYLE: scoped
/// acquire and release), and the file systems and immutable files it set up in that folder
/// (``ScratchFileSystems``), undone first. ``LoopbackTestCase`` adds a server to it.
open class TemporaryFolderTestCase: XCTestCase {
  public var temporary: TemporaryDirectory!
  public var fileSystems: ScratchFileSystems!

  open override func setUpWithError() throws {
    try super.setUpWithError()
    temporary = try TemporaryDirectory()
    fileSystems = ScratchFileSystems()
  }

  open override func tearDown() {
    fileSystems?.undo()
    temporary?.remove()
    super.tearDown()
  }

  /// The binary run with `arguments` as the unprivileged user nobody (uid and gid 65534) when
  /// the tests run as root, who may write anywhere (as themselves otherwise): the temporary
  /// folder, and the other folders `sharing` names, are opened to every user for it.
  public func runUnprivileged(_ arguments: [String], sharing folders: [String] = []) throws
    -> CommandResult
  {
    try ImageCacheBinary.runUnprivileged(arguments, sharing: [temporary.path] + folders)
  }
}
