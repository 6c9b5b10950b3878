import Core
import XCTest

/// SD 5.21.5's derived keys for thumbnails and transformers (issue 12): the issue's vectors.
final class DerivedKeyTests: XCTestCase {
  func testThumbnailKeysGoBeforeTheExtensionOfTheDecodedPath() {
    XCTAssertEqual(
      DerivedKey.key(for: "https://a.com/p/x.jpg?w=1", thumbnail: (100, 100)),
      "https://a.com/p/x-Thumbnail(%7B100.000000,100.000000%7D,1).jpg?w=1")
    XCTAssertEqual(
      DerivedKey.key(
        for: "https://a.com/p/x.jpg?w=1", thumbnail: (100, 100), preserveAspectRatio: false),
      "https://a.com/p/x-Thumbnail(%7B100.000000,100.000000%7D,0).jpg?w=1")
  }

  func testAKeyWithoutAnExtensionGetsTheSuffixAppendedRaw() {
    XCTAssertEqual(
      DerivedKey.key(for: "https://a.com/p/x?w=1", thumbnail: (100, 100)),
      "https://a.com/p/x?w=1-Thumbnail({100.000000,100.000000},1)")
  }

  func testTransformersFollowTheThumbnailAndJoinWithDashes() {
    let red = ImageTransformer.Color(hex: "#ff0000")!
    XCTAssertEqual(
      DerivedKey.key(
        for: "https://a.com/p/x.jpg?w=1",
        transformers: [
          .resizing(width: 200, height: 200, scaleMode: .aspectFill),
          .tint(color: red, blendMode: 18),
        ]),
      "https://a.com/p/x-SDImageResizingTransformer(%7B200.000000,200.000000%7D,2)"
        + "-SDImageTintTransformer(%23ffff0000,18).jpg?w=1")
    XCTAssertEqual(
      DerivedKey.key(
        for: "https://a.com/x.png", thumbnail: (64, 32),
        transformers: [.flipping(horizontal: true, vertical: false)]),
      "https://a.com/x-Thumbnail(%7B64.000000,32.000000%7D,1)-SDImageFlippingTransformer(1,0).png")
  }

  func testEveryTransformerPrintsItsKeyAsSDDoes() {
    XCTAssertEqual(
      ImageTransformer.cropping(x: 1, y: 2, width: 30, height: 40).key,
      "SDImageCroppingTransformer({1.000000,2.000000,30.000000,40.000000})")
    XCTAssertEqual(
      ImageTransformer.rotation(angle: .pi / 2, fitSize: true).key,
      "SDImageRotationTransformer(1.570796,1)")
    XCTAssertEqual(
      ImageTransformer.roundCorner(radius: 8, corners: .all, borderWidth: 1, borderColor: nil).key,
      "SDImageRoundCornerTransformer(8.000000,18446744073709551615,1.000000,(null))")
    XCTAssertEqual(
      ImageTransformer.roundCorner(
        radius: 4, corners: [.topLeft, .bottomRight], borderWidth: 0,
        borderColor: .init(hex: "#80112233")
      ).key,
      "SDImageRoundCornerTransformer(4.000000,9,0.000000,#80112233)")
    XCTAssertEqual(ImageTransformer.blur(radius: 2.5).key, "SDImageBlurTransformer(2.500000)")
  }

  func testSpacesAndHashesInThePathAreReencoded() {
    XCTAssertEqual(
      DerivedKey.key(for: "https://a.com/my%20photo.jpg#frag", thumbnail: (10, 10)),
      "https://a.com/my%20photo-Thumbnail(%7B10.000000,10.000000%7D,1).jpg#frag")
    // A key that is not a URL: the raw string's extension, braces kept.
    XCTAssertEqual(
      DerivedKey.key(for: "avatars/42.png", thumbnail: (10, 10)),
      "avatars/42-Thumbnail(%7B10.000000,10.000000%7D,1).png",
      "a relative key parses as a URL and is re-encoded like one")
  }

  func testAZeroSizeAndAnEmptyPipelineStillChangeTheKeyAsInSD() {
    // SD appends any thumbnail size it is given, and a pipeline's key even when it is empty.
    XCTAssertEqual(
      DerivedKey.key(for: "https://a.com/x.jpg", thumbnail: (0, 0)),
      "https://a.com/x-Thumbnail(%7B0.000000,0.000000%7D,1).jpg")
    XCTAssertEqual(
      DerivedKey.key(for: "https://a.com/x.jpg", transformers: []), "https://a.com/x-.jpg")
    XCTAssertEqual(
      DerivedKey.key(for: "https://a.com/x.jpg", transformers: nil), "https://a.com/x.jpg")
  }

  func testThumbnailSizesReadAsPairsOrWxH() {
    XCTAssertEqual(ThumbnailSize(.string("300x200")), ThumbnailSize(width: 300, height: 200))
    XCTAssertEqual(
      ThumbnailSize(.array([.number(64.5), .number(32)])), ThumbnailSize(width: 64.5, height: 32))
    XCTAssertNil(ThumbnailSize(.string("300")))
    XCTAssertNil(ThumbnailSize(.array([.number(-1), .number(3)])))
  }

  private func parse(_ json: String) throws -> [ImageTransformer]? {
    try ImageTransformer.parse(JSONDecoder().decode(JSONValue.self, from: Data(json.utf8)))
  }

  func testTransformerJSONParses() throws {
    XCTAssertEqual(
      try parse(
        ##"[{"resizing": {"size": [200, 200], "scaleMode": "aspectFill"}}, {"tint": {"color": "#ff0000"}}]"##
      ),
      [
        .resizing(width: 200, height: 200, scaleMode: .aspectFill),
        .tint(color: .init(argb: 0xFFFF_0000), blendMode: 18),
      ])
    XCTAssertEqual(
      try parse(
        ##"{"roundCorner": {"radius": 4, "corners": ["topLeft", "bottomRight"], "borderColor": "#80112233"}}"##
      ),
      [
        .roundCorner(
          radius: 4, corners: [.topLeft, .bottomRight], borderWidth: 0,
          borderColor: .init(argb: 0x8011_2233))
      ])
    XCTAssertEqual(
      try parse(##"{"tint": {"color": "#00ff00", "blendMode": "multiply"}}"##)?.first?.key,
      "SDImageTintTransformer(#ff00ff00,1)")
    XCTAssertNil(try parse("null"))
    XCTAssertThrowsError(try parse(##"{"filter": {"name": "CISepiaTone"}}"##)) { error in
      XCTAssertTrue("\(error)".contains("Core Image"), "\(error)")
    }
    XCTAssertThrowsError(try parse(##"[{"blur": {"radius": "big"}}]"##)) { error in
      XCTAssertEqual("\(error)", "[0]: blur.radius: expected a number")
    }
    XCTAssertThrowsError(try parse(##"{"sharpen": {}}"##))
  }
}
