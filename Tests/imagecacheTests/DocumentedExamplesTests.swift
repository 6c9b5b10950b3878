import Foundation
import TestSupport
import XCTest

/// Every command the README, docs/ and the man pages show is run here, as written, with the
/// built binary first on `PATH` (issue 39, item 10): an example that rots (a flag renamed, a
/// file moved, a job its own page refuses) fails here, and so does a page whose shown output is
/// no longer what the command prints. A command block is run unless ``runElsewhere`` names it
/// with what runs it instead (a Slurm array, an install into the machine's own folders), so a
/// new example cannot go untested by being forgotten.
///
/// A page's blocks run in page order in a folder of the page's own, as a reader following the
/// page would: a file a page shows with its name on its first line (`# urls.txt`) is written
/// there before the commands after it, and a block may use what an earlier one made. The
/// README's tour declares the files every page names (`urls.txt`, the nightly job), so every
/// page's folder starts with them.
///
/// Each block runs in a network namespace of its own, where the hosts the examples name are
/// 127.0.0.1 and a server answers them (images, a sitemap, a web page for `/broken/...`) over
/// HTTPS, with a test CA, and plain HTTP: nothing leaves loopback, and the example's own
/// `jobs/serve.py` has port 18089 to itself. The system folders the examples name (`/srv`,
/// `/etc`, `/var`, `/tmp`...) are the page's folders, by rewriting the commands, and in the
/// namespace the root file system is read-only, so a block can write nowhere else. Needs root
/// and unshare(1); without them it skips, unless `IMAGECACHE_REQUIRE_ENGINES=1`.
final class DocumentedExamplesTests: TemporaryFolderTestCase {
  private static var repository: URL { CronWrapperTests.repository }

  // MARK: What is not run here, and what some blocks need

  /// A command block that is not run here: why, and what runs it instead.
  struct RunElsewhere {
    var page: String
    /// Part of the block's first command, which names it.
    var command: String
    var why: String
  }

  static let runElsewhere: [RunElsewhere] = [
    RunElsewhere(
      page: "README.md", command: #"curl -O "https://download.swift.org"#,
      why: "downloads and installs a Swift toolchain from swift.org; this suite runs on one"),
    RunElsewhere(
      page: "README.md", command: "bash scripts/install-system-packages &&",
      why: "installs packages with apt-get and builds the release, as .ci/run does before "
        + "the suite, which is its swift test; its bash jobs/run-example.sh is run here as the "
        + "README's own block"),
    RunElsewhere(
      page: "README.md", command: "17 3 * * * /usr/local/bin/imagecache-cron",
      why: "a crontab line for the installed wrapper: CronWrapperRunTests runs imagecache-cron "
        + "with the README's job, scripts/test-deb the installed one"),
    RunElsewhere(
      page: "docs/fleets.md", command: "jid=$(sbatch --parsable",
      why: "Slurm, GNU parallel and Grid Engine arrays and their merges: SlurmTests (a "
        + "one-node cluster), ParallelRecipeTests and GridEngineTests (a one-node cell) each "
        + "run their engine's lines of this block as written"),
    RunElsewhere(
      page: "docs/fleets.md", command: "night=$(date +%F)",
      why: "Snakemake's four shards and merge: SnakemakeRecipeTests runs this block with the "
        + "page's Snakefile"),
    RunElsewhere(
      page: "docs/fleets.md", command: "rid=$(sbatch --parsable --array=3",
      why: "reruns one shard of a killed night under each engine: SlurmTests, "
        + "ParallelRecipeTests, SnakemakeRecipeTests and GridEngineTests run their engine's "
        + "lines after killing shard 2"),
    RunElsewhere(
      page: "docs/benchmarks.md", command: "imagecache maintain --dry-run --json",
      why: "the label of a measured row (two tables): Benchmarks/ runs it on a million-file "
        + "cache with the limits the page gives"),
    RunElsewhere(
      page: "docs/mutation-testing.md", command: "scripts/mutants  ",
      why: "the mutation exercise rebuilds and tests the tree with each mutant: not from inside "
        + "the suite; MutantListTests runs its --check with the suite"),
    RunElsewhere(
      page: "docs/mutation-testing.md", command: "swift build --build-tests",
      why: "a contributor's recipe that builds and runs test classes: not from inside the suite"),
    RunElsewhere(
      page: "docs/operations.md", command: "apt install ./imagecache_*.deb",
      why: "installs the .deb into the machine and enables a systemd timer: scripts/test-deb "
        + "installs it into a fresh Debian 12 root"),
    RunElsewhere(
      page: "docs/operations.md", command: "bash scripts/install-system-packages && bash",
      why: "installs into /usr/local, adds a system user and enables a timer: "
        + "InstalledDocsTests and OperationsTests run scripts/install under DESTDIR"),
    RunElsewhere(
      page: "docs/operations.md", command: "MAILTO=ops@example.com",
      why: "a crontab: CronWrapperTests and CronWrapperRunTests run the wrapper with "
        + "IMAGECACHE_ARGS and its lock"),
    RunElsewhere(
      page: "man/imagecache.1", command: "imagecache prefetch https://intranet.example/",
      why: "names a corporate CA file and proxy that are not here: TLSAndProxyTests runs "
        + "--cacert and --proxy against loopback servers"),
  ]

  /// The commands of blocks that need an engine, a package manager or the machine's own
  /// services: such a block must be in ``runElsewhere``, never run here.
  static let machineCommands = [
    "sbatch", "qsub", "kubectl", "podman", "snakemake", "parallel", "systemctl", "apt",
    "apt-get", "useradd", "swiftly", "swift build", "swift test", "scripts/install",
  ]

  /// What a block needs here beyond its page's files, and the exit status it ends with when
  /// that is not 0. Paths in `setup` are rewritten as the block's are.
  struct World {
    var page: String
    var command: String
    var setup = ""
    var status: Int32 = 0
    var why: String
  }

  static let serveJobs = "python3 jobs/serve.py jobs 18089 &\nwait_for_port 18089"

  static let worlds: [World] = [
    World(
      page: "README.md", command: "imagecache run /etc/imagecache/nightly.yaml --dry-run",
      setup: "mkdir -p /var/lib/imagecache && cp urls.txt /var/lib/imagecache/urls.txt",
      why: "the job reads the tour's urls.txt where it names it"),
    World(
      page: "README.md", command: "imagecache stats --cache /srv/images",
      setup: "imagecache prefetch --url https://cdn.example.com/broken/x.jpg --cache "
        + "/srv/images -q || true",
      why: "a URL the cache blacklisted (its server answers with a web page), for grep to find"),
    World(
      page: "README.md", command: "sed 's/",
      setup: #"""
        sed 's/\[expire, trim\]/[expire]/' /etc/imagecache/nightly.yaml > shard.yaml
        for k in 0 1 3; do
          imagecache run shard.yaml --shard $k/4 --report "reports/shard-$k.json" -q
        done
        """#,
      why: "the fleet's three other workers, so that the merge has every shard"),
    World(
      page: "README.md", command: "imagecache run /etc/imagecache/nightly.yaml --wait",
      setup: "mkdir -p /var/lib/imagecache && cp urls.txt /var/lib/imagecache/urls.txt",
      why: "the job reads the tour's urls.txt where it names it"),
    World(
      page: "README.md", command: "imagecache blacklist remove https://x/a.png",
      status: 1, why: "the URL is not on the blacklist here, which remove says with exit 1"),
    World(
      page: "README.md", command: "imagecache report merge r0.json r1.json",
      setup: """
        for k in 0 1; do
          imagecache prefetch urls.txt --cache /srv/merge --shard $k/2 --report r$k.json -q
        done
        """,
      why: "the reports of a run's two shards"),
    World(
      page: "docs/jobs.md", command: "imagecache run /etc/imagecache/nightly.yaml --concurrency 8",
      setup: "mkdir -p /var/lib/imagecache && cp urls.txt /var/lib/imagecache/urls.txt",
      why: "the README's job, its manifest where it names it"),
    World(
      page: "docs/verify.md", command: "imagecache verify --cache /var/cache/images --report",
      setup: "imagecache prefetch --url https://cdn.example.com/avatar.jpg "
        + "--cache /var/cache/images -q",
      why: "a cache to verify, its images whole (a bad one would end the block with exit 1)"),
    World(
      page: "docs/fleets.md", command: "cat jobs/manifests/urls.txt",
      setup: serveJobs, why: "the page serves the example's files so"),
    World(
      page: "man/imagecache.1", command: "imagecache run jobs/example.yaml",
      setup: serveJobs, why: "the example job's manifests are on jobs/serve.py's port"),
    World(
      page: "man/imagecache.1", command: "imagecache run /etc/imagecache/nightly.yaml --wait",
      setup: "mkdir -p /var/lib/imagecache && cp urls.txt /var/lib/imagecache/urls.txt",
      why: "the README's job, its manifest where it names it"),
    World(
      page: "man/imagecache.1", command: "imagecache prefetch a.jsonl b.txt",
      setup: #"""
        echo '{"url": "https://cdn.example.com/hero.jpg", "options": ["highPriority"]}' > a.jsonl
        echo https://cdn.example.com/b.jpg > b.txt
        """#,
      why: "the two manifests it names"),
    World(
      page: "man/imagecache.1", command: "imagecache stats --cache /var/cache/images --namespace",
      setup: "imagecache prefetch --url https://cdn.example.com/avatar.jpg "
        + "--cache /var/cache/images --namespace avatars -q",
      why: "a cache with that namespace"),
    World(
      page: "man/imagecache.1", command: "imagecache blacklist remove https://example.com/a.png",
      status: 1, why: "the URL is not on the blacklist here, which remove says with exit 1"),
    World(
      page: "man/imagecache.1", command: "imagecache refusals remove https://img.example.com",
      status: 1, why: "no refusal of the origin is remembered here, which remove says with exit 1"),
    World(
      page: "man/imagecache.1", command: "imagecache report merge shard-*.json",
      setup: """
        for k in 0 1; do
          imagecache prefetch urls.txt --cache /srv/merge --shard $k/2 --report shard-$k.json -q
        done
        """,
      why: "the reports of a run's two shards"),
  ]

  // MARK: The blocks

  private func blocks() throws -> [DocumentedBlock] {
    try DocumentedBlocks.all(repository: Self.repository)
  }

  private static func elsewhere(_ block: DocumentedBlock) -> RunElsewhere? {
    runElsewhere.first { $0.page == block.page && block.firstCommand.contains($0.command) }
  }

  private static func world(_ block: DocumentedBlock) -> World? {
    worlds.first { $0.page == block.page && block.firstCommand.contains($0.command) }
  }

  func testEveryBlockOfThePagesSaysWhatItHolds() throws {
    let blocks = try blocks()  // throws on an untagged fence that is no block's output
    let pages = Set(blocks.map(\.page))
    for page in ["README.md", "docs/fleets.md", "docs/cache-format.md", "man/imagecache.1"] {
      XCTAssertTrue(pages.contains(page), "no block found in \(page)")
    }
    XCTAssertGreaterThan(
      blocks.filter { $0.page == "man/imagecache.1" && $0.isCommand }.count, 15,
      "the --help examples in imagecache(1) were not found")
    XCTAssertNotNil(
      blocks.first { $0.page == "README.md" && $0.output != nil }, "the README's shown output")
    XCTAssertNotNil(
      blocks.first { $0.page == "README.md" && $0.firstCommand.hasPrefix("imagecache stats") },
      "the README's table of commands")
  }

  /// Every entry of the two lists names exactly one block, and a block that needs the
  /// machine's own engines or installs is listed, not run.
  func testEveryBlockIsRunHereOrListedWithWhatRunsIt() throws {
    let commands = try blocks().filter(\.isCommand)
    for entry in Self.runElsewhere {
      let named = commands.filter {
        $0.page == entry.page && $0.firstCommand.contains(entry.command)
      }
      XCTAssertFalse(named.isEmpty, "runElsewhere's \(entry.page) '\(entry.command)': no block")
    }
    for entry in Self.worlds {
      let named = commands.filter {
        $0.page == entry.page && $0.firstCommand.contains(entry.command)
      }
      XCTAssertEqual(named.count, 1, "worlds' \(entry.page) '\(entry.command)': \(named)")
    }
    for block in commands where Self.elsewhere(block) == nil {
      XCTAssertNotEqual(block.language, "cron", "\(block): a crontab is run by cron: list it")
      // The commands themselves, without the comments that may name an engine in passing.
      let script = block.text.split(separator: "\n").map {
        $0.trimmingCharacters(in: .whitespaces).hasPrefix("#")
          ? "" : String($0.split(separator: " #", maxSplits: 1).first ?? "")
      }.joined(separator: "\n")
      for command in Self.machineCommands {
        let regex = try Regex(#"(^|[\s;&|(])"# + command + #"\b"#).anchorsMatchLineEndings()
        XCTAssertTrue(
          script.firstMatch(of: regex) == nil,
          "\(block) runs \(command): list it in runElsewhere with the test that runs it")
      }
    }
  }

  // MARK: Running them

  /// The system folders examples name, each a folder of the test's here.
  private static let systemFolders = #"(?<![\w.~/$-])/(etc|srv|var|tmp|opt|home|mnt)(?=/)"#

  private func rewritten(_ text: String, root: String) throws -> String {
    let regex = try NSRegularExpression(pattern: Self.systemFolders)
    return regex.stringByReplacingMatches(
      in: text, range: NSRange(text.startIndex..., in: text),
      withTemplate: NSRegularExpression.escapedTemplate(for: root) + "/$1")
  }

  /// The server the examples' hosts lead to: images by extension, a sitemap (gzip too), a web
  /// page in place of any image under `/broken/`, 404 for anything else.
  private static let server = #"""
    import gzip, http.server, ssl, sys, threading
    world = sys.argv[1]
    def read(name):
        with open(world + "/" + name, "rb") as f:
            return f.read()
    images = {".jpg": ("image/jpeg", read("photo.jpg")), ".png": ("image/png", read("chart.png")),
              ".gif": ("image/gif", read("spinner.gif"))}
    sitemap = b"""<?xml version="1.0" encoding="UTF-8"?>
    <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
            xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
      <url><loc>https://shop.example.com/p/1</loc><lastmod>2026-11-20</lastmod>
        <image:image><image:loc>https://cdn.example.com/p/1.jpg</image:loc></image:image></url>
      <url><loc>https://shop.example.com/p/2</loc><lastmod>2026-11-21</lastmod>
        <image:image><image:loc>https://cdn.example.com/p/2.png</image:loc></image:image></url>
    </urlset>
    """
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def log_message(self, *args):
            pass
        def do_GET(self):
            path = self.path.split("?")[0]
            extension = path[path.rfind("."):]
            status, kind, body = 404, "text/plain", b"not found"
            if path.startswith("/broken/"):
                status, kind, body = 200, "text/html", b"<html><body>gone</body></html>"
            elif path.endswith("sitemap.xml.gz"):
                status, kind, body = 200, "application/gzip", gzip.compress(sitemap)
            elif path.endswith("sitemap.xml"):
                status, kind, body = 200, "application/xml", sitemap
            elif extension in images:
                status, (kind, body) = 200, images[extension]
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128
    plain = Server(("127.0.0.1", 80), Handler)
    secure = Server(("127.0.0.1", 443), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(world + "/ca/server/cert.pem", world + "/ca/server/key.pem")
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    secure.serve_forever()
    """#

  /// Runs in the block's namespace: loopback up, the examples' hosts on it, the root file
  /// system read-only but for the test's folder, the server started, then the block's setup and
  /// the block itself, whose exit status is the script's.
  private static let namespaceScript = #"""
    set -eu
    ip link set lo up
    mount --bind "$SANDBOX" "$SANDBOX"
    mount --bind "$WORLD/hosts" /etc/hosts
    mount -o remount,bind,ro /
    if [ -w / ]; then echo "/ is still writable" >&2; exit 97; fi
    set +e
    wait_for_port() {
      timeout 20 bash -c "until (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null; do sleep 0.05; done"
    }
    python3 "$WORLD/server.py" "$WORLD" &
    wait_for_port 443 || { echo "the examples' server did not start" >&2; exit 98; }
    cd "$WORK"
    if ! (set -e; . "$WORLD/setup.sh") > "$WORLD/setup.log" 2>&1; then
      echo "its setup failed:" >&2; cat "$WORLD/setup.log" >&2; exit 99
    fi
    exec bash -eo pipefail "$WORLD/block.sh"
    """#

  func testEveryDocumentedCommandRunsAsWrittenAndPrintsWhatItsPageShows() throws {
    guard try namespacesAvailable() else { return }
    let blocks = try blocks()
    let environment = try makeWorld(hosts: Self.hosts(in: blocks))
    // The README's tour declares the files the other pages name too (urls.txt, nightly.yaml).
    let tour = blocks.filter { $0.page == "README.md" && $0.declaredFile != nil }
    var ran: [String] = []
    var elsewhere: [String] = []
    for (number, page) in try DocumentedBlocks.pages(repository: Self.repository).enumerated() {
      let folder = try makePageFolder(temporary.appending("pages/\(number)"), files: tour)
      for block in blocks where block.page == page {
        if block.declaredFile != nil {
          try write(block, in: folder)
        } else if !block.isCommand {
          continue
        } else if Self.elsewhere(block) != nil {
          elsewhere.append(block.description)
        } else {
          try run(block, in: folder, environment: environment)
          ran.append(block.description)
        }
      }
    }
    print("documented examples: \(ran.count) run, \(elsewhere.count) run elsewhere")
    XCTAssertGreaterThan(ran.count, 30, "ran: \(ran)")
  }

  /// The hosts the blocks name, which lead to 127.0.0.1 here.
  private static func hosts(in blocks: [DocumentedBlock]) -> [String] {
    Set(
      blocks.flatMap { block in
        block.text.matches(of: /https?:\/\/([A-Za-z0-9.-]+)/).map { String($0.output.1) }
      }
    ).subtracting(["127.0.0.1", "localhost"]).sorted()
  }

  private var world: String { temporary.appending("world") }

  /// A page's own folders: the one its commands run in, and the one that stands for the
  /// system folders they name (`/srv/c` is `root/srv/c`).
  private struct PageFolder {
    var work: String
    var root: String
  }

  /// The server, its certificate for `hosts`, the hosts file and the folders every block
  /// shares; returns the blocks' environment.
  private func makeWorld(hosts: [String]) throws -> [String: String] {
    for folder in [world, temporary.appending("home")] {
      try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }
    let images = Self.repository.appendingPathComponent("jobs/images")
    for image in ["photo.jpg", "chart.png", "spinner.gif"] {
      try FileManager.default.copyItem(
        at: images.appendingPathComponent(image), to: URL(fileURLWithPath: world + "/" + image))
    }
    try Self.server.write(toFile: world + "/server.py", atomically: true, encoding: .utf8)
    try Self.namespaceScript.write(
      toFile: world + "/namespace.sh", atomically: true, encoding: .utf8)
    let authority = try TestCertificateAuthority(folder: world + "/ca", hostNames: hosts)
    try ("127.0.0.1 localhost " + hosts.joined(separator: " ") + "\n::1 localhost\n").write(
      toFile: world + "/hosts", atomically: true, encoding: .utf8)
    let binaries = URL(fileURLWithPath: ImageCacheBinary.path).deletingLastPathComponent().path
    return [
      "PATH": binaries + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
      "HOME": temporary.appending("home"),
      "IMAGECACHE": ImageCacheBinary.path, "CURL_CA_BUNDLE": authority.certificate,
      "SANDBOX": temporary.path, "WORLD": world, "LANG": "C.UTF-8",
    ]
  }

  /// A page's own folders, the one it runs in as the repository's (the example's jobs/,
  /// without its work), holding the tour's files: a page never sees what another made.
  private func makePageFolder(_ path: String, files: [DocumentedBlock]) throws -> PageFolder {
    let folder = PageFolder(work: path + "/work", root: path + "/root")
    for made in [folder.work, folder.root + "/tmp"] {
      try FileManager.default.createDirectory(atPath: made, withIntermediateDirectories: true)
    }
    try FileManager.default.copyItem(
      at: Self.repository.appendingPathComponent("jobs"),
      to: URL(fileURLWithPath: folder.work + "/jobs"))
    try? FileManager.default.removeItem(atPath: folder.work + "/jobs/work")
    for file in files { try write(file, in: folder) }
    return folder
  }

  /// Writes the file a block declares, where it says (relative to the page's folder).
  private func write(_ block: DocumentedBlock, in folder: PageFolder) throws {
    let path = try rewritten(block.declaredFile ?? "", root: folder.root)
    let absolute = path.hasPrefix("/") ? path : folder.work + "/" + path
    try FileManager.default.createDirectory(
      atPath: (absolute as NSString).deletingLastPathComponent,
      withIntermediateDirectories: true)
    try rewritten(block.text, root: folder.root).write(
      toFile: absolute, atomically: true, encoding: .utf8)
  }

  /// Runs a command block in its namespace, in the page's folder, after its setup, and checks
  /// its exit status and the output its page shows.
  private func run(
    _ block: DocumentedBlock, in folder: PageFolder, environment: [String: String]
  ) throws {
    let needs = Self.world(block)
    try rewritten(needs?.setup ?? "", root: folder.root).write(
      toFile: world + "/setup.sh", atomically: true, encoding: .utf8)
    try rewritten(block.text, root: folder.root).write(
      toFile: world + "/block.sh", atomically: true, encoding: .utf8)
    var environment = environment
    environment["WORK"] = folder.work
    environment["TMPDIR"] = folder.root + "/tmp"
    let result = try Command.run(
      "/usr/bin/timeout",
      [
        "-s", "KILL", "300", "unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc",
        "bash", world + "/namespace.sh",
      ], environment: environment, directory: folder.work)
    XCTAssertEqual(
      result.status, needs?.status ?? 0,
      "\(block) exits \(result.status):\n\(block.text)\nstdout:\n\(result.stdout)\n"
        + "stderr:\n\(result.stderr)")
    if let shown = block.output {
      try checkShownOutput(shown, of: block, printed: result.stdout + "\n" + result.stderr)
    }
  }

  /// Each line a page shows a block printing is a line it printed, with any figure in place
  /// of a figure (counts, sizes, times and dates vary from run to run) and any folder in place
  /// of an absolute path's folders (the page's machine is not this one).
  private func checkShownOutput(_ shown: String, of block: DocumentedBlock, printed: String)
    throws
  {
    let lines = printed.components(separatedBy: "\n")
    for line in shown.components(separatedBy: "\n") where !line.isEmpty {
      let pattern = try Regex(Self.pattern(forShown: line))
      XCTAssertTrue(
        lines.contains { $0.wholeMatch(of: pattern) != nil },
        "\(block) shows '\(line)', which it no longer prints:\n\(printed)")
    }
  }

  /// A shown line as a regular expression: figures match any figure, sizes any unit, an
  /// absolute path any path ending in its last two components.
  static func pattern(forShown line: String) -> String {
    func figures(_ text: Substring) -> String {
      var pattern = ""
      var rest = text[...]
      while let match = rest.firstMatch(of: /[0-9]+(\.[0-9]+)?( [KMGT]?i?B)?/) {
        pattern += NSRegularExpression.escapedPattern(for: String(rest[..<match.range.lowerBound]))
        pattern += match.output.2 == nil ? "[0-9]+(\\.[0-9]+)?" : "[0-9]+(\\.[0-9]+)? [KMGT]?i?B"
        rest = rest[match.range.upperBound...]
      }
      return pattern + NSRegularExpression.escapedPattern(for: String(rest))
    }
    var pattern = ""
    var rest = line[...]
    while let match = rest.firstMatch(of: /(?:^| )\/\S+/) {
      pattern += figures(rest[..<match.range.lowerBound])
      let path = match.output.trimmingCharacters(in: .whitespaces)
      let tail = path.split(separator: "/").suffix(2).joined(separator: "/")
      pattern += (match.output.hasPrefix(" ") ? " " : "") + "/\\S*" + figures(tail[...])
      rest = rest[match.range.upperBound...]
    }
    return pattern + figures(rest)
  }

  func testAShownLineMatchesWhatARunPrintsWhateverItsFiguresAndFolders() throws {
    let shown = "example: 8 URLs: 7 downloaded, 3.8 KB in 75 ms, to /work/x/reports/r-2026.json"
    let pattern = try Regex(Self.pattern(forShown: shown))
    XCTAssertNotNil(
      "example: 9 URLs: 9 downloaded, 612 B in 5 ms, to /tmp/a/b/reports/r-2027.json"
        .wholeMatch(of: pattern))
    XCTAssertNil(
      "example: 9 URLs: 9 fetched, 612 B in 5 ms, to /tmp/a/b/reports/r-2027.json"
        .wholeMatch(of: pattern), "a changed word is a changed line")
    XCTAssertNil(
      "example: 9 URLs: 9 downloaded, 612 B in 5 ms, to /tmp/a/b/cache/r-2027.json"
        .wholeMatch(of: pattern), "the path's end is kept")
  }

  /// Whether root and unshare(1) make the namespaces; without them the test skips, saying so,
  /// or fails when the engines are required.
  private func namespacesAvailable() throws -> Bool {
    let probe = try? Command.run("/usr/bin/unshare", ["--net", "--mount", "/bin/true"])
    guard probe?.status == 0 else {
      let why = "running the documented examples needs root and unshare(1) (util-linux)"
      try requireOrSkip(why)
    }
    return true
  }
}
