import Core
import Foundation
import Runner
import TestSupport
import XCTest

/// SPEC section 6: the streamed report has the schema's shape and decodes to what was recorded.
final class ReportWriterTests: TemporaryFolderTestCase {
  func testAStreamedReportDecodesToWhatWasRecorded() throws {
    let location = CacheLocation(directory: "/srv/c\"ache", namespace: "ns")
    let started = Date(timeIntervalSince1970: 1_700_000_000.25)
    let path = temporary.appending("out/report.json")
    let writer = try ReportWriter(
      job: "night\u{1}ly", location: location, startedAt: started, files: [path],
      standardOutput: false)

    var sink = writer.prefetchRecorder
    let failure = FailureReport(
      url: "https://x/\"a\"\\b\n.png", code: 2001, name: "invalidDownloadStatusCode",
      httpStatus: 404, message: "unacceptable HTTP status 404", attempts: 1, blacklisted: false,
      source: "urls.txt:3")
    sink.recordFailure(failure)
    let download = DownloadReport(
      url: "https://x/é.jpg", bytes: 1234, info: ImageInfo(format: .jpeg, width: 4, height: 3))
    sink.recordDownload(download)
    sink.recordLineError("urls.txt:9: not a URL")
    writer.recordBlacklisted("https://x/bad.png")
    var counts = PrefetchCounts()
    counts.total = 3
    counts.downloaded = 1
    counts.failed = 1
    counts.skipped = 1
    counts.bytesDownloaded = 1234
    counts.durationSeconds = 0.5

    var expire = try writer.beginPass(.expire, dryRun: true, listsActions: true)
    expire.recordDelete(
      path: "a/b.jpg", bytes: 4096, date: Date(timeIntervalSince1970: 1_600_000_000.5))
    expire.recordError("cannot remove x: Permission denied")
    writer.endPass(expire)
    var trim = try writer.beginPass(.trim, dryRun: true, listsActions: false)
    trim.recordDelete(path: "c.png", bytes: 8192, date: nil)
    writer.endPass(trim)

    let finished = started.addingTimeInterval(2)
    try writer.finish(
      status: .completed, finishedAt: finished, prefetch: counts, warnings: ["w1", "w\t2"])

    let data = try XCTUnwrap(FileManager.default.contents(atPath: path))
    let report = try RunReport.decode(data)
    XCTAssertEqual(report.schemaVersion, 1)
    XCTAssertEqual(report.job, "night\u{1}ly")
    XCTAssertEqual(report.status, .completed)
    XCTAssertEqual(
      report.startedAt.timeIntervalSince1970, started.timeIntervalSince1970, accuracy: 0.001)
    XCTAssertEqual(
      report.finishedAt.timeIntervalSince1970, finished.timeIntervalSince1970, accuracy: 0.001)
    XCTAssertEqual(report.cache.path, location.directory)
    XCTAssertEqual(report.cache.namespace, "ns")
    let prefetch = try XCTUnwrap(report.prefetch)
    XCTAssertEqual(prefetch.counts, counts)
    XCTAssertEqual(prefetch.failures, [failure])
    XCTAssertEqual(prefetch.downloads, [download])
    XCTAssertEqual(prefetch.lineErrors, ["urls.txt:9: not a URL"])
    XCTAssertEqual(prefetch.blacklistedURLs, ["https://x/bad.png"])
    XCTAssertEqual(report.maintenance.map(\.pass), [.expire, .trim])
    XCTAssertEqual(report.maintenance[0].filesRemoved, 1)
    XCTAssertEqual(report.maintenance[0].bytesFreed, 4096)
    XCTAssertEqual(report.maintenance[0].actions.map(\.path), ["a/b.jpg"])
    XCTAssertEqual(
      report.maintenance[0].actions[0].date?.timeIntervalSince1970 ?? 0, 1_600_000_000.5,
      accuracy: 0.001)
    XCTAssertEqual(report.maintenance[0].errors, ["cannot remove x: Permission denied"])
    XCTAssertEqual(report.maintenance[1].filesRemoved, 1, "counted without being listed")
    XCTAssertEqual(report.maintenance[1].actions, [])
    XCTAssertEqual(report.warnings, ["w1", "w\t2"])
    XCTAssertEqual(
      SchemaValidator.validate(
        try JSONSerialization.jsonObject(with: data), against: try SchemaValidator.reportSchema()),
      [])
    XCTAssertEqual(
      try FileManager.default.contentsOfDirectory(atPath: temporary.appending("out")),
      ["report.json"], "no temporary file left beside the report")
  }

  func testAFailedRunCarriesItsErrorAndStatus() throws {
    let path = temporary.appending("report.json")
    let writer = try ReportWriter(
      job: "j", location: CacheLocation(directory: "/c"), startedAt: Date(), files: [path],
      standardOutput: false)
    try writer.finish(
      status: .failed, finishedAt: Date(), prefetch: nil, warnings: [],
      error: "cannot write /c/default/x: No space left on device")
    let report = try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: path)))
    XCTAssertEqual(report.status, .failed)
    XCTAssertEqual(report.error, "cannot write /c/default/x: No space left on device")
    XCTAssertNil(report.prefetch)
  }

  func testABareFileNameIsWrittenInTheWorkingDirectory() throws {
    let previous = FileManager.default.currentDirectoryPath
    XCTAssertTrue(FileManager.default.changeCurrentDirectoryPath(temporary.path))
    defer { _ = FileManager.default.changeCurrentDirectoryPath(previous) }
    let writer = try ReportWriter(
      job: "j", location: CacheLocation(directory: "/c"), startedAt: Date(), files: ["r.json"],
      standardOutput: false)
    try writer.finish(status: .completed, finishedAt: Date(), prefetch: nil, warnings: [])
    XCTAssertEqual(
      try RunReport.decode(
        XCTUnwrap(FileManager.default.contents(atPath: temporary.appending("r.json")))
      ).job,
      "j")
    XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: temporary.path), ["r.json"])
  }

  func testAReportPathThatCannotBeWrittenFailsBeforeTheRun() throws {
    try "x".write(toFile: temporary.appending("file"), atomically: true, encoding: .utf8)
    XCTAssertThrowsError(
      try ReportWriter(
        job: "j", location: CacheLocation(directory: "/c"), startedAt: Date(),
        files: [temporary.appending("file/report.json")], standardOutput: false)
    ) { error in
      XCTAssertTrue("\(error)".contains(self.temporary.appending("file")), "\(error)")
    }
  }
}
