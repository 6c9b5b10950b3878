import Foundation

/// A GIF of one frame written from its colour indices, with the LZW coding chosen: the minimum
/// code size, and whether a full table (4,096 codes) is cleared or kept (a "deferred clear",
/// which GIF allows and some encoders do). The tests of verify's LZW follower use it to make
/// streams that fill the table at every code width; its output was checked once against
/// Pillow's decoder (the same indices back).
public struct GIFWriter {
  public var width: Int
  public var height: Int
  public var minCodeSize: Int
  public var clearWhenFull: Bool

  public init(width: Int, height: Int, minCodeSize: Int, clearWhenFull: Bool) {
    self.width = width
    self.height = height
    self.minCodeSize = minCodeSize
    self.clearWhenFull = clearWhenFull
  }

  /// Indices in `0..<(1 << minCodeSize)` drawn from `seed`, runs among them so that the table
  /// holds strings of many lengths.
  public func noise(seed: UInt64) -> [UInt8] {
    var random = SeededRandom(seed: seed)
    var pixels: [UInt8] = []
    while pixels.count < width * height {
      let value = UInt8(random.below(1 << minCodeSize))
      pixels += [UInt8](repeating: value, count: 1 + random.below(4))
    }
    return Array(pixels.prefix(width * height))
  }

  /// The LZW codes of `pixels`, each with the width the decoder reads it at, from the first
  /// clear code to the end code.
  public func codes(_ pixels: [UInt8]) -> [(code: Int, width: Int)] {
    let clear = 1 << minCodeSize
    var codes: [(code: Int, width: Int)] = []
    var table: [Int: Int] = [:]
    var next = clear + 2
    var width = minCodeSize + 1
    var read = 0  // codes since the last clear, as giflib counts them to grow the width
    func emit(_ code: Int) {
      codes.append((code, width))
      if code == clear {
        table = [:]
        next = clear + 2
        width = minCodeSize + 1
        read = 0
        return
      }
      read += 1
      if clear + 2 + read > 1 << width && width < 12 { width += 1 }
    }
    emit(clear)
    var current = Int(pixels[0])
    for pixel in pixels.dropFirst() {
      let key = current << 8 | Int(pixel)
      if let code = table[key] {
        current = code
        continue
      }
      emit(current)
      if next < 4096 {
        table[key] = next
        next += 1
      } else if clearWhenFull {
        emit(clear)
      }
      current = Int(pixel)
    }
    emit(current)
    emit(clear + 1)
    return codes
  }

  /// The codes packed least significant bit first.
  public static func pack(_ codes: [(code: Int, width: Int)]) -> [UInt8] {
    var bytes: [UInt8] = []
    var accumulator = 0
    var held = 0
    for (code, width) in codes {
      accumulator |= code << held
      held += width
      while held >= 8 {
        bytes.append(UInt8(accumulator & 0xFF))
        accumulator >>= 8
        held -= 8
      }
    }
    if held > 0 { bytes.append(UInt8(accumulator & 0xFF)) }
    return bytes
  }

  /// A whole GIF89a: a grey global colour table of `1 << minCodeSize` entries (at least 2), one
  /// image descriptor, `lzw` as 255-byte sub-blocks and their terminator, the trailer.
  public func file(lzw: [UInt8]) -> Data {
    let tableBits = max(minCodeSize, 1)
    var bytes = Array("GIF89a".utf8)
    bytes += le16(width) + le16(height) + [0x80 | UInt8(tableBits - 1), 0, 0]
    for index in 0..<(1 << tableBits) {
      let grey = UInt8(truncatingIfNeeded: index * 255 / ((1 << tableBits) - 1))
      bytes += [grey, grey, grey]
    }
    bytes += [0x2C] + le16(0) + le16(0) + le16(width) + le16(height) + [0]
    bytes.append(UInt8(minCodeSize))
    for start in stride(from: 0, to: lzw.count, by: 255) {
      let block = lzw[start..<min(start + 255, lzw.count)]
      bytes += [UInt8(block.count)] + block
    }
    bytes += [0, 0x3B]
    return Data(bytes)
  }

  public func file(_ pixels: [UInt8]) -> Data { file(lzw: Self.pack(codes(pixels))) }

  private func le16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
}
