import Core
import Imaging
import TestSupport
import XCTest

/// verify's judgement of a cache file's content (issue 45).
final class ContentCheckTests: XCTestCase {
  func problem(_ data: Data, level: VerifyLevel = .structure) -> String? {
    guard case .failure(let problem) = ContentCheck(level: level).check(data) else { return nil }
    return problem.description
  }

  func testEveryValidFixtureIsAnImageAtEachLevel() {
    for level in VerifyLevel.allCases {
      for (url, data) in validCacheImages {
        XCTAssertNil(problem(data, level: level), "\(url) at \(level)")
      }
    }
  }

  /// Damage inside the compressed data of a JPEG, PNG, GIF or WebP passes the structure walk and
  /// is found by the full level's decode, which says so.
  func testTheFullLevelFindsDamageInsideTheCompressedDataOfEveryFormatItDecodes() {
    for kind in EntropyDamagedImage.allCases {
      XCTAssertNil(problem(kind.data, level: .structure), "\(kind)")
      let found = problem(kind.data, level: .full)
      XCTAssertTrue(
        found?.hasPrefix(kind.reason) == true && found?.hasSuffix("(full decode)") == true,
        "\(kind): \(found ?? "passed")")
    }
  }

  /// An HTML error page with an inline SVG icon is still an HTML page, not an SVG image; so is
  /// one after a byte-order mark and blank lines.
  func testAnHTMLPageIsAnHTMLPageWhateverItHolds() {
    let pages = [
      "<html><head></head><body><svg width=\"8\" height=\"8\"></svg> Not found</body></html>",
      "\u{FEFF}\n\n  <!doctype HTML><title>Sign in</title>",
    ]
    for page in pages {
      XCTAssertTrue(
        problem(Data(page.utf8))?.hasPrefix("an HTML page") == true, "\(page.debugDescription)")
    }
    XCTAssertNil(
      problem(Data("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"/>".utf8)),
      "an SVG image is no HTML page")
  }

  /// The header level checks the IHDR chunk's CRC: the header is what it reads.
  func testTheHeaderLevelFindsABrokenIHDRChunk() {
    var png = Fixtures.png
    png[20] ^= 0x01
    XCTAssertEqual(problem(png, level: .header), "png: corrupt: CRC mismatch in chunk \"IHDR\"")
  }

  /// Given only the start of a file, the header level asks for the rest when the header runs
  /// past it, instead of calling the file truncated.
  func testAStartTooShortForTheHeaderIsNoVerdict() {
    let start = Fixtures.jpeg.prefix(30)
    XCTAssertNil(ContentCheck(level: .header).check(start, complete: false))
    XCTAssertTrue(problem(start, level: .header)?.hasPrefix("jpeg: truncated") == true)
  }
}
