import Foundation

/// One damaged cache file per kind of damage `imagecache verify` names, each made from a valid
/// fixture, with the start of the reason it must be given (issue 45).
public enum DamagedImage: String, CaseIterable, Sendable {
  case truncatedJPEG
  case truncatedPNG
  case brokenPNGCRC
  case flippedJPEGHeaderByte
  case zeroBytes
  case htmlPage
  case text
  case unknownFormat

  public var data: Data {
    switch self {
    case .truncatedJPEG:
      // Cut inside the scan: the headers are whole, the EOI marker is gone.
      return Fixtures.jpeg.prefix(Fixtures.jpeg.count - 100)
    case .truncatedPNG:
      return Fixtures.png.prefix(Fixtures.png.count - 20)
    case .brokenPNGCRC:
      var png = Fixtures.png
      let idat = png.range(of: Data("IDAT".utf8))!.lowerBound
      png[idat + 6] ^= 0x55
      return png
    case .flippedJPEGHeaderByte:
      // The 0xFF of the marker after the first segment: the header no longer holds together.
      var jpeg = Fixtures.jpeg
      let firstSegment = Int(jpeg[4]) << 8 | Int(jpeg[5])
      jpeg[4 + firstSegment] ^= 0xFF
      return jpeg
    case .zeroBytes:
      return Data()
    case .htmlPage:
      return Data(
        "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body>gone</body></html>\n"
          .utf8)
    case .text:
      return Data("{\"error\": \"rate limited, try again later\"}\n".utf8)
    case .unknownFormat:
      return Data([0x1F, 0x8B, 0x08, 0x00] + [UInt8](repeating: 0, count: 60))
    }
  }

  /// How the reason `verify` gives begins.
  public var reason: String {
    switch self {
    case .truncatedJPEG: "jpeg: truncated"
    case .truncatedPNG: "png: truncated"
    case .brokenPNGCRC: "png: corrupt: CRC mismatch in chunk \"IDAT\""
    case .flippedJPEGHeaderByte: "jpeg: corrupt: expected a marker at byte"
    case .zeroBytes: "empty file (0 bytes)"
    case .htmlPage: "an HTML page, not an image"
    case .text: "text, not an image"
    case .unknownFormat: "unknown format, not an image"
    }
  }

  /// Whether the damage is in the header, which `--level header` reads; the rest is found by
  /// `--level structure` only.
  public var isInHeader: Bool {
    switch self {
    case .truncatedJPEG, .truncatedPNG, .brokenPNGCRC: false
    default: true
    }
  }

  /// The URL it was fetched from, as the cache names it: the extension an app's URL had.
  public var url: String {
    let ext = ["truncatedPNG": "png", "brokenPNGCRC": "png", "htmlPage": "png"][rawValue] ?? "jpg"
    return "https://images.example/damaged/\(rawValue).\(ext)"
  }
}

/// The valid fixtures, by the URL a cache would have them under: `verify` must flag none.
public let validCacheImages: [(url: String, data: Data)] = [
  ("https://images.example/photo.jpg", Fixtures.jpeg),
  ("https://images.example/large.jpg?w=400", Fixtures.largeJPEG),
  ("https://images.example/oriented.jpeg", Fixtures.orientedJPEG),
  ("https://images.example/image.png", Fixtures.png),
  ("https://images.example/alpha.png", Fixtures.alphaPNG),
  ("https://images.example/anim.gif", Fixtures.gif),
  ("https://images.example/lossless.webp", Fixtures.webpLossless),
  ("https://images.example/lossy.webp", Fixtures.webpLossy),
  ("https://images.example/still.gif", Fixtures.stillGIF),
  ("https://images.example/animated.gif", Fixtures.animatedGIF),
  ("https://images.example/photo.webp", Fixtures.lossyWebP),
  ("https://images.example/alpha.webp", Fixtures.losslessAlphaWebP),
  ("https://images.example/lossy-alpha.webp", Fixtures.lossyAlphaWebP),
  ("https://images.example/animated.webp", Fixtures.animatedWebP),
  ("https://images.example/noextension", Fixtures.jpeg),
]

/// Damage inside the compressed data, where only a decode looks (`verify --level full`): the
/// container still holds together, so the structure walk passes both.
public enum EntropyDamagedImage: String, CaseIterable, Sendable {
  /// The 400x300 JPEG with one byte in the middle of its scan data flipped (no marker made or
  /// broken): the Huffman decoding goes astray and libjpeg-turbo runs out of data before the
  /// last block, "premature end of data segment". Not every flip shows: one that decodes to
  /// other valid codes only changes pixels, and JPEG has no checksum to tell.
  case flippedJPEGScanByte
  /// The 64x48 PNG with a byte of its IDAT's zlib data flipped and the chunk's CRC made right
  /// again, as a writer that compressed wrong would leave it: zlib's check fails.
  case corruptPNGDeflateData
  /// The still GIF with the third byte of its LZW data flipped: the codes go astray and one
  /// falls past the table's end. GIF has no checksum either: about a third of such flips show.
  case flippedGIFLZWByte
  /// The animated GIF with its second frame's LZW data cut in half, the sub-blocks still
  /// well formed and terminated: the data runs out before the frame's last pixel.
  case shortGIFFrameData
  /// The lossy WebP cut in the middle of its token partition, the VP8 chunk's and RIFF's sizes
  /// made to match: libwebp runs out of data before the last macroblock.
  case shortWebPLossyData
  /// The lossless WebP with alpha with a byte in the middle of its VP8L data flipped: its
  /// prefix codes no longer decode.
  case flippedWebPLosslessByte
  /// The animated WebP with a byte of its third frame's alpha data (lossless compressed)
  /// flipped.
  case flippedWebPFrameAlphaByte
  /// The lossy WebP with alpha (64x48: an even height) with its ALPH chunk's size one byte
  /// short, the padding keeping the layout: the alpha plane's last row runs out of data. A
  /// decode cropped to the last row alone would pass it (libwebp starts a lossy crop on an
  /// even row and reads the alpha to the crop's bottom only).
  case shortWebPAlphaData

  public var data: Data {
    switch self {
    case .flippedJPEGScanByte:
      var jpeg = Fixtures.largeJPEG
      let bytes = [UInt8](jpeg)
      let sos = (0..<bytes.count - 1).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA }!
      let scan = sos + 2 + (Int(bytes[sos + 2]) << 8 | Int(bytes[sos + 3]))
      let middle = scan + (bytes.count - 2 - scan) / 2
      precondition(bytes[middle] != 0xFF && bytes[middle - 1] != 0xFF && bytes[middle] != 0xAA)
      jpeg[middle] ^= 0x55
      return jpeg
    case .corruptPNGDeflateData:
      var png = [UInt8](Fixtures.png)
      let type = (0..<png.count - 4).first { Array(png[$0..<$0 + 4]) == Array("IDAT".utf8) }!
      let length = png[(type - 4)..<type].reduce(0) { $0 << 8 | Int($1) }
      png[type + 4 + length / 2] ^= 0x55
      let crc = crc32(png[type..<(type + 4 + length)])
      for index in 0..<4 {
        png[type + 4 + length + index] = UInt8(truncatingIfNeeded: crc >> (24 - 8 * index))
      }
      return Data(png)
    case .flippedGIFLZWByte:
      var gif = Fixtures.stillGIF
      gif[gifImageData(gif, frame: 1).lowerBound + 2] ^= 0x55
      return gif
    case .shortGIFFrameData:
      let gif = [UInt8](Fixtures.animatedGIF)
      let blocks = gifImageData(Data(gif), frame: 2)
      // The LZW minimum code size, then the sub-blocks' bytes joined, halved and cut again.
      var lzw: [UInt8] = []
      var offset = blocks.lowerBound + 1
      while gif[offset] != 0 {
        lzw += gif[(offset + 1)..<(offset + 1 + Int(gif[offset]))]
        offset += 1 + Int(gif[offset])
      }
      var short: [UInt8] = [gif[blocks.lowerBound]]
      for start in stride(from: 0, to: lzw.count / 2, by: 255) {
        let block = lzw[start..<min(start + 255, lzw.count / 2)]
        short += [UInt8(block.count)] + block
      }
      return Data(gif[..<blocks.lowerBound] + short + [0] + gif[blocks.upperBound...])
    case .shortWebPLossyData:
      var webp = [UInt8](Fixtures.lossyWebP)
      let size = Int(webp[16]) | Int(webp[17]) << 8 | Int(webp[18]) << 16
      let firstPartition = (Int(webp[20]) | Int(webp[21]) << 8 | Int(webp[22]) << 16) >> 5
      let kept = ((10 + firstPartition + size) / 2) & ~1
      webp = Array(webp[..<(20 + kept)])
      setUInt32LE(&webp, at: 16, kept)
      setUInt32LE(&webp, at: 4, webp.count - 8)
      return Data(webp)
    case .flippedWebPLosslessByte:
      var webp = Fixtures.losslessAlphaWebP
      webp[webp.count / 2] ^= 0x55
      return webp
    case .flippedWebPFrameAlphaByte:
      var webp = Fixtures.animatedWebP
      webp[webp.range(of: Data("ALPH".utf8))!.lowerBound + 10] ^= 0x55
      return webp
    case .shortWebPAlphaData:
      var webp = Fixtures.lossyAlphaWebP
      let size = webp.range(of: Data("ALPH".utf8))!.upperBound
      precondition(webp[size] > 0 && webp[size + 1] == 0)
      webp[size] -= 1
      return webp
    }
  }

  /// How the reason `verify --level full` gives begins.
  public var reason: String {
    switch self {
    case .flippedJPEGScanByte: "jpeg: Corrupt JPEG data"
    case .corruptPNGDeflateData: "png: IDAT:"
    case .flippedGIFLZWByte: "gif: frame 1: corrupt LZW data"
    case .shortGIFFrameData: "gif: frame 2: corrupt LZW data: the data ends after"
    case .shortWebPLossyData: "webp: image 1: truncated bitstream"
    case .flippedWebPLosslessByte: "webp: image 1: corrupt bitstream"
    case .flippedWebPFrameAlphaByte: "webp: frame 3: corrupt bitstream"
    case .shortWebPAlphaData: "webp: image 1: corrupt bitstream"
    }
  }

  public var url: String {
    let ext = reason.prefix { $0 != ":" }
    return "https://images.example/damaged/\(rawValue).\(ext == "jpeg" ? "jpg" : ext)"
  }
}

/// The range of a GIF's `frame` (from 1) from its LZW minimum code size to the end of its
/// sub-blocks' terminator, found by walking the blocks.
public func gifImageData(_ gif: Data, frame: Int) -> Range<Int> {
  let bytes = [UInt8](gif)
  let colourTable = { (packed: UInt8) in packed & 0x80 == 0 ? 0 : 3 << (Int(packed & 7) + 1) }
  let skipSubBlocks = { (start: Int) -> Int in
    var offset = start
    while bytes[offset] != 0 { offset += 1 + Int(bytes[offset]) }
    return offset + 1
  }
  var offset = 13 + colourTable(bytes[10])
  var frames = 0
  while true {
    if bytes[offset] == 0x21 {
      offset = skipSubBlocks(offset + 2)
      continue
    }
    precondition(bytes[offset] == 0x2C, "frame \(frame) of a GIF of \(frames) frames")
    let data = offset + 10 + colourTable(bytes[offset + 9])
    offset = skipSubBlocks(data + 1)
    frames += 1
    if frames == frame { return data..<offset }
  }
}

private func setUInt32LE(_ bytes: inout [UInt8], at offset: Int, _ value: Int) {
  for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * index)) }
}

/// The 64x48 PNG with its header declaring `width` x `height` (the header's CRC made right): a
/// container that holds together, whose pixels only a decode would miss.
public func pngDeclaring(width: UInt32, height: UInt32) -> Data {
  var png = [UInt8](Fixtures.png)
  for (offset, value) in [(16, width), (20, height)] {
    for index in 0..<4 {
      png[offset + index] = UInt8(truncatingIfNeeded: value >> (24 - 8 * index))
    }
  }
  let crc = crc32(png[12..<29])
  for index in 0..<4 { png[29 + index] = UInt8(truncatingIfNeeded: crc >> (24 - 8 * index)) }
  return Data(png)
}

/// PNG's CRC-32 (ISO 3309), bit by bit: for fixtures only.
func crc32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
  var crc: UInt32 = 0xFFFF_FFFF
  for byte in bytes {
    crc ^= UInt32(byte)
    for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
  }
  return ~crc
}
