import Foundation
import XCTest

/// A test with a temporary folder made before each test and removed after it (STYLE: scoped
/// acquire and release). ``LoopbackTestCase`` adds a server to it.
open class TemporaryFolderTestCase: XCTestCase {
  public var temporary: TemporaryDirectory!

  open override func setUpWithError() throws {
    try super.setUpWithError()
    temporary = try TemporaryDirectory()
  }

  open override func tearDown() {
    temporary?.remove()
    super.tearDown()
  }
}
