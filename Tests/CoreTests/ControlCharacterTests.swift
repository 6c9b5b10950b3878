import Core
import XCTest

/// SPEC section 10: text with a control character never goes into a path, a request or onto a
/// terminal as it is.
final class ControlCharacterTests: XCTestCase {
  func testASCIIControlsAreFoundAndTabOnlyWhenAllowed() {
    XCTAssertFalse("https://example.com/a.jpg".containsControlCharacter())
    for text in ["a\nb", "a\rb", "\0", "esc\u{1B}[31m", "del\u{7F}"] {
      XCTAssertTrue(text.containsControlCharacter(), text.debugDescription)
    }
    XCTAssertTrue("a\tb".containsControlCharacter())
    XCTAssertFalse("a\tb".containsControlCharacter(allowingTab: true))
  }

  func testOutsideASCIIC1ControlsAreFoundAndOtherTextIsNot() {
    XCTAssertFalse("https://example.com/фото.jpg".containsControlCharacter())
    XCTAssertTrue("https://example.com/\u{85}.jpg".containsControlCharacter())
    XCTAssertTrue("https://example.com/фото\u{9B}31m".containsControlCharacter())
    // An ASCII control after the first non-ASCII character counts as much as one before it.
    XCTAssertTrue("фото\n".containsControlCharacter())
    XCTAssertFalse("фото\t".containsControlCharacter(allowingTab: true))
  }
}
