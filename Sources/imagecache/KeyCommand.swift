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
      cache, as on iOS 17 and later. When SD before iOS 17 derives another key (its NSURL \
      refuses the raw braces a thumbnail leaves on a key without an extension) or names \
      the file differently, lines marked "on iOS before 17" follow. A prefetch whose \
      context asks for a thumbnail or transformers (a job's context:, or a manifest line's) \
      renders the image and stores it under the derived key, and under both names when \
      they differ, as SDWebImage would: this shows where an app looks for it. Nothing in \
      the cache is read and it need not exist yet, but a --cache that is a FIFO or a file, \
      or lies under one, is exit 2, as for every command.

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
      throw ValidationError("'\(url)' is not a URL")
    }
    // Nothing is read in the cache, and it need not exist yet; but paths printed under a FIFO
    // or a file are paths no app has: a wrong --cache is exit 2, as for every other command.
    try FileSystem.checkCacheFolders(cacheOptions.location)
    // The same context keys, and the same checks, as a manifest line's.
    var object: [String: JSONValue] = [:]
    if let cacheKeyFilter {
      object["cacheKeyFilter"] = PrefetchSettings.cacheKeyFilterJSON(cacheKeyFilter)
    }
    if let thumbnail { object["imageThumbnailPixelSize"] = .string(thumbnail) }
    object["imagePreserveAspectRatio"] = .bool(preserveAspectRatio)
    if let transformer {
      // The user is told; the decoder's own words add only its internals.
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
    // iOS 17's key and file above; SD before iOS 17 may derive another key, or name the
    // same one differently, and the prefetch writes the variant there too.
    let older = context.variant.derivedKey(for: original, on: .beforeiOS17)
    if older != derived {
      lines.append("derived key on iOS before 17: \(older)")
    }
    for name in context.variant.derivedFileNames(for: original).dropFirst() {
      lines.append("derived file on iOS before 17: \(disk.path)/\(name)")
    }
    Console.write(lines.joined(separator: "\n") + "\n", to: STDOUT_FILENO)
  }
}
