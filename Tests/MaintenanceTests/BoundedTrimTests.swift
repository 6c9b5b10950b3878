import Core
import Foundation
import TestSupport
import XCTest

@testable import Maintenance

/// The trim in bounded memory (survivors in a temporary file, sorted a few at a time) deletes
/// exactly what sorting every survivor would, in the same order, with the limits made tiny so
/// that small caches go through every path: the temporary file, records cut by its chunks,
/// many rounds, finer histograms, and single dates holding more files than may be sorted.
final class BoundedTrimTests: XCTestCase {
  var temporary: TemporaryDirectory!
  var builder: CacheBuilder!
  var immutable: [String] = []
  let now: Int64 = 1_700_000_000
  var nowDate: Date { Date(timeIntervalSince1970: TimeInterval(now)) }

  override func setUpWithError() throws {
    temporary = try TemporaryDirectory()
    builder = CacheBuilder(root: temporary.appending("default"))
  }

  override func tearDown() {
    for path in immutable { _ = chattr("-i", path) }
    temporary.remove()
  }

  private func chattr(_ flag: String, _ path: String) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["chattr", flag, path]
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return -1 }
    process.waitUntilExit()
    return process.terminationStatus
  }

  func testTrimDeletesExactlyWhatSortingEverySurvivorWouldWithTiesAndFailedDeletes() throws {
    var generator = SeededGenerator(seed: 0xB0_0DED)
    var failuresRan = false
    for round in 0..<30 {
      for path in immutable { _ = chattr("-i", path) }
      immutable = []
      try? FileManager.default.removeItem(atPath: builder.root)
      // Few distinct seconds: many ties, which only the walk's order breaks.
      let spread = Int64.random(in: 0...60, using: &generator)
      for i in 0..<Int.random(in: 0...250, using: &generator) {
        let folder = ["", "", "a/", "a/b/", "c/"].randomElement(using: &generator)!
        let date = now - Int64.random(in: 0...spread, using: &generator)
        if i > 0 && Int.random(in: 0..<20, using: &generator) == 0 {
          try builder.link("\(folder)l\(i)", to: builder.root + "/f0", accessTime: date)
        } else {
          let size = [0, 1, 4096, 9000, 30_000].randomElement(using: &generator)!
          try builder.file(
            "\(folder)f\(i)"
              + String(repeating: "x", count: Int.random(in: 0...40, using: &generator)),
            size: size, accessTime: date)
        }
      }
      let files = try CacheScanner(root: builder.root, includesSymbolicLinks: true).files()
      // Deletes that fail: an immutable file cannot be removed, even by root.
      for file in files.filter({ $0.attributes.isRegularFile }).shuffled(using: &generator)
        .prefix(Int.random(in: 0...4, using: &generator))
      {
        let path = builder.root + "/" + file.relativePath
        if chattr("+i", path) == 0 { immutable.append(path) }
      }
      failuresRan = failuresRan || !immutable.isEmpty
      let maxAge = TimeInterval(
        [-1, Int.random(in: 0...70, using: &generator)].randomElement(
          using: &generator)!)
      let total = files.map(\.attributes.allocatedSize).reduce(0, +)
      let maxSize = UInt64.random(in: 1...max(total, 1), using: &generator)
      var cleaner = CacheCleaner(
        diskCachePath: builder.root,
        configuration: CleanupConfiguration(maxDiskAge: maxAge, maxDiskSize: maxSize))
      cleaner.trimLimits = TrimLimits(
        sortBudget: Int.random(in: 1...6, using: &generator),
        buckets: Int.random(in: 2...16, using: &generator),
        spillBuffer: [1, 30, 200, 1 << 20].randomElement(using: &generator)!)
      let failing = Set(immutable.map { String($0.dropFirst(builder.root.count + 1)) })
      let message = "round \(round), limits \(cleaner.trimLimits)"

      let planned = reference(files, maxAge: maxAge, maxSize: maxSize, failing: [])
      let plan = try cleaner.run(now: nowDate, dryRun: true)
      XCTAssertEqual(plan.trim.actions.map(\.path), planned.trimmed, message)
      XCTAssertEqual(
        try cleaner.plan(now: nowDate).deletions, planned.expired.count + planned.trimmed.count,
        message)

      let expected = reference(files, maxAge: maxAge, maxSize: maxSize, failing: failing)
      let done = try cleaner.run(now: nowDate, dryRun: false)
      XCTAssertEqual(Set(done.expire.actions.map(\.path)), expected.expired, message)
      XCTAssertEqual(done.trim.actions.map(\.path), expected.trimmed, message)
      XCTAssertEqual(done.trim.errors.count, expected.trimErrors, message)
      let remaining = try CacheScanner(root: builder.root, includesSymbolicLinks: true).files()
      XCTAssertEqual(
        Set(remaining.map(\.relativePath)),
        Set(files.map(\.relativePath)).subtracting(expected.expired).subtracting(expected.trimmed),
        message)
    }
    if !failuresRan {
      print("chattr +i is not available here: the rounds ran without failed deletes")
    }
  }

  /// The survivors go to a temporary file in `TMPDIR`; where none can be made, or the disk
  /// fills while it is written (a full disk is when a trim matters most), they stay in memory
  /// and the trim is the same.
  func testTrimIsTheSameWhenTheTemporaryFileCannotBeMadeOrTheDiskFills() throws {
    var generator = SeededGenerator(seed: 0xF011)
    for i in 0..<400 {
      // Long names: 400 records of some 220 bytes overflow the 64 KiB disk below.
      let name = "f\(i)-" + String(repeating: "n", count: 200)
      try builder.file(
        name, size: 4096, accessTime: now - Int64.random(in: 0...100, using: &generator))
    }
    let files = try CacheScanner(root: builder.root, includesSymbolicLinks: true).files()
    let total = files.map(\.attributes.allocatedSize).reduce(0, +)
    let expected = reference(files, maxAge: -1, maxSize: total / 3, failing: [])
    var cleaner = CacheCleaner(
      diskCachePath: builder.root,
      configuration: CleanupConfiguration(maxDiskAge: -1, maxDiskSize: total / 3))
    cleaner.trimLimits = TrimLimits(sortBudget: 7, buckets: 4, spillBuffer: 1000)

    let small = temporary.appending("small")
    try FileSystem.createDirectory(path: small)
    let mount = Process()
    mount.executableURL = URL(fileURLWithPath: "/bin/mount")
    mount.arguments = ["-t", "tmpfs", "-o", "size=64k", "tmpfs", small]
    mount.standardError = FileHandle.nullDevice
    try mount.run()
    mount.waitUntilExit()
    let mounted = mount.terminationStatus == 0
    defer {
      if mounted {
        let umount = Process()
        umount.executableURL = URL(fileURLWithPath: "/bin/umount")
        umount.arguments = [small]
        try? umount.run()
        umount.waitUntilExit()
      }
    }
    let saved = ProcessInfo.processInfo.environment["TMPDIR"]
    defer {
      if let saved { setenv("TMPDIR", saved, 1) } else { unsetenv("TMPDIR") }
    }
    var folders = [temporary.appending("missing")]
    if mounted {
      folders.append(small)
    } else {
      print("mount -t tmpfs needs root: the full disk case is not run")
    }
    for folder in folders {
      setenv("TMPDIR", folder, 1)
      let plan = try cleaner.run(now: nowDate, dryRun: true)
      XCTAssertEqual(plan.trim.actions.map(\.path), expected.trimmed, folder)
    }
    XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: small), [], "nothing left")
  }

  /// SPEC section 4 as plainly as it can be written: every survivor sorted by date, ties in the
  /// walk's order, deleted oldest first until the total is strictly below half the limit;
  /// a delete in `failing` subtracts nothing.
  private func reference(
    _ files: [ScannedFile], maxAge: TimeInterval, maxSize: UInt64, failing: Set<String>
  ) -> (expired: Set<String>, trimmed: [String], trimErrors: Int) {
    let cutoff = now * 1_000_000_000 - Int64(maxAge) * 1_000_000_000
    var expired = Set<String>()
    var survivors: [(walk: Int, file: ScannedFile)] = []
    var total: UInt64 = 0
    for (walk, file) in files.enumerated() {
      if maxAge >= 0 && file.attributes.accessTime <= cutoff {
        if !failing.contains(file.relativePath) {
          expired.insert(file.relativePath)
          continue
        }
      } else {
        survivors.append((walk, file))
      }
      total += file.attributes.allocatedSize
    }
    var trimmed: [String] = []
    var errors = 0
    guard total > maxSize else { return (expired, [], 0) }
    for (_, file) in survivors.sorted(by: {
      ($0.file.attributes.accessTime, $0.walk) < ($1.file.attributes.accessTime, $1.walk)
    }) {
      if total < maxSize / 2 { break }
      if failing.contains(file.relativePath) {
        errors += 1
        continue
      }
      trimmed.append(file.relativePath)
      total -= file.attributes.allocatedSize
    }
    return (expired, trimmed, errors)
  }
}
