import Core
import Foundation
import TestSupport
import XCTest

@testable import Imaging

/// Variants as SD 5.21.5 stores them under derived keys (issue 12): thumbnail sizes, EXIF
/// orientation, formats, and what each transformer draws.
final class VariantRendererTests: XCTestCase {
  private let maxPixels = 100_000_000

  private func render(
    _ data: Data, thumbnail: (Double, Double)? = nil, preserve: Bool = true,
    transformers: [ImageTransformer]? = nil, scale: Double = 1, quality: Double = 1
  ) throws -> RenderedVariant {
    var request = VariantRequest(
      thumbnail: thumbnail.map { ThumbnailSize(width: $0.0, height: $0.1) },
      preserveAspectRatio: preserve, transformers: transformers)
    request.scale = scale
    request.compressionQuality = quality
    return try VariantRenderer.render(data, request: request, maxPixels: maxPixels)
  }

  /// The encoded variant, checked to decode in full to the size it claims.
  private func encoded(
    _ variant: RenderedVariant, file: StaticString = #filePath, line: UInt = #line
  ) throws -> (data: Data, format: ImageFormat, width: Int, height: Int) {
    guard case .encoded(let data, let format, let width, let height) = variant else {
      XCTFail("expected an encoded variant, got \(variant)", file: file, line: line)
      throw RenderError("not encoded")
    }
    let info = try ImageValidator(level: .full, maxPixels: maxPixels).validate(data)
    XCTAssertEqual(info.format, format, file: file, line: line)
    XCTAssertEqual(info.width, width, "decoded width", file: file, line: line)
    XCTAssertEqual(info.height, height, "decoded height", file: file, line: line)
    return (data, format, width, height)
  }

  /// The pixel at (x, y) of a PNG, straight (not premultiplied) RGBA.
  private func pixel(_ png: Data, _ x: Int, _ y: Int) throws -> [Int] {
    let decoded = try SourceDecoder.decodePNG(png, maxPixels: maxPixels)
    return decoded.surface.withPixels { pixels, stride in
      let p = pixels + y * stride + x * 4
      let alpha = Int(p[3])
      func straight(_ v: UInt8) -> Int { alpha == 0 ? 0 : min(255, Int(v) * 255 / alpha) }
      return [straight(p[2]), straight(p[1]), straight(p[0]), alpha]
    }
  }

  func testAThumbnailFitsTheBoxLongSideExactShortSideRoundedUp() throws {
    let fit = try encoded(render(Fixtures.largeJPEG, thumbnail: (100, 100)))
    XCTAssertEqual(fit.format, .jpeg)
    XCTAssertEqual([fit.width, fit.height], [100, 75])
    // 400x300 into 70x70: the long side 70, the short 52.5 rounded up.
    let odd = try encoded(render(Fixtures.largeJPEG, thumbnail: (70, 70)))
    XCTAssertEqual([odd.width, odd.height], [70, 53])
    // A box wider than the image's ratio: the height decides.
    let tall = try encoded(render(Fixtures.largeJPEG, thumbnail: (300, 60)))
    XCTAssertEqual([tall.width, tall.height], [80, 60])
  }

  func testWithoutPreservingTheRatioTheThumbnailIsExactlyTheBox() throws {
    let exact = try encoded(render(Fixtures.largeJPEG, thumbnail: (100, 100), preserve: false))
    XCTAssertEqual([exact.width, exact.height], [100, 100])
  }

  func testAThumbnailNeverUpscales() throws {
    let whole = try encoded(render(Fixtures.largeJPEG, thumbnail: (1000, 1000)))
    XCTAssertEqual([whole.width, whole.height], [400, 300])
  }

  func testPreservingTheRatioAppliesTheEXIFOrientation() throws {
    // Stored 300x200 with orientation 6: shown 200x300.
    let turned = try encoded(render(Fixtures.orientedJPEG, thumbnail: (100, 100)))
    XCTAssertEqual([turned.width, turned.height], [67, 100])
    XCTAssertEqual(SourceDecoder.exifOrientation(ofJPEG: turned.data), 1)
    // Not preserving: the stored pixels scaled, the orientation kept as metadata (SD keeps
    // the image's orientation, and its encoder writes it).
    let exact = try encoded(render(Fixtures.orientedJPEG, thumbnail: (100, 50), preserve: false))
    XCTAssertEqual([exact.width, exact.height], [100, 50])
    XCTAssertEqual(SourceDecoder.exifOrientation(ofJPEG: exact.data), 6)
  }

  func testAPNGThumbnailKeepsItsAlpha() throws {
    let thumbnail = try encoded(render(Fixtures.alphaPNG, thumbnail: (100, 100)))
    XCTAssertEqual(thumbnail.format, .png)
    XCTAssertEqual([thumbnail.width, thumbnail.height], [100, 50])
    XCTAssertEqual(try pixel(thumbnail.data, 0, 0)[3], 0, "the corner stays transparent")
    let middle = try pixel(thumbnail.data, 50, 25)
    XCTAssertEqual(middle[0], 255, accuracy: 2)
    XCTAssertEqual(middle[3], 128, accuracy: 2, "half-opaque red stays half-opaque")
  }

  func testAnimatedImagesAndAZeroSizeKeepTheOriginalBytes() throws {
    guard case .originalBytes = try render(Fixtures.gif, thumbnail: (10, 10)) else {
      return XCTFail("an animated GIF keeps its bytes")
    }
    guard case .originalBytes = try render(Fixtures.largeJPEG, thumbnail: (0, 0)) else {
      return XCTFail("a zero thumbnail size decodes the full image: the original bytes")
    }
    guard case .skipped(let reason) = try render(Fixtures.webpLossy, thumbnail: (10, 10)) else {
      return XCTFail("WebP gets no disk variant")
    }
    XCTAssertTrue(reason.contains("webp"), reason)
  }

  func testJPEGQualityFollowsTheEncodeOptions() throws {
    let best = try encoded(render(Fixtures.largeJPEG, thumbnail: (200, 200)))
    let low = try encoded(render(Fixtures.largeJPEG, thumbnail: (200, 200), quality: 0.3))
    XCTAssertLessThan(low.data.count, best.data.count / 2)
  }

  func testResizingUsesPointsOfTheKeysScale() throws {
    let fill = try encoded(
      render(
        Fixtures.largeJPEG, transformers: [.resizing(width: 50, height: 50, scaleMode: .aspectFill)]
      ))
    XCTAssertEqual([fill.width, fill.height], [50, 50])
    let retina = try encoded(
      render(
        Fixtures.largeJPEG, transformers: [.resizing(width: 50, height: 50, scaleMode: .fill)],
        scale: 2))
    XCTAssertEqual([retina.width, retina.height], [100, 100])
    // aspectFit leaves transparent bands, which a PNG keeps.
    let fit = try encoded(
      render(
        Fixtures.alphaPNG, transformers: [.resizing(width: 100, height: 100, scaleMode: .aspectFit)]
      ))
    XCTAssertEqual([fit.width, fit.height], [100, 100])
    XCTAssertEqual(try pixel(fit.data, 50, 10)[3], 0, "above the fitted image")
    XCTAssertGreaterThan(try pixel(fit.data, 50, 50)[3], 100, "inside it")
  }

  func testCroppingRotationAndFlipping() throws {
    let crop = try encoded(
      render(Fixtures.alphaPNG, transformers: [.cropping(x: 10, y: 10, width: 50, height: 30)]))
    XCTAssertEqual([crop.width, crop.height], [50, 30])
    XCTAssertEqual(try pixel(crop.data, 5, 5)[3], 0, "(15,15) is outside the rectangle")
    XCTAssertGreaterThan(try pixel(crop.data, 15, 15)[3], 100, "(25,25) is inside")

    let turned = try encoded(
      render(Fixtures.alphaPNG, transformers: [.rotation(angle: .pi / 2, fitSize: true)]))
    XCTAssertEqual([turned.width, turned.height], [100, 200])
    let same = try encoded(
      render(Fixtures.alphaPNG, transformers: [.rotation(angle: .pi / 2, fitSize: false)]))
    XCTAssertEqual([same.width, same.height], [200, 100])

    // The rectangle spans x 20-180: flipped, a pixel at x 10 stays clear, and one cropped
    // from the left edge shows what was on the right.
    let flipped = try encoded(
      render(
        Fixtures.alphaPNG,
        transformers: [
          .flipping(horizontal: true, vertical: false),
          .cropping(x: 0, y: 0, width: 30, height: 100),
        ]))
    XCTAssertEqual(try pixel(flipped.data, 10, 50)[3], 0)
    XCTAssertGreaterThan(try pixel(flipped.data, 25, 50)[3], 100)
  }

  func testCroppingAnOrientedImageCropsItsStoredPixelsAndKeepsTheOrientation() throws {
    // Stored 300x200, orientation 6, white in the stored (0,0)-(60,30): SD crops the CGImage.
    let crop = try encoded(
      render(Fixtures.orientedJPEG, transformers: [.cropping(x: 0, y: 0, width: 60, height: 30)]))
    XCTAssertEqual([crop.width, crop.height], [60, 30], "the stored pixels, not the upright ones")
    XCTAssertEqual(SourceDecoder.exifOrientation(ofJPEG: crop.data), 6)
    let corner = try pixel(
      VariantEncoder.png(
        SourceDecoder.decodeJPEG(
          crop.data, minimumWidth: 60, minimumHeight: 30, maxPixels: maxPixels
        ).surface), 30, 15)
    XCTAssertGreaterThan(corner[0] + corner[1] + corner[2], 700, "the white corner: \(corner)")
    // Drawn transformers see the upright image (200x300): the orientation is applied.
    let flipped = try encoded(
      render(Fixtures.orientedJPEG, transformers: [.flipping(horizontal: true, vertical: false)]))
    XCTAssertEqual([flipped.width, flipped.height], [200, 300])
    XCTAssertEqual(SourceDecoder.exifOrientation(ofJPEG: flipped.data), 1)
  }

  func testTintSourceInColoursOnlyWhatIsThere() throws {
    let red = try encoded(
      render(
        Fixtures.alphaPNG,
        transformers: [.tint(color: ImageTransformer.Color(hex: "#00ff00")!, blendMode: 18)]))
    let inside = try pixel(red.data, 100, 50)
    XCTAssertEqual(inside[0], 0, accuracy: 2)
    XCTAssertEqual(inside[1], 255, accuracy: 2)
    XCTAssertEqual(inside[3], 128, accuracy: 2, "sourceIn keeps the image's alpha")
    XCTAssertEqual(try pixel(red.data, 5, 5)[3], 0)
  }

  func testRoundCornersClipAndJPEGFlattensOntoWhite() throws {
    let rounded = try encoded(
      render(
        Fixtures.largeJPEG,
        transformers: [.roundCorner(radius: 50, corners: .all, borderWidth: 0, borderColor: nil)]))
    XCTAssertEqual(rounded.format, .jpeg)
    XCTAssertEqual([rounded.width, rounded.height], [400, 300])
    // The corner is cut away; a JPEG has no alpha, so it is white.
    let png = try VariantEncoder.png(
      try SourceDecoder.decodeJPEG(
        rounded.data, minimumWidth: 400, minimumHeight: 300, maxPixels: maxPixels
      ).surface)
    let corner = try pixel(png, 1, 1)
    XCTAssertGreaterThan(corner[0] + corner[1] + corner[2], 740, "white: \(corner)")
  }

  func testBlurSpreadsAnEdgeAndKeepsTheSize() throws {
    let sharp = try pixel(Fixtures.alphaPNG, 19, 50)[3]
    let blurred = try encoded(render(Fixtures.alphaPNG, transformers: [.blur(radius: 4)]))
    XCTAssertEqual([blurred.width, blurred.height], [200, 100])
    XCTAssertEqual(sharp, 0)
    let spread = try pixel(blurred.data, 19, 50)[3]
    XCTAssertGreaterThan(spread, 20, "alpha leaks past the edge")
    XCTAssertLessThan(spread, 110)
  }

  func testATransformerThatGivesNoImageStoresTheOriginal() throws {
    // A crop outside the image gives SD no image: the original data is stored instead.
    guard
      case .originalBytes = try render(
        Fixtures.largeJPEG, transformers: [.cropping(x: 500, y: 500, width: 10, height: 10)])
    else { return XCTFail("expected the original bytes") }
  }

  func testTheScaleFactorComesFromTheKey() {
    XCTAssertEqual(imageScaleFactor(forKey: "https://a.com/icon@2x.png"), 2)
    XCTAssertEqual(imageScaleFactor(forKey: "https://a.com/icon%403x.png"), 3)
    XCTAssertEqual(imageScaleFactor(forKey: "icon%403x.png"), 1, "only URLs are decoded")
    XCTAssertEqual(imageScaleFactor(forKey: "https://a.com/icon@2x"), 1, "needs the dot")
  }
}

extension VariantRendererTests {
  /// A manifest line is hostile input: no size it names may crash the run or allocate beyond
  /// the pixel limit.
  func testHugeSizesAreRefusedNotAllocatedOrTrapped() throws {
    let limited = 10_000_000
    func attempt(_ request: VariantRequest) -> String? {
      do {
        _ = try VariantRenderer.render(Fixtures.largeJPEG, request: request, maxPixels: limited)
        return nil
      } catch {
        return error.message
      }
    }
    for transformers: [ImageTransformer] in [
      [.resizing(width: 1e300, height: 1, scaleMode: .fill)],
      [.resizing(width: 20_000, height: 20_000, scaleMode: .aspectFit)],
      [
        .rotation(angle: 0.3, fitSize: true),
        .resizing(width: 5000, height: 5000, scaleMode: .fill),
      ],
    ] {
      let message = attempt(VariantRequest(transformers: transformers))
      XCTAssertNotNil(message, "\(transformers)")
    }
    // A blur wider than the image is the image's mean: bounded, not a trap.
    XCTAssertNil(attempt(VariantRequest(transformers: [.blur(radius: 1e300)])))
    // A thumbnail box wider than any image: nothing to reduce on that side.
    XCTAssertNil(attempt(VariantRequest(thumbnail: ThumbnailSize(width: 1e300, height: 10))))
    XCTAssertNotNil(
      attempt(
        VariantRequest(
          thumbnail: ThumbnailSize(width: 1e300, height: 10), preserveAspectRatio: false)))
  }

  /// `maxPixels` bounds the source a variant decodes: a source of exactly that many pixels is
  /// decoded, one pixel over is refused before a pixel is.
  func testASourceOfExactlyMaxPixelsIsDecodedAndOneMoreIsRefused() throws {
    let pixels = 64 * 48  // Fixtures.png and Fixtures.jpeg
    XCTAssertNoThrow(try SourceDecoder.decodePNG(Fixtures.png, maxPixels: pixels))
    XCTAssertThrowsError(try SourceDecoder.decodePNG(Fixtures.png, maxPixels: pixels - 1))
    XCTAssertNoThrow(
      try SourceDecoder.decodeJPEG(
        Fixtures.jpeg, minimumWidth: 64, minimumHeight: 48, maxPixels: pixels))
    XCTAssertThrowsError(
      try SourceDecoder.decodeJPEG(
        Fixtures.jpeg, minimumWidth: 64, minimumHeight: 48, maxPixels: pixels - 1))
  }
}
