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
}
