import Core
import State
import TestSupport
import XCTest

/// End-to-end: `imagecache verify` (issue 45), the built binary on real cache folders.
final class VerifyCommandTests: TemporaryFolderTestCase {
  var location: CacheLocation!

  override func setUpWithError() throws {
    try super.setUpWithError()
    location = CacheLocation(directory: temporary.appending("cache"))
    try FileSystem.createDirectory(path: location.diskCachePath)
  }

  /// Stores `data` under the file name SD 5 gives `url`; returns the name.
  @discardableResult
  func store(_ data: Data, url: String) throws -> String {
    let name = CacheFileName.fileName(forKey: url)
    try data.write(to: URL(fileURLWithPath: location.diskCachePath + "/" + name))
    return name
  }

  func storeValidImages() throws -> [String] {
    try validCacheImages.map { try store($0.data, url: $0.url) }
  }

  /// Stores every damaged image; returns each one's file name.
  func storeDamagedImages(_ kinds: [DamagedImage] = DamagedImage.allCases) throws -> [String:
    DamagedImage]
  {
    var names: [String: DamagedImage] = [:]
    for kind in kinds { names[try store(kind.data, url: kind.url)] = kind }
    return names
  }

  func verify(_ arguments: [String]) throws -> CommandResult {
    try ImageCacheBinary.run(["verify", "--cache", location.directory] + arguments)
  }

  func report(_ path: String) throws -> RunReport {
    try RunReport.decode(XCTUnwrap(FileManager.default.contents(atPath: path)))
  }

  /// `imagecache_verify_repaired_files{action="quarantine"}` of the metrics file at `path`.
  func quarantined(_ path: String) throws -> Double? {
    let text = try String(contentsOfFile: path, encoding: .utf8)
    let sample = text.split(separator: "\n").first {
      $0.hasPrefix("imagecache_verify_repaired_files{") && $0.contains("action=\"quarantine\"")
    }
    return sample?.split(separator: " ").last.flatMap { Double($0) }
  }

  var namespaceFiles: [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: location.diskCachePath))?
      .filter { !$0.hasPrefix(".") }.sorted() ?? []
  }

  func testEveryKindOfDamageIsFoundWithItsReasonAndNoValidImageIsFlagged() throws {
    let valid = try storeValidImages()
    let damaged = try storeDamagedImages()
    let reportPath = temporary.appending("reports/verify.json")

    let result = try verify(["--report", reportPath])

    XCTAssertEqual(result.status, 1, "bad files found: \(result.stderr)")
    let verify = try XCTUnwrap(report(reportPath).verify)
    XCTAssertEqual(verify.level, .structure, "the default level")
    XCTAssertEqual(verify.repair, .none)
    XCTAssertEqual(verify.counts.files, valid.count + damaged.count)
    XCTAssertEqual(verify.counts.ok, valid.count)
    XCTAssertEqual(verify.counts.bad, damaged.count)
    XCTAssertEqual(verify.counts.note, 0)
    XCTAssertEqual(Set(verify.files.map(\.name)), Set(damaged.keys), "no valid image flagged")
    for file in verify.files {
      let kind = try XCTUnwrap(damaged[file.name])
      XCTAssertEqual(file.outcome, .bad, "\(kind)")
      XCTAssertTrue(
        file.reason?.hasPrefix(kind.reason) == true, "\(kind): \(file.reason ?? "no reason")")
      XCTAssertEqual(file.size, UInt64(kind.data.count), "\(kind)")
      let attributes = try XCTUnwrap(
        FileSystem.attributes(atPath: location.diskCachePath + "/" + file.name))
      XCTAssertEqual(
        file.modifiedAt.timeIntervalSince1970,
        attributes.modificationDate.timeIntervalSince1970, accuracy: 0.001)
      XCTAssertTrue(result.stderr.contains("verify: bad: \(file.name)"), result.stderr)
    }
    XCTAssertTrue(
      result.stderr.contains(
        "verified \(valid.count + damaged.count) files (structure): \(valid.count) ok, "
          + "0 with notes, \(damaged.count) bad"), result.stderr)
    XCTAssertEqual(namespaceFiles, (valid + damaged.keys).sorted(), "a report only")
    let json = try JSONSerialization.jsonObject(
      with: XCTUnwrap(FileManager.default.contents(atPath: reportPath)))
    XCTAssertEqual(SchemaValidator.validate(json, against: try SchemaValidator.reportSchema()), [])
  }

  func testTheHeaderLevelFindsHeaderDamageAndPassesWhatLiesBeyondTheHeader() throws {
    let damaged = try storeDamagedImages()
    let reportPath = temporary.appending("verify.json")

    let result = try verify(["--level", "header", "--report", reportPath])

    XCTAssertEqual(result.status, 1, result.stderr)
    let verify = try XCTUnwrap(report(reportPath).verify)
    XCTAssertEqual(verify.level, .header)
    let flagged = Set(verify.files.map { damaged[$0.name]! })
    XCTAssertEqual(flagged, Set(DamagedImage.allCases.filter(\.isInHeader)))
    XCTAssertEqual(verify.counts.ok, DamagedImage.allCases.filter { !$0.isInHeader }.count)
  }

  func testACleanCacheExitsZeroAndItsMetricsCountTheFilesByOutcome() throws {
    let valid = try storeValidImages()
    try store(Fixtures.png, url: "https://images.example/named-as.jpg")
    let metricsPath = temporary.appending("metrics/verify.prom")

    let result = try verify(["--metrics", metricsPath, "--jobs", "3"])

    XCTAssertEqual(result.status, 0, result.stderr)
    let metrics = try String(contentsOfFile: metricsPath, encoding: .utf8)
    let labels = "imagecache_job=\"verify\",namespace=\"default\""
    for (outcome, count) in [("ok", valid.count), ("note", 1), ("bad", 0)] {
      XCTAssertTrue(
        metrics.contains("imagecache_verify_files{\(labels),outcome=\"\(outcome)\"} \(count).0"),
        metrics)
    }
    XCTAssertTrue(metrics.contains("# TYPE imagecache_verify_files gauge"), metrics)
  }

  func testNamesAreJudgedAndNotedWithoutFailingTheRun() throws {
    let current = try store(Fixtures.jpeg, url: "https://images.example/a.jpg")
    let misnamed = try store(Fixtures.png, url: "https://images.example/really-a-png.jpg")
    let legacy = CacheFileName.fileName(
      forKey: "https://images.example/b.jpg?w=1", scheme: .rawStringExtension)
    try Fixtures.jpeg.write(to: URL(fileURLWithPath: location.diskCachePath + "/" + legacy))
    let builder = CacheBuilder(root: location.diskCachePath)
    let now = Int64(Date().timeIntervalSince1970)
    let stale = FileSystem.temporaryPrefix + "killed"
    try builder.file(stale, accessTime: now - 3 * 3600)
    let fresh = FileSystem.temporaryPrefix + "inflight"
    try builder.file(fresh, accessTime: now - 1800)
    try builder.file("README.txt", accessTime: now)
    try builder.file("sub/" + CacheFileName.fileName(forKey: "x"), accessTime: now)
    let reportPath = temporary.appending("verify.json")

    let result = try verify(["--report", reportPath, "-v"])

    XCTAssertEqual(result.status, 0, "notes are no failure: \(result.stderr)")
    let verify = try XCTUnwrap(report(reportPath).verify)
    XCTAssertEqual(verify.counts.ok, 1)
    XCTAssertEqual(verify.counts.note, 6)
    let notes = Dictionary(uniqueKeysWithValues: verify.files.map { ($0.name, $0.notes) })
    XCTAssertNil(notes[current])
    XCTAssertEqual(notes[misnamed], ["named .jpg, holds png (SD reads it all the same)"])
    XCTAssertTrue(notes[legacy]?.first?.hasPrefix("a legacy name (SD 3/4)") == true, "\(notes)")
    XCTAssertTrue(
      notes[stale]?.first?.contains("3 h old: left by a killed run") == true, "\(notes)")
    XCTAssertTrue(
      notes[fresh]?.first?.contains("30 min old: a store in flight") == true, "\(notes)")
    XCTAssertTrue(notes["README.txt"]?.first?.hasPrefix("foreign: not a name SD gives") == true)
    XCTAssertTrue(
      notes["sub/" + CacheFileName.fileName(forKey: "x")]?.first?.hasPrefix(
        "foreign: in a subfolder")
        == true, "\(notes)")
    XCTAssertTrue(result.stderr.contains("verify: note: \(misnamed)"), result.stderr)
    XCTAssertTrue(
      FileManager.default.fileExists(atPath: location.diskCachePath + "/" + stale),
      "a verify run sweeps no temporary file: it names it")
  }

  func testQuarantineMovesTheBadFilesByRenameAfterADryRunThatChangesNothing() throws {
    let valid = try storeValidImages()
    let damaged = try storeDamagedImages([.truncatedJPEG, .htmlPage])
    let inodes = try damaged.keys.map { name in
      try XCTUnwrap(
        FileManager.default.attributesOfItem(
          atPath: location.diskCachePath + "/" + name)[.systemFileNumber] as? UInt64)
    }
    let before = namespaceFiles
    let planPath = temporary.appending("plan.json")

    let metricsPath = temporary.appending("verify.prom")
    let plan = try verify(
      ["--repair", "quarantine", "--dry-run", "--report", planPath, "--metrics", metricsPath])

    XCTAssertEqual(plan.status, 1, plan.stderr)
    XCTAssertEqual(namespaceFiles, before, "a dry run changes nothing")
    XCTAssertFalse(
      FileManager.default.fileExists(atPath: location.stateDirectory + "/quarantine"))
    let planned = try XCTUnwrap(report(planPath).maintenance.first { $0.pass == .repair })
    XCTAssertTrue(planned.dryRun)
    XCTAssertEqual(Set(planned.actions.map(\.path)), Set(damaged.keys))
    XCTAssertEqual(Set(planned.actions.map(\.kind)), [.move])
    for name in damaged.keys {
      XCTAssertTrue(plan.stdout.contains("repair: would move \(name) -> "), plan.stdout)
    }
    XCTAssertEqual(try quarantined(metricsPath), 0, "a plan is no repair in the metrics")

    let reportPath = temporary.appending("verify.json")
    let result = try verify(
      ["--repair", "quarantine", "--report", reportPath, "--metrics", metricsPath])
    XCTAssertEqual(try quarantined(metricsPath), 2)

    XCTAssertEqual(result.status, 1, "bad files were found: \(result.stderr)")
    XCTAssertEqual(namespaceFiles, valid.sorted(), "the bad files are gone, the valid ones stay")
    let days = try FileManager.default.contentsOfDirectory(
      atPath: location.stateDirectory + "/quarantine")
    XCTAssertEqual(days.count, 1)
    let day = try XCTUnwrap(days.first)
    XCTAssertNotNil(day.range(of: #"^\d{4}-\d{2}-\d{2}$"#, options: .regularExpression), day)
    let folder = location.stateDirectory + "/quarantine/" + day
    XCTAssertEqual(
      try FileManager.default.contentsOfDirectory(atPath: folder).sorted(),
      damaged.keys.sorted())
    for (name, kind) in damaged {
      XCTAssertEqual(FileManager.default.contents(atPath: folder + "/" + name), kind.data)
    }
    let moved = try damaged.keys.map { name in
      try XCTUnwrap(
        FileManager.default.attributesOfItem(
          atPath: folder + "/" + name)[.systemFileNumber] as? UInt64)
    }
    XCTAssertEqual(moved, inodes, "moved by rename: the same files, never copies")
    let repair = try XCTUnwrap(report(reportPath).maintenance.first { $0.pass == .repair })
    XCTAssertFalse(repair.dryRun)
    XCTAssertEqual(repair.filesMoved, damaged.count)
    XCTAssertEqual(
      Set(repair.actions.compactMap(\.destination)),
      Set(damaged.keys.map { ".imagecache/quarantine/\(day)/\($0)" }))
    XCTAssertTrue(result.stderr.contains("repair: quarantined 2 files, deleted 0 files"))
    for path in [planPath, reportPath] {
      let json = try JSONSerialization.jsonObject(
        with: XCTUnwrap(FileManager.default.contents(atPath: path)))
      XCTAssertEqual(
        SchemaValidator.validate(json, against: try SchemaValidator.reportSchema()), [], path)
    }

    // The same names again the same day are kept beside the first ones, never over them.
    try storeDamagedImages([.truncatedJPEG])
    XCTAssertEqual(try verify(["--repair", "quarantine"]).status, 1)
    let name = CacheFileName.fileName(forKey: DamagedImage.truncatedJPEG.url)
    XCTAssertTrue(FileManager.default.fileExists(atPath: folder + "/" + name + ".1"))
  }

  func testMaxDeleteRefusesARepairOfMoreBadFilesAndRepairsNothing() throws {
    let valid = try storeValidImages()
    let damaged = try storeDamagedImages([.zeroBytes, .text, .unknownFormat])
    let reportPath = temporary.appending("verify.json")

    let refused = try verify(["--repair", "delete", "--max-delete", "2", "--report", reportPath])

    XCTAssertEqual(refused.status, 2, refused.stderr)
    XCTAssertTrue(
      refused.stderr.contains(
        "verify found 3 bad files of \(valid.count + 3), more than "
          + "--max-delete allows --repair delete to take: 2 files; nothing was repaired"),
      refused.stderr)
    XCTAssertEqual(namespaceFiles, (valid + damaged.keys).sorted())
    let failed = try report(reportPath)
    XCTAssertEqual(failed.status, .failed)
    XCTAssertEqual(failed.verify?.counts.bad, 3, "the report lists the bad files all the same")
    XCTAssertEqual(Set(failed.verify?.files.map(\.name) ?? []), Set(damaged.keys))

    let dryRun = try verify(["--repair", "delete", "--max-delete", "2", "--dry-run"])
    XCTAssertEqual(dryRun.status, 1, dryRun.stderr)
    XCTAssertTrue(dryRun.stderr.contains("a real run would stop here"), dryRun.stderr)
    XCTAssertEqual(namespaceFiles, (valid + damaged.keys).sorted())

    let deleted = try verify(["--repair", "delete", "--max-delete", "3", "--report", reportPath])
    XCTAssertEqual(deleted.status, 1, deleted.stderr)
    XCTAssertEqual(namespaceFiles, valid.sorted())
    let repair = try XCTUnwrap(report(reportPath).maintenance.first { $0.pass == .repair })
    XCTAssertEqual(repair.filesRemoved, 3)
    XCTAssertEqual(Set(repair.actions.map(\.kind)), [.delete])
    XCTAssertEqual(try verify([]).status, 0, "nothing bad is left")
  }

  func testTheConsoleSaysTheFirstTwentyBadFilesAndTheReportListsThemAll() throws {
    for index in 0..<25 {
      try store(Data(), url: "https://images.example/empty/\(index).jpg")
    }
    let reportPath = temporary.appending("verify.json")

    let result = try verify(["--report", reportPath])

    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertEqual(result.stderr.components(separatedBy: "verify: bad: ").count - 1, 20)
    XCTAssertTrue(
      result.stderr.contains("verify: ... further bad files are in the report only"),
      result.stderr)
    XCTAssertEqual(try report(reportPath).verify?.files.count, 25)
    let verbose = try verify(["-v"])
    XCTAssertEqual(verbose.stderr.components(separatedBy: "verify: bad: ").count - 1, 25)
  }

  /// SIGINT stops the walk after the batch in hand: exit 130, the report `interrupted` with the
  /// counts so far, and nothing repaired.
  func testSIGINTStopsTheWalkWithAnInterruptedReportAndRepairsNothing() throws {
    let count = 20_000
    for index in 0..<count {
      FileManager.default.createFile(
        atPath: location.diskCachePath + "/" + CacheFileName.md5Hex("\(index)") + ".jpg",
        contents: nil)
    }
    let reportPath = temporary.appending("verify.json")
    let result = try ImageCacheBinary.interrupt(
      [
        "verify", "--cache", location.directory, "--repair", "delete", "--report", reportPath,
        "--jobs", "1",
      ], when: "verify: bad: ")

    XCTAssertEqual(result.status, 130, String(result.stderr.suffix(1000)))
    let report = try report(reportPath)
    XCTAssertEqual(report.status, .interrupted)
    let verify = try XCTUnwrap(report.verify)
    XCTAssertGreaterThan(verify.counts.files, 0)
    XCTAssertLessThan(verify.counts.files, count, "stopped midway")
    XCTAssertEqual(verify.counts.bad, verify.counts.files)
    XCTAssertEqual(verify.files.count, verify.counts.bad)
    XCTAssertNil(report.maintenance.first { $0.pass == .repair }, "nothing repaired")
    XCTAssertEqual(namespaceFiles.count, count)
  }

  func testTheFullLevelDecodesJPEGPNGGIFAndWebPAndFindsDamageInsideTheirCompressedData() throws {
    let valid = try storeValidImages()
    var damaged: [String: EntropyDamagedImage] = [:]
    for kind in EntropyDamagedImage.allCases { damaged[try store(kind.data, url: kind.url)] = kind }
    let reportPath = temporary.appending("verify.json")

    let structure = try verify(["--report", reportPath])

    XCTAssertEqual(structure.status, 0, "the containers hold together: \(structure.stderr)")
    XCTAssertEqual(try XCTUnwrap(report(reportPath).verify).counts.bad, 0)

    let full = try verify(["--level", "full", "--report", reportPath])

    XCTAssertEqual(full.status, 1, full.stderr)
    let verify = try XCTUnwrap(report(reportPath).verify)
    XCTAssertEqual(verify.level, .full)
    XCTAssertEqual(verify.counts.files, valid.count + damaged.count)
    XCTAssertEqual(verify.counts.bad, damaged.count, "no valid fixture flagged: \(verify.files)")
    for file in verify.files where file.outcome == .bad {
      let kind = try XCTUnwrap(damaged[file.name], "\(file.name) is valid: \(file)")
      let reason = try XCTUnwrap(file.reason)
      XCTAssertTrue(reason.hasPrefix(kind.reason), reason)
      XCTAssertTrue(reason.hasSuffix("(full decode)"), reason)
    }
    XCTAssertTrue(full.stderr.contains("verified \(verify.counts.files) files (full)"), full.stderr)
  }

  /// The peak memory (KiB) of `verify --level full` on a cache of `data` alone, stored under
  /// `url`'s name, which must pass. A spawned child's peak starts from the test process's own
  /// (the kernel carries it over the exec), so peaks are compared with each other, not with a
  /// fixed bound.
  func fullVerifyPeakKiB(_ data: Data, url: String, _ what: String) throws -> Int {
    try? FileManager.default.removeItem(atPath: location.diskCachePath)
    try FileSystem.createDirectory(path: location.diskCachePath)
    try store(data, url: url)
    let (status, peakKiB) = try PeakMemory.run(
      ImageCacheBinary.path, ["verify", "--cache", location.directory, "--level", "full"])
    XCTAssertEqual(status, 0, "a valid \(what)")
    return peakKiB
  }

  /// giflib keeps every frame's descriptor it reads: a GIF of millions of 1x1 frames (45 MB)
  /// took 180 MB more to check than a GIF of one frame and the same size. The full level's
  /// memory follows the file's size, not its number of frames (SPEC section 12).
  func testTheFullLevelChecksAGIFOfManyFramesInTheMemoryOfOne() throws {
    let screen = Data("GIF89a".utf8) + Data([1, 0, 1, 0, 0x80, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF])
    // A 1x1 frame: its descriptor, then LZW codes of 3 bits (clear, pixel 0, end).
    let frame = Data([0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0x02, 0x02, 0x44, 0x01, 0x00])
    let frames = 3_000_000
    let thousandFrames = Data((0..<1000).flatMap { _ in frame })
    var many = screen
    for _ in 0..<(frames / 1000) { many += thousandFrames }
    many += Data([0x3B])
    // One frame, then a comment extension of as many bytes as the other frames.
    let thousandBlocks = Data(
      (0..<1000).flatMap { _ in [0xFF] + [UInt8](repeating: 0x61, count: 255) })
    var one = screen + frame + Data([0x21, 0xFE])
    for _ in 0..<(frames * frame.count / 256_000) { one += thousandBlocks }
    one += Data([0x00, 0x3B])

    let peaks = try [one, many].map {
      try fullVerifyPeakKiB($0, url: "https://example.com/frames.gif", "GIF of \($0.count) bytes")
    }
    XCTAssertLessThan(
      peaks[1], peaks[0] + 48 * 1024, "peak KiB of one frame, of \(frames) frames: \(peaks)")
  }

  /// libwebp decodes a lossless frame into an ARGB buffer of all its pixels, and a lossy frame's
  /// alpha plane whole: a WebP of a few hundred KB claiming 10000x10000 took 430 MB (lossless)
  /// and 530 MB (lossy with alpha) to check. Over 4096 x 4096 such a frame is checked to its
  /// header and passes, in the memory of a 64x48 one (SPEC section 2, step 6).
  func testTheFullLevelChecksALargeLosslessOrAlphaWebPWithoutHoldingItsPixels() throws {
    let url = "https://images.example/image.webp"
    let small = try fullVerifyPeakKiB(Fixtures.losslessAlphaWebP, url: url, "64x48 WebP")
    for (name, webp) in [
      ("lossless", Fixtures.largeLosslessWebP), ("lossy with alpha", Fixtures.largeLossyAlphaWebP),
    ] {
      let large = try fullVerifyPeakKiB(webp, url: url, "10000x10000 \(name) WebP")
      XCTAssertLessThan(
        large, small + 48 * 1024, "peak KiB of a 64x48 WebP, of a 10000x10000 \(name) one")
    }
  }

  func testTheFullLevelNotesAnImageTooLargeToDecodeAndWalksItsStructureOnly() throws {
    let name = try store(
      pngDeclaring(width: 20000, height: 20000), url: "https://images.example/huge.png")
    let reportPath = temporary.appending("verify.json")

    let result = try verify(["--level", "full", "--report", reportPath])

    XCTAssertEqual(result.status, 0, "not decoded is no verdict: \(result.stderr)")
    let file = try XCTUnwrap(report(reportPath).verify?.files.first)
    XCTAssertEqual(file.name, name)
    XCTAssertEqual(file.outcome, .note)
    XCTAssertEqual(
      file.notes,
      ["not decoded: 20000x20000 is over 100000000 pixels; its structure was checked"])
  }

  /// `--max-pixels` (a job's `verify.maxPixels`) moves the limit: under a higher one the same
  /// image is decoded, and its pixel data, far short of what its header claims, makes it bad;
  /// under a lower one an ordinary image is noted, not decoded.
  func testMaxPixelsSetsTheLimitOfTheFullDecode() throws {
    let huge = try store(
      pngDeclaring(width: 20000, height: 20000), url: "https://images.example/huge.png")
    let reportPath = temporary.appending("verify.json")

    let decoded = try verify([
      "--level", "full", "--max-pixels", "400000000", "--report", reportPath,
    ])

    XCTAssertEqual(decoded.status, 1, decoded.stderr)
    let file = try XCTUnwrap(report(reportPath).verify?.files.first)
    XCTAssertEqual(file.name, huge)
    XCTAssertEqual(file.outcome, .bad)
    XCTAssertTrue(
      file.reason?.hasSuffix("(full decode)") == true, "\(String(describing: file.reason))")

    try FileManager.default.removeItem(atPath: location.diskCachePath + "/" + huge)
    let photo = try store(Fixtures.jpeg, url: "https://images.example/photo.jpg")
    try job("maintenance: [verify]\nverify: {level: full, maxPixels: 1}\nreport: \(reportPath)\n")

    let noted = try ImageCacheBinary.run(["run", temporary.appending("job.yaml")])

    XCTAssertEqual(noted.status, 0, "a note is no verdict: \(noted.stderr)")
    let note = try XCTUnwrap(report(reportPath).verify?.files.first)
    XCTAssertEqual(note.name, photo)
    XCTAssertEqual(note.outcome, .note)
    XCTAssertTrue(
      note.notes.first?.hasPrefix("not decoded: ") == true
        && note.notes.first?.hasSuffix(" is over 1 pixels; its structure was checked") == true,
      "\(note.notes)")

    try job("maintenance: [verify]\nverify: {maxPixels: 0}\n")
    let refused = try ImageCacheBinary.run(["run", temporary.appending("job.yaml")])
    XCTAssertEqual(refused.status, 2, refused.stderr)
    XCTAssertTrue(refused.stderr.contains("verify.maxPixels"), refused.stderr)
  }

  // MARK: The verify pass of a job

  /// Writes a job file for the test's cache, with `settings` after its `cache:`; returns its path.
  @discardableResult
  func job(_ settings: String) throws -> String {
    let path = temporary.appending("job.yaml")
    try "cache:\n  directory: \(location.directory)\n  maxDiskAge: 7d\n\(settings)".write(
      toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  /// A valid image a month old, which expire removes.
  func storeExpiredImage() throws -> String {
    let name = try store(Fixtures.gif, url: "https://images.example/old.gif")
    try FileManager.default.setAttributes(
      [.modificationDate: Date().addingTimeInterval(-30 * 86400)],
      ofItemAtPath: location.diskCachePath + "/" + name)
    return name
  }

  func testAJobListingVerifyAuditsTheCacheAfterExpireAndExitsOneOnABadFile() throws {
    let valid = try storeValidImages()
    let expired = try storeExpiredImage()
    let damaged = try storeDamagedImages([.truncatedPNG])
    let reportPath = temporary.appending("reports/job.json")
    let metricsPath = temporary.appending("metrics/job.prom")
    let file = try job(
      "maintenance: [expire, verify]\nreport: \(reportPath)\nmetrics: \(metricsPath)\n")

    let result = try ImageCacheBinary.run(["run", file])

    XCTAssertEqual(result.status, 1, "a bad file makes the run exit 1: \(result.stderr)")
    let report = try report(reportPath)
    XCTAssertEqual(report.maintenance.map(\.pass), [.expire], "a report only: no repair pass")
    let verify = try XCTUnwrap(report.verify, "the job's report has a verify section")
    XCTAssertEqual(verify.level, .structure)
    XCTAssertEqual(verify.repair, .none)
    XCTAssertEqual(
      verify.counts.files, valid.count + damaged.count, "expired before the audit: \(expired)")
    XCTAssertEqual(verify.counts.bad, 1)
    let bad = try XCTUnwrap(verify.files.first)
    XCTAssertEqual(bad.name, try XCTUnwrap(damaged.keys.first))
    XCTAssertEqual(bad.outcome, .bad)
    XCTAssertTrue(
      bad.reason?.hasPrefix("png: truncated") ?? false, "\(String(describing: bad.reason))")
    XCTAssertTrue(namespaceFiles.contains(bad.name), "a report only: nothing repaired")
    XCTAssertTrue(result.stderr.contains("verify: bad: \(bad.name)"), result.stderr)
    let metrics = try String(contentsOfFile: metricsPath, encoding: .utf8)
    XCTAssertTrue(
      metrics.contains(
        "imagecache_verify_files{imagecache_job=\"job\",namespace=\"default\",outcome=\"bad\"} 1.0"),
      metrics)
  }

  func testAJobsVerifySettingsChooseTheLevelAndTheRepair() throws {
    let valid = try storeValidImages()
    let damaged = try storeDamagedImages([.truncatedJPEG, .brokenPNGCRC])
    let reportPath = temporary.appending("job.json")
    let file = try job(
      "maintenance: [verify]\nverify: {level: header, repair: quarantine}\n"
        + "report: \(reportPath)\n")

    let result = try ImageCacheBinary.run(["run", file])

    XCTAssertEqual(result.status, 0, result.stderr)
    let report = try report(reportPath)
    let verify = try XCTUnwrap(report.verify)
    XCTAssertEqual(verify.level, .header)
    XCTAssertEqual(verify.repair, .quarantine)
    XCTAssertEqual(verify.counts.bad, 0, "the header level passes damage beyond the header")
    XCTAssertEqual(namespaceFiles, (valid + damaged.keys).sorted())

    try job("maintenance: [verify]\nverify: {repair: quarantine}\nreport: \(reportPath)\n")
    let repaired = try ImageCacheBinary.run(["run", file])

    XCTAssertEqual(repaired.status, 1, repaired.stderr)
    XCTAssertEqual(namespaceFiles, valid.sorted(), "the bad files are quarantined")
    let repair = try XCTUnwrap(self.report(reportPath).maintenance.first { $0.pass == .repair })
    XCTAssertEqual(repair.filesMoved, damaged.count)
  }

  func testAJobWithoutTheVerifyPassDoesNotVerify() throws {
    try storeValidImages()
    try storeDamagedImages([.truncatedPNG, .htmlPage])
    let reportPath = temporary.appending("job.json")
    let metricsPath = temporary.appending("job.prom")
    let file = try job(
      "maintenance: [expire, trim]\nreport: \(reportPath)\nmetrics: \(metricsPath)\n")

    let result = try ImageCacheBinary.run(["run", file])

    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertNil(try report(reportPath).verify)
    XCTAssertFalse(
      try String(contentsOfFile: metricsPath, encoding: .utf8).contains("imagecache_verify_files"))
    XCTAssertFalse(result.stderr.contains("verify:"), result.stderr)

    try job("maintenance: [expire]\nverify: {level: header}\n")
    let unlisted = try ImageCacheBinary.run(["run", file])

    XCTAssertEqual(unlisted.status, 2, "verify settings without the pass: \(unlisted.stderr)")
    XCTAssertTrue(unlisted.stderr.contains("does not list the verify pass"), unlisted.stderr)
  }

  /// SPEC section 9: the shards of a fleet run each audit their own files (shard 0 those no
  /// shard owns too), and `report merge` makes their audits the one audit of the whole cache.
  func testShardsAuditTheirOwnFilesAndTheirMergedAuditIsTheWholeCaches() throws {
    let valid = try storeValidImages()
    let damaged = try storeDamagedImages()
    try Data("not ours".utf8).write(
      to: URL(fileURLWithPath: location.diskCachePath + "/notes.txt"))
    let whole = temporary.appending("whole.json")
    XCTAssertEqual(try verify(["--report", whole]).status, 1)
    let file = try job(
      "maintenance: [verify]\nreport: \(temporary.appending("shard-{shard}.json"))\n")

    var shardReports: [String] = []
    for index in 0..<2 {
      let result = try ImageCacheBinary.run(["run", file, "--shard", "\(index)/2"])
      XCTAssertTrue([0, 1].contains(result.status), "shard \(index): \(result.stderr)")
      let path = temporary.appending("shard-\(index).json")
      shardReports.append(path)
      let shard = try XCTUnwrap(Shard(index: index, count: 2))
      for audited in try XCTUnwrap(report(path).verify).files {
        XCTAssertEqual(
          shard.owns(fileName: audited.name) ?? (index == 0), true,
          "shard \(index) audits its own files only: \(audited.name)")
      }
    }
    let merged = temporary.appending("merged.json")
    let merge = try ImageCacheBinary.run(
      ["report", "merge"] + shardReports + ["--report", merged])

    XCTAssertEqual(merge.status, 1, "bad files found, as in one audit: \(merge.stderr)")
    let audit = try XCTUnwrap(report(merged).verify)
    let reference = try XCTUnwrap(report(whole).verify)
    XCTAssertEqual(audit.counts, reference.counts, "the shards' audits add up to one")
    XCTAssertEqual(audit.counts.files, valid.count + damaged.count + 1)
    XCTAssertEqual(
      audit.files.map(\.name).sorted(), reference.files.map(\.name).sorted(),
      "every bad and noted file once")
    XCTAssertEqual(Set(audit.files.filter { $0.outcome == .bad }.map(\.name)), Set(damaged.keys))
    let page = try ImageCacheBinary.run(["report", "html", merged])
    XCTAssertEqual(page.status, 0, page.stderr)
    XCTAssertTrue(page.stdout.contains("<h3>Verify</h3>"), "the page shows the merged audit")
  }

  func testUsageErrorsExitTwo() throws {
    for arguments in [
      ["--level", "pixels"], ["--repair", "fix"], ["--jobs", "0"], ["--max-pixels", "0"],
    ] {
      let result = try verify(arguments)
      XCTAssertEqual(result.status, 2, "\(arguments): \(result.stderr)")
    }
    let missing = try ImageCacheBinary.run(["verify", "--cache", temporary.appending("nothing")])
    XCTAssertEqual(missing.status, 2, missing.stderr)
    XCTAssertTrue(missing.stderr.contains("no cache at"), missing.stderr)
  }

  func testAnotherRunHoldingTheLockExitsThree() async throws {
    try store(Fixtures.jpeg, url: "https://images.example/a.jpg")
    let result = try await RunLock.withLock(location: location, wait: false) {
      try verify([])
    }
    XCTAssertEqual(result.status, 3, result.stderr)
    XCTAssertTrue(result.stderr.contains("holds the cache lock"), result.stderr)
  }

  /// A folder the audit cannot read leaves it incomplete: exit 4, the folder named in the
  /// report's errors. A file it cannot read is bad: an app could not read it either.
  func testAFolderThatCannotBeReadExitsFourAndAFileThatCannotBeReadIsBad() throws {
    let valid = try store(Fixtures.jpeg, url: "https://images.example/a.jpg")
    let unreadable = try store(Fixtures.png, url: "https://images.example/b.png")
    let folder = location.diskCachePath + "/sub"
    try FileSystem.createDirectory(path: folder)
    try Fixtures.jpeg.write(to: URL(fileURLWithPath: folder + "/" + valid))
    XCTAssertEqual(chmod(location.diskCachePath + "/" + unreadable, 0), 0)
    XCTAssertEqual(chmod(folder, 0), 0)
    let reportPath = temporary.appending("verify.json")

    // Root reads anything: the run drops to an unprivileged user, who may write the cache.
    let result = try runUnprivileged(
      ["verify", "--cache", location.directory, "--report", reportPath],
      sharing: [location.diskCachePath])

    XCTAssertEqual(result.status, 4, result.stderr)
    let verify = try XCTUnwrap(report(reportPath).verify)
    XCTAssertEqual(verify.counts.errors, 1)
    XCTAssertTrue(verify.errors.first?.contains(folder) == true, "\(verify.errors)")
    XCTAssertTrue(result.stderr.contains("verify: error: "), result.stderr)
    XCTAssertEqual(verify.files.map(\.name), [unreadable])
    XCTAssertEqual(verify.files.first?.outcome, .bad)
    XCTAssertTrue(
      verify.files.first?.reason?.hasPrefix("cannot be read: ") == true, "\(verify.files)")
    XCTAssertEqual(verify.counts.ok, 1)
  }

  func testALockThatCannotBeOpenedExitsFour() throws {
    try store(Fixtures.jpeg, url: "https://images.example/a.jpg")
    XCTAssertEqual(try verify([]).status, 0)
    let lock = location.stateDirectory + "/lock"
    try fileSystems.makeImmutable(lock)
    let result = try verify([])
    XCTAssertEqual(result.status, 4, result.stderr)
  }
}
