import Core
import Foundation
import GRDB
import State
import TestSupport
import XCTest

/// End-to-end: `imagecache verify --repair refetch` (issue 45), the built binary against a
/// loopback server. A prefetch teaches the state each file's URL; verify downloads a damaged
/// file again through the prefetch's pipeline, and quarantines what it cannot refetch.
final class VerifyRefetchTests: LoopbackTestCase {
  var location: CacheLocation!

  override var routes: [String: Route] {
    var routes = Self.images
    // Served once: the prefetch gets it, a refetch finds it gone.
    routes["/once.jpg"] = { request in
      request.attempt == 1 ? .image(Fixtures.jpeg, type: "image/jpeg") : ServerResponse(status: 404)
    }
    // The second request (the first refetch) is answered slowly: in flight for seconds.
    routes["/slow.jpg"] = { request in
      request.attempt != 2
        ? .image(Fixtures.jpeg, type: "image/jpeg")
        : ServerResponse(
          headers: [("Content-Type", "image/jpeg")], body: Fixtures.jpeg,
          dripInterval: .milliseconds(50), dripChunk: 16)
    }
    // Revalidated: 304 Not Modified to a request that names its ETag.
    routes["/etag.jpg"] = { request in
      request.header("If-None-Match") == "\"v1\""
        ? ServerResponse(status: 304, headers: [("ETag", "\"v1\"")])
        : ServerResponse(
          headers: [("ETag", "\"v1\""), ("Content-Type", "image/jpeg")], body: Fixtures.jpeg)
    }
    // The first refetch is answered only after seconds.
    routes["/stuck.jpg"] = { request in
      request.attempt == 2
        ? ServerResponse(
          headers: [("Content-Type", "image/jpeg")], body: Fixtures.jpeg, headDelay: .seconds(10))
        : .image(Fixtures.jpeg, type: "image/jpeg")
    }
    return routes
  }

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
  }

  func path(_ name: String) -> String { location.diskCachePath + "/" + name }

  /// Prefetches `paths` of the server; returns each one's file name.
  func prefetch(_ paths: [String]) throws -> [String: String] {
    let manifest = temporary.appending("urls.txt")
    try paths.map(server.url).joined(separator: "\n").write(
      toFile: manifest, atomically: true, encoding: .utf8)
    let result = try ImageCacheBinary.run(["prefetch", manifest, "--cache", location.directory])
    XCTAssertEqual(result.status, 0, result.stderr)
    return Dictionary(
      uniqueKeysWithValues: paths.map { ($0, CacheFileName.fileName(forKey: server.url($0))) })
  }

  /// Truncates the file `name` to its first half: a bad JPEG or PNG.
  func damage(_ name: String) throws {
    let data = try XCTUnwrap(FileManager.default.contents(atPath: path(name)))
    try data.prefix(data.count / 2).write(to: URL(fileURLWithPath: path(name)))
  }

  func verify(_ arguments: [String]) throws -> (CommandResult, RunReport) {
    let reportPath = temporary.appending("reports/verify-\(UUID().uuidString).json")
    let result = try ImageCacheBinary.run(
      ["verify", "--cache", location.directory, "--report", reportPath] + arguments)
    let report = try RunReport.decode(
      XCTUnwrap(FileManager.default.contents(atPath: reportPath), result.stderr))
    return (result, report)
  }

  var quarantined: [String] {
    (FileManager.default.subpaths(atPath: location.diskCachePath + "/.imagecache/quarantine")
      ?? []).filter { $0.contains(".") && $0.count > 20 }
  }

  func testADamagedFileWhoseURLTheStateKnowsIsRefetchedByteForByte() throws {
    let names = try prefetch(["/a.jpg", "/b.png"])
    try damage(names["/a.jpg"]!)
    try damage(names["/b.png"]!)
    let requestsBefore = server.requestCount("/a.jpg")

    let (result, report) = try verify(["--repair", "refetch"])

    XCTAssertEqual(result.status, 1, "bad files were found: \(result.stderr)")
    XCTAssertEqual(server.requestCount("/a.jpg"), requestsBefore + 1)
    XCTAssertEqual(FileManager.default.contents(atPath: path(names["/a.jpg"]!)), Fixtures.jpeg)
    XCTAssertEqual(FileManager.default.contents(atPath: path(names["/b.png"]!)), Fixtures.png)
    let verify = try XCTUnwrap(report.verify)
    XCTAssertEqual(verify.repair, .refetch)
    XCTAssertEqual(
      Set(verify.files.compactMap(\.url)), [server.url("/a.jpg"), server.url("/b.png")],
      "each bad file's URL, from the state")
    let pass = try XCTUnwrap(report.maintenance.first { $0.pass == .repair })
    XCTAssertEqual(pass.filesRefetched, 2)
    XCTAssertEqual(pass.filesNotRefetched, 0)
    XCTAssertEqual(pass.filesMoved, 0)
    XCTAssertEqual(Set(pass.actions.map(\.kind)), [.refetch])
    XCTAssertEqual(Set(pass.actions.map(\.path)), Set(names.values))
    XCTAssertTrue(result.stderr.contains("refetched 2 files"), result.stderr)
    XCTAssertTrue(quarantined.isEmpty)

    let again = try ImageCacheBinary.run(["verify", "--cache", location.directory])
    XCTAssertEqual(again.status, 0, "the refetched files are valid: \(again.stderr)")
  }

  /// A cache prefetched before the state kept URLs learns them from its revalidations: a 304
  /// records its file's URL as a download does (a hit still records nothing), and the file can
  /// then be refetched.
  func testARevalidationTeachesTheStateTheURLOfAFileStoredBeforeItKeptURLs() throws {
    let name = try XCTUnwrap(prefetch(["/etag.jpg"])["/etag.jpg"])
    let state = location.stateDirectory + "/" + StateStore.fileName
    try DatabaseQueue(path: state).write { try $0.execute(sql: "DELETE FROM stored") }
    func storedURL() throws -> String? {
      try XCTUnwrap(StateStore.openForReading(path: state)).storedURL(forFileName: name)?.url
    }
    let manifest = temporary.appending("urls.txt")
    let hit = try ImageCacheBinary.run(["prefetch", manifest, "--cache", location.directory])
    XCTAssertEqual(hit.status, 0, hit.stderr)
    XCTAssertNil(try storedURL(), "a hit records nothing")

    let reportPath = temporary.appending("revalidation.json")
    let revalidation = try ImageCacheBinary.run([
      "prefetch", manifest, "--cache", location.directory, "--option", "refreshCached",
      "--report", reportPath,
    ])

    XCTAssertEqual(revalidation.status, 0, revalidation.stderr)
    let report = try RunReport.decode(
      XCTUnwrap(FileManager.default.contents(atPath: reportPath)))
    XCTAssertEqual(report.prefetch?.notModified, 1)
    XCTAssertEqual(server.requests("/etag.jpg").last?.header("If-None-Match"), "\"v1\"")
    XCTAssertEqual(try storedURL(), server.url("/etag.jpg"), "the 304 recorded the file's URL")

    try damage(name)
    let (result, audit) = try verify(["--repair", "refetch"])

    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertEqual(audit.verify?.files.first?.url, server.url("/etag.jpg"))
    XCTAssertEqual(audit.maintenance.first { $0.pass == .repair }?.filesRefetched, 1)
    XCTAssertEqual(FileManager.default.contents(atPath: path(name)), Fixtures.jpeg)
  }

  func testAFileWhoseURLIsUnknownIsQuarantinedInstead() throws {
    let names = try prefetch(["/a.jpg"])
    // Written by another tool: the state has no URL for it.
    let foreign = CacheFileName.fileName(forKey: "https://elsewhere.example/x.jpg")
    try DamagedImage.truncatedJPEG.data.write(to: URL(fileURLWithPath: path(foreign)))
    try damage(names["/a.jpg"]!)

    let (result, report) = try verify(["--repair", "refetch"])

    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertEqual(FileManager.default.contents(atPath: path(names["/a.jpg"]!)), Fixtures.jpeg)
    XCTAssertFalse(FileManager.default.fileExists(atPath: path(foreign)))
    XCTAssertEqual(quarantined.map { ($0 as NSString).lastPathComponent }, [foreign])
    let pass = try XCTUnwrap(report.maintenance.first { $0.pass == .repair })
    XCTAssertEqual(pass.filesRefetched, 1)
    XCTAssertEqual(pass.filesMoved, 1)
    let move = try XCTUnwrap(pass.actions.first { $0.kind == .move })
    XCTAssertEqual(move.path, foreign)
    XCTAssertTrue(move.reason?.contains("no URL known") == true, "\(move)")
    XCTAssertNil(report.verify?.files.first { $0.name == foreign }?.url)
    XCTAssertTrue(
      result.stderr.contains("repair: quarantined 1 files, deleted 0 files, refetched 1 files"),
      result.stderr)
  }

  func testADryRunSaysWhatItWouldRefetchAndChangesNothing() throws {
    let names = try prefetch(["/a.jpg"])
    try damage(names["/a.jpg"]!)
    let damaged = FileManager.default.contents(atPath: path(names["/a.jpg"]!))
    let foreign = CacheFileName.fileName(forKey: "https://elsewhere.example/x.jpg")
    try DamagedImage.truncatedJPEG.data.write(to: URL(fileURLWithPath: path(foreign)))
    let requestsBefore = server.allRequests.count

    let (result, report) = try verify(["--repair", "refetch", "--dry-run"])

    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertEqual(server.allRequests.count, requestsBefore, "a dry run downloads nothing")
    XCTAssertEqual(FileManager.default.contents(atPath: path(names["/a.jpg"]!)), damaged)
    XCTAssertTrue(FileManager.default.fileExists(atPath: path(foreign)))
    XCTAssertTrue(quarantined.isEmpty)
    XCTAssertTrue(
      result.stdout.contains(
        "repair: would refetch \(names["/a.jpg"]!) from \(server.url("/a.jpg"))"),
      result.stdout)
    XCTAssertTrue(result.stdout.contains("repair: would move \(foreign)"), result.stdout)
    let pass = try XCTUnwrap(report.maintenance.first { $0.pass == .repair })
    XCTAssertTrue(pass.dryRun)
    XCTAssertEqual(
      pass.actions.map(\.kind).sorted { $0.rawValue < $1.rawValue }, [.move, .refetch])
  }

  func testARefetchThatFailsQuarantinesTheBadFileAndSaysSo() throws {
    let names = try prefetch(["/once.jpg", "/a.jpg"])
    try damage(names["/once.jpg"]!)

    let metricsPath = temporary.appending("verify.prom")
    let (result, report) = try verify(["--repair", "refetch", "--metrics", metricsPath])

    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertFalse(FileManager.default.fileExists(atPath: path(names["/once.jpg"]!)))
    let metrics = try String(contentsOfFile: metricsPath, encoding: .utf8)
    for (action, count) in [("quarantine", 1), ("refetch", 0), ("refetch_failed", 1)] {
      XCTAssertTrue(
        metrics.contains(
          "imagecache_verify_repaired_files{imagecache_job=\"verify\",namespace=\"default\","
            + "action=\"\(action)\"} \(count).0"), metrics)
    }
    XCTAssertEqual(quarantined.map { ($0 as NSString).lastPathComponent }, [names["/once.jpg"]!])
    let pass = try XCTUnwrap(report.maintenance.first { $0.pass == .repair })
    XCTAssertEqual(pass.filesRefetched, 0)
    XCTAssertEqual(pass.filesNotRefetched, 1)
    XCTAssertEqual(pass.filesMoved, 1)
    XCTAssertTrue(pass.errors.contains { $0.contains("404") }, "\(pass.errors)")
    XCTAssertTrue(
      pass.actions.first?.reason?.hasPrefix("refetch failed") == true, "\(pass.actions)")
    XCTAssertTrue(result.stderr.contains("1 failed and were quarantined"), result.stderr)
    XCTAssertEqual(
      FileManager.default.contents(atPath: path(names["/a.jpg"]!)), Fixtures.jpeg,
      "a good file is left alone")
  }

  func testMaxDeleteGuardsARefetchAsItGuardsAQuarantine() throws {
    let names = try prefetch(["/a.jpg", "/b.png"])
    try damage(names["/a.jpg"]!)
    try damage(names["/b.png"]!)
    let damaged = FileManager.default.contents(atPath: path(names["/a.jpg"]!))
    let requestsBefore = server.allRequests.count

    let reportPath = temporary.appending("reports/guard.json")
    let result = try ImageCacheBinary.run([
      "verify", "--cache", location.directory, "--repair", "refetch", "--max-delete", "1",
      "--report", reportPath,
    ])

    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertEqual(server.allRequests.count, requestsBefore, "nothing refetched")
    XCTAssertEqual(FileManager.default.contents(atPath: path(names["/a.jpg"]!)), damaged)
    let report = try RunReport.decode(
      XCTUnwrap(FileManager.default.contents(atPath: reportPath)))
    XCTAssertEqual(report.status, .failed)
    XCTAssertEqual(report.verify?.counts.bad, 2)
  }

  /// A job's verify pass refetches with the job's own context: its headers reach the origin,
  /// and its cache key filter names the same file.
  func testAJobsVerifyPassRefetchesWithTheJobsContext() throws {
    let manifest = temporary.appending("job-urls.txt")
    try server.url("/a.jpg?v=1").write(toFile: manifest, atomically: true, encoding: .utf8)
    let reportPath = temporary.appending("reports/job.json")
    let file = temporary.appending("job.yaml")
    try """
    cache:
      directory: \(location.directory)
    manifests: [\(manifest)]
    context:
      headers: {X-Api-Key: key-123}
      cacheKeyFilter: stripQuery
    maintenance: [verify]
    verify: {repair: refetch}
    report: \(reportPath)

    """.write(toFile: file, atomically: true, encoding: .utf8)
    let first = try ImageCacheBinary.run(["run", file])
    XCTAssertEqual(first.status, 0, first.stderr)
    let name = CacheFileName.fileName(forKey: server.url("/a.jpg"))
    try damage(name)

    let result = try ImageCacheBinary.run(["run", file])

    XCTAssertEqual(result.status, 1, "the audit found a bad file: \(result.stderr)")
    XCTAssertEqual(FileManager.default.contents(atPath: path(name)), Fixtures.jpeg)
    let requests = server.requests("/a.jpg")
    XCTAssertEqual(requests.count, 2, "the prefetch's download, then the refetch")
    XCTAssertEqual(requests.last?.header("X-Api-Key"), "key-123")
    let report = try RunReport.decode(
      XCTUnwrap(FileManager.default.contents(atPath: reportPath)))
    XCTAssertEqual(report.prefetch?.counts.diskHits, 1, "the damaged file was a hit")
    XCTAssertEqual(report.maintenance.first { $0.pass == .repair }?.filesRefetched, 1)
  }

  /// SIGINT during a refetch cancels the download in flight: the run ends at once, its report
  /// interrupted, the bad file left as it was (not quarantined: nothing failed).
  func testSIGINTDuringARefetchCancelsItAndLeavesTheFileAsItWas() throws {
    let names = try prefetch(["/stuck.jpg"])
    let name = names["/stuck.jpg"]!
    try damage(name)
    let damaged = FileManager.default.contents(atPath: path(name))
    let reportPath = temporary.appending("reports/interrupted.json")

    let (process, stdout, stderr) = try ImageCacheBinary.start([
      "verify", "--cache", location.directory, "--repair", "refetch", "--report", reportPath,
    ])
    waitUntil("the refetch's request") { server.requestCount("/stuck.jpg") == 2 }
    kill(process.processIdentifier, SIGINT)
    let result = ImageCacheBinary.finish(process, stdout, stderr)

    XCTAssertEqual(result.status, 130, result.stderr)
    XCTAssertEqual(FileManager.default.contents(atPath: path(name)), damaged)
    XCTAssertTrue(quarantined.isEmpty)
    let report = try RunReport.decode(
      XCTUnwrap(FileManager.default.contents(atPath: reportPath)))
    XCTAssertEqual(report.status, .interrupted)
    let pass = try XCTUnwrap(report.maintenance.first { $0.pass == .repair })
    XCTAssertEqual(pass.filesRefetched, 0)
    XCTAssertEqual(pass.filesNotRefetched, 0)
    XCTAssertTrue(pass.errors.contains { $0.contains("refetch interrupted") }, "\(pass.errors)")
  }

  /// A refetch killed while its download is in flight leaves the bad file as it was, or the
  /// whole new one: the store is a rename. Nothing else visible is left in the cache.
  func testKillNineDuringARefetchLeavesTheBadFileOrTheWholeNewOne() throws {
    let names = try prefetch(["/slow.jpg", "/a.jpg"])
    let name = names["/slow.jpg"]!
    try damage(name)
    let damaged = try XCTUnwrap(FileManager.default.contents(atPath: path(name)))

    let (process, stdout, stderr) = try ImageCacheBinary.start([
      "verify", "--cache", location.directory, "--repair", "refetch",
    ])
    waitUntil("part of the refetch's body") {
      server.bodyBytesSent("/slow.jpg") > Fixtures.jpeg.count + 64
    }
    kill(process.processIdentifier, SIGKILL)
    _ = ImageCacheBinary.finish(process, stdout, stderr)

    let now = FileManager.default.contents(atPath: path(name))
    XCTAssertTrue(now == damaged || now == Fixtures.jpeg, "the bad file or the whole new one")
    XCTAssertEqual(FileManager.default.contents(atPath: path(names["/a.jpg"]!)), Fixtures.jpeg)
    let visible = try FileManager.default.contentsOfDirectory(atPath: location.diskCachePath)
      .filter { !$0.hasPrefix(".") }
    XCTAssertEqual(Set(visible), Set(names.values), "no partial file under a name SD reads")

    // The next refetch finishes the job.
    let (result, _) = try verify(["--repair", "refetch"])
    XCTAssertEqual(result.status, now == damaged ? 1 : 0, result.stderr)
    XCTAssertEqual(FileManager.default.contents(atPath: path(name)), Fixtures.jpeg)
  }
}
