import Core
import XCTest

/// SPEC section 1: the file name of a cache key. MD5 digests are reference values computed
/// independently (Python's hashlib) for each key.
final class CacheFileNameTests: XCTestCase {
  func testSpecVectors() {
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/a.png"),
      "8c11d92f07c76baf29e49afd2301deb2.png")
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/img/photo.jpg?size=large"),
      "4d71d9e1d36571b22d5dd89b751927a9.jpg")
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/noext"),
      "e53566be7e08af71a1135ac4a1830724")
    XCTAssertEqual(CacheFileName.fileName(forKey: ""), "d41d8cd98f00b204e9800998ecf8427e")
  }

  func testAKeyIsHashedUpToAnEmbeddedNUL() {
    // SD hashes the key's UTF8String with strlen: what follows a NUL is not hashed.
    XCTAssertEqual(
      CacheFileName.md5Hex("https://example.com/a\u{0}b.png"), "cd69b81ea00cc2798797293cbc92d643")
    XCTAssertEqual(CacheFileName.md5Hex("\u{0}x"), "d41d8cd98f00b204e9800998ecf8427e")
  }

  func testDotOnlyInQueryGivesNoExtension() {
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/staticmap?center=48.85,2.35&format=png"),
      "e44b7051315e70249acbed7548183312")
  }

  func testPercentEncodedNULIsRemovedFromExtension() {
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/a.jpg00%00"),
      "971d6e2e5ed2d6c1aa3571be509a013c.jpg00")
  }

  func testNonASCIIPathKeepsItsExtension() {
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/фото.jpg"),
      "4077132a226dad2ee087eb8fdf397fde.jpg")
  }

  func testPercentEncodedPathIsDecodedBeforeTakingTheExtension() {
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/%E5%9B%BE%E7%89%87.webp"),
      "72ae2ae9fd3f80ba09909f720576c60e.webp")
    // An encoded slash becomes part of the decoded path; the extension is still the last one.
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/a%2Fb.gif"),
      "0a7a00a3f3bd2bf95e8126726d9e4c3a.gif")
  }

  func testFragmentIsNotPartOfTheExtension() {
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/a.png#frag.jpg"),
      "24bd8d80afc2ae3af0b80bc4d9ef66e7.png")
  }

  func testColonIsRemovedFromExtension() {
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/a:b.p:ng"),
      "6c0a71991aed9bad692c5d1939ad9855.png")
  }

  func testKeyThatIsNotAURLUsesTheRawStringExtension() {
    // A space in the host makes this unparsable as a URL, so the raw string's extension (after
    // the last dot of the last path component, query text included) is used.
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "http://a b.com/x.png?y=1.gif"),
      "211537c7cb287f49ccd79493c7b6d91d.gif")
  }

  func testTrailingSlashAndHiddenNames() {
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/img.jpg/"),
      "e1611f6cab582356d6dfe7f747cd4c70.jpg")
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/.hidden"),
      "3f087077b708186b5d5e5b64482954dc")
  }

  func testExtensionLongerThan222CharactersIsDropped() {
    let long = "https://example.com/a." + String(repeating: "x", count: 223)
    XCTAssertEqual(CacheFileName.fileName(forKey: long), "571333d059d7a87a40cd086cec552e8b")
    let limit = "https://example.com/a." + String(repeating: "x", count: 222)
    XCTAssertEqual(
      CacheFileName.fileName(forKey: limit),
      "5d2a6dbe5ec33039fe13e38bcd2d11c6." + String(repeating: "x", count: 222))
    XCTAssertEqual(CacheFileName.maxExtensionLength, 222)
  }

  func testExtensionCaseIsKept() {
    XCTAssertEqual(
      CacheFileName.fileName(forKey: "https://example.com/a.JPEG"),
      "622229d9fbb2cd63bdd49ecf21baca2a.JPEG")
  }

  func testLegacySchemes() {
    let key = "https://example.com/img/photo.jpg?size=large"
    let digest = "4d71d9e1d36571b22d5dd89b751927a9"
    XCTAssertEqual(CacheFileName.fileName(forKey: key, scheme: .noExtension), digest)
    XCTAssertEqual(
      CacheFileName.fileName(forKey: key, scheme: .rawStringExtension), digest + ".jpg?size=large")
    XCTAssertEqual(
      CacheFileName.fileName(forKey: key, scheme: .uncappedURLExtension), digest + ".jpg")
    XCTAssertEqual(
      CacheFileName.legacyFileNames(forKey: key), [digest, digest + ".jpg?size=large"])

    let long = "https://example.com/a." + String(repeating: "x", count: 223)
    XCTAssertEqual(
      CacheFileName.fileName(forKey: long, scheme: .uncappedURLExtension),
      "571333d059d7a87a40cd086cec552e8b." + String(repeating: "x", count: 223))
  }

  /// A key without an extension has one name in every scheme, the digest alone (never
  /// `digest.`): there is no legacy name to migrate it from.
  func testAKeyWithoutAnExtensionHasNoLegacyName() {
    let key = "https://example.com/noext"
    let digest = "e53566be7e08af71a1135ac4a1830724"
    for scheme in LegacyScheme.allCases {
      XCTAssertEqual(CacheFileName.fileName(forKey: key, scheme: scheme), digest, "\(scheme)")
    }
    XCTAssertEqual(CacheFileName.legacyFileNames(forKey: key), [])
  }

  /// The names `migrate` and `stats` count as legacy, which SD 5 never writes: the digest
  /// alone, or an extension holding query text (`?`, `&`, `=`) or a colon. SD 5's names are
  /// not, nor is anything without 32 lowercase hex digits first.
  func testLegacyNamesAreTheBareDigestOrAnExtensionWithQueryTextOrAColon() {
    let digest = "4d71d9e1d36571b22d5dd89b751927a9"
    XCTAssertTrue(CacheFileName.isLegacyName(digest))
    for ext in ["jpg?size=large", "p:ng", "a&b", "v=2"] {
      XCTAssertTrue(CacheFileName.isLegacyName(digest + "." + ext), ext)
    }
    for name in [
      digest + ".jpg", digest + ".jpeg", digest.uppercased(), digest.uppercased() + ".jpg?v=1",
      "notes.txt", String(digest.dropLast()),
    ] {
      XCTAssertFalse(CacheFileName.isLegacyName(name), name)
    }
  }

  /// A variant is written under each name an app looks for it by: one name when SD before
  /// iOS 17 names the key as iOS 17 does, both when they differ (raw braces: the older NSURL
  /// refused the key, and its raw string's extension, query and all, names it).
  func testAVariantIsWrittenUnderEachNameOnce() {
    XCTAssertEqual(
      CacheFileName.variantFileNames(forKey: "https://example.com/a.png"),
      ["8c11d92f07c76baf29e49afd2301deb2.png"])
    let braces = "https://example.com/a.png?v={1}"
    let digest = CacheFileName.md5Hex(braces)
    XCTAssertEqual(
      CacheFileName.variantFileNames(forKey: braces), [digest + ".png", digest + ".png?v={1}"])
  }
}
