import Core
import Foundation
import TestSupport
import XCTest

/// Memory does not follow what origins send (SPEC section 12): a body is held in memory only
/// up to a small buffer and spills to its temporary file in the cache folder, so that many
/// compression bombs at once cost no more than the number of transfers.
final class ResponseMemoryTests: LoopbackTestCase {
  /// 200 MB of zeros, as a server sends it gzip-encoded: about 200 KB.
  static let gzipBomb = Fixtures.gzip(Data(count: 200_000_000))

  /// The same zeros `Content-Encoding: deflate` (a zlib stream): the gzip stream's deflate
  /// data (after gzip(1)'s 10-byte header, before its 8-byte trailer) with zlib's header and
  /// the Adler-32 of the zeros (1, and the count modulo 65521, big-endian).
  static let deflateBomb: Data = {
    let raw = gzipBomb.dropFirst(10).dropLast(8)
    let sum = UInt32(200_000_000 % 65521)
    let adler = (sum << 16) | 1
    return Data([0x78, 0x9C]) + raw + withUnsafeBytes(of: adler.bigEndian) { Data($0) }
  }()

  /// A valid 64x48 JPEG grown past 2 MB by comment segments before its frame.
  static let largeJPEG: Data = {
    let comment = Data([0xFF, 0xFE, 0xFF, 0xFF]) + Data(repeating: 0x41, count: 0xFFFF - 2)
    var data = Data([0xFF, 0xD8])
    for _ in 0..<32 { data += comment }
    return data + Fixtures.jpeg.dropFirst(2)
  }()

  static let bombs = 20

  override var routes: [String: Route] {
    var routes: [String: Route] = [
      "/large.jpg": { _ in .image(Self.largeJPEG, type: "image/jpeg") }
    ]
    for index in 0..<Self.bombs {
      let encoding = index.isMultiple(of: 2) ? "gzip" : "deflate"
      let body = index.isMultiple(of: 2) ? Self.gzipBomb : Self.deflateBomb
      routes["/bomb\(index).png"] = { _ in
        ServerResponse(
          headers: [("Content-Type", "image/png"), ("Content-Encoding", encoding)], body: body)
      }
    }
    return routes
  }

  /// The cache folder's entries other than the tool's state: files, and any temporary left.
  private func entries(_ cache: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: cache + "/default")
      .filter { $0 != ".imagecache" }.sorted()
  }

  func testCompressionBombsAtOnceFailAsTooLargeInBoundedMemory() throws {
    let cache = temporary.appending("cache")
    let report = temporary.appending("report.json")
    let urls = (0..<Self.bombs).map { server.url("/bomb\($0).png") }
    // Every bomb at once: the limits let them all run together.
    let (status, peakKiB) = try PeakMemory.run(
      ImageCacheBinary.path,
      [
        "prefetch", try temporary.manifest(urls), "--cache", cache, "--report", report,
        "--concurrency", "\(Self.bombs)", "--per-host-concurrency", "\(Self.bombs)",
        "--retries", "0",
      ])
    XCTAssertEqual(status, 1)
    let prefetch = try XCTUnwrap(
      try RunReport.decode(try Data(contentsOf: URL(fileURLWithPath: report))).prefetch)
    XCTAssertEqual(prefetch.failures.count, Self.bombs)
    for failure in prefetch.failures {
      XCTAssertEqual(failure.name, "responseTooLarge", failure.url)
    }
    XCTAssertEqual(try entries(cache), [], "nothing is stored and no temporary file is left")
    // Each bomb is cut at the 50 MiB limit: held in memory, 20 of them took about 1 GB.
    XCTAssertLessThan(peakKiB, 400 * 1024, "peak resident memory \(peakKiB) KiB")
  }

  func testABodyOverTheMemoryBufferIsValidatedAndStoredWhole() throws {
    let cache = temporary.appending("cache")
    let result = try ImageCacheBinary.run(
      ["prefetch", try temporary.manifest([server.url("/large.jpg")]), "--cache", cache])
    XCTAssertEqual(result.status, 0, result.stderr)
    let name = CacheFileName.fileName(forKey: server.url("/large.jpg"))
    XCTAssertEqual(try entries(cache), [name])
    XCTAssertEqual(
      FileManager.default.contents(atPath: cache + "/default/" + name), Self.largeJPEG)
  }
}
