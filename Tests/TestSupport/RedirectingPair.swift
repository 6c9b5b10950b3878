import Foundation
import NIOCore
import XCTest

extension XCTestCase {
  /// Two loopback servers for a redirect: a target serving `/img.png` (`image`; by default the
  /// PNG, after `imageDelay`), and a start whose `/moved.png?Q` redirects to the target's
  /// `/img.png?Q` after `redirectDelay`; both shut down when the test ends.
  public func redirectingPair(
    imageDelay: TimeAmount? = nil, redirectDelay: TimeAmount? = nil, image: Route? = nil
  ) throws -> (target: LoopbackServer, start: LoopbackServer) {
    let target = try LoopbackServer(routes: [
      "/img.png": image
        ?? { _ in
          var response = ServerResponse.image(Fixtures.png, type: "image/png")
          response.headDelay = imageDelay
          return response
        }
    ])
    addTeardownBlock { target.shutdown() }
    let start = try LoopbackServer(routes: [
      "/moved.png": { request in
        var response = ServerResponse.redirect(
          to: "http://127.0.0.1:\(target.port)/img.png?\(request.query ?? "")")
        response.headDelay = redirectDelay
        return response
      }
    ])
    addTeardownBlock { start.shutdown() }
    return (target, start)
  }
}
