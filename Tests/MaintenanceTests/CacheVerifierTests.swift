import Core
import Imaging
import Synchronization
import TestSupport
import XCTest

@testable import Maintenance

/// The verify walk and its judgement (issue 45), on real folders.
final class CacheVerifierTests: TemporaryFolderTestCase {
  var root: String { temporary.appending("default") }

  func verifier(
    level: VerifyLevel = .structure, repair: VerifyRepair = .none, jobs: Int = 2
  ) -> CacheVerifier {
    var configuration = VerifyConfiguration()
    configuration.level = level
    configuration.repair = repair
    configuration.jobs = jobs
    return CacheVerifier(diskCachePath: root, configuration: configuration)
  }

  func store(_ data: Data, as name: String) throws {
    try FileSystem.createDirectory(path: root)
    try data.write(to: URL(fileURLWithPath: root + "/" + name))
  }

  /// Every file not plainly ok, in the walk's order, and the findings.
  func run(_ verifier: CacheVerifier) throws -> ([VerifiedFile], CacheVerifier.Findings) {
    var files: [VerifiedFile] = []
    var errors: [String] = []
    let findings = try verifier.run(
      record: { files.append($0) }, recordError: { errors.append($0) })
    XCTAssertEqual(errors, [])
    return (files, findings)
  }

  func testFileNamesAreSD5sLegacyTemporaryOrForeign() {
    let digest = CacheFileName.md5Hex("https://a.example/x.jpg")
    XCTAssertEqual(FileNameKind(digest), .key(legacy: false, ext: nil))
    XCTAssertEqual(FileNameKind(digest + ".jpg"), .key(legacy: false, ext: "jpg"))
    XCTAssertEqual(FileNameKind(digest + ".jpg?w=1"), .key(legacy: true, ext: "jpg?w=1"))
    XCTAssertEqual(
      FileNameKind(digest + "." + String(repeating: "e", count: 223)),
      .key(legacy: true, ext: String(repeating: "e", count: 223)), "SD 4.2's uncapped extension")
    XCTAssertEqual(FileNameKind(FileSystem.temporaryPrefix + "abc"), .temporary)
    for foreign in [
      digest.uppercased(), digest + "x", digest + ".", ".DS_Store", "sub/" + digest, "notes.txt",
    ] {
      guard case .foreign = FileNameKind(foreign) else {
        return XCTFail("\(foreign) should be foreign")
      }
    }
  }

  /// SPEC section 9: each shard judges its own files, shard 0 also those no shard owns; the
  /// shards together judge every file once.
  func testShardsJudgeTheirOwnFilesAndShardZeroThoseNoShardOwns() throws {
    var names: [String] = []
    for index in 0..<40 {
      let name = CacheFileName.fileName(forKey: "https://a.example/\(index).jpg")
      try store(DamagedImage.truncatedJPEG.data, as: name)
      names.append(name)
    }
    try store(Data("not ours".utf8), as: "notes.txt")
    var judged: [[String]] = []
    for index in 0..<2 {
      let shard = try XCTUnwrap(Shard(index: index, count: 2))
      let (files, findings) = try run(
        CacheVerifier(diskCachePath: root, configuration: VerifyConfiguration(), shard: shard))
      XCTAssertEqual(findings.counts.files, files.count)
      let own = files.map(\.name)
      XCTAssertEqual(
        own.filter { $0 != "notes.txt" }, own.filter { shard.owns(fileName: $0) == true })
      XCTAssertEqual(own.contains("notes.txt"), index == 0, "no shard's file: shard 0's")
      judged.append(own)
    }
    XCTAssertFalse(judged[0].isEmpty || judged[1].isEmpty)
    XCTAssertEqual((judged[0] + judged[1]).sorted(), (names + ["notes.txt"]).sorted())
  }

  func testEveryDamagedImageIsBadWithItsReasonAtEachLevel() throws {
    for kind in DamagedImage.allCases {
      try store(kind.data, as: CacheFileName.fileName(forKey: kind.url))
    }
    for level in VerifyLevel.allCases {
      let (files, findings) = try run(verifier(level: level))
      let expected = DamagedImage.allCases.filter { level != .header || $0.isInHeader }
      XCTAssertEqual(findings.counts.bad, expected.count, "\(level)")
      XCTAssertEqual(findings.counts.ok, DamagedImage.allCases.count - expected.count)
      for kind in expected {
        let file = files.first { $0.name == CacheFileName.fileName(forKey: kind.url) }
        XCTAssertEqual(file?.outcome, .bad, "\(kind) at \(level)")
        XCTAssertTrue(
          file?.reason?.hasPrefix(kind.reason) == true, "\(kind): \(String(describing: file))")
      }
    }
  }

  /// The header level reads the start of a large file only, and the whole file when its header
  /// runs past that start.
  func testTheHeaderLevelReadsOnToFindAHeaderPastItsFirstRead() throws {
    // A JPEG whose frame header follows more than the header read of APP segments.
    let jpeg = Fixtures.jpeg
    var padded = Data(jpeg.prefix(2))
    let segment = Data([0xFF, 0xE1, 0xFF, 0xFF]) + Data(repeating: 0, count: 0xFFFD)
    for _ in 0..<(ContentCheck.headerBytes / segment.count + 1) { padded += segment }
    padded += jpeg.dropFirst(2)
    try store(padded, as: CacheFileName.fileName(forKey: "https://a.example/big.jpg"))
    let (files, findings) = try run(verifier(level: .header))
    XCTAssertEqual(findings.counts.ok, 1, "\(files)")
  }

  /// The worker pool judges every file once and records them in the walk's order, whatever the
  /// number of workers, over several batches (one worker: three).
  func testAnyNumberOfWorkersGivesTheSameFindingsInTheSameOrder() throws {
    let count = 2 * CacheVerifier.batchPerWorker + 452
    for index in 0..<count {
      let kind = DamagedImage.allCases[index % DamagedImage.allCases.count]
      let data = index % 3 == 0 ? kind.data : Fixtures.png
      try store(data, as: CacheFileName.fileName(forKey: "https://a.example/\(index).png"))
    }
    let (one, oneFindings) = try run(verifier(jobs: 1))
    for jobs in [2, 5, 64] {
      let (many, findings) = try run(verifier(jobs: jobs))
      XCTAssertEqual(many, one, "\(jobs) workers")
      XCTAssertEqual(findings.counts, oneFindings.counts)
    }
    XCTAssertEqual(oneFindings.counts.files, count)
    XCTAssertEqual(oneFindings.counts.bad, (count + 2) / 3)
  }

  /// A repair never touches a file that changed since it was checked: it may be a fresh store.
  func testARepairLeavesAFileThatChangedSinceItWasCheckedAlone() async throws {
    let name = CacheFileName.fileName(forKey: "https://a.example/x.jpg")
    try store(DamagedImage.truncatedJPEG.data, as: name)
    let verifier = verifier(repair: .delete)
    let (_, findings) = try run(verifier)
    XCTAssertEqual(findings.counts.bad, 1)
    try store(Fixtures.jpeg, as: name)

    var pass = MaintenancePassReport(pass: .repair, dryRun: false)
    try await verifier.repair(findings, dryRun: false, into: &pass)

    XCTAssertEqual(pass.filesRemoved, 0)
    XCTAssertEqual(pass.errors.count, 1)
    XCTAssertTrue(pass.errors[0].contains("changed or gone since it was checked"), "\(pass.errors)")
    XCTAssertEqual(FileManager.default.contents(atPath: root + "/" + name), Fixtures.jpeg)
  }

  /// A refetch sends no URL whose password the state masked: the file is quarantined instead,
  /// and so is one whose URL is unknown; the others are fetched.
  func testARefetchQuarantinesWhatItCannotFetchAndFetchesTheRest() async throws {
    let urls = [
      CacheFileName.fileName(forKey: "https://a.example/known.jpg"): "https://a.example/known.jpg",
      CacheFileName.fileName(forKey: "https://a.example/secret.jpg"):
        "https://user:***@a.example/secret.jpg",
    ]
    for name in urls.keys { try store(DamagedImage.truncatedJPEG.data, as: name) }
    let unknown = CacheFileName.fileName(forKey: "https://a.example/unknown.jpg")
    try store(DamagedImage.truncatedJPEG.data, as: unknown)
    let verifier = verifier(repair: .refetch)
    let (_, findings) = try run(verifier)
    XCTAssertEqual(findings.counts.bad, 3)
    let fetched = Mutex<[String]>([])
    let source = RefetchSource(
      url: { urls[$0] },
      fetch: { url, _ in
        fetched.withLock { $0.append(url) }
        return .success(4096)
      }, concurrency: 2)

    var pass = MaintenancePassReport(pass: .repair, dryRun: false)
    try await verifier.repair(findings, dryRun: false, into: &pass, refetch: source)

    XCTAssertEqual(fetched.withLock { $0 }, ["https://a.example/known.jpg"])
    XCTAssertEqual(pass.summary.filesRefetched, 1)
    XCTAssertEqual(pass.filesMoved, 2)
    let reasons = Dictionary(
      uniqueKeysWithValues: pass.actions.filter { $0.kind == .move }.map { ($0.path, $0.reason) })
    XCTAssertTrue(reasons[unknown]??.hasPrefix("no URL known") == true, "\(reasons)")
    XCTAssertTrue(
      reasons[CacheFileName.fileName(forKey: "https://a.example/secret.jpg")]??.contains(
        "password") == true, "\(reasons)")
  }

  /// A temporary file of an atomic store is noted with its age in the unit a person reads
  /// (seconds below two minutes, then minutes, hours, days) and, from `staleTemporaryAge` on,
  /// as left by a killed run.
  func testATemporaryFileIsNotedWithItsAgeAndAsStaleFromTheStaleAge() throws {
    let name = FileSystem.temporaryPrefix + "abc"
    try store(Data([1]), as: name)
    // Whole seconds, so that the ages below are exact.
    let written: Int64 = 1_700_000_000
    try FileSystem.setTimes(
      path: root + "/" + name, accessTime: written * 1_000_000_000,
      modificationTime: written * 1_000_000_000)
    let modified = Date(timeIntervalSince1970: TimeInterval(written))
    let verifier = verifier()
    XCTAssertEqual(verifier.configuration.staleTemporaryAge, 3600)
    for (age, said, stale) in [
      (90.0, "90 s old", false), (150, "2 min old", false), (3599, "59 min old", false),
      (3600, "60 min old", true), (7200, "2 h old", true), (200_000, "2 d old", true),
    ] {
      var notes: [String] = []
      _ = try verifier.run(
        now: modified.addingTimeInterval(age), record: { notes += $0.notes },
        recordError: { XCTFail($0) })
      XCTAssertEqual(notes.count, 1, "\(notes)")
      XCTAssertTrue(notes.first?.contains(", \(said):") == true, "\(age): \(notes)")
      XCTAssertEqual(
        notes.first?.contains("left by a killed run") == true, stale, "\(age): \(notes)")
    }
  }

  /// A repair acts on a bad file only as it was checked: a change of its size alone (a write
  /// that kept the time) or of its modification time alone (a store of the same length) is a
  /// change, and leaves it alone; an unchanged file is repaired.
  func testARepairLeavesAFileWhoseSizeOrTimeAloneChanged() async throws {
    let name = CacheFileName.fileName(forKey: "https://a.example/x.jpg")
    let path = root + "/" + name
    let bad = DamagedImage.truncatedJPEG.data
    for change in ["size", "time", "nothing"] {
      try store(bad, as: name)
      let checked = try XCTUnwrap(FileSystem.attributes(atPath: path))
      let verifier = verifier(repair: .delete)
      let (_, findings) = try run(verifier)
      XCTAssertEqual(findings.counts.bad, 1)
      switch change {
      case "size":
        try store(bad + Data([0]), as: name)
        try FileSystem.setTimes(
          path: path, accessTime: checked.accessTime, modificationTime: checked.modificationTime)
      case "time":
        try FileSystem.setTimes(
          path: path, accessTime: checked.accessTime,
          modificationTime: checked.modificationTime - 1_000_000_000)
      default:
        break
      }
      var pass = MaintenancePassReport(pass: .repair, dryRun: false)
      try await verifier.repair(findings, dryRun: false, into: &pass)
      let repaired = change == "nothing"
      XCTAssertEqual(pass.filesRemoved, repaired ? 1 : 0, change)
      XCTAssertEqual(pass.errors.count, repaired ? 0 : 1, "\(change): \(pass.errors)")
      XCTAssertEqual(try FileSystem.attributes(atPath: path) == nil, repaired, change)
    }
  }

  /// SD 5 names a key with up to 222 UTF-16 units of extension (longer ones it drops, SD 4.2
  /// kept them: legacy), after 32 lowercase hex digits: any other letter is not a digest.
  /// HEIC and HEIF name one container, so either extension fits either brand without a note.
  func testTheLongestExtensionSD5WritesIsCurrentAndOnlyHexDigitsMakeADigest() {
    let digest = CacheFileName.md5Hex("https://a.example/x.jpg")
    let longest = String(repeating: "e", count: CacheFileName.maxExtensionLength)
    XCTAssertEqual(FileNameKind(digest + "." + longest), .key(legacy: false, ext: longest))
    for letter in ["g", "z"] {
      guard case .foreign = FileNameKind(letter + digest.dropFirst() + ".jpg") else {
        return XCTFail("\(letter) is no hex digit")
      }
    }
    XCTAssertTrue(CacheVerifier.sameFamily(.heic, .heif))
    XCTAssertTrue(CacheVerifier.sameFamily(.heif, .heic))
    XCTAssertFalse(CacheVerifier.sameFamily(.heic, .avif))
  }

  /// The counts are of every file looked at: each is ok, noted or bad, and `files` is all of
  /// them.
  func testTheCountsAddUpToEveryFileLookedAt() throws {
    try store(Fixtures.jpeg, as: CacheFileName.fileName(forKey: "https://a.example/ok.jpg"))
    try store(
      DamagedImage.truncatedJPEG.data,
      as: CacheFileName.fileName(forKey: "https://a.example/bad.jpg"))
    try store(Data([1]), as: "notes.txt")
    let (_, findings) = try run(verifier())
    XCTAssertEqual(findings.counts.files, 3)
    XCTAssertEqual([findings.counts.ok, findings.counts.note, findings.counts.bad], [1, 1, 1])
  }

  /// A file quarantined where one of its name already is (quarantined earlier the same day)
  /// goes beside it as `name.1`, then `name.2`: nothing in the quarantine is replaced.
  func testAQuarantineOfTheSameNameTheSameDayKeepsEveryCopy() async throws {
    let name = CacheFileName.fileName(forKey: "https://a.example/x.jpg")
    let day = Date(timeIntervalSince1970: 1_800_000_000)
    let verifier = verifier(repair: .quarantine)
    let bad = DamagedImage.truncatedJPEG.data
    var destinations: [String] = []
    for copy in 0..<3 {
      try store(bad + Data(repeating: 1, count: copy), as: name)
      let (_, findings) = try run(verifier)
      XCTAssertEqual(findings.counts.bad, 1)
      var pass = MaintenancePassReport(pass: .repair, dryRun: false)
      try await verifier.repair(findings, dryRun: false, now: day, into: &pass)
      destinations += pass.actions.compactMap(\.destination)
    }
    let first = ".imagecache/quarantine/" + CacheVerifier.day(day) + "/" + name
    XCTAssertEqual(destinations, [first, first + ".1", first + ".2"])
    for (copy, destination) in destinations.enumerated() {
      XCTAssertEqual(
        FileManager.default.contents(atPath: root + "/" + destination)?.count, bad.count + copy)
    }
  }
}
