import CImaging
import Foundation

/// A cairo image surface: premultiplied ARGB32, one `UInt32` a pixel in native byte order (B, G,
/// R, A in memory on the little-endian machines we run on), the format CoreGraphics' bitmap
/// contexts use on Apple platforms too. Owns its surface; the one type the renderer passes
/// around.
final class Surface {
  let pointer: OpaquePointer
  let width: Int
  let height: Int

  /// A transparent surface of `width` x `height` pixels.
  init(width: Int, height: Int) throws(RenderError) {
    guard width > 0, height > 0, width <= 32767, height <= 32767 else {
      throw RenderError("a \(width)x\(height) canvas is outside cairo's limits")
    }
    let surface = ic_cairo_image_surface_create(CAIRO_FORMAT_ARGB32, Int32(width), Int32(height))!
    guard ic_cairo_surface_status(surface) == CAIRO_STATUS_SUCCESS else {
      ic_cairo_surface_destroy(surface)
      throw RenderError("cannot allocate a \(width)x\(height) canvas")
    }
    pointer = surface
    self.width = width
    self.height = height
  }

  /// A transparent canvas for a size worked out in floating point (points times a scale, from
  /// a manifest line), rounded up: refused, not allocated or trapped on, when it is not finite,
  /// over cairo's limits or over `maxPixels`.
  convenience init(width: Double, height: Double, maxPixels: Int) throws(RenderError) {
    let size = try Self.pixelSize(width: width, height: height, maxPixels: maxPixels)
    try self.init(width: size.width, height: size.height)
  }

  /// `width` x `height` rounded up to whole pixels (at least 1), or why no canvas that size is
  /// drawn.
  static func pixelSize(width: Double, height: Double, maxPixels: Int) throws(RenderError)
    -> (width: Int, height: Int)
  {
    let (w, h) = ((width - 1e-9).rounded(.up), (height - 1e-9).rounded(.up))
    guard w.isFinite, h.isFinite, w <= 32767, h <= 32767, w * h <= Double(maxPixels) else {
      throw RenderError(
        "a \(width)x\(height) canvas is over the limit of \(maxPixels) pixels (maxPixels)")
    }
    return (Int(max(1, w)), Int(max(1, h)))
  }

  deinit { ic_cairo_surface_destroy(pointer) }

  var stride: Int { Int(ic_cairo_image_surface_get_stride(pointer)) }

  /// Writes the pixels directly (decoders, the blur): `body` gets the rows and the stride.
  func withPixels<T>(_ body: (UnsafeMutablePointer<UInt8>, Int) throws -> T) rethrows -> T {
    ic_cairo_surface_flush(pointer)
    defer { ic_cairo_surface_mark_dirty(pointer) }
    return try body(ic_cairo_image_surface_get_data(pointer)!, stride)
  }

  /// Whether any pixel is less than opaque.
  var hasTransparency: Bool {
    withPixels { data, stride in
      for y in 0..<height {
        let row = data + y * stride
        for x in 0..<width where row[x * 4 + 3] != 255 { return true }
      }
      return false
    }
  }

  /// Draws this image on `context`, stretched over `rect` (in the context's units), as
  /// `-[UIImage drawInRect:]` does: resampled with a good filter (a box filter when reducing),
  /// its edge pixels repeated outward so that its border is not blended with transparency.
  func draw(in rect: CGRect, on context: OpaquePointer) {
    ic_cairo_save(context)
    ic_cairo_translate(context, rect.minX, rect.minY)
    ic_cairo_scale(context, rect.width / Double(width), rect.height / Double(height))
    ic_cairo_set_source_surface(context, pointer, 0, 0)
    let pattern = ic_cairo_get_source(context)
    ic_cairo_pattern_set_filter(pattern, CAIRO_FILTER_GOOD)
    ic_cairo_pattern_set_extend(pattern, CAIRO_EXTEND_PAD)
    ic_cairo_rectangle(context, 0, 0, Double(width), Double(height))
    ic_cairo_fill(context)
    ic_cairo_restore(context)
  }

  /// Draws on this surface; the context is destroyed after `body`.
  func draw(_ body: (OpaquePointer) -> Void) {
    let context = ic_cairo_create(pointer)!
    body(context)
    ic_cairo_destroy(context)
  }
}

/// Why a variant could not be rendered.
public struct RenderError: Error, Sendable, Equatable, CustomStringConvertible {
  public var message: String
  public init(_ message: String) { self.message = message }
  public var description: String { message }
}
