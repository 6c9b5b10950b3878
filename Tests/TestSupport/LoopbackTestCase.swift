import Foundation
import XCTest

/// A test against a loopback server and a temporary folder (``TemporaryFolderTestCase``), both
/// made before each test and removed after it (STYLE: scoped acquire and release, as
/// async-http-client's test base class does). A subclass names its routes; the default serves a
/// JPEG, a PNG and a GIF.
open class LoopbackTestCase: TemporaryFolderTestCase {
  public var server: LoopbackServer!

  /// `/a.jpg`, `/b.png` and `/c.gif`, real images from the fixtures.
  public static let images: [String: Route] = [
    "/a.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") },
    "/b.png": { _ in .image(Fixtures.png, type: "image/png") },
    "/c.gif": { _ in .image(Fixtures.gif, type: "image/gif") },
  ]

  /// What the server answers; override to serve more.
  open var routes: [String: Route] { Self.images }

  open override func setUpWithError() throws {
    try super.setUpWithError()
    server = try LoopbackServer(routes: routes)
  }

  open override func tearDown() {
    server?.shutdown()
    super.tearDown()
  }
}
