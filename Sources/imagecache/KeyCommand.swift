import ArgumentParser
import Core
import Foundation

struct KeyCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "key",
    abstract: "Print the cache keys and file paths SDWebImage uses for a URL.",
    discussion: """
      The original key (the URL, through --cache-key-filter), the key SDWebImage 5.21.5 \
      derives for a thumbnail and transformers (the suffix goes before the path extension, \
      on the decoded path, which is re-encoded), and the file each is stored under in the \
      cache. A prefetch whose context asks for them (a job's context:, or a manifest line's) \
      renders the thumbnail or transformed image and stores it under the derived key, as \
      SDWebImage would: this shows where an app looks for it.

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
    // The same context keys, and the same checks, as a manifest line's.
    var object: [String: JSONValue] = [:]
    if let cacheKeyFilter {
      object["cacheKeyFilter"] = PrefetchSettings.cacheKeyFilterJSON(cacheKeyFilter)
    }
    if let thumbnail { object["imageThumbnailPixelSize"] = .string(thumbnail) }
    object["imagePreserveAspectRatio"] = .bool(preserveAspectRatio)
    if let transformer {
      guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(transformer.utf8))
      else { throw ValidationError("--transformer: not valid JSON") }
      object["imageTransformer"] = value
    }
    let context: ImageContext
    do {
      context = try ImageContext().applying(object, source: "command line")
    } catch {
      throw ValidationError(error.description)
    }
    let original = context.cacheKeyFilter.cacheKey(for: parsed)
    let derived = context.variant.derivedKey(for: original)
    let disk = DiskCache(location: cacheOptions.location)
    var lines = [
      "original key:  \(original)",
      "original file: \(disk.cachePath(forKey: original))",
      "derived key:   \(derived)",
      "derived file:  \(disk.cachePath(forKey: derived))",
    ]
    for name in CacheFileName.variantFileNames(forKey: derived).dropFirst() {
      lines.append("derived file on iOS before 17: \(disk.path)/\(name)")
    }
    Console.write(lines.joined(separator: "\n") + "\n", to: STDOUT_FILENO)
  }
}
