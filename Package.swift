// swift-tools-version:6.0
import PackageDescription

let package = Package(
  name: "imagecache",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "imagecache", targets: ["imagecache"]),
    .library(name: "Core", targets: ["Core"]),
    .library(name: "Prefetcher", targets: ["Prefetcher"]),
    .library(name: "Maintenance", targets: ["Maintenance"]),
  ],
  dependencies: [
    .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
    .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
    .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
  ],
  targets: [
    // C system libraries, wrapped once by Swift types in Core (STYLE: nothing else imports them).
    .systemLibrary(
      name: "CTurboJPEG", path: "Sources/CTurboJPEG", pkgConfig: "libturbojpeg",
      providers: [.apt(["libturbojpeg0-dev"])]),
    .systemLibrary(
      name: "CPNG", path: "Sources/CPNG", pkgConfig: "libpng",
      providers: [.apt(["libpng-dev"])]),
    // statx(2) for birth times and allocated sizes, which Glibc's Swift overlay does not expose.
    .target(name: "CFileStat", path: "Sources/CFileStat"),
    .target(
      name: "Core",
      dependencies: [
        "CTurboJPEG", "CPNG", "CFileStat",
        .product(name: "Crypto", package: "swift-crypto"),
        .product(name: "GRDB", package: "GRDB.swift"),
        .product(name: "Yams", package: "Yams"),
        .product(name: "Logging", package: "swift-log"),
      ]),
    .target(
      name: "Prefetcher",
      dependencies: [
        "Core",
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "DequeModule", package: "swift-collections"),
        .product(name: "Logging", package: "swift-log"),
      ]),
    .target(
      name: "Maintenance",
      dependencies: [
        "Core",
        .product(name: "HeapModule", package: "swift-collections"),
        .product(name: "Logging", package: "swift-log"),
      ]),
    .executableTarget(
      name: "imagecache",
      dependencies: [
        "Core", "Prefetcher", "Maintenance",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "Logging", package: "swift-log"),
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
    .testTarget(name: "CoreTests", dependencies: ["Core", "TestSupport", "cache-writer"]),
    .testTarget(name: "PrefetcherTests", dependencies: ["Prefetcher", "Core", "TestSupport"]),
    .testTarget(name: "MaintenanceTests", dependencies: ["Maintenance", "Core", "TestSupport"]),
    .testTarget(name: "imagecacheTests", dependencies: ["Core", "TestSupport", "imagecache"]),
  ]
)
