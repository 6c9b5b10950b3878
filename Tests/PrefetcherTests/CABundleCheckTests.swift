import Foundation
import Synchronization
import XCTest

@testable import HTTP

/// `--cacert`'s check reads a bundle a chunk at a time up to its first certificate marker.
final class CABundleCheckTests: XCTestCase {
  private var folder: URL!

  override func setUpWithError() throws {
    folder = FileManager.default.temporaryDirectory.appendingPathComponent(
      "ca-bundle-check-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
  }

  override func tearDownWithError() throws {
    try? FileManager.default.removeItem(at: folder)
  }

  private func bundle(_ text: String) throws -> String {
    let path = folder.appendingPathComponent("bundle-\(UUID().uuidString).pem").path
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    return path
  }

  func testAMarkerIsFoundWhereverItIsInTheFile() throws {
    let chunk = Connection.caBundleChunkBytes
    for marker in Connection.pemCertificateMarkers {
      // At the start, split across the first chunk's end at every point, and well past it.
      var offsets = [0, 3 * chunk + 5]
      offsets += (1..<marker.utf8.count).map { chunk - $0 }
      for offset in offsets {
        let text =
          String(repeating: "# comment\n", count: offset / 10)
          + String(repeating: "x", count: offset % 10) + marker + "\nMIIB\n"
        XCTAssertNil(Connection.caBundleProblem(try bundle(text)), "\(marker) at \(offset)")
      }
    }
  }

  func testAFileWithoutAMarkerIsRefused() throws {
    let text = String(repeating: "-----BEGIN CERTIFICATE----\n", count: 2_000)
    let problem = try XCTUnwrap(Connection.caBundleProblem(try bundle(text)))
    XCTAssertTrue(problem.contains("not a PEM bundle of CA certificates"), problem)
    XCTAssertNotNil(Connection.caBundleProblem(try bundle("")))
  }

  func testALoopOfSymbolicLinksIsSaidAsItIsNotAsAMissingFile() throws {
    let loop = folder.appendingPathComponent("loop.pem").path
    XCTAssertEqual(symlink(loop, loop), 0, String(cString: strerror(errno)))
    let problem = try XCTUnwrap(Connection.caBundleProblem(loop))
    XCTAssertEqual(problem, "\(loop): \(String(cString: strerror(ELOOP)))")
    let missing = folder.appendingPathComponent("missing.pem").path
    XCTAssertEqual(Connection.caBundleProblem(missing), "\(missing): no such file")
    XCTAssertEqual(Connection.caBundleProblem(folder.path), "\(folder.path): not a readable file")
  }

  func testAFIFOIsRefusedWithoutWaitingForAWriter() throws {
    let fifo = folder.appendingPathComponent("bundle.pem").path
    XCTAssertEqual(mkfifo(fifo, 0o600), 0, String(cString: strerror(errno)))
    let checked = DispatchSemaphore(value: 0)
    let problem = Mutex<String?>(nil)
    Thread {
      problem.withLock { $0 = Connection.caBundleProblem(fifo) }
      checked.signal()
    }.start()
    let answered = checked.wait(timeout: .now() + 5) == .success
    if !answered {
      // A writer that comes and goes lets the stuck check end.
      let writer = open(fifo, O_WRONLY | O_NONBLOCK)
      if writer >= 0 { close(writer) }
      checked.wait()
    }
    XCTAssertTrue(answered, "the check waited for a writer on \(fifo)")
    let said = try XCTUnwrap(problem.withLock { $0 })
    XCTAssertTrue(said.contains("not a regular file"), said)
  }
}
