import Core
import Foundation
import State
import TestSupport
import XCTest

#if canImport(Glibc)
  import Glibc
#endif

/// Issue 27: a manifest that can be read only once (standard input, `/dev/stdin`, a FIFO) is
/// read once, by the run, and waiting on one never holds a signal up.
final class StreamManifestTests: LoopbackTestCase {
  var location: CacheLocation!

  override var routes: [String: Route] {
    [
      "/photo.jpg": { _ in .image(Fixtures.jpeg, type: "image/jpeg") }
    ]
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  private func makeFIFO(_ name: String) throws -> String {
    let path = temporary.appending(name)
    guard mkfifo(path, 0o600) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    return path
  }

  /// The writing end of `fifo`, once `reader` has opened its end (before, opening fails with
  /// ENXIO); `nil` if it has not within a few seconds.
  private func openForWriting(_ fifo: String, reader: Process) -> FileHandle? {
    var descriptor: Int32 = -1
    waitUntil(timeout: 10, "the run to open \(fifo)") {
      descriptor = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
      return descriptor >= 0 || !reader.isRunning
    }
    guard descriptor >= 0 else { return nil }
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
    return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
  }

  /// Waits for `process` to exit, at most `seconds`; kills it (and fails) if it does not.
  private func finish(
    _ process: Process, _ stdout: Pipe, _ stderr: Pipe, within seconds: TimeInterval,
    file: StaticString = #filePath, line: UInt = #line
  ) -> CommandResult {
    if !waitUntil(
      timeout: seconds, "the run to end", file: file, line: line, { !process.isRunning })
    {
      kill(process.processIdentifier, SIGKILL)
    }
    return ImageCacheBinary.finish(process, stdout, stderr)
  }

  func testEveryURLOfAPipedManifestIsFetchedWhetherItIsDashDevStdinOrAFIFO() throws {
    let count = 40
    var runs = 0
    for round in 0..<4 {
      for kind in ["-", "/dev/stdin", "fifo"] {
        let urls = (0..<count).map { server.url("/photo.jpg") + "?run=\(runs)&n=\($0)" }
        let text = Data((urls.joined(separator: "\n") + "\n").utf8)
        let before = server.requestCount("/photo.jpg")
        let cache = temporary.appending("cache-\(runs)")
        runs += 1
        let result: CommandResult
        if kind == "fifo" {
          let fifo = try makeFIFO("urls-\(round).fifo")
          let (process, stdout, stderr) = try ImageCacheBinary.start([
            "prefetch", fifo, "--cache", cache,
          ])
          let writer = try XCTUnwrap(openForWriting(fifo, reader: process))
          writer.write(text)
          try writer.close()
          result = finish(process, stdout, stderr, within: 30)
        } else {
          let input = Pipe()
          let (process, stdout, stderr) = try ImageCacheBinary.start(
            ["prefetch", kind, "--cache", cache], input: input)
          input.fileHandleForWriting.write(text)
          try input.fileHandleForWriting.close()
          result = finish(process, stdout, stderr, within: 30)
        }
        XCTAssertEqual(result.status, 0, "\(kind), round \(round): \(result.stderr)")
        XCTAssertEqual(
          server.requestCount("/photo.jpg") - before, count,
          "\(kind), round \(round): every URL fetched once: \(result.stderr)")
        XCTAssertTrue(
          result.stderr.contains("\(count) done,"), "no total for a pipe: \(result.stderr)")
      }
    }
  }

  func testSIGTERMEndsARunWaitingOnAFIFOThatNobodyWrites() throws {
    let fifo = try makeFIFO("silent.fifo")
    let report = temporary.appending("report.json")
    let (process, stdout, stderr) = try ImageCacheBinary.start([
      "prefetch", fifo, "--cache", location.directory, "--report", report,
    ])
    // The run is waiting once its row in the state says `running`. Read only: a read-write
    // open would create and migrate the state file while the run is creating it.
    let state = location.stateDirectory + "/state.sqlite"
    var running = false
    waitUntil(timeout: 20, "the run to begin") {
      if FileManager.default.fileExists(atPath: state) {
        running =
          (try? StateStore.openForReading(location: location)?.recentRuns().first?.status)
          == "running"
      }
      return running || !process.isRunning
    }
    XCTAssertTrue(running, "the run never began")
    kill(process.processIdentifier, SIGTERM)
    let result = finish(process, stdout, stderr, within: 10)
    XCTAssertEqual(result.status, 128 + SIGTERM, result.stderr)
    let written = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: report)))
    XCTAssertEqual(written.status, .interrupted)
    let run = try XCTUnwrap(try StateStore(location: location).recentRuns().first)
    XCTAssertEqual(run.status, "interrupted")
  }

  func testAManifestThatCanBeReadOnceIsNotNamedTwice() throws {
    let twice = try ImageCacheBinary.run(["prefetch", "-", "-", "--cache", location.directory])
    XCTAssertEqual(twice.status, 2, twice.stderr)
    XCTAssertTrue(twice.stderr.contains("read only once"), twice.stderr)
  }
}
