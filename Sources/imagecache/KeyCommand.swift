import ArgumentParser
import Core
import Foundation

struct KeyCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "key",
    abstract: "Print the cache keys and file paths SDWebImage uses for a URL.",
    discussion: """
      The original key (the URL, through --cache-key-filter), the key SDWebImage 5.21.5 \\
      derives for a thumbnail and transformers (the suffix goes before the path extension, \\
      on the decoded path, which is re-encoded), and the file each is stored under in the \\
      cache. Thumbnails and transformers are not yet prefetched: this shows where an app \\
      looks for them.

      Examples:
        imagecache key 'https://a.com/p/x.jpg?w=1' --thumbnail 100x100
        imagecache key https://a.com/x.png \\
          --transformer '[{"resizing": {"size": [200, 200], "scaleMode": "aspectFill"}}]'
      """)

  @Argument(help: ArgumentHelp("The image URL.", valueName: "url"))
  var url: String

  @OptionGroup var cacheOptions: CacheOptions

  @Option(help: ArgumentHelp("imageThumbnailPixelSize, as WxH in pixels.", valueName: "WxH"))
  var thumbnail: String?

  @Option(
    name: .customLong("preserve-aspect-ratio"),
    help: ArgumentHelp("imagePreserveAspectRatio (default true).", valueName: "bool"))
  var preserveAspectRatio = true

  @Option(
    help: ArgumentHelp(
      "imageTransformer as JSON: an object or an array of them.", valueName: "json"))
  var transformer: String?

  @Option(
    name: .customLong("cache-key-filter"),
    help: ArgumentHelp("url (default), stripQuery, or strip:NAME,NAME.", valueName: "filter"))
  var cacheKeyFilter: String?

  func run() throws {
    guard let parsed = URL(string: url) else {
      throw ValidationError("\(url) is not a URL")
    }
    var context = ImageContext()
    if let cacheKeyFilter {
      context = try context.applying(
        ["cacheKeyFilter": PrefetchSettings.cacheKeyFilterJSON(cacheKeyFilter)],
        source: "--cache-key-filter")
    }
    let original = context.cacheKeyFilter.cacheKey(for: parsed)
    var size: (width: Double, height: Double)?
    if let thumbnail {
      let parts = thumbnail.lowercased().split(separator: "x")
      guard parts.count == 2, let width = Double(parts[0]), let height = Double(parts[1]),
        width >= 0, height >= 0
      else { throw ValidationError("--thumbnail \(thumbnail): expected WxH, such as 100x100") }
      size = (width, height)
    }
    var transformers: [ImageTransformer] = []
    if let transformer {
      guard let data = transformer.data(using: .utf8),
        let value = try? JSONDecoder().decode(JSONValue.self, from: data)
      else { throw ValidationError("--transformer: not valid JSON") }
      do {
        transformers = try ImageTransformer.parse(value)
      } catch {
        throw ValidationError("--transformer: \(error.message)")
      }
    }
    let derived = DerivedKey.key(
      for: original, thumbnail: size, preserveAspectRatio: preserveAspectRatio,
      transformers: transformers)
    let disk = DiskCache(location: cacheOptions.location)
    var lines = [
      "original key:  \(original)",
      "original file: \(disk.cachePath(forKey: original))",
      "derived key:   \(derived)",
      "derived file:  \(disk.cachePath(forKey: derived))",
    ]
    // Before iOS 17, NSURL refuses a key with braces (a derived key with no path extension):
    // SD then takes the raw string's extension, so such a variant has a second name.
    let older = CacheFileName.fileName(forKey: derived, scheme: .rawStringExtension)
    if derived.contains("{") && older != CacheFileName.fileName(forKey: derived) {
      lines.append("derived file on iOS before 17: \(disk.path)/\(older)")
    }
    Console.write(lines.joined(separator: "\n") + "\n", to: STDOUT_FILENO)
  }
}
