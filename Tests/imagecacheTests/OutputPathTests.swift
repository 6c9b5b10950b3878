import Core
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
  import Glibc
#endif

/// Issue 26, items 1 and 2 (SPEC section 11), on the built binary: the files a user names for
/// output may be devices, FIFOs, sockets, links or folders, and the tool's own files under
/// `.imagecache/` may have been replaced by links. Device nodes are made in the temporary
/// folder (`mknod`), never the machine's own: as root, a rename over `/dev/null` replaces it
/// for every process on the machine.
final class OutputPathTests: LoopbackTestCase {
  private var manifest: String!
  private var cache: String { temporary.appending("cache") }

  override func setUpWithError() throws {
    try super.setUpWithError()
    manifest = temporary.appending("urls.txt")
    try "\(server.url("/a.jpg"))\n".write(toFile: manifest, atomically: true, encoding: .utf8)
  }

  private func prefetch(_ arguments: [String]) throws -> CommandResult {
    try ImageCacheBinary.run(["prefetch", manifest, "--cache", cache, "-q"] + arguments)
  }

  private func fileType(_ path: String) -> mode_t? {
    var info = stat()
    guard lstat(path, &info) == 0 else { return nil }
    return info.st_mode & S_IFMT
  }

  /// `/dev/null`'s device number, 1:3, as glibc's `makedev` (a macro Swift cannot call) makes it.
  private static let nullDevice: dev_t = (1 << 8) | 3

  /// A character device node like `/dev/null` (1, 3), made in the temporary folder.
  private func makeNullDevice(_ name: String) throws -> String {
    guard getuid() == 0 else { try requireOrSkip("mknod needs root: the device tests are skipped") }
    let path = temporary.appending(name)
    guard mknod(path, S_IFCHR | 0o666, Self.nullDevice) == 0 else {
      try requireOrSkip("mknod refused here (errno \(errno)): the device tests are skipped")
    }
    return path
  }

  /// Reads a FIFO to its end on another thread; `value` waits for the writer to close it.
  private final class FIFOReader: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var data = Data()
    init(_ path: String) {
      Thread {
        let handle = FileHandle(forReadingAtPath: path)
        self.data = handle?.readDataToEndOfFile() ?? Data()
        self.done.signal()
      }.start()
    }
    func value(timeout: TimeInterval = 30) -> Data? {
      done.wait(timeout: .now() + timeout) == .success ? data : nil
    }
  }

  func testReportsAndMetricsToACharacterDeviceAreWrittenToItAndNeverReplaceIt() throws {
    let device = try makeNullDevice("null")
    let result = try prefetch(["--report", device, "--metrics", device])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(fileType(device), S_IFCHR, "the device node was replaced")
    var info = stat()
    XCTAssertEqual(lstat(device, &info), 0)
    XCTAssertEqual(info.st_rdev, Self.nullDevice)
    XCTAssertEqual(
      try FileManager.default.contentsOfDirectory(atPath: temporary.path).sorted(),
      ["cache", "null", "urls.txt"], "a temporary file was left beside the device")
  }

  func testAReportToANamedPipeReachesItsReaderAndThePipeStays() throws {
    let fifo = temporary.appending("report.fifo")
    XCTAssertEqual(mkfifo(fifo, 0o600), 0)
    let reader = FIFOReader(fifo)
    let result = try prefetch(["--report", fifo])
    XCTAssertEqual(result.status, 0, result.stderr)
    let data = try XCTUnwrap(reader.value(), "the reader got nothing")
    let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    XCTAssertEqual(report["status"] as? String, "completed")
    XCTAssertEqual(fileType(fifo), S_IFIFO)
  }

  func testAReportThroughASymbolicLinkReplacesItsTargetAndTheLinkStays() throws {
    let target = temporary.appending("reports/real.json")
    try FileSystem.createDirectory(path: temporary.appending("reports"))
    try "old".write(toFile: target, atomically: true, encoding: .utf8)
    let link = temporary.appending("latest.json")
    XCTAssertEqual(symlink("reports/real.json", link), 0)
    let dangling = temporary.appending("next.json")
    XCTAssertEqual(symlink("reports/next-real.json", dangling), 0)

    let result = try prefetch(["--report", link, "--metrics", dangling])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertEqual(fileType(link), S_IFLNK)
    XCTAssertEqual(fileType(dangling), S_IFLNK)
    XCTAssertTrue(try String(contentsOfFile: target, encoding: .utf8).contains("\"completed\""))
    XCTAssertTrue(
      try String(contentsOfFile: temporary.appending("reports/next-real.json"), encoding: .utf8)
        .contains("imagecache_last_run_urls"))
  }

  func testAFolderNamedAsAnOutputIsRefusedBeforeTheRunNamingIt() throws {
    let folder = temporary.appending("out")
    try FileSystem.createDirectory(path: folder)
    for arguments in [["--report", folder], ["--metrics", folder], ["--report", folder + "/"]] {
      let result = try prefetch(arguments)
      XCTAssertEqual(result.status, 2, result.stderr)
      XCTAssertTrue(result.stderr.contains(arguments[1]), result.stderr)
      XCTAssertTrue(result.stderr.contains("folder"), result.stderr)
    }
    XCTAssertEqual(server.requestCount("/a.jpg"), 0, "the run started before the refusal")
  }

  /// An output path that runs through a file (`out.json/night.prom`) is the user's mistake,
  /// refused before the run as a folder is (exit 2, naming it), not an I/O failure (4).
  func testAnOutputUnderAFileIsRefusedBeforeTheRunNamingIt() throws {
    let file = temporary.appending("out.json")
    try Data("kept".utf8).write(to: URL(fileURLWithPath: file))
    for option in ["--report", "--metrics"] {
      let result = try prefetch([option, file + "/night.out"])
      XCTAssertEqual(result.status, 2, result.stderr)
      XCTAssertTrue(result.stderr.contains(file + "/night.out"), result.stderr)
      XCTAssertTrue(result.stderr.contains("is a file, not a folder"), result.stderr)
    }
    XCTAssertEqual(server.requestCount("/a.jpg"), 0, "the run started before the refusal")
    XCTAssertEqual(try String(contentsOfFile: file, encoding: .utf8), "kept")
  }

  /// `{date}` and `{time}` in `--report` become the run's start, as in a job's `report:` (a
  /// second run in the same second gets `-2`), never a file literally named `{date}`. A metrics
  /// file is one file each run rewrites: `{date}` or `{time}` there, on the command line or in
  /// a job, is refused before the run (exit 2) naming the path, or the job file, line and field.
  func testDateAndTimeMakeADatedReportAndAreRefusedInAMetricsPath() throws {
    let reports = temporary.appending("reports")
    for _ in 0..<2 {
      let result = try prefetch(["--report", reports + "/night-{date}-{time}.json"])
      XCTAssertEqual(result.status, 0, result.stderr)
    }
    let names = try FileManager.default.contentsOfDirectory(atPath: reports).sorted()
    XCTAssertEqual(names.count, 2, "one report a run: \(names)")
    for name in names {
      XCTAssertNotNil(
        name.range(
          of: #"^night-\d{4}-\d{2}-\d{2}-\d{6}(-2)?\.json$"#, options: .regularExpression),
        name)
    }
    XCTAssertEqual(server.requestCount("/a.jpg"), 1, "the second run found the image cached")

    let dated = temporary.appending("imagecache-{date}.prom")
    let refused = try prefetch(["--metrics", dated])
    XCTAssertEqual(refused.status, 2, refused.stderr)
    XCTAssertTrue(
      refused.stderr.contains("--metrics \(dated): {date} and {time} are for reports"),
      refused.stderr)
    let job = temporary.appending("nightly.yaml")
    try "cache:\n  directory: \(cache)\nmanifests: [\(manifest!)]\nmetrics: m-{time}.prom\n"
      .write(toFile: job, atomically: true, encoding: .utf8)
    let run = try ImageCacheBinary.run(["run", job])
    XCTAssertEqual(run.status, 2, run.stderr)
    XCTAssertTrue(
      run.stderr.contains("\(job):4: field 'metrics': {date} and {time} are for reports"),
      run.stderr)
    XCTAssertEqual(server.requestCount("/a.jpg"), 1, "neither refused run started")
    XCTAssertEqual(
      try FileManager.default.contentsOfDirectory(atPath: temporary.path).filter {
        $0.contains("{")
      }, [])
  }

  func testReportHTMLAndReportMergeWriteToDevicesAndRefuseFolders() throws {
    let report = temporary.appending("run.json")
    XCTAssertEqual(try prefetch(["--report", report]).status, 0)
    let device = try makeNullDevice("null")
    let page = try ImageCacheBinary.run(["report", "html", report, "--output", device])
    XCTAssertEqual(page.status, 0, page.stderr)
    let merged = try ImageCacheBinary.run(["report", "merge", report, "--report", device])
    XCTAssertEqual(merged.status, 0, merged.stderr)
    XCTAssertEqual(fileType(device), S_IFCHR)
    let refused = try ImageCacheBinary.run(
      ["report", "html", report, "--output", temporary.path])
    XCTAssertEqual(refused.status, 2, refused.stderr)
    XCTAssertTrue(refused.stderr.contains("folder"), refused.stderr)
  }

  // MARK: The tool's own files (item 2)

  private var stateFolder: String { cache + "/default/.imagecache" }

  private func assertRefused(
    _ entry: String, status: Int32 = 4, file: StaticString = #filePath, line: UInt = #line
  ) throws {
    let result = try prefetch([])
    XCTAssertEqual(result.status, status, result.stderr, file: file, line: line)
    XCTAssertTrue(result.stderr.contains(entry), result.stderr, file: file, line: line)
  }

  func testALinkPlantedAsTheLockIsRefusedAndItsTargetIsUntouched() throws {
    let victim = temporary.appending("victim.txt")
    try "precious".write(toFile: victim, atomically: true, encoding: .utf8)
    try FileSystem.createDirectory(path: stateFolder)
    XCTAssertEqual(symlink(victim, stateFolder + "/lock"), 0)
    try assertRefused(stateFolder + "/lock")
    XCTAssertEqual(try String(contentsOfFile: victim, encoding: .utf8), "precious")
    XCTAssertEqual(server.requestCount("/a.jpg"), 0)
  }

  func testALinkPlantedAsTheStateDatabaseIsRefusedAndItsTargetIsUntouched() throws {
    let victim = temporary.appending("victim.db")
    try "precious".write(toFile: victim, atomically: true, encoding: .utf8)
    try FileSystem.createDirectory(path: stateFolder)
    XCTAssertEqual(symlink(victim, stateFolder + "/state.sqlite-wal"), 0)
    try assertRefused(stateFolder + "/state.sqlite-wal")
    XCTAssertEqual(try String(contentsOfFile: victim, encoding: .utf8), "precious")
  }

  func testAStateFolderThatIsALinkIsRefusedAndNothingIsWrittenWhereItPoints() throws {
    let elsewhere = temporary.appending("elsewhere")
    try FileSystem.createDirectory(path: elsewhere)
    try FileSystem.createDirectory(path: cache + "/default")
    XCTAssertEqual(symlink(elsewhere, stateFolder), 0)
    // A link where a folder is expected: the cache is named wrongly, exit 2 (issue 38).
    try assertRefused(stateFolder, status: 2)
    XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: elsewhere), [])
  }

  func testAFIFOPlantedAsTheLockIsRefusedWithoutWaitingOnIt() throws {
    try FileSystem.createDirectory(path: stateFolder)
    XCTAssertEqual(mkfifo(stateFolder + "/lock", 0o600), 0)
    try assertRefused(stateFolder + "/lock")
  }
}
