/// The marker segments of a JPEG before its entropy-coded data: read for what they say (the
/// frame's size and sampling, the EXIF orientation) without decoding anything.
enum JPEGHeader {
  /// Calls `visit` with the marker and the body of each segment from the start of the image
  /// (after SOI) up to and including its first scan's header (SOS), until `visit` returns
  /// `false`. Stops at an EOI, at a byte that is not a marker, or at a segment whose length
  /// is under 2 or runs past the end of `bytes`.
  static func forEachSegment<Bytes: RandomAccessCollection<UInt8>>(
    in bytes: Bytes, _ visit: (_ marker: UInt8, _ body: Range<Int>) -> Bool
  ) where Bytes.Index == Int {
    var offset = bytes.startIndex + 2
    while offset + 4 <= bytes.endIndex, bytes[offset] == 0xFF {
      let marker = bytes[offset + 1]
      guard marker != 0xD9 else { return }
      let length = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
      let body = offset + 4
      let end = offset + 2 + length
      guard length >= 2, end <= bytes.endIndex, visit(marker, body..<end), marker != 0xDA else {
        return
      }
      offset = end
    }
  }
}
