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
}
