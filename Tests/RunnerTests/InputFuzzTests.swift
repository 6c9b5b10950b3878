import Core
import Foundation
import Runner
import TestSupport
import XCTest

/// SPEC section 10: random and mutated manifests and job files, from a fixed seed, never crash
/// the readers, every error names its file and line, and memory stays bounded.
final class InputFuzzTests: TemporaryFolderTestCase {
  static let fragments: [[UInt8]] = [
    "https://cdn.example.com/a.jpg", "http://x/y.png?w=1&h=2", "# comment", "",
    #"{"url": "https://x/a.jpg"}"#, #"{"url": "https://x/b.jpg", "options": ["highPriority"]}"#,
    #"{"url": "https://x/c.jpg", "context": {"headers": {"A": "b"}, "namespace": "n"}}"#,
    #"{"url": 5}"#, #"{"url": "u", "url": "v"}"#, "{", "}", "\u{FEFF}", "\t \r",
    "ftp://x/a", "data:image/png;base64,AAAA", "é€😀", "%00", "\\u0000",
  ].map { Array($0.utf8) }

  private func mutate(_ bytes: inout [UInt8], _ random: inout SeededRandom) {
    for _ in 0..<random.below(8) {
      switch random.below(5) {
      case 0 where !bytes.isEmpty: bytes[random.below(bytes.count)] = UInt8(random.below(256))
      case 1: bytes.insert(UInt8(random.below(256)), at: random.below(bytes.count + 1))
      case 2 where !bytes.isEmpty: bytes.remove(at: random.below(bytes.count))
      case 3:
        let special: [UInt8] = Array("\n\0{}[]:,\"'&*#-|>!%@`\u{7F}".utf8)
        bytes.insert(special[random.below(special.count)], at: random.below(bytes.count + 1))
      default:
        let fragment = Self.fragments[random.below(Self.fragments.count)]
        bytes.insert(contentsOf: fragment, at: random.below(bytes.count + 1))
      }
    }
  }

  private static var peakResidentKilobytes: Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_maxrss
  }

  func testManifestsNeverCrashTheReaderAndEveryErrorNamesItsLine() throws {
    var random = SeededRandom(seed: 20_261_122)
    let path = temporary.appending("fuzz.txt")
    let memoryBefore = Self.peakResidentKilobytes
    for _ in 0..<3_000 {
      var bytes: [UInt8] = []
      for _ in 0..<random.below(12) {
        bytes += Self.fragments[random.below(Self.fragments.count)] + [UInt8(ascii: "\n")]
      }
      if random.below(50) == 0 {
        bytes += [UInt8](repeating: UInt8(ascii: "a"), count: 70_000 + random.below(10_000))
      }
      mutate(&bytes, &random)
      XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
      let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).count
      for result in ManifestReader(path: path) {
        switch result {
        case .success(let entry):
          XCTAssertEqual(entry.file, path)
          XCTAssertTrue((1...lines).contains(entry.line))
          XCTAssertFalse(entry.url.unicodeScalars.contains { $0.value < 0x20 }, entry.url)
        case .failure(let error):
          XCTAssertEqual(error.file, path)
          XCTAssertTrue((1...lines).contains(error.line), "\(error) of \(lines) lines")
          XCTAssertTrue(error.description.hasPrefix("\(path):\(error.line): "))
        }
      }
    }
    XCTAssertLessThan(
      Self.peakResidentKilobytes - memoryBefore, 200_000, "memory stays bounded")
  }

  func testJobFilesNeverCrashTheParserAndEveryErrorNamesTheFile() throws {
    let valid = Array(
      """
      name: nightly
      cache:
        directory: cache
        namespace: avatars
        maxDiskAge: 30d
        maxDiskSize: 2GiB
      manifests: [a.txt, /abs/b.jsonl]
      options: [retryFailed]
      context:
        headers: {Authorization: "Bearer x"}
        cacheKeyFilter: stripQuery
      prefetch: {concurrency: 32, timeout: 10s, validate: full, maxPixels: 1000}
      maintenance: [migrate, expire]
      report: reports/{date}.json
      """.utf8)
    var random = SeededRandom(seed: 7)
    let path = temporary.appending("fuzz.yaml")
    let memoryBefore = Self.peakResidentKilobytes
    var parsed = 0
    for _ in 0..<2_000 {
      var bytes = valid
      mutate(&bytes, &random)
      XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
      do {
        _ = try Job.load(path: path)
        parsed += 1
      } catch {
        XCTAssertEqual(error.source, path)
        XCTAssertTrue(error.description.hasPrefix(path + ":"), error.description)
        if let line = error.line {
          XCTAssertTrue(line >= 1 && line <= bytes.count + 1, error.description)
        }
      }
    }
    XCTAssertGreaterThan(parsed, 0, "some mutations are still valid jobs")
    XCTAssertLessThan(
      Self.peakResidentKilobytes - memoryBefore, 200_000, "memory stays bounded")
  }
}
