import Core
import Foundation
import TestSupport
import XCTest

/// End-to-end: a namespace folder, or its `.imagecache/`, that is a symbolic link to a folder
/// outside the cache is refused by every command that reads, writes or deletes there (exit 2,
/// naming it), and the folder it points to is left exactly as it was (SPEC section 12).
final class LinkedFolderTests: LoopbackTestCase {
  var location: CacheLocation!
  /// The folder outside the cache that the link points to, with an old file and a sub-folder.
  var outside: String!

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
    outside = temporary.appending("outside")
    let builder = CacheBuilder(root: outside)
    try builder.file("8c11d92f07c76baf29e49afd2301deb2.png", accessTime: 1_000_000_000)
    try builder.file("keep/old.txt", accessTime: 1_000_000_000)
    try FileSystem.createDirectory(path: location.directory)
  }

  /// Every entry below `outside`, hidden ones too, with its size and times.
  private func outsideContents() throws -> [String] {
    let enumerator = try XCTUnwrap(FileManager.default.enumerator(atPath: outside))
    return try enumerator.compactMap { $0 as? String }.sorted().map { name in
      let attributes = try XCTUnwrap(FileSystem.attributes(atPath: outside + "/" + name))
      return "\(name) \(attributes.size) \(attributes.accessTime) \(attributes.modificationTime)"
    }
  }

  /// Links the namespace (or, with `stateFolder`, the namespace's `.imagecache`) to the outside
  /// folder, runs the binary with `arguments`, and checks the refusal and the outside folder.
  private func assertRefused(
    _ arguments: [String], stateFolder: Bool = false,
    file: StaticString = #filePath, line: UInt = #line
  ) throws {
    let link = stateFolder ? location.stateDirectory : location.diskCachePath
    try FileSystem.createDirectory(path: (link as NSString).deletingLastPathComponent)
    try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: outside)
    let before = try outsideContents()

    let result = try ImageCacheBinary.run(arguments)

    XCTAssertEqual(result.status, 2, result.stderr, file: file, line: line)
    XCTAssertTrue(
      result.stderr.contains(link) && result.stderr.contains("symbolic link"), result.stderr,
      file: file, line: line)
    XCTAssertEqual(
      try outsideContents(), before, "the linked folder is untouched", file: file, line: line)
    XCTAssertEqual(server.allRequests.count, 0, "nothing fetched", file: file, line: line)
  }

  func testMaintainRefusesALinkedNamespace() throws {
    try assertRefused([
      "maintain", "--cache", location.directory, "--max-age", "1d", "--max-size", "1",
    ])
  }

  func testPrefetchRefusesALinkedNamespace() throws {
    let manifest = try temporary.manifest([server.url("/b.png")])
    try assertRefused(["prefetch", manifest, "--cache", location.directory])
  }

  func testPrefetchRefusesALinkedStateFolder() throws {
    let manifest = try temporary.manifest([server.url("/b.png")])
    try assertRefused(["prefetch", manifest, "--cache", location.directory], stateFolder: true)
  }

  func testAManifestLineNamingALinkedNamespaceFailsAndWritesNothingThere() throws {
    let other = CacheLocation(directory: location.directory, namespace: "other")
    try FileManager.default.createSymbolicLink(
      atPath: other.diskCachePath, withDestinationPath: outside)
    let before = try outsideContents()
    let manifest = temporary.appending("urls.jsonl")
    try """
    {"url": "\(server.url("/a.jpg"))"}
    {"url": "\(server.url("/b.png"))", "context": {"namespace": "other"}}
    """.write(toFile: manifest, atomically: true, encoding: .utf8)

    let result = try ImageCacheBinary.run([
      "prefetch", manifest, "--cache", location.directory, "--json",
    ])

    XCTAssertEqual(result.status, 1, result.stderr)
    let failure = try XCTUnwrap(RunReport.decode(Data(result.stdout.utf8)).prefetch?.failures.first)
    XCTAssertEqual(failure.url, server.url("/b.png"))
    XCTAssertTrue(
      failure.message.contains(other.diskCachePath + ": a symbolic link"), failure.message)
    XCTAssertEqual(try outsideContents(), before, "the linked folder is untouched")
    XCTAssertEqual(server.requestCount("/b.png"), 0)
    XCTAssertEqual(server.requestCount("/a.jpg"), 1, "the other lines go on")
  }

  func testRunRefusesALinkedNamespace() throws {
    let manifest = try temporary.manifest([server.url("/b.png")])
    let job = temporary.appending("nightly.yaml")
    try """
    name: nightly
    cache:
      directory: \(location.directory)
      maxDiskAge: 1d
    manifests: [\(manifest)]
    maintenance: [migrate, expire, trim]
    """.write(toFile: job, atomically: true, encoding: .utf8)
    try assertRefused(["run", job])
  }

  func testMigrateRefusesALinkedNamespaceAndMovesNothing() throws {
    let legacy = temporary.appending("legacy")
    try CacheBuilder(root: legacy).file("e53566be7e08af71a1135ac4a1830724", accessTime: 1_000)
    try assertRefused(["migrate", "--cache", location.directory, "--from", legacy])
    XCTAssertTrue(
      FileManager.default.fileExists(atPath: legacy + "/e53566be7e08af71a1135ac4a1830724"))
  }

  func testBlacklistClearRefusesALinkedStateFolder() throws {
    try FileSystem.createDirectory(path: location.diskCachePath)
    try assertRefused(["blacklist", "clear", "--cache", location.directory], stateFolder: true)
  }

  func testBlacklistRemoveRefusesALinkedNamespace() throws {
    try assertRefused([
      "blacklist", "remove", server.url("/b.png"), "--cache", location.directory,
    ])
  }

  func testStatsRefusesALinkedNamespace() throws {
    try assertRefused(["stats", "--cache", location.directory])
  }
}
