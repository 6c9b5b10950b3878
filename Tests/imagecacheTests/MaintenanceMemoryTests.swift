import Core
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
  import Glibc
#endif

/// `maintain` over a cache of any size holds the same memory: four times the files, every one
/// of them planned for deletion by the trim, costs no more.
final class MaintenanceMemoryTests: TemporaryFolderTestCase {

  /// Adds empty files `first..<end` (cache-like names, dates spread over 30 days, a few ties),
  /// one in a thousand with a page of data so that the cache is over its 1-byte limit.
  private func addFiles(_ range: Range<Int>, to folder: String) throws {
    var generator = SystemRandomNumberGenerator()
    let page = [UInt8](repeating: 7, count: 4096)
    for index in range {
      let path = folder + "/" + String(format: "%032x", index &* 2_654_435_761) + ".jpg"
      let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
      guard descriptor >= 0 else { throw FileSystemError("create", path: path, errno: errno) }
      if index % 1000 == 0 { _ = page.withUnsafeBytes { write(descriptor, $0.baseAddress, 4096) } }
      let date = 1_700_000_000 - Int.random(in: 0..<(30 * 86400), using: &generator)
      var times = [timespec(tv_sec: date, tv_nsec: 0), timespec(tv_sec: date, tv_nsec: 0)]
      guard futimens(descriptor, &times) == 0 else {
        throw FileSystemError("set times", path: path, errno: errno)
      }
      close(descriptor)
    }
  }

  func testMaintainPeakMemoryDoesNotGrowWithTheNumberOfFiles() throws {
    // Empty files on a tmpfs are quick to make; mounting one needs root.
    let mounted = try fileSystems.mountTmpfs(
      at: temporary.appending("tmpfs"), size: "256m", inodes: 1 << 20)
    let cache = mounted + "/cache"
    let folder = cache + "/default"
    try FileSystem.createDirectory(path: folder)

    func peak() throws -> Int {
      let (status, kib) = try PeakMemory.run(
        ImageCacheBinary.path,
        ["maintain", "--cache", cache, "--max-size", "1", "--dry-run", "--json"])
      XCTAssertEqual(status, 0)
      return kib
    }
    try addFiles(0..<100_000, to: folder)
    let small = try peak()
    try addFiles(100_000..<400_000, to: folder)
    let large = try peak()
    // Every file survives and the trim plans them all: kept in memory, 300,000 more would
    // cost some 30 MB.
    XCTAssertLessThan(large, small + 4 * 1024, "400,000 files: \(large) KiB, 100,000: \(small) KiB")
  }

  /// Where no temporary file can be made for the trim's records, they are held in memory, and
  /// the run says so once, naming why: its memory is no longer bounded.
  func testATrimWithoutATemporaryFileSaysItHeldItsFilesInMemory() throws {
    let mounted = try fileSystems.mountTmpfs(
      at: temporary.appending("tmpfs"), size: "64m", inodes: 1 << 17)
    try FileSystem.createDirectory(path: mounted + "/cache/default")
    // Some 1.4 MB of records: more than the 1 MB kept in memory before they go to the file.
    try addFiles(0..<25_000, to: mounted + "/cache/default")
    var environment = ProcessInfo.processInfo.environment
    environment["TMPDIR"] = temporary.appending("missing")

    let result = try ImageCacheBinary.run(
      ["maintain", "--cache", mounted + "/cache", "--max-size", "1", "--dry-run"],
      environment: environment)
    XCTAssertEqual(result.status, 0, result.stderr)
    let said = result.stderr.split(separator: "\n").filter { $0.contains("held in memory") }
    XCTAssertEqual(said.count, 1, result.stderr)
    XCTAssertTrue(
      said.first?.contains(temporary.appending("missing")) ?? false, "names the folder: \(said)")
  }

  /// `migrate` moves a legacy folder of any size in the same memory: it walks the folder as it
  /// moves the files, never listing it whole first.
  func testMigratePeakMemoryDoesNotGrowWithTheNumberOfFiles() throws {
    let mounted = try fileSystems.mountTmpfs(
      at: temporary.appending("tmpfs"), size: "256m", inodes: 1 << 20)
    let legacy = mounted + "/legacy"

    func peak(moving files: Range<Int>) throws -> Int {
      try FileSystem.createDirectory(path: legacy)
      try addFiles(files, to: legacy)
      let (status, kib) = try PeakMemory.run(
        ImageCacheBinary.path, ["migrate", "--cache", mounted + "/cache", "--from", legacy])
      XCTAssertEqual(status, 0)
      XCTAssertFalse(FileManager.default.fileExists(atPath: legacy), "every file moved")
      return kib
    }
    let small = try peak(moving: 0..<50_000)
    let large = try peak(moving: 50_000..<250_000)
    // Listed first, 150,000 more files would cost some 30 MB.
    XCTAssertLessThan(large, small + 4 * 1024, "200,000 files: \(large) KiB, 50,000: \(small) KiB")
  }
}
