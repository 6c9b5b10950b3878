import Foundation

/// The sample images under `Tests/Fixtures`, shared by every test target.
public enum Fixtures {
  /// `Tests/Fixtures`, found from this file's location so that no resource bundle is needed.
  public static let directory: String = {
    let here = URL(fileURLWithPath: #filePath)
    return here.deletingLastPathComponent().deletingLastPathComponent()
      .appendingPathComponent("Fixtures").path
  }()

  /// The bytes of the fixture `name` (e.g. `photo.jpg`); a missing fixture stops the test run.
  public static func data(_ name: String) -> Data {
    let path = (directory as NSString).appendingPathComponent(name)
    guard let data = FileManager.default.contents(atPath: path) else {
      fatalError("missing test fixture \(path)")
    }
    return data
  }

  /// A 64x48 baseline JPEG.
  public static var jpeg: Data { data("photo.jpg") }
  /// `count` bytes: the JPEG's start, padded with spaces (served where validation is off, for
  /// bodies of a known size).
  public static func paddedJPEG(count: Int) -> Data {
    jpeg + Data(repeating: 0x20, count: count - jpeg.count)
  }
  /// A 64x48 RGB PNG.
  public static var png: Data { data("image.png") }
  /// A 400x300 JPEG: a gradient with a circle.
  public static var largeJPEG: Data { data("photo-400x300.jpg") }
  /// A JPEG stored 300x200 with EXIF orientation 6 (shown 200x300, turned clockwise).
  public static var orientedJPEG: Data { data("oriented-6.jpg") }
  /// A 200x100 PNG, transparent but for a half-opaque red rectangle (20,20)-(180,80).
  public static var alphaPNG: Data { data("alpha.png") }
  /// A 1x1 GIF with two frames.
  public static var gif: Data { data("anim.gif") }
  /// A 64x48 interlaced GIF of 64 colours, one frame.
  public static var stillGIF: Data { data("still.gif") }
  /// A 64x48 GIF of three frames, the second 64x47 at (0, 1) with a colour table of its own.
  public static var animatedGIF: Data { data("anim-64x48.gif") }
  /// A 64x48 lossy WebP (a VP8 chunk alone).
  public static var lossyWebP: Data { data("lossy.webp") }
  /// A 64x48 lossless WebP with a gradient of alpha (a VP8L chunk alone).
  public static var losslessAlphaWebP: Data { data("lossless-alpha.webp") }
  /// A 64x48 lossy WebP with a gradient of alpha (VP8X, ALPH, VP8).
  public static var lossyAlphaWebP: Data { data("lossy-alpha.webp") }
  /// A 64x48 animated WebP of three frames: lossless with alpha, lossy, lossy with alpha.
  public static var animatedWebP: Data { data("anim.webp") }
  /// A 10000x10000 lossless WebP (a VP8L chunk of 37 KB, a palette of 256 colours: each row a
  /// ramp of red), which libwebp decodes into 400 MB of ARGB. Made by
  /// `cwebp -lossless`; stored gzip-compressed (507 bytes).
  public static var largeLosslessWebP: Data { gunzip(data("lossless-10000x10000.webp.gz")) }
  /// A 10000x10000 lossy WebP with alpha (VP8X, ALPH, VP8; 208 KB): a flat colour under an alpha
  /// that varies along each row and not down the columns (vertically filtered, then compressed
  /// losslessly), which libwebp decodes into 400 MB of ARGB and a 100 MB alpha plane. Made by
  /// `cwebp -q 0 -m 6 -sns 0 -f 0 -segments 1`; stored gzip-compressed (577 bytes).
  public static var largeLossyAlphaWebP: Data {
    gunzip(data("lossy-alpha-10000x10000.webp.gz"))
  }
  /// `data` compressed by gzip(1), as a server sends a `Content-Encoding: gzip` body.
  public static func gzip(_ data: Data) -> Data { filter(data, through: "gzip -c") }
  /// `data` decompressed by gzip(1).
  public static func gunzip(_ data: Data) -> Data { filter(data, through: "gzip -dc") }

  private static func filter(_ data: Data, through command: String) -> Data {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", command]
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    guard (try? process.run()) != nil else { fatalError("cannot run \(command)") }
    // Written from another thread: a large input would fill the pipe while nobody reads.
    let writer = Thread {
      input.fileHandleForWriting.write(data)
      try? input.fileHandleForWriting.close()
    }
    writer.start()
    let filtered = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return filtered
  }

  /// A 1x1 lossless WebP.
  public static let webpLossless = Data(
    base64Encoded: "UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")!
  /// A 1x1 lossy WebP.
  public static let webpLossy = Data(
    base64Encoded: "UklGRiIAAABXRUJQVlA4IBYAAAAwAQCdASoBAAEADsD+JaQAA3AAAAAA")!
}

/// A fresh directory under the system temporary folder, removed by ``remove()``.
public struct TemporaryDirectory: Sendable {
  public let path: String

  public init(prefix: String = "imagecache-test") throws {
    let pattern = (NSTemporaryDirectory() as NSString).appendingPathComponent("\(prefix)-XXXXXX")
    var template = Array(pattern.utf8CString)
    guard let made = mkdtemp(&template) else {
      throw CocoaError(.fileWriteUnknown)
    }
    path = String(cString: made)
  }

  /// `path/relative`.
  public func appending(_ relative: String) -> String {
    (path as NSString).appendingPathComponent(relative)
  }

  /// Writes `urls`, one a line, to a manifest of a new name in this folder; returns its path.
  public func manifest(_ urls: [String]) throws -> String {
    let path = appending("urls-\(UUID().uuidString).txt")
    try urls.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  public func remove() {
    try? FileManager.default.removeItem(atPath: path)
  }
}

/// Where SwiftPM put the products of this build (the test bundle's folder), so that tests can
/// run the built executables.
public enum BuiltProducts {
  public static let directory: String = {
    let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    var folder = bundle.deletingLastPathComponent()
    while folder.path != "/" && !folder.lastPathComponent.hasSuffix("debug")
      && !folder.lastPathComponent.hasSuffix("release")
      && !FileManager.default.fileExists(atPath: folder.appendingPathComponent("imagecache").path)
    {
      folder = folder.deletingLastPathComponent()
    }
    return folder.path
  }()

  public static func executable(_ name: String) -> String {
    (directory as NSString).appendingPathComponent(name)
  }
}
