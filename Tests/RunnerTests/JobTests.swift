import Core
import HTTP
import Maintenance
import Pipeline
import Prefetcher
import Runner
import TestSupport
import XCTest

final class JobTests: TemporaryFolderTestCase {
  private func write(_ text: String, name: String = "job.yaml") throws -> String {
    let path = temporary.appending(name)
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  private func assertError(
    _ text: String, line: Int?, field: String?, containing message: String,
    file: StaticString = #filePath, sourceLine: UInt = #line
  ) throws {
    let path = try write(text)
    XCTAssertThrowsError(try Job.load(path: path), file: file, line: sourceLine) { error in
      guard let error = error as? ConfigurationError else {
        return XCTFail("\(error)", file: file, line: sourceLine)
      }
      XCTAssertEqual(error.source, path, file: file, line: sourceLine)
      XCTAssertEqual(error.line, line, "\(error)", file: file, line: sourceLine)
      XCTAssertEqual(error.field, field, "\(error)", file: file, line: sourceLine)
      XCTAssertTrue(
        error.description.contains(message), error.description, file: file, line: sourceLine)
    }
  }

  func testAddressRulesAreReadFromTheJob() throws {
    let job = try Job.load(
      path: try write(
        """
        name: inside
        cache:
          directory: cache
        manifests: [a.txt]
        prefetch:
          denyAddresses: [private, 192.0.2.0/24]
          allowLinkLocal: true
        """))
    let rules = job.prefetch.connection.addressRules
    XCTAssertTrue(rules.allowLinkLocal)
    XCTAssertEqual(Set(rules.denied.map(\.rule)), ["private", "192.0.2.0/24"])
    try assertError(
      """
      name: inside
      cache:
        directory: cache
      manifests: [a.txt]
      prefetch:
        denyAddresses: [intranet]
      """, line: 6, field: "prefetch.denyAddresses", containing: "intranet")
  }

  func testFullJobInYAML() throws {
    let path = try write(
      """
      name: nightly
      cache:
        directory: cache
        namespace: avatars
        maxDiskAge: 30d
        maxDiskSize: 2GiB
        expireType: modificationDate
      manifests: [a.txt, /abs/b.jsonl]
      options: [retryFailed, progressiveLoad]
      context:
        headers: {Authorization: Bearer x}
        cacheKeyFilter: stripQuery
        storeCacheType: disk
        downloadTimeout: 5
      prefetch:
        concurrency: 32
        perHostConcurrency: 4
        timeout: 10s
        deadline: 2m
        maxResponseSize: 5MB
        retries: 0
        validate: full
        blacklistTTL: 7d
      maintenance: [migrate, expire]
      migrate: {from: legacy}
      report: reports/{date}.json
      """)
    let job = try Job.load(path: path)
    XCTAssertEqual(job.name, "nightly")
    XCTAssertEqual(
      job.location, CacheLocation(directory: temporary.appending("cache"), namespace: "avatars"))
    XCTAssertEqual(job.cleanup.maxDiskAge, 30 * 86_400)
    XCTAssertEqual(job.cleanup.maxDiskSize, 2 * 1_073_741_824)
    XCTAssertEqual(job.cleanup.expireType, .modificationDate)
    XCTAssertEqual(job.manifests, [temporary.appending("a.txt"), "/abs/b.jsonl"])
    XCTAssertEqual(job.options, ImageOptions([.retryFailed]))
    XCTAssertEqual(job.warnings.count, 1)
    XCTAssertTrue(job.warnings[0].message.contains("progressiveLoad"))
    XCTAssertEqual(job.context.headers, ["Authorization": "Bearer x"])
    XCTAssertEqual(job.context.cacheKeyFilter, .stripQuery)
    XCTAssertEqual(job.context.storeCacheType, .disk)
    XCTAssertEqual(job.context.downloadTimeout, 5)
    XCTAssertEqual(job.prefetch.concurrency, 32)
    XCTAssertEqual(job.prefetch.perHostConcurrency, 4)
    XCTAssertEqual(job.prefetch.timeout, 10)
    XCTAssertEqual(job.prefetch.deadline, 120)
    XCTAssertEqual(job.prefetch.maxResponseSize, 5_000_000)
    XCTAssertEqual(job.prefetch.retries, 0)
    XCTAssertEqual(job.prefetch.validation, .full)
    XCTAssertEqual(job.prefetch.blacklistTTL, 7 * 86_400)
    XCTAssertEqual(job.passes, [.migrate, .expire])
    XCTAssertEqual(job.migrateFrom, temporary.appending("legacy"))
    XCTAssertEqual(
      job.reportPath(startedAt: Date(timeIntervalSince1970: 1_700_000_000)),
      temporary.appending("reports/2023-11-14.json"))
  }

  func testAmpersandsAndStarsInTextAreNotAnchors() throws {
    let path = try write(
      """
      name: a*b&c   # &not-an-anchor *nor-an-alias
      cache: {directory: "/srv/*&cache"}
      context:
        headers: {Cookie: 'k=v&x=*y', X-Stars: "*"}
      report: reports/*.json
      """)
    let job = try Job.load(path: path)
    XCTAssertEqual(job.name, "a*b&c")
    XCTAssertEqual(job.location.directory, "/srv/*&cache")
    XCTAssertEqual(job.context.headers, ["Cookie": "k=v&x=*y", "X-Stars": "*"])
  }

  func testAnchorsAndAliasesAreRefusedNamingTheLine() throws {
    try assertError(
      "cache: {directory: c}\nbase: &base {Authorization: x}\ncontext: {headers: *base}\n",
      line: 2, field: nil, containing: "anchors and aliases")
    try assertError(
      "cache: {directory: c}\nmanifests:\n  - a.txt\n  - *x\n", line: 4, field: nil,
      containing: "anchors and aliases")
  }

  func testJSONJobWithDefaults() throws {
    let path = try write(
      #"{"cache": {"directory": "/srv/c"}, "manifests": ["m.txt"]}"#, name: "nightly.json")
    let job = try Job.load(path: path)
    XCTAssertEqual(job.name, "nightly")
    XCTAssertEqual(job.location, CacheLocation(directory: "/srv/c"))
    XCTAssertEqual(job.cleanup.maxDiskAge, 7 * 86_400)
    XCTAssertEqual(job.passes, [], "a job runs no pass it does not list")
    XCTAssertEqual(job.prefetch, PrefetchConfiguration())
  }

  func testEachProtocolsPerHostLimitIsFixedOrAdaptiveAndHTTP1AdaptsByDefault() throws {
    let defaults = try Job.load(path: write("cache:\n  directory: c\n")).prefetch
    XCTAssertTrue(defaults.adaptivePerHost, "over HTTP/1.1, auto by default (issue 44)")
    XCTAssertFalse(defaults.adaptiveStreams, "over HTTP/2, the streams by default")
    let swapped = try Job.load(
      path: write(
        "cache:\n  directory: c\nprefetch: {perHostConcurrency: 6, perHostStreams: auto}\n")
    ).prefetch
    XCTAssertEqual(swapped.perHostConcurrency, 6)
    XCTAssertFalse(swapped.adaptivePerHost)
    XCTAssertTrue(swapped.adaptiveStreams)
    let both = try Job.load(
      path: write(
        "cache:\n  directory: c\nprefetch: {perHostConcurrency: auto, perHostStreams: 9}\n")
    ).prefetch
    XCTAssertTrue(both.adaptivePerHost)
    XCTAssertEqual(both.perHostStreams, 9)
    XCTAssertFalse(both.adaptiveStreams)
  }

  func testSitemapSettingsAndManifestURLs() throws {
    let path = try write(
      """
      cache:
        directory: c
      manifests:
        - urls.txt
        - https://example.invalid/sitemap.xml.gz
      sitemap:
        pages: true
        order: lastmod
      """)
    let job = try Job.load(path: path)
    XCTAssertEqual(
      job.manifests,
      [temporary.appending("urls.txt"), "https://example.invalid/sitemap.xml.gz"],
      "a URL is not a path relative to the job file")
    XCTAssertEqual(job.sitemap, SitemapSettings(pages: true, order: .lastmod))
    XCTAssertEqual(try Job.load(path: write("cache:\n  directory: c\n")).sitemap, SitemapSettings())
    try assertError(
      "cache:\n  directory: c\nsitemap:\n  order: newest\n", line: 4, field: "sitemap.order",
      containing: "document, lastmod")
    try assertError(
      "cache:\n  directory: c\nsitemap:\n  pages: yes please\n", line: 4, field: "sitemap.pages",
      containing: "true or false")
  }

  func testATemplatedReportNeverOverwritesOneFromTheSameSecond() throws {
    var job = Job(name: "n", location: CacheLocation(directory: temporary.appending("c")))
    job.report = temporary.appending("r-{date}-{time}.json")
    let now = Date()
    let first = try XCTUnwrap(job.reportPath(startedAt: now))
    try "{}".write(toFile: first, atomically: true, encoding: .utf8)
    let second = try XCTUnwrap(job.reportPath(startedAt: now))
    XCTAssertNotEqual(first, second)
    XCTAssertEqual(second, String(first.dropLast(5)) + "-2.json")
    job.report = temporary.appending("fixed.json")
    try "{}".write(toFile: temporary.appending("fixed.json"), atomically: true, encoding: .utf8)
    XCTAssertEqual(
      job.reportPath(startedAt: now), temporary.appending("fixed.json"),
      "a fixed name is overwritten")
  }

  func testAJobMayBeAShard() throws {
    XCTAssertEqual(
      try Job.load(path: write("cache:\n  directory: c\nshard: 2/4\n")).shard,
      Shard(index: 2, count: 4))
    XCTAssertEqual(
      try Job.load(path: write("cache:\n  directory: c\nshard: 2/4\n")).prefetch.shard,
      Shard(index: 2, count: 4), "the prefetcher sees it")
    try assertError(
      "cache:\n  directory: c\nshard: 4/4\n", line: 3, field: "shard", containing: "K/N")
  }

  func testTrustedOriginsAreBareHTTPOriginsAndAnythingElseIsAnErrorNamingTheEntry() throws {
    let path = try write(
      """
      cache: {directory: c}
      context:
        trustedOrigins: ["https://CDN2.example.com", "http://10.0.0.5:8080/"]
      """)
    XCTAssertEqual(
      try Job.load(path: path).context.trustedOrigins,
      [
        try XCTUnwrap(Origin(parsing: "https://cdn2.example.com:443")),
        Origin(try XCTUnwrap(URL(string: "http://10.0.0.5:8080/any/path"))),
      ])
    for bad in [
      "https://cdn.example.com/images", "ftp://cdn.example.com", "cdn.example.com",
      "https://user@cdn.example.com", "https://cdn.example.com?sig=1", "https://cdn.example.com#x",
    ] {
      try assertError(
        "cache:\n  directory: c\ncontext:\n  trustedOrigins: [\"https://ok.example.com\", \"\(bad)\"]\n",
        line: 4, field: "context.trustedOrigins[1]", containing: "\"\(bad)\" is not an origin")
    }
    try assertError(
      "cache:\n  directory: c\ncontext:\n  trustedOrigins: https://cdn.example.com\n", line: 4,
      field: "context.trustedOrigins", containing: "expected a list of origins")
  }

  func testErrorsNameTheLineAndField() throws {
    try assertError(
      "cache:\n  directory: c\nprefetch:\n  concurrency: zero\n", line: 4,
      field: "prefetch.concurrency", containing: "whole number")
    try assertError(
      "cache:\n  directory: c\n  colour: blue\n", line: 3, field: "cache.colour",
      containing: "unknown setting")
    try assertError(
      "cache:\n  directory: c\noptions: [retryFailed, teleport]\n", line: 3, field: "options",
      containing: "unknown option \"teleport\"")
    try assertError(
      "cache:\n  directory: c\ncontext:\n  imageThumbnailPixelSize: 100\n", line: 4,
      field: "context.imageThumbnailPixelSize", containing: "expected [width, height]")
    try assertError(
      "cache:\n  directory: c\noptions: [scaleDownLargeImages]\n", line: 3, field: "options",
      containing: "not supported yet")
    try assertError("name: x\n", line: 1, field: "cache", containing: "required")
    try assertError(
      "cache:\n  directory: c\n  maxDiskSize: huge\n", line: 3, field: "cache.maxDiskSize",
      containing: "size")
    try assertError(
      "cache:\n  directory: c\nmaintenance: [expire, vacuum]\n", line: 3, field: "maintenance",
      containing: "vacuum")
    try assertError("cache: [unclosed\n", line: 2, field: nil, containing: "not valid YAML")
  }

  /// A job's namespace becomes a folder of the cache: a name that would leave it, or be no
  /// folder at all, is refused naming the line and the field.
  func testAJobsNamespaceIsOneFolderNameNamingTheLineAndField() throws {
    for name in ["a/b", ".."] {
      try assertError(
        "cache:\n  directory: c\n  namespace: \(name)\n", line: 3, field: "cache.namespace",
        containing: "single folder name")
    }
  }

  /// An empty text (`directory: ""`, `report: ''`) is a mistake named by its field, not the job
  /// file's folder: taken as a path, it would make the job folder the cache (or the report).
  func testAnEmptyTextIsRefusedNamingTheField() throws {
    try assertError(
      "cache:\n  directory: \"\"\n", line: 2, field: "cache.directory", containing: "expected text")
    try assertError(
      "cache:\n  directory: c\nreport: ''\n", line: 3, field: "report", containing: "expected text")
  }

  /// `prefetch FILE` takes a file for a job file only when its first line is a job key with its
  /// colon: a manifest's first line that is a bare word (`cache`, `name`) is a manifest's bad
  /// line, said as such, not a job file's YAML error.
  func testOnlyAJobKeyWithItsColonMakesAFileAJobFile() throws {
    for (text, isJob) in [
      ("cache:\n  directory: c\n", true), ("# nightly\n{\"cache\": {}}\n", true),
      ("cache\nhttps://x/a.png\n", false), ("name\n", false), ("https://x/a.png\n", false),
    ] {
      XCTAssertEqual(Job.looksLikeJobFile(path: try write(text, name: "input")), isJob, text)
    }
  }

  /// A manifest that can be read only once (standard input) is refused before anything runs
  /// when the job's migrate pass and its prefetch would both read it: the second read would
  /// find nothing and say nothing.
  func testStandardInputIsRefusedWhenTheMigratePassAndThePrefetchBothReadIt() throws {
    var job = Job(
      name: "j", location: CacheLocation(directory: temporary.appending("c"), namespace: "default"))
    job.manifests = ["-"]
    job.passes = [.migrate, .expire]
    XCTAssertThrowsError(try job.checkManifests(what: "manifest")) {
      XCTAssertTrue("\($0)".contains("can be read only once"), "\($0)")
    }
    job.passes = [.expire]
    XCTAssertNoThrow(try job.checkManifests(what: "manifest"), "read once by the prefetch alone")
  }

  /// A manifest URL without a host (`https:///list.txt`, a templated host left empty) is
  /// refused before anything runs, naming it.
  func testAManifestURLWithoutAHostIsRefusedBeforeTheRun() throws {
    for url in ["https:///list.txt", "http://", "http://:80/list.txt"] {
      XCTAssertThrowsError(try Job.checkManifest(url, what: "manifest"), url) {
        XCTAssertEqual("\($0)", "manifest \(url): not a valid URL")
      }
    }
    XCTAssertNoThrow(try Job.checkManifest("https://x/list.txt", what: "manifest"))
  }

  /// A job file of up to 1 MiB is read; one byte more is refused, saying the limit.
  func testAJobFileOfExactlyTheLimitIsReadAndOneByteMoreIsNot() throws {
    let head = "cache:\n  directory: c\n"
    let padding = Job.maxFileSize - head.utf8.count - 1
    let text = head + "#" + String(repeating: "x", count: padding - 1) + "\n"
    XCTAssertEqual(text.utf8.count, Job.maxFileSize)
    XCTAssertEqual(try Job.load(path: try write(text)).location.namespace, "default")
    try assertError(text + "\n", line: nil, field: nil, containing: "a job file is small")
  }

  /// `-` among a job's manifests is standard input, as on the command line, not a file named
  /// `-` beside the job file; a URL stays a URL and a relative path is the job folder's.
  func testADashAmongAJobsManifestsIsStandardInput() throws {
    let job = try Job.load(
      path: try write(
        "cache:\n  directory: c\nmanifests: [\"-\", \"https://x/list.txt\", list.txt]\n"))
    XCTAssertEqual(
      job.manifests, ["-", "https://x/list.txt", temporary.appending("list.txt")])
  }

  /// The verify pass's repairs are held to the job's `cache.maxDelete`, as expire and trim are:
  /// a verify pass that may delete is never unguarded by a limit the job file sets.
  func testAJobsVerifyPassIsHeldToItsCachesMaxDelete() throws {
    let job = try Job.load(
      path: try write(
        "cache:\n  directory: c\n  maxDelete: 5\nmaintenance: [verify]\n"
          + "verify:\n  repair: delete\n"))
    XCTAssertEqual(job.verify?.repair, .delete)
    XCTAssertEqual(job.verify?.maxDelete, .files(5))
  }
}

/// Issue 26, item 6: a job's name becomes part of paths (`{job}`), so it is checked as one.
final class JobNameTests: TemporaryFolderTestCase {
  private func loadError(name: String) throws -> ConfigurationError? {
    let path = temporary.appending("job.yaml")
    try "cache:\n  directory: c\nname: \(name)\n".write(
      toFile: path, atomically: true, encoding: .utf8)
    do {
      _ = try Job.load(path: path)
      return nil
    } catch {
      return try XCTUnwrap(error as? ConfigurationError, "\(error)")
    }
  }

  func testAJobNameThatWouldLeaveTheReportFolderIsRefusedNamingTheLineAndField() throws {
    for name in [#""../x""#, #""a/b""#, "\"..\"", #""a\nb""#, #""tab\there""#, #""\u0000""#] {
      let error = try XCTUnwrap(try loadError(name: name), name)
      XCTAssertEqual(error.field, "name", "\(error)")
      XCTAssertEqual(error.line, 3, "\(error)")
      XCTAssertTrue(error.description.contains("{job}"), error.description)
    }
  }

  func testAnOrdinaryJobNameIsKept() throws {
    XCTAssertNil(try loadError(name: "nightly-eu.2"))
  }
}

/// Issue 29, item 2: `cache.maxDelete` in a job file.
final class MaxDeleteJobTests: TemporaryFolderTestCase {
  func testMaxDeleteIsAFileCountOrAShareAndAnythingElseNamesTheField() throws {
    let path = temporary.appending("job.yaml")
    for (value, expected) in [("500", DeletionLimit.files(500)), ("\"10%\"", .percent(10))] {
      try "cache:\n  directory: c\n  maxDelete: \(value)\n".write(
        toFile: path, atomically: true, encoding: .utf8)
      XCTAssertEqual(try Job.load(path: path).cleanup.maxDelete, expected)
    }
    try "cache:\n  directory: c\n  maxDelete: lots\n".write(
      toFile: path, atomically: true, encoding: .utf8)
    XCTAssertThrowsError(try Job.load(path: path)) { error in
      XCTAssertEqual((error as? ConfigurationError)?.field, "cache.maxDelete", "\(error)")
      XCTAssertEqual((error as? ConfigurationError)?.line, 3, "\(error)")
    }
  }
}
