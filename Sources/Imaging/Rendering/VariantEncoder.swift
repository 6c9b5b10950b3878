import CImaging
import CPNG
import CTurboJPEG
import Foundation

/// Encodes a rendered variant in its source's format, as SD's coders do when a thumbnail or a
/// transformed image has no data of its own: JPEG at `quality` (SD's default 1.0) with any
/// transparency flattened onto white, PNG with its alpha.
enum VariantEncoder {
  static func jpeg(_ surface: Surface, quality: Double, orientation: Int = 1) throws(RenderError)
    -> Data
  {
    // Flatten onto white: cairo's RGB24 is the same memory layout with the alpha byte unused.
    let flat = ic_cairo_image_surface_create(
      CAIRO_FORMAT_RGB24, Int32(surface.width), Int32(surface.height))!
    defer { ic_cairo_surface_destroy(flat) }
    guard ic_cairo_surface_status(flat) == CAIRO_STATUS_SUCCESS else {
      throw RenderError("cannot allocate a \(surface.width)x\(surface.height) canvas")
    }
    let context = ic_cairo_create(flat)!
    ic_cairo_set_source_rgb(context, 1, 1, 1)
    ic_cairo_paint(context)
    ic_cairo_set_source_surface(context, surface.pointer, 0, 0)
    ic_cairo_paint(context)
    ic_cairo_destroy(context)
    ic_cairo_surface_flush(flat)

    guard let handle = tjInitCompress() else {
      throw RenderError("jpeg: cannot start the encoder")
    }
    defer { tjDestroy(handle) }
    let level = Int32(max(1, min(100, (quality * 100).rounded())))
    // At high quality keep full chroma resolution, as Apple's encoder does.
    let subsampling = level >= 90 ? TJSAMP_444 : TJSAMP_420
    var output: UnsafeMutablePointer<UInt8>?
    var size: UInt = 0
    let status = tjCompress2(
      handle, ic_cairo_image_surface_get_data(flat), Int32(surface.width),
      ic_cairo_image_surface_get_stride(flat), Int32(surface.height), Int32(TJPF_BGRX.rawValue),
      &output, &size, Int32(subsampling.rawValue), level, 0)
    defer { tjFree(output) }
    guard status == 0, let output else {
      throw RenderError("jpeg: \(String(cString: tjGetErrorStr2(handle)))")
    }
    var data = Data(bytes: output, count: Int(size))
    if orientation != 1 { data.insert(contentsOf: exifSegment(orientation: orientation), at: 2) }
    return data
  }

  /// An APP1 `Exif` segment holding only the orientation tag, for a variant whose pixels are
  /// stored unrotated (SD keeps the source's orientation as metadata there).
  static func exifSegment(orientation: Int) -> [UInt8] {
    let tiff: [UInt8] = [
      0x4D, 0x4D, 0, 0x2A, 0, 0, 0, 8,  // big-endian TIFF header, IFD0 at 8
      0, 1,  // one entry
      0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, UInt8(orientation), 0, 0,  // Orientation, SHORT, 1
      0, 0, 0, 0,  // no next IFD
    ]
    let payload: [UInt8] = Array("Exif".utf8) + [0, 0] + tiff
    let length = payload.count + 2
    return [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
  }

  static func png(_ surface: Surface) throws(RenderError) -> Data {
    let width = surface.width
    let height = surface.height
    let alpha = surface.hasTransparency
    let channels = alpha ? 4 : 3
    var straight = [UInt8](repeating: 0, count: width * height * channels)
    surface.withPixels { pixels, stride in
      for y in 0..<height {
        let row = pixels + y * stride
        for x in 0..<width {
          let source = row + x * 4
          let target = (y * width + x) * channels
          let a = UInt32(source[3])
          for channel in 0..<3 {
            let value = UInt32(source[channel])
            straight[target + channel] =
              a == 255 || a == 0 ? UInt8(value) : UInt8(min(255, (value * 255 + a / 2) / a))
          }
          if alpha { straight[target + 3] = UInt8(a) }
        }
      }
    }
    var image = png_image()
    image.version = ic_png_image_version
    image.width = UInt32(width)
    image.height = UInt32(height)
    image.format = alpha ? ic_png_format_bgra : ic_png_format_bgr
    var size = 0
    guard
      png_image_write_to_memory(&image, nil, &size, 0, straight, Int32(width * channels), nil)
        != 0
    else { throw RenderError("png: \(SourceDecoder.pngMessage(image))") }
    var data = Data(count: size)
    let written = data.withUnsafeMutableBytes { raw in
      png_image_write_to_memory(
        &image, raw.baseAddress, &size, 0, straight, Int32(width * channels), nil)
    }
    png_image_free(&image)
    guard written != 0 else { throw RenderError("png: \(SourceDecoder.pngMessage(image))") }
    return data.prefix(size)
  }
}
