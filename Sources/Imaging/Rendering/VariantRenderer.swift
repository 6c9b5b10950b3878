import CImaging
import Core
import Foundation

/// What goes under the derived key.
public enum RenderedVariant: Sendable, Equatable {
  /// Freshly encoded bytes.
  case encoded(Data, format: ImageFormat, width: Int, height: Int)
  /// The original bytes, as SD stores them for animated images and a thumbnail size of zero.
  case originalBytes(reason: String)
  /// Nothing: SD would store no disk variant (or this tool cannot make it); says why.
  case skipped(reason: String)
}

/// Renders the variant SD 5.21.5 stores under a derived key (`SDWebImageManager`'s transform
/// process, `SDImageIOAnimatedCoder`'s thumbnail decoding, `UIImage+Transform`): the thumbnail
/// decoded from the original, then the transformers in order, then encoded in the original's
/// format.
public enum VariantRenderer {
  public static func render(_ original: Data, request: VariantRequest, maxPixels: Int)
    throws(RenderError) -> RenderedVariant
  {
    guard let format = ImageFormat.detect(original) else {
      throw RenderError("unrecognised image format")
    }
    let thumbnail = request.thumbnail.flatMap { $0.width > 0 && $0.height > 0 ? $0 : nil }
    if (format == .gif && SourceDecoder.isAnimatedGIF(original))
      || (format == .png && SourceDecoder.isAnimatedPNG(original))
    {
      return .originalBytes(
        reason: "animated \(format.rawValue): SD stores the original data under the derived key")
    }
    if thumbnail == nil && request.transformers == nil {
      return .originalBytes(reason: "a thumbnail size of zero decodes the full image")
    }
    switch format {
    case .jpeg, .png: break
    case .webp, .heic, .heif, .avif:
      return .skipped(
        reason: "\(format.rawValue): SD's encoder writes no disk variant for this format")
    default:
      return .skipped(reason: "\(format.rawValue): variants are rendered from JPEG and PNG only")
    }

    guard ic_cairo_load() != 0 else {
      throw RenderError("cairo (libcairo.so.2) could not be loaded; install libcairo2")
    }
    var image: Surface
    var orientation: Int
    if let thumbnail {
      (image, orientation) = try decodeThumbnail(
        original, format: format, size: thumbnail, preserveAspectRatio: request.preserveAspectRatio,
        maxPixels: maxPixels)
    } else {
      let decoded = try decode(original, format: format, minimum: nil, maxPixels: maxPixels)
      (image, orientation) = (decoded.surface, decoded.orientation)
    }

    if let transformers = request.transformers {
      var current = image
      var currentOrientation = orientation
      var failed = false
      let rendering = TransformerRendering(scale: request.scale, maxPixels: maxPixels)
      for transformer in transformers {
        switch transformer {
        case .cropping, .blur:
          // SD crops and blurs the CGImage, the stored pixels, and keeps the orientation.
          break
        default:
          // The others draw the image as UIKit shows it: the orientation applied.
          current = try oriented(current, orientation: currentOrientation)
          currentOrientation = 1
        }
        guard let next = try rendering.apply(transformer, to: current) else {
          failed = true
          break
        }
        current = next
      }
      if !failed {
        image = current
        orientation = currentOrientation
      } else if thumbnail == nil {
        // SD stores the untransformed image with its original data.
        return .originalBytes(reason: "a transformer gave no image")
      }
    }

    let data: Data
    switch format {
    case .png:
      // PNG keeps no orientation here: draw it in.
      image = try oriented(image, orientation: orientation)
      data = try VariantEncoder.png(image)
    default:
      data = try VariantEncoder.jpeg(
        image, quality: request.compressionQuality, orientation: orientation)
    }
    return .encoded(data, format: format, width: image.width, height: image.height)
  }

  /// SD's thumbnail decoding (`SDImageIOAnimatedCoder`): an image that fits the box is decoded
  /// whole (never upscaled), keeping its orientation as metadata; otherwise with
  /// `preserveAspectRatio` the long side becomes ImageIO's max pixel size and the orientation
  /// is applied, and without it the image is scaled to exactly the box, unrotated.
  static func decodeThumbnail(
    _ data: Data, format: ImageFormat, size box: ThumbnailSize, preserveAspectRatio: Bool,
    maxPixels: Int
  ) throws(RenderError) -> (Surface, orientation: Int) {
    let (rawWidth, rawHeight) = try SourceDecoder.size(of: data, format: format)
    if Double(rawWidth) <= box.width && Double(rawHeight) <= box.height {
      let decoded = try decode(data, format: format, minimum: nil, maxPixels: maxPixels)
      return (decoded.surface, decoded.orientation)
    }
    let targetWidth: Int
    let targetHeight: Int
    if preserveAspectRatio {
      let pixelRatio = Double(rawWidth) / Double(rawHeight)
      let boxRatio = box.width / box.height
      let maxPixelSize =
        pixelRatio > boxRatio
        ? max(box.width, box.width / pixelRatio) : max(box.height, box.height * pixelRatio)
      let long = Int(min(Double(max(rawWidth, rawHeight)), max(1, maxPixelSize.rounded())))
      let factor = Double(long) / Double(max(rawWidth, rawHeight))
      func side(_ raw: Int) -> Int {
        raw == max(rawWidth, rawHeight)
          ? long : max(1, Int((Double(raw) * factor - 1e-9).rounded(.up)))
      }
      (targetWidth, targetHeight) = (side(rawWidth), side(rawHeight))
    } else {
      (targetWidth, targetHeight) = try Surface.pixelSize(
        width: box.width.rounded(), height: box.height.rounded(), maxPixels: maxPixels)
    }
    let decoded = try decode(
      data, format: format, minimum: (targetWidth, targetHeight), maxPixels: maxPixels)
    let scaled = try resample(decoded.surface, width: targetWidth, height: targetHeight)
    if preserveAspectRatio {
      return (try oriented(scaled, orientation: decoded.orientation), 1)
    }
    return (scaled, decoded.orientation)
  }

  private static func decode(
    _ data: Data, format: ImageFormat, minimum: (Int, Int)?, maxPixels: Int
  ) throws(RenderError) -> DecodedSource {
    switch format {
    case .jpeg:
      return try SourceDecoder.decodeJPEG(
        data, minimumWidth: minimum?.0 ?? .max, minimumHeight: minimum?.1 ?? .max,
        maxPixels: maxPixels)
    default:
      return try SourceDecoder.decodePNG(data, maxPixels: maxPixels)
    }
  }

  /// `image` resampled to `width` x `height`.
  static func resample(_ image: Surface, width: Int, height: Int) throws(RenderError) -> Surface {
    if image.width == width && image.height == height { return image }
    let canvas = try Surface(width: width, height: height)
    canvas.draw { context in
      image.draw(in: CGRect(x: 0, y: 0, width: width, height: height), on: context)
    }
    return canvas
  }

  /// `image` with EXIF `orientation` (1-8) applied to its pixels.
  static func oriented(_ image: Surface, orientation: Int) throws(RenderError) -> Surface {
    guard (2...8).contains(orientation) else { return image }
    let swaps = orientation >= 5
    let width = Double(swaps ? image.height : image.width)
    let height = Double(swaps ? image.width : image.height)
    // (xx, yx, xy, yy, x0, y0): where a source pixel lands on the upright canvas.
    let matrices: [Int: (Double, Double, Double, Double, Double, Double)] = [
      2: (-1, 0, 0, 1, width, 0), 3: (-1, 0, 0, -1, width, height), 4: (1, 0, 0, -1, 0, height),
      5: (0, 1, 1, 0, 0, 0), 6: (0, 1, -1, 0, width, 0), 7: (0, -1, -1, 0, width, height),
      8: (0, -1, 1, 0, 0, height),
    ]
    let m = matrices[orientation]!
    let canvas = try Surface(width: Int(width), height: Int(height))
    canvas.draw { context in
      var matrix = cairo_matrix_t()
      ic_cairo_matrix_init(&matrix, m.0, m.1, m.2, m.3, m.4, m.5)
      ic_cairo_transform(context, &matrix)
      ic_cairo_set_source_surface(context, image.pointer, 0, 0)
      ic_cairo_pattern_set_filter(ic_cairo_get_source(context), CAIRO_FILTER_NEAREST)
      ic_cairo_set_operator(context, CAIRO_OPERATOR_SOURCE)
      ic_cairo_paint(context)
    }
    return canvas
  }
}
