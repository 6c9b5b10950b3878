import CPNG
import Core
import Foundation

struct StructureFailure: Error {
  var reason: String
}

/// Bounds-checked big- and little-endian reads over a body.
struct ByteReader {
  let raw: UnsafeRawBufferPointer
  init(_ raw: UnsafeRawBufferPointer) { self.raw = raw }

  var count: Int { raw.count }

  func need(_ offset: Int, _ length: Int, _ what: String) throws {
    guard offset >= 0, length >= 0, offset <= raw.count - length else {
      throw StructureFailure(reason: "truncated (\(what) past the end of \(raw.count) bytes)")
    }
  }
  func u8(_ offset: Int, _ what: String = "data") throws -> Int {
    try need(offset, 1, what)
    return Int(raw[offset])
  }
  func u16be(_ offset: Int, _ what: String = "data") throws -> Int {
    try need(offset, 2, what)
    return Int(raw[offset]) << 8 | Int(raw[offset + 1])
  }
  func u16le(_ offset: Int, _ what: String = "data") throws -> Int {
    try need(offset, 2, what)
    return Int(raw[offset + 1]) << 8 | Int(raw[offset])
  }
  func u32be(_ offset: Int, _ what: String = "data") throws -> Int {
    try need(offset, 4, what)
    return Int(raw[offset]) << 24 | Int(raw[offset + 1]) << 16 | Int(raw[offset + 2]) << 8
      | Int(raw[offset + 3])
  }
  func u32le(_ offset: Int, _ what: String = "data") throws -> Int {
    try need(offset, 4, what)
    return Int(raw[offset + 3]) << 24 | Int(raw[offset + 2]) << 16 | Int(raw[offset + 1]) << 8
      | Int(raw[offset])
  }
  func matches(_ offset: Int, _ text: String) -> Bool {
    let bytes = Array(text.utf8)
    guard offset >= 0, offset <= raw.count - bytes.count else { return false }
    return raw[offset..<offset + bytes.count].elementsEqual(bytes)
  }
  func firstIndex(of text: String, from start: Int = 0) -> Int? {
    let bytes = Array(text.utf8)
    guard let first = bytes.first, raw.count >= bytes.count else { return nil }
    var index = start
    while index <= raw.count - bytes.count {
      if raw[index] == first && matches(index, text) { return index }
      index += 1
    }
    return nil
  }
}

/// The `structure` level: one pass over the container of each format. With `headerOnly`
/// (`verify --level header`), only the header: JPEG's segments up to its frame header, PNG's
/// signature and IHDR chunk (its CRC too), GIF's screen descriptor; the other formats' magic.
struct StructureCheck {
  let bytes: ByteReader
  let format: ImageFormat
  var headerOnly = false

  func run() throws -> ImageInfo {
    if headerOnly && ![.jpeg, .png, .gif].contains(format) { return ImageInfo(format: format) }
    let size: (Int, Int)?
    switch format {
    case .jpeg: size = try jpeg()
    case .png: size = try png()
    case .gif: size = try gif()
    case .webp: size = try webp()
    case .heic, .heif, .avif: size = try isoMedia()
    case .tiff: size = try tiff()
    case .bmp: size = try bmp()
    case .svg: size = try svg()
    case .pdf: size = try pdf()
    }
    if let size, size.0 <= 0 || size.1 <= 0 {
      throw StructureFailure(reason: "image has zero pixels (\(size.0)x\(size.1))")
    }
    return ImageInfo(format: format, width: size?.0, height: size?.1)
  }

  /// Walks the marker segments to the SOF header for dimensions, through every scan's
  /// entropy-coded data, and requires the EOI marker.
  private func jpeg() throws -> (Int, Int)? {
    var offset = 2
    var size: (Int, Int)?
    while true {
      guard offset < bytes.count else { throw StructureFailure(reason: "truncated: no EOI marker") }
      guard try bytes.u8(offset) == 0xFF else {
        throw StructureFailure(reason: "corrupt: expected a marker at byte \(offset)")
      }
      var markerOffset = offset + 1
      while markerOffset < bytes.count, bytes.raw[markerOffset] == 0xFF { markerOffset += 1 }
      let marker = try bytes.u8(markerOffset, "marker")
      offset = markerOffset + 1
      switch marker {
      case 0xD9:
        guard size != nil else { throw StructureFailure(reason: "corrupt: EOI before any frame") }
        return size
      case 0x01, 0xD0...0xD7:
        continue
      default:
        break
      }
      let length = try bytes.u16be(offset, "segment length")
      guard length >= 2 else { throw StructureFailure(reason: "corrupt: segment length \(length)") }
      try bytes.need(offset, length, "segment")
      if [0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF].contains(
        marker)
      {
        size = (try bytes.u16be(offset + 5), try bytes.u16be(offset + 3))
        if headerOnly { return size }
      }
      offset += length
      if marker == 0xDA && headerOnly {
        throw StructureFailure(reason: "corrupt: scan before any frame header")
      }
      if marker == 0xDA {
        offset = try endOfEntropyCodedData(from: offset)
      }
    }
  }

  /// The offset of the first marker after a scan's entropy-coded data (0xFF followed by
  /// neither a stuffed 0x00 nor a restart marker).
  private func endOfEntropyCodedData(from start: Int) throws -> Int {
    var index = start
    let raw = bytes.raw
    // memchr finds each 0xFF: the scan is most of a JPEG's bytes, and few of them are 0xFF.
    while index + 1 < raw.count, let base = raw.baseAddress,
      let found = memchr(base + index, 0xFF, raw.count - 1 - index)
    {
      index = UnsafeRawPointer(found) - base
      let next = raw[index + 1]
      if next != 0x00 && !(0xD0...0xD7).contains(next) && next != 0xFF { return index }
      index += 1
    }
    throw StructureFailure(reason: "truncated: scan data runs to the end without an EOI marker")
  }

  /// Walks every chunk, checking its CRC, from IHDR to IEND.
  private func png() throws -> (Int, Int)? {
    var offset = 8
    var size: (Int, Int)?
    while true {
      let length = try bytes.u32be(offset, "chunk length")
      try bytes.need(offset + 4, 4 + length + 4, "chunk")
      let type = String(decoding: bytes.raw[(offset + 4)..<(offset + 8)], as: UTF8.self)
      if size == nil {
        guard type == "IHDR", length == 13 else {
          throw StructureFailure(
            reason: "corrupt: first chunk is \(type.debugDescription), not IHDR")
        }
        size = (try bytes.u32be(offset + 8), try bytes.u32be(offset + 12))
      }
      let stored = UInt(try bytes.u32be(offset + 8 + length))
      let computed = crc32(
        0, bytes.raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + offset + 4,
        UInt32(4 + length))
      guard stored == computed else {
        throw StructureFailure(reason: "corrupt: CRC mismatch in chunk \(type.debugDescription)")
      }
      offset += 12 + length
      if type == "IEND" || headerOnly { return size }
    }
  }

  /// Walks the blocks (extensions with their sub-blocks, image descriptors with their colour
  /// tables and LZW data) to the trailer.
  private func gif() throws -> (Int, Int)? {
    let size = (try bytes.u16le(6), try bytes.u16le(8))
    let packed = try bytes.u8(10, "screen descriptor")
    if headerOnly { return size }
    var offset = 13
    if packed & 0x80 != 0 { offset += 3 << ((packed & 0x07) + 1) }
    var frames = 0
    while true {
      let introducer = try bytes.u8(offset, "block")
      switch introducer {
      case 0x3B:
        guard frames > 0 else { throw StructureFailure(reason: "corrupt: no image in the file") }
        return size
      case 0x21:
        offset = try skipSubBlocks(from: offset + 2)
      case 0x2C:
        let imagePacked = try bytes.u8(offset + 9, "image descriptor")
        offset += 10
        if imagePacked & 0x80 != 0 { offset += 3 << ((imagePacked & 0x07) + 1) }
        offset = try skipSubBlocks(from: offset + 1)
        frames += 1
      default:
        throw StructureFailure(reason: "corrupt: unknown block 0x\(String(introducer, radix: 16))")
      }
    }
  }

  private func skipSubBlocks(from start: Int) throws -> Int {
    var offset = start
    while true {
      let length = try bytes.u8(offset, "sub-block")
      offset += 1 + length
      if length == 0 { return offset }
    }
  }

  private func webp() throws -> (Int, Int)? {
    let riffSize = try bytes.u32le(4)
    try bytes.need(0, 8 + riffSize, "RIFF payload")
    if bytes.matches(12, "VP8 ") {
      guard try bytes.u8(23) == 0x9D, try bytes.u8(24) == 0x01, try bytes.u8(25) == 0x2A
      else { throw StructureFailure(reason: "corrupt: no VP8 start code") }
      return (try bytes.u16le(26) & 0x3FFF, try bytes.u16le(28) & 0x3FFF)
    }
    if bytes.matches(12, "VP8L") {
      guard try bytes.u8(20) == 0x2F else {
        throw StructureFailure(reason: "corrupt: no VP8L signature")
      }
      let bits = try bytes.u32le(21)
      return ((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    }
    if bytes.matches(12, "VP8X") {
      let width = try bytes.u16le(24) | (try bytes.u8(26)) << 16
      let height = try bytes.u16le(27) | (try bytes.u8(29)) << 16
      return (width + 1, height + 1)
    }
    throw StructureFailure(reason: "corrupt: no VP8, VP8L or VP8X chunk")
  }

  /// Top-level boxes must tile the file exactly; dimensions come from the `ispe` property.
  private func isoMedia() throws -> (Int, Int)? {
    var offset = 0
    var sawMeta = false
    while offset < bytes.count {
      var boxSize = try bytes.u32be(offset, "box header")
      let type = String(
        decoding: bytes.raw[(offset + 4)..<min(offset + 8, bytes.count)], as: UTF8.self)
      if boxSize == 1 {
        boxSize = (try bytes.u32be(offset + 8)) << 32 | (try bytes.u32be(offset + 12))
      } else if boxSize == 0 {
        boxSize = bytes.count - offset
      }
      guard boxSize >= 8 else { throw StructureFailure(reason: "corrupt: box size \(boxSize)") }
      try bytes.need(offset, boxSize, "box \(type.debugDescription)")
      if type == "meta" { sawMeta = true }
      offset += boxSize
    }
    guard sawMeta else { throw StructureFailure(reason: "corrupt: no meta box") }
    guard let ispe = bytes.firstIndex(of: "ispe") else { return nil }
    return (try bytes.u32be(ispe + 8), try bytes.u32be(ispe + 12))
  }

  /// The first IFD must lie inside the file, and so must its strips or tiles.
  private func tiff() throws -> (Int, Int)? {
    let little = bytes.matches(0, "II")
    let u16 = { (offset: Int) throws -> Int in
      little ? try bytes.u16le(offset, "IFD") : try bytes.u16be(offset, "IFD")
    }
    let u32 = { (offset: Int) throws -> Int in
      little ? try bytes.u32le(offset, "IFD") : try bytes.u32be(offset, "IFD")
    }
    let ifd = try u32(4)
    let entries = try u16(ifd)
    var width = 0
    var height = 0
    var dataOffset: Int?
    var dataLength: Int?
    for entry in 0..<entries {
      let base = ifd + 2 + entry * 12
      let tag = try u16(base)
      let type = try u16(base + 2)
      let count = try u32(base + 4)
      let value = type == 3 ? try u16(base + 8) : try u32(base + 8)
      switch tag {
      case 256: width = value
      case 257: height = value
      case 273, 324: dataOffset = count == 1 ? value : nil
      case 279, 325: dataLength = count == 1 ? value : nil
      default: break
      }
    }
    if let dataOffset, let dataLength { try bytes.need(dataOffset, dataLength, "image data") }
    return (width, height)
  }

  private func bmp() throws -> (Int, Int)? {
    let fileSize = try bytes.u32le(2)
    try bytes.need(0, fileSize, "declared file size")
    let pixelOffset = try bytes.u32le(10)
    guard pixelOffset < bytes.count else {
      throw StructureFailure(reason: "truncated: pixel data at \(pixelOffset)")
    }
    let headerSize = try bytes.u32le(14)
    if headerSize == 12 { return (try bytes.u16le(18), try bytes.u16le(20)) }
    let width = Int(Int32(truncatingIfNeeded: try bytes.u32le(18)))
    let height = Int(Int32(truncatingIfNeeded: try bytes.u32le(22)))
    return (width, abs(height))
  }

  private func svg() throws -> (Int, Int)? {
    let text = String(decoding: bytes.raw, as: UTF8.self)
    guard
      text.range(of: "</svg>", options: [.caseInsensitive, .backwards]) != nil
        || text.range(of: "<svg[^>]*/>", options: [.regularExpression, .caseInsensitive]) != nil
    else { throw StructureFailure(reason: "truncated: no closing </svg>") }
    return nil
  }

  private func pdf() throws -> (Int, Int)? {
    let tailStart = max(0, bytes.count - 1024)
    guard bytes.firstIndex(of: "%%EOF", from: tailStart) != nil else {
      throw StructureFailure(reason: "truncated: no %%EOF trailer")
    }
    return nil
  }
}
