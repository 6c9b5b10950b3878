import CImaging
import Core
import Foundation

/// SD's transformers (`UIImage+Transform.m`, SDWebImage 5.21.5) drawn with cairo, whose imaging
/// model (paths, antialiased clips, operators, affine transforms, a y-down user space like
/// UIKit's) is CoreGraphics'. Sizes are points: `scale` pixels each. `nil` is SD's `nil`: the
/// transformer gave no image.
struct TransformerRendering {
  /// Points to pixels (SD's `image.scale`, from the key).
  var scale: Double
  /// The largest canvas a transformer may draw on.
  var maxPixels: Int

  func apply(_ transformer: ImageTransformer, to image: Surface) throws(RenderError) -> Surface? {
    let width = Double(image.width) / scale
    let height = Double(image.height) / scale
    switch transformer {
    case .resizing(let targetWidth, let targetHeight, let mode):
      guard targetWidth > 0, targetHeight > 0 else { return nil }
      let canvas = try canvas(width: targetWidth, height: targetHeight)
      let rect = Self.fit(
        CGRect(x: 0, y: 0, width: targetWidth, height: targetHeight),
        size: CGSize(width: width, height: height), mode: mode)
      guard rect.width != 0, rect.height != 0 else { return canvas }
      canvas.draw { context in
        ic_cairo_scale(context, scale, scale)
        image.draw(in: rect, on: context)
      }
      return canvas

    case .cropping(let x, let y, let cropWidth, let cropHeight):
      // CGImageCreateWithImageInRect: the pixel rect made integral, within the image.
      let rect = CGRect(
        x: x * scale, y: y * scale, width: cropWidth * scale, height: cropHeight * scale)
      guard rect.width > 0, rect.height > 0 else { return nil }
      let cropped = rect.integral.intersection(
        CGRect(x: 0, y: 0, width: image.width, height: image.height))
      guard !cropped.isNull, cropped.width >= 1, cropped.height >= 1 else { return nil }
      let canvas = try Surface(width: Int(cropped.width), height: Int(cropped.height))
      canvas.draw { context in
        ic_cairo_set_operator(context, CAIRO_OPERATOR_SOURCE)
        ic_cairo_set_source_surface(context, image.pointer, -cropped.minX, -cropped.minY)
        ic_cairo_paint(context)
      }
      return canvas

    case .flipping(let horizontal, let vertical):
      let w = width.rounded(.towardZero)
      let h = height.rounded(.towardZero)
      let canvas = try canvas(width: width, height: height)
      canvas.draw { context in
        ic_cairo_scale(context, scale, scale)
        var matrix = cairo_matrix_t()
        if horizontal {
          ic_cairo_matrix_init(&matrix, -1, 0, 0, 1, w, 0)
          ic_cairo_transform(context, &matrix)
        }
        if vertical {
          ic_cairo_matrix_init(&matrix, 1, 0, 0, -1, 0, h)
          ic_cairo_transform(context, &matrix)
        }
        image.draw(in: CGRect(x: 0, y: 0, width: w, height: h), on: context)
      }
      return canvas

    case .rotation(let angle, let fitSize):
      let w = width.rounded(.towardZero)
      let h = height.rounded(.towardZero)
      var size = CGSize(width: w, height: h)
      if fitSize {
        size = CGSize(
          width: abs(w * cos(angle)) + abs(h * sin(angle)),
          height: abs(w * sin(angle)) + abs(h * cos(angle)))
      }
      let canvas = try canvas(width: size.width, height: size.height)
      canvas.draw { context in
        ic_cairo_scale(context, scale, scale)
        ic_cairo_translate(context, size.width / 2, size.height / 2)
        // UIKit's y-down space turns the other way: SD rotates by -angle there.
        ic_cairo_rotate(context, -angle)
        image.draw(in: CGRect(x: -w / 2, y: -h / 2, width: w, height: h), on: context)
      }
      return canvas

    case .roundCorner(let radius, let corners, let borderWidth, let borderColor):
      let canvas = try canvas(width: width, height: height)
      let rect = CGRect(x: 0, y: 0, width: width, height: height)
      let minSize = min(width, height)
      canvas.draw { context in
        ic_cairo_scale(context, scale, scale)
        if borderWidth < minSize / 2 {
          ic_cairo_save(context)
          Self.roundedRect(
            rect.insetBy(dx: borderWidth, dy: borderWidth), corners: corners, radius: radius,
            on: context)
          ic_cairo_clip(context)
          image.draw(in: rect, on: context)
          ic_cairo_restore(context)
        }
        if let borderColor, borderWidth < minSize / 2, borderWidth > 0 {
          let inset = ((borderWidth * scale).rounded(.down) + 0.5) / scale
          let strokeRadius = radius > scale / 2 ? radius - scale / 2 : 0
          Self.roundedRect(
            rect.insetBy(dx: inset, dy: inset), corners: corners, radius: strokeRadius,
            on: context)
          ic_cairo_set_line_width(context, borderWidth)
          Self.setSource(borderColor, on: context)
          ic_cairo_stroke(context)
        }
      }
      return canvas

    case .tint(let color, let blendMode):
      guard color.argb >> 24 != 0 else { return image }
      let canvas = try canvas(width: width, height: height)
      canvas.draw { context in
        ic_cairo_set_source_surface(context, image.pointer, 0, 0)
        ic_cairo_paint(context)
        Self.setSource(color, on: context)
        if let op = Self.operators[blendMode] {
          ic_cairo_set_operator(context, op)
          ic_cairo_paint(context)
        }
      }
      if blendMode == 26 { Self.plusDarker(canvas, color: color) }
      return canvas

    case .blur(let radius):
      guard width >= 1, height >= 1 else { return nil }
      guard radius > Double(Float.ulpOfOne) else { return image }
      var inputRadius = radius * scale
      if inputRadius - 2 < Double(Float.ulpOfOne) { inputRadius = 2 }
      let kernel = (inputRadius * 3 * (2 * Double.pi).squareRoot() / 4 + 0.5).rounded(.down)
      // A box wider than twice the image only weighs its edges more: bounded there.
      let size = Int(min(kernel, Double(2 * max(image.width, image.height) + 1))) | 1
      let canvas = try Surface(width: image.width, height: image.height)
      canvas.draw { context in
        ic_cairo_set_operator(context, CAIRO_OPERATOR_SOURCE)
        ic_cairo_set_source_surface(context, image.pointer, 0, 0)
        ic_cairo_paint(context)
      }
      for _ in 0..<3 { BoxBlur.apply(canvas, size: size) }
      return canvas
    }
  }

  /// A transparent canvas of `width` x `height` points, as SD's image renderer makes.
  private func canvas(width: Double, height: Double) throws(RenderError) -> Surface {
    try Surface(width: width * scale, height: height * scale, maxPixels: maxPixels)
  }

  /// `SDCGRectFitWithScaleMode`.
  static func fit(_ rect: CGRect, size: CGSize, mode: ImageTransformer.ScaleMode) -> CGRect {
    guard size.width > 0, size.height > 0 else { return rect }
    var result = rect
    let center = CGPoint(x: rect.midX, y: rect.midY)
    switch mode {
    case .fill:
      return rect
    case .aspectFit:
      if rect.width / rect.height < size.width / size.height {
        result.size.height = rect.width * size.height / size.width
      } else {
        result.size.width = rect.height * size.width / size.height
      }
    case .aspectFill:
      if rect.width / rect.height < size.width / size.height {
        result.size.width = rect.height * size.width / size.height
      } else {
        result.size.height = rect.width * size.height / size.width
      }
    }
    result.origin = CGPoint(x: center.x - result.width / 2, y: center.y - result.height / 2)
    return result
  }

  /// `+[UIBezierPath bezierPathWithRoundedRect:byRoundingCorners:cornerRadii:]`: circular arcs
  /// on the chosen corners, the radius at most half the shorter side.
  static func roundedRect(
    _ rect: CGRect, corners: ImageTransformer.Corners, radius: Double, on context: OpaquePointer
  ) {
    let r = max(0, min(radius, min(rect.width, rect.height) / 2))
    func corner(_ which: ImageTransformer.Corners) -> Double {
      corners.contains(which) ? r : 0
    }
    let topLeft = corner(.topLeft)
    let topRight = corner(.topRight)
    let bottomRight = corner(.bottomRight)
    let bottomLeft = corner(.bottomLeft)
    ic_cairo_new_path(context)
    ic_cairo_move_to(context, rect.minX + topLeft, rect.minY)
    ic_cairo_line_to(context, rect.maxX - topRight, rect.minY)
    if topRight > 0 {
      ic_cairo_arc(context, rect.maxX - topRight, rect.minY + topRight, topRight, -.pi / 2, 0)
    }
    ic_cairo_line_to(context, rect.maxX, rect.maxY - bottomRight)
    if bottomRight > 0 {
      ic_cairo_arc(
        context, rect.maxX - bottomRight, rect.maxY - bottomRight, bottomRight, 0, .pi / 2)
    }
    ic_cairo_line_to(context, rect.minX + bottomLeft, rect.maxY)
    if bottomLeft > 0 {
      ic_cairo_arc(
        context, rect.minX + bottomLeft, rect.maxY - bottomLeft, bottomLeft, .pi / 2, .pi)
    }
    ic_cairo_line_to(context, rect.minX, rect.minY + topLeft)
    if topLeft > 0 {
      ic_cairo_arc(context, rect.minX + topLeft, rect.minY + topLeft, topLeft, .pi, 3 * .pi / 2)
    }
    ic_cairo_close_path(context)
  }

  static func setSource(_ color: ImageTransformer.Color, on context: OpaquePointer) {
    let argb = color.argb
    ic_cairo_set_source_rgba(
      context, Double(argb >> 16 & 0xFF) / 255, Double(argb >> 8 & 0xFF) / 255,
      Double(argb & 0xFF) / 255, Double(argb >> 24) / 255)
  }

  /// CGBlendMode to cairo's operators, which implement the same PDF and Porter-Duff
  /// equations. `plusDarker` (26) has no operator: ``plusDarker(_:color:)`` does it.
  static let operators: [Int: cairo_operator_t] = [
    0: CAIRO_OPERATOR_OVER, 1: CAIRO_OPERATOR_MULTIPLY, 2: CAIRO_OPERATOR_SCREEN,
    3: CAIRO_OPERATOR_OVERLAY, 4: CAIRO_OPERATOR_DARKEN, 5: CAIRO_OPERATOR_LIGHTEN,
    6: CAIRO_OPERATOR_COLOR_DODGE, 7: CAIRO_OPERATOR_COLOR_BURN, 8: CAIRO_OPERATOR_SOFT_LIGHT,
    9: CAIRO_OPERATOR_HARD_LIGHT, 10: CAIRO_OPERATOR_DIFFERENCE, 11: CAIRO_OPERATOR_EXCLUSION,
    12: CAIRO_OPERATOR_HSL_HUE, 13: CAIRO_OPERATOR_HSL_SATURATION, 14: CAIRO_OPERATOR_HSL_COLOR,
    15: CAIRO_OPERATOR_HSL_LUMINOSITY, 16: CAIRO_OPERATOR_CLEAR, 17: CAIRO_OPERATOR_SOURCE,
    18: CAIRO_OPERATOR_IN, 19: CAIRO_OPERATOR_OUT, 20: CAIRO_OPERATOR_ATOP,
    21: CAIRO_OPERATOR_DEST_OVER, 22: CAIRO_OPERATOR_DEST_IN, 23: CAIRO_OPERATOR_DEST_OUT,
    24: CAIRO_OPERATOR_DEST_ATOP, 25: CAIRO_OPERATOR_XOR, 27: CAIRO_OPERATOR_ADD,
  ]

  /// `kCGBlendModePlusDarker`: R = max(0, 1 - ((1 - D) + (1 - S))), on premultiplied values.
  static func plusDarker(_ surface: Surface, color: ImageTransformer.Color) {
    let alpha = Int(color.argb >> 24)
    let source = [
      Int(color.argb & 0xFF) * alpha / 255, Int(color.argb >> 8 & 0xFF) * alpha / 255,
      Int(color.argb >> 16 & 0xFF) * alpha / 255, alpha,
    ]
    surface.withPixels { pixels, stride in
      for y in 0..<surface.height {
        let row = pixels + y * stride
        for x in 0..<surface.width {
          let pixel = row + x * 4
          let resultAlpha = min(255, Int(pixel[3]) + alpha - Int(pixel[3]) * alpha / 255)
          for channel in 0..<3 {
            let value = max(0, Int(pixel[channel]) + source[channel] - 255)
            pixel[channel] = UInt8(min(value, resultAlpha))
          }
          pixel[3] = UInt8(resultAlpha)
        }
      }
    }
  }
}

/// vImage's `vImageBoxConvolve_ARGB8888` with `kvImageEdgeExtend`, done as a horizontal and a
/// vertical running sum (a box kernel separates exactly).
enum BoxBlur {
  static func apply(_ surface: Surface, size: Int) {
    let width = surface.width
    let height = surface.height
    let half = size / 2
    surface.withPixels { pixels, stride in
      var line = [UInt8](repeating: 0, count: max(width, height) * 4)
      // Rows.
      for y in 0..<height {
        let row = pixels + y * stride
        for i in 0..<width * 4 { line[i] = row[i] }
        blurLine(line, count: width, step: 4, half: half, size: size) { index, channel, value in
          row[index * 4 + channel] = value
        }
      }
      // Columns.
      for x in 0..<width {
        for y in 0..<height {
          for channel in 0..<4 { line[y * 4 + channel] = pixels[y * stride + x * 4 + channel] }
        }
        blurLine(line, count: height, step: 4, half: half, size: size) { index, channel, value in
          pixels[index * stride + x * 4 + channel] = value
        }
      }
    }
  }

  private static func blurLine(
    _ line: [UInt8], count: Int, step: Int, half: Int, size: Int,
    write: (Int, Int, UInt8) -> Void
  ) {
    for channel in 0..<4 {
      func at(_ index: Int) -> Int { Int(line[min(max(index, 0), count - 1) * step + channel]) }
      var sum = 0
      for offset in -half...half { sum += at(offset) }
      for index in 0..<count {
        write(index, channel, UInt8((sum + size / 2) / size))
        sum += at(index + half + 1) - at(index - half)
      }
    }
  }
}
