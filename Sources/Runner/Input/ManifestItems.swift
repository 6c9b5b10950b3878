import Core
import Foundation
import Prefetcher
import Synchronization

/// The items of one or more manifests, read lazily in order, each line's options and context
/// applied on top of the job's defaults. A bad line becomes a failure naming its file, line and
/// field; UI-only options become warnings.
public struct ManifestItems: Sequence, Sendable {
  public let paths: [String]
  public let defaultOptions: ImageOptions
  public let defaultContext: ImageContext
  private let warningsBox = WarningList()

  public init(
    paths: [String], defaultOptions: ImageOptions = ImageOptions(),
    defaultContext: ImageContext = ImageContext()
  ) {
    self.paths = paths
    self.defaultOptions = defaultOptions
    self.defaultContext = defaultContext
  }

  /// Warnings gathered so far (UI-only options on manifest lines).
  public var warnings: [String] { warningsBox.all }

  public func makeIterator() -> Iterator { Iterator(owner: self) }

  /// The cache keys of the items, lazily; bad lines go to `onError`.
  public func cacheKeys(onError: @escaping (ConfigurationError) -> Void) -> some Sequence<String> {
    lazy.compactMap { result -> String? in
      switch result {
      case .success(let item): return item.cacheKey
      case .failure(let error):
        onError(error)
        return nil
      }
    }
  }

  public struct Iterator: IteratorProtocol {
    let owner: ManifestItems
    var pathIndex = 0
    var current: ManifestReader.Iterator?

    public mutating func next() -> Result<PrefetchItem, ConfigurationError>? {
      while true {
        if current == nil {
          guard pathIndex < owner.paths.count else { return nil }
          current = ManifestReader(path: owner.paths[pathIndex]).makeIterator()
          pathIndex += 1
        }
        guard let line = current!.next() else {
          current = nil
          continue
        }
        return owner.item(from: line)
      }
    }
  }

  func item(from line: Result<ManifestEntry, ManifestLineError>) -> Result<
    PrefetchItem, ConfigurationError
  > {
    let entry: ManifestEntry
    switch line {
    case .success(let value): entry = value
    case .failure(let error):
      return .failure(
        ConfigurationError(
          source: error.file, line: error.line, field: error.field, message: error.message))
    }
    do {
      let (options, warnings) = try ImageOptions.parse(
        entry.options, source: entry.file, line: entry.line)
      warningsBox.append(warnings)
      let context = try defaultContext.applying(entry.context, source: entry.file, line: entry.line)
      return .success(
        PrefetchItem(
          url: entry.url, options: defaultOptions.union(options), context: context,
          source: "\(entry.file):\(entry.line)"))
    } catch {
      return .failure(error)
    }
  }
}

/// Warnings gathered while a sequence is read, shared by its copies.
final class WarningList: Sendable {
  private let list = Mutex<[String]>([])
  func append(_ warnings: [String]) {
    if !warnings.isEmpty { list.withLock { $0.append(contentsOf: warnings) } }
  }
  var all: [String] { list.withLock { $0 } }
}

extension Job {
  /// The job's manifests, read lazily, with its options and context as every line's defaults.
  public var manifestItems: ManifestItems {
    ManifestItems(paths: manifests, defaultOptions: options, defaultContext: context)
  }
}
