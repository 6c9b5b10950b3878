import Core
import Foundation
import XCTest

/// Our errors carry the code under them (the file system's `errno`, SQLite's result code) as a
/// number, so that callers and tests compare it instead of reading the words; the words stay
/// as they were.
final class FailureCauseTests: XCTestCase {
  func testAFailedCallCarriesItsErrnoAndARefusedPathNone() {
    XCTAssertEqual(FileSystemError("write", path: "/c/a", errno: ENOSPC).cause, .errno(ENOSPC))
    XCTAssertNil(FileSystemError.refused("open", path: "/c/a", because: "a link").cause)
    XCTAssertNil(FileSystemError.unexpectedEnd("read", path: "/c/a").cause)
  }

  func testAStateFailureKeepsItsCauseAndItsWords() {
    let error = FileSystemError("create", path: "/c/.imagecache", errno: EROFS)
    let failure = ImageCacheError.stateFailed(error)
    XCTAssertEqual(failure.cause, .errno(EROFS))
    XCTAssertEqual(failure.message, "could not use the state database: \(error)")
    XCTAssertTrue(failure.endsRun)
    XCTAssertNil(ImageCacheError.stateFailed(CocoaError(.fileNoSuchFile)).cause)
  }

  /// A full, over-quota or read-only disk, a cache folder gone and no file descriptors left
  /// end the run (SPEC section 2, step 7): by the store's `errno`, not by its text.
  func testAStoreFailureEndsTheRunByItsErrno() {
    for code in [ENOSPC, EDQUOT, EROFS, ENOENT, ENOTDIR, EMFILE, ENFILE] {
      XCTAssertTrue(
        ImageCacheError.storeFailed(reason: "r", cause: .errno(code)).endsRun, "\(code)")
    }
    XCTAssertFalse(ImageCacheError.storeFailed(reason: "r", cause: .errno(EACCES)).endsRun)
    XCTAssertFalse(ImageCacheError.storeFailed(reason: "no space left on device").endsRun)
    XCTAssertFalse(ImageCacheError.storeFailed(reason: "r", cause: .sqlite(13)).endsRun)
  }
}

/// What an error about a relative path the user named advises: an absolute path where the
/// working directory may be why (cron's home, a unit's /), never where the disk is full.
final class RelativePathAdviceTests: XCTestCase {
  func testAFullDiskIsNotAdvisedAnAbsolutePathAndAMissingFileIs() {
    let cwd = FileManager.default.currentDirectoryPath
    let missing = FileSystemError("open", path: "reports/r.json", errno: ENOENT)
      .namingWorkingDirectory().description
    XCTAssertTrue(missing.contains("reports/r.json (relative to \(cwd))"), missing)
    XCTAssertTrue(missing.hasSuffix(FileSystem.relativePathAdvice), missing)
    for errno in [ENOSPC, EDQUOT, EIO] {
      let full = FileSystemError("write", path: "reports/r.json", errno: errno)
        .namingWorkingDirectory().description
      XCTAssertTrue(full.contains("(relative to \(cwd))"), "where it was, still: \(full)")
      XCTAssertFalse(full.contains("give an absolute path"), full)
    }
  }
}
