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

/// Issue 26, item 4: how a URL's password is masked in text shown to people.
final class URLPasswordMaskingTests: XCTestCase {
  func testThePasswordOfEveryURLInTheTextIsMaskedAndTheRestKept() {
    let cases: [(String, String)] = [
      ("https://bob:pw@a.com/x.jpg", "https://bob:***@a.com/x.jpg"),
      ("http://bob:p@ss@a.com:8080/x?y=@z", "http://bob:***@a.com:8080/x?y=@z"),
      (
        "invalid URL \"ftp://u:p@h/a\" then https://v:q@i/",
        "invalid URL \"ftp://u:***@h/a\" then https://v:***@i/"
      ),
      ("https://bob@a.com/x.jpg", "https://bob@a.com/x.jpg"),
      ("https://a.com/x@2x.jpg", "https://a.com/x@2x.jpg"),
      ("mail me at bob@a.com", "mail me at bob@a.com"),
      ("https://bob:***@a.com/", "https://bob:***@a.com/"),
      ("https://:pw@a.com", "https://:***@a.com"),
      ("no url here", "no url here"),
    ]
    for (text, expected) in cases {
      XCTAssertEqual(text.maskingURLPasswords, expected, text)
    }
  }
}
