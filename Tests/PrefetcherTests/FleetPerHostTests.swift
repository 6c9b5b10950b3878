import HTTP
import Pipeline
import Prefetcher
import XCTest

/// `fleetPerHostConcurrency` (issue 28 item 5): a fleet-wide limit to one host, shared out.
final class FleetPerHostTests: XCTestCase {
  func testEachShardTakesItsShareRoundedDownAndAtLeastOne() {
    XCTAssertEqual(PrefetchConfiguration.perHostShare(ofFleet: 12, shards: 4), 3)
    XCTAssertEqual(PrefetchConfiguration.perHostShare(ofFleet: 10, shards: 4), 2, "never over")
    XCTAssertEqual(PrefetchConfiguration.perHostShare(ofFleet: 6, shards: 1), 6)
    XCTAssertEqual(PrefetchConfiguration.perHostShare(ofFleet: 3, shards: 8), 1, "never none")
    for fleet in 1...40 {
      for shards in 1...fleet {
        XCTAssertLessThanOrEqual(
          PrefetchConfiguration.perHostShare(ofFleet: fleet, shards: shards) * shards, fleet)
      }
    }
  }
}
