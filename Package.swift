// swift-tools-version:6.0
import PackageDescription

// Linux only (SPEC: servers; Glibc, statx(2), libcurl): no Apple platform is declared, as
// none builds it.
let package = Package(
  name: "imagecache",
  products: [
    .executable(name: "imagecache", targets: ["imagecache"]),
    .library(name: "Core", targets: ["Core"]),
    .library(name: "HTTP", targets: ["HTTP"]),
    .library(name: "Pipeline", targets: ["Pipeline"]),
    .library(name: "Prefetcher", targets: ["Prefetcher"]),
    .library(name: "Maintenance", targets: ["Maintenance"]),
    .library(name: "Runner", targets: ["Runner"]),
  ],
  dependencies: [
    // Only for the tests' loopback HTTP server.
    .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
    .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
    // The Prometheus text format of --metrics (SPEC section 6).
    .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
  ],
  targets: [
    // C system libraries, wrapped once by Swift types in Core (STYLE: nothing else imports them).
    .systemLibrary(
      name: "CTurboJPEG", path: "Sources/CTurboJPEG", pkgConfig: "libturbojpeg",
      providers: [.apt(["libturbojpeg0-dev"])]),
    // libcurl's multi interface: the HTTP client (SPEC section 2).
    .systemLibrary(
      name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
      providers: [.apt(["libcurl4-openssl-dev"])]),
    // OpenSSL's libcrypto, for MD5 (libcurl links it already).
    .systemLibrary(
      name: "CCrypto", path: "Sources/CCrypto", pkgConfig: "libcrypto",
      providers: [.apt(["libssl-dev"])]),
    // zlib's gz* files: sitemap manifests, plain or gzip-compressed (SPEC section 6).
    .systemLibrary(
      name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
    .systemLibrary(
      name: "CPNG", path: "Sources/CPNG", pkgConfig: "libpng",
      providers: [.apt(["libpng-dev"])]),
    // libxml2 (Debian libxml2), loaded with dlopen the first time a sitemap is read: neither
    // its headers nor pkg-config are used, since SwiftPM would link what pkg-config names.
    .target(name: "CXML2", path: "Sources/CXML2"),
    // statx(2) for birth times and allocated sizes, which Glibc's Swift overlay does not expose.
    .target(name: "CFileStat", path: "Sources/CFileStat"),
    // Cache keys and file names, disk and memory caches, the scanner, file-system calls, error
    // codes, per-URL options and context, the report model: no heavy dependency (STYLE).
    .target(
      name: "Core",
      dependencies: ["CFileStat", "CCrypto"]),
    // The SQLite state store (blacklist, validators, runs) and the run lock.
    .target(
      name: "State",
      dependencies: [
        "Core", .product(name: "GRDB", package: "GRDB.swift"),
        .product(name: "GRDBSQLite", package: "GRDB.swift"),
      ]),
    // libpng's row-by-row decode, whose errors longjmp: caught in C, never across Swift frames;
    // verify's check of a PNG's image data, inflated whole by libdeflate (Debian libdeflate-dev)
    // when it fits 4 MiB, otherwise streamed through zlib, which also words every failure; the
    // full decode of every frame of a GIF with giflib (Debian libgif-dev) and of a WebP with
    // libwebp and its demuxer (Debian libwebp-dev), each from memory; and cairo (thumbnails and
    // transformers share CoreGraphics' imaging model), loaded with dlopen the first time a
    // variant is rendered (Debian libcairo2-dev).
    .target(
      name: "CImaging", dependencies: ["CPNG"], path: "Sources/CImaging",
      linkerSettings: [
        .linkedLibrary("png16"), .linkedLibrary("z"), .linkedLibrary("deflate"),
        .linkedLibrary("gif"), .linkedLibrary("webp"), .linkedLibrary("webpdemux"),
      ]),
    // Validation and rendering variants: the only code that touches libjpeg-turbo, libpng,
    // giflib, libwebp and cairo.
    .target(name: "Imaging", dependencies: ["Core", "CTurboJPEG", "CPNG", "CImaging"]),
    // The data flow's three stages of a prefetch, as Nuke's folders show its stages.
    // HTTP: the downloader on libcurl and its per-host limits; knows nothing of SD or caches.
    .target(
      name: "HTTP",
      dependencies: [
        "Core", "CCurl", .product(name: "DequeModule", package: "swift-collections"),
      ]),
    // SD's manager: what a load needs (SPEC section 2, steps 1-4, decided once) and what
    // becomes of its download (validation, store, validators, blacklist).
    .target(name: "Pipeline", dependencies: ["Core", "Imaging", "HTTP"]),
    // Scheduling: the item feed, the window, retries, coalescing; runs the pipeline's loads on
    // the downloader, or plans them.
    .target(
      name: "Prefetcher",
      dependencies: [
        "Core", "HTTP", "Pipeline",
        .product(name: "DequeModule", package: "swift-collections"),
      ]),
    // Expire, trim, migrate and verify: neither YAML nor SQL.
    .target(
      name: "Maintenance",
      dependencies: ["Core", "Imaging"]),
    // Jobs and manifests as input, one configuration tree, running a job, signals, the
    // streamed report.
    .target(
      name: "Runner",
      dependencies: [
        "Core", "State", "HTTP", "Pipeline", "Prefetcher", "Maintenance", "CXML2", "CZlib",
        .product(name: "Yams", package: "Yams"),
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "DequeModule", package: "swift-collections"),
      ]),
    // The command line only: parse, call the runner, print, exit code.
    .executableTarget(
      name: "imagecache",
      dependencies: [
        "Core", "State", "Runner", "HTTP", "Pipeline", "Prefetcher", "Imaging", "Maintenance",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ]),
    .target(
      name: "TestSupport",
      dependencies: [
        "Core",
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
      ],
      path: "Tests/TestSupport"),
    // Stores under one key in a loop until killed: the atomic-store test's victim.
    .executableTarget(name: "cache-writer", dependencies: ["Core"], path: "Tests/CacheWriter"),
    .testTarget(name: "CoreTests", dependencies: ["Core", "State", "TestSupport", "cache-writer"]),
    .testTarget(
      name: "StateTests",
      dependencies: ["State", "Core", "TestSupport", .product(name: "GRDB", package: "GRDB.swift")]),
    .testTarget(name: "ImagingTests", dependencies: ["Imaging", "Core", "CPNG", "TestSupport"]),
    .testTarget(
      name: "PrefetcherTests",
      dependencies: [
        "HTTP", "Pipeline", "Prefetcher", "Core", "TestSupport", "CCurl",
      ]),
    .testTarget(
      name: "MaintenanceTests", dependencies: ["Maintenance", "Core", "Imaging", "TestSupport"]),
    .testTarget(
      name: "RunnerTests",
      dependencies: [
        "Runner", "Core", "State", "HTTP", "Pipeline", "Prefetcher", "Maintenance", "TestSupport",
      ]),
    .testTarget(
      name: "imagecacheTests",
      dependencies: [
        "Core", "State", "Runner", "TestSupport", "imagecache",
        .product(name: "GRDB", package: "GRDB.swift"),
        .product(name: "Yams", package: "Yams"),
      ]),
  ]
)
