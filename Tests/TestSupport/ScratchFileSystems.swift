import Foundation
import XCTest

/// What a test sets up inside its temporary folder that the folder's own file system (ext4 in
/// `/tmp` here) cannot show: a disk that fills (a small tmpfs), a file system without birth
/// times (ramfs), a read-only one, a file that not even root may change or delete
/// (`chattr +i`). ``undo()`` undoes all of it, last first; ``TemporaryFolderTestCase`` calls it
/// before removing the folder. Tests run as root and only ever mount on folders of their own:
/// never on the machine's system folders. What cannot be set up here ends the test through
/// ``requireOrSkip(_:file:line:)``: a failure in CI.
public final class ScratchFileSystems {
  private var mountPoints: [String] = []
  private var immutablePaths: [String] = []

  public init() {}

  /// Mounts a tmpfs of `size` (`mount -o size=`: `64k`, `1m`) on `path`, made if need be, and
  /// optionally with at most `inodes` files. Returns `path`.
  @discardableResult
  public func mountTmpfs(
    at path: String, size: String, inodes: Int? = nil, file: StaticString = #filePath,
    line: UInt = #line
  ) throws -> String {
    let options = "size=\(size)" + (inodes.map { ",nr_inodes=\($0)" } ?? "")
    try mount(["-t", "tmpfs", "-o", options, "tmpfs", path], at: path, file: file, line: line)
    return path
  }

  /// Mounts a ramfs on `path`, made if need be: a file system whose files have no birth time
  /// (`statx` reports none), where tmpfs and ext4 have one. Returns `path`.
  @discardableResult
  public func mountRamfs(at path: String, file: StaticString = #filePath, line: UInt = #line)
    throws -> String
  {
    try mount(["-t", "ramfs", "ramfs", path], at: path, file: file, line: line)
    return path
  }

  /// Makes the folder `path` read-only where it is, by a read-only bind mount of itself: file
  /// modes do not bind root, a read-only mount does.
  public func bindReadOnly(_ path: String, file: StaticString = #filePath, line: UInt = #line)
    throws
  {
    try mount(["--bind", path, path], at: path, file: file, line: line)
    try remountReadOnly(path, bind: true, file: file, line: line)
  }

  /// Remounts what this object mounted on `path` read-only.
  public func remountReadOnly(
    _ path: String, bind: Bool = false, file: StaticString = #filePath, line: UInt = #line
  ) throws {
    precondition(mountPoints.contains(path), "\(path) was not mounted by this test")
    let result = try Command.run(
      "/bin/mount", ["-o", bind ? "remount,ro,bind" : "remount,ro", path])
    guard result.status == 0 else {
      try requireOrSkip(
        "cannot remount \(path) read-only: \(result.stderr)", file: file, line: line)
    }
  }

  /// Makes `path` immutable (`chattr +i`): not even root may then write, rename or delete it.
  /// ext4 and tmpfs (since Linux 6.0) take the attribute.
  public func makeImmutable(_ path: String, file: StaticString = #filePath, line: UInt = #line)
    throws
  {
    let result = try Command.run("/usr/bin/env", ["chattr", "+i", path])
    guard result.status == 0 else {
      try requireOrSkip("chattr +i \(path) failed: \(result.stderr)", file: file, line: line)
    }
    immutablePaths.append(path)
  }

  /// Makes every file ``makeImmutable(_:file:line:)`` made immutable mutable again.
  public func makeAllMutable() {
    for path in immutablePaths.reversed() {
      Command.status("/usr/bin/env", ["chattr", "-i", path])
    }
    immutablePaths = []
  }

  /// Unmounts everything mounted here and makes every immutable file mutable, last first.
  public func undo() {
    makeAllMutable()
    for path in mountPoints.reversed() { Command.status("/bin/umount", [path]) }
    mountPoints = []
  }

  private func mount(_ arguments: [String], at path: String, file: StaticString, line: UInt)
    throws
  {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    let result = try Command.run("/bin/mount", arguments)
    guard result.status == 0 else {
      try requireOrSkip(
        "cannot mount \(arguments.joined(separator: " ")) (root is needed): \(result.stderr)",
        file: file, line: line)
    }
    mountPoints.append(path)
  }
}
