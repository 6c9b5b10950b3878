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
    // CGBlendMode's raw values, in Apple's order (CGContext.h): SD writes the number in the
    // key, so a name mapped to its neighbour's number is a key SD never asks for.
    let cgBlendModes = [
      "normal", "multiply", "screen", "overlay", "darken", "lighten", "colorDodge", "colorBurn",
      "softLight", "hardLight", "difference", "exclusion", "hue", "saturation", "color",
      "luminosity", "clear", "copy", "sourceIn", "sourceOut", "sourceAtop", "destinationOver",
      "destinationIn", "destinationOut", "destinationAtop", "xor", "plusDarker", "plusLighter",
    ]
    for (raw, name) in cgBlendModes.enumerated() {
      XCTAssertEqual(
        try parse(##"{"tint": {"color": "#00ff00", "blendMode": "\##(name)"}}"##)?.first?.key,
        "SDImageTintTransformer(#ff00ff00,\(raw))", name)
    }
    XCTAssertNil(try parse("null"))
    XCTAssertThrowsError(try parse(##"{"filter": {"name": "CISepiaTone"}}"##)) { error in
      XCTAssertTrue("\(error)".contains("Core Image"), "\(error)")
    }
    XCTAssertThrowsError(try parse(##"[{"blur": {"radius": "big"}}]"##)) { error in
      XCTAssertEqual("\(error)", "[0]: blur.radius: expected a number")
    }
    XCTAssertThrowsError(try parse(##"{"sharpen": {}}"##))
  }

  // Issue 30: SD's chain before iOS 17, where NSURL refuses the raw braces of the thumbnail
  // step and SDTransformedKeyForKey takes its raw-string branch.

  func testThumbnailThenTransformerOnAKeyWithoutExtensionDerivesAnotherKeyBeforeiOS17() {
    let blur: [ImageTransformer] = [.blur(radius: 1)]
    XCTAssertEqual(
      DerivedKey.key(for: "https://a.com/x", thumbnail: (10, 20), transformers: blur),
      "https://a.com/x-Thumbnail(%7B10.000000,20-SDImageBlurTransformer(1.000000).000000%7D,1)")
    XCTAssertEqual(
      DerivedKey.key(
        for: "https://a.com/x", thumbnail: (10, 20), transformers: blur, on: .beforeiOS17),
      "https:/a.com/x-Thumbnail({10.000000,20-SDImageBlurTransformer(1.000000).000000},1)",
      "unencoded, and NSString's path methods fold the scheme's // into one /")
    // A query stays in the raw string's last path component, where the extension is found.
    XCTAssertEqual(
      DerivedKey.key(
        for: "https://a.com/x?v=1", thumbnail: (10, 20), transformers: blur, on: .beforeiOS17),
      "https:/a.com/x?v=1-Thumbnail({10.000000,20-SDImageBlurTransformer(1.000000).000000},1)")
    XCTAssertEqual(
      DerivedKey.key(for: "https://a.com/x?v=1", thumbnail: (10, 20), transformers: blur),
      "https://a.com/x?v=1-Thumbnail({10.000000,20.000000},1)-SDImageBlurTransformer(1.000000)",
      "iOS 17 parses the key: its path has no extension, so the suffix is appended again")
  }

  func testBothFileNamesOfTheDivergingChainAreTheVariantsNames() {
    var request = VariantRequest(thumbnail: ThumbnailSize(width: 10, height: 20))
    request.transformers = [.blur(radius: 1)]
    let current = request.derivedKey(for: "https://a.com/x")
    let older = request.derivedKey(for: "https://a.com/x", on: .beforeiOS17)
    XCTAssertNotEqual(current, older)
    // iOS 17 takes the extension of the decoded URL path, the older systems that of the raw
    // string: both `000000},1)` here, on different keys.
    XCTAssertEqual(
      request.derivedFileNames(for: "https://a.com/x"),
      [
        CacheFileName.md5Hex(current) + ".000000},1)",
        CacheFileName.md5Hex(older) + ".000000},1)",
      ])
  }

  func testEveryThumbnailAndTransformerCombinationFollowsTheRawBranchBeforeiOS17() {
    let all: [ImageTransformer] = [
      .resizing(width: 200, height: 100, scaleMode: .aspectFit),
      .cropping(x: 1, y: 2, width: 3, height: 4),
      .flipping(horizontal: true, vertical: false),
      .rotation(angle: 0.5, fitSize: true),
      .roundCorner(radius: 8, corners: .all, borderWidth: 1, borderColor: .init(hex: "#123456")),
      .roundCorner(radius: 8, corners: [.topLeft], borderWidth: 0, borderColor: nil),
      .tint(color: .init(hex: "#ff0000")!, blendMode: 18),
      .blur(radius: 2.5),
    ]
    var pipelines: [[ImageTransformer]] = [[]] + all.map { [$0] }
    pipelines.append(all)
    for preserve in [true, false] {
      for pipeline in pipelines {
        let suffix = DerivedKey.transformerSuffix(pipeline)
        let older = DerivedKey.key(
          for: "https://a.com/p/x", thumbnail: (10, 20), preserveAspectRatio: preserve,
          transformers: pipeline, on: .beforeiOS17)
        // The thumbnail's raw `.000000},P)` is the extension the transformers go before.
        XCTAssertEqual(
          older,
          "https:/a.com/p/x-Thumbnail({10.000000,20-\(suffix).000000},\(preserve ? 1 : 0))",
          suffix)
        let request = VariantRequest(
          thumbnail: ThumbnailSize(width: 10, height: 20), preserveAspectRatio: preserve,
          transformers: pipeline)
        XCTAssertEqual(
          request.derivedFileNames(for: "https://a.com/p/x").last,
          CacheFileName.fileNameBeforeiOS17(forKey: older), suffix)
        XCTAssertEqual(request.derivedFileNames(for: "https://a.com/p/x").count, 2, suffix)
      }
    }
  }

  func testTheChainsAgreeWhenNoStepLeavesWhatTheOlderNSURLRefuses() {
    let transformers: [ImageTransformer] = [.blur(radius: 1)]
    for key in ["https://a.com/x.png", "https://a.com/p/x.jpg?w=1", "https://a.com/x%20y.gif"] {
      XCTAssertEqual(
        DerivedKey.key(for: key, thumbnail: (10, 20), transformers: transformers),
        DerivedKey.key(
          for: key, thumbnail: (10, 20), transformers: transformers, on: .beforeiOS17), key)
      XCTAssertEqual(
        VariantRequest(thumbnail: ThumbnailSize(width: 10, height: 20), transformers: transformers)
          .derivedFileNames(for: key).count, 1, key)
    }
    // One step only: the key is the same, but its name before iOS 17 is not when it holds
    // raw braces, or a second `#` (a tint, then a border colour).
    let tinted = VariantRequest(transformers: [
      .tint(color: .init(hex: "#ff0000")!, blendMode: 18),
      .roundCorner(radius: 2, corners: .all, borderWidth: 1, borderColor: .init(hex: "#00ff00")),
    ])
    let key = tinted.derivedKey(for: "https://a.com/x")
    XCTAssertEqual(key, tinted.derivedKey(for: "https://a.com/x", on: .beforeiOS17))
    XCTAssertEqual(
      tinted.derivedFileNames(for: "https://a.com/x"),
      [CacheFileName.md5Hex(key), CacheFileName.md5Hex(key) + ".000000,#ff00ff00)"])
  }

  func testWhatNSURLRefusedBeforeiOS17() {
    for accepted in [
      "https://a.com/x.png", "https://a.com/x%7B1%7D.png", "https://[::1]:8080/x",
      "https://a.com/x?a=1&b=$,;:@+!~*'()#frag", "https://a.com/%41",
    ] {
      XCTAssertTrue(CacheFileName.isURLStringBeforeiOS17(accepted), accepted)
    }
    for refused in [
      "https://a.com/x-Thumbnail({1.000000,1.000000},1)", "https://a.com/x#a#b",
      "https://a.com/x y", "https://a.com/ü", "https://a.com/%4", "https://a.com/%zz",
      "https://a.com/a|b", "https://a.com/a^b", "https://a.com/a\\b", "https://a.com/\"",
      "https://a.com/<a>", "https://a.com/a`b",
    ] {
      XCTAssertFalse(CacheFileName.isURLStringBeforeiOS17(refused), refused)
    }
  }

  /// SD's `SDImageScaleFactorForKey` looks at keys of 8 UTF-16 units or more (its comment:
  /// `a@2x.png -> 8`): the shortest key with a scale has it, a shorter one is 1.
  func testTheShortestKeyWithAScaleIsEightUnits() {
    XCTAssertEqual(imageScaleFactor(forKey: "a@2x.png"), 2)
    XCTAssertEqual(imageScaleFactor(forKey: "a@3x.png"), 3)
    XCTAssertEqual(imageScaleFactor(forKey: "@2x.png"), 1)
  }

  /// A tint's blend mode is a CGBlendMode: by name, or a whole number from 0 (normal) to 27
  /// (plusLighter); any other number is refused, naming the field.
  func testATintsBlendModeIsAWholeNumberUpToPlusLighter() throws {
    let red = ImageTransformer.Color(argb: 0xFFFF_0000)
    for (given, mode) in [("27", 27), ("0", 0), ("\"plusLighter\"", 27), ("\"sourceIn\"", 18)] {
      XCTAssertEqual(
        try parse(##"{"tint": {"color": "#ff0000", "blendMode": \##(given)}}"##),
        [.tint(color: red, blendMode: mode)], given)
    }
    for given in ["28", "-1", "2.5", "\"plus\"", "true"] {
      XCTAssertThrowsError(
        try parse(##"{"tint": {"color": "#ff0000", "blendMode": \##(given)}}"##), given
      ) {
        XCTAssertEqual(
          ($0 as? TransformerError)?.message,
          "tint.blendMode: expected a CGBlendMode name or number 0-27", given)
      }
    }
  }

  /// A request derives a key of its own when it names a thumbnail or a transformer list, even
  /// an empty one (SD's empty pipeline); only a request of neither is the original.
  func testARequestOfTransformersAloneIsAVariant() {
    XCTAssertTrue(VariantRequest().isEmpty)
    XCTAssertFalse(VariantRequest(transformers: [.blur(radius: 1)]).isEmpty)
    XCTAssertFalse(VariantRequest(transformers: []).isEmpty)
    XCTAssertFalse(VariantRequest(thumbnail: ThumbnailSize(width: 0, height: 0)).isEmpty)
  }
}
