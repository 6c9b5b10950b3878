import Core
import Foundation
import TestSupport
import XCTest

/// End-to-end: `imagecache migrate` finds SD's legacy folder of any namespace where each SD
/// version put it, and a merge from another file system keeps the files' times (issues 38, 41).
final class LegacyMigrationTests: TemporaryFolderTestCase {
  /// `<Caches>`: the folder that holds SD 5's cache directory and SD 3/4's folders.
  private var caches: String { temporary.appending("Caches") }
  private var directory: String { caches + "/com.hackemist.SDImageCache" }

  private let fileName = "e53566be7e08af71a1135ac4a1830724"

  /// Puts a file in `legacy` (relative to `<Caches>`), runs `migrate` on namespace
  /// `namespace` with no --from, and checks the file moved into the namespace's folder.
  private func assertMigrated(
    from legacy: String, namespace: String, file: StaticString = #filePath, line: UInt = #line
  ) throws {
    try CacheBuilder(root: caches + "/" + legacy).file(fileName, accessTime: 1_600_000_000)
    let result = try ImageCacheBinary.run([
      "migrate", "--cache", directory, "--namespace", namespace,
    ])
    XCTAssertEqual(result.status, 0, result.stderr, file: file, line: line)
    let migrated = directory + "/" + namespace + "/" + fileName
    XCTAssertTrue(
      FileManager.default.fileExists(atPath: migrated), result.stderr, file: file, line: line)
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: caches + "/" + legacy), "the merged folder goes",
      file: file, line: line)
  }

  func testMigrateFindsSD4sFolderOfANamespaceOtherThanDefault() throws {
    try assertMigrated(
      from: "avatars/com.hackemist.SDWebImageCache.avatars", namespace: "avatars")
  }

  func testMigrateFindsSD3sFolderOfANamespaceOtherThanDefault() throws {
    try assertMigrated(from: "com.hackemist.SDWebImageCache.avatars", namespace: "avatars")
  }

  func testMigrateFindsSD3sFolderOfTheDefaultNamespace() throws {
    try assertMigrated(from: "com.hackemist.SDWebImageCache.default", namespace: "default")
  }

  func testAMergeFromAnotherFileSystemKeepsEachFilesAccessAndModificationTimes() throws {
    let device = try fileSystems.mountTmpfs(at: temporary.appending("device"), size: "8m")
    let server = try fileSystems.mountTmpfs(at: temporary.appending("server"), size: "8m")
    let legacy = device + "/com.hackemist.SDWebImageCache.default"
    // 2020: older than a day and than its modification, so that relatime updates it on a read.
    let accessTime: Int64 = 1_600_000_000
    try CacheBuilder(root: legacy).file(
      fileName, size: 5000, accessTime: accessTime, modificationTime: 1_600_000_100)
    let result = try ImageCacheBinary.run([
      "migrate", "--cache", server + "/cache", "--from", legacy,
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let migrated = try XCTUnwrap(
      FileSystem.attributes(atPath: server + "/cache/default/" + fileName), result.stderr)
    XCTAssertEqual(migrated.accessTime, accessTime * 1_000_000_000)
    XCTAssertEqual(migrated.modificationTime, 1_600_000_100 * 1_000_000_000)
    XCTAssertEqual(migrated.size, 5000)
  }

  func testADryRunPlansAMergeIntoACacheThatDoesNotExistYetAndCreatesNothing() throws {
    let legacy = temporary.appending("device/com.hackemist.SDWebImageCache.default")
    try CacheBuilder(root: legacy).file(fileName, accessTime: 1_600_000_000)
    let result = try ImageCacheBinary.run([
      "migrate", "--cache", directory, "--from", legacy, "--dry-run",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertTrue(result.stdout.contains(fileName), result.stdout)
    XCTAssertTrue(
      result.stderr.contains("(new: it does not exist yet; a real run creates it)"), result.stderr)
    XCTAssertFalse(FileManager.default.fileExists(atPath: directory), "a dry run creates nothing")
    XCTAssertTrue(FileManager.default.fileExists(atPath: legacy + "/" + fileName))
  }

  func testAMigrationWithoutAManifestSaysHowManyFilesKeepALegacyNameAndWhatRenamesThem() throws {
    let legacy = temporary.appending("device/com.hackemist.SDWebImageCache.default")
    // SD 3.7.3 and SD 4.0 names: no extension, and the raw string's extension with its query.
    try CacheBuilder(root: legacy).file(fileName, accessTime: 1_600_000_000)
    try CacheBuilder(root: legacy).file(
      "4d71d9e1d36571b22d5dd89b751927a9.jpg?size=large", accessTime: 1_600_000_000)
    let result = try ImageCacheBinary.run(["migrate", "--cache", directory, "--from", legacy])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertTrue(result.stderr.contains("2 file(s)"), result.stderr)
    XCTAssertTrue(result.stderr.contains("legacy names"), result.stderr)
    XCTAssertTrue(result.stderr.contains("--manifest"), result.stderr)
  }

  func testAKeptLegacyFolderSaysHowMuchIsLeftInItAndWhy() throws {
    let legacy = temporary.appending("device/com.hackemist.SDWebImageCache.default")
    try CacheBuilder(root: legacy).file(fileName, accessTime: 1_600_000_000)
    try CacheBuilder(root: legacy).file(".DS_Store", size: 1500, accessTime: 1_600_000_000)
    let result = try ImageCacheBinary.run(["migrate", "--cache", directory, "--from", legacy])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertTrue(FileManager.default.fileExists(atPath: legacy + "/.DS_Store"))
    XCTAssertTrue(
      result.stderr.contains("kept \(legacy): 1 file(s) (1.5 KB) remain: 1 hidden"), result.stderr)
  }
}
