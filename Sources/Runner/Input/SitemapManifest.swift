import Core
import DequeModule
import Foundation
import Synchronization

/// How sitemaps are read (SPEC section 6): `sitemap:` in a job, `--sitemap-pages` and
/// `--sitemap-order` on the command line.
public struct SitemapSettings: Sendable, Equatable {
  /// Also prefetch each `<url>`'s own `<loc>` when it names an image (by its extension).
  public var pages = false
  public var order: SitemapOrder = .document
  /// How deep sitemap indexes may nest: an index of indexes is read, one more level is not.
  public var maxIndexDepth = 2

  public init(pages: Bool = false, order: SitemapOrder = .document) {
    self.pages = pages
    self.order = order
  }
}

/// The order in which a sitemap's URLs are prefetched.
public enum SitemapOrder: String, Sendable, CaseIterable {
  /// As they appear.
  case document
  /// Newest `<lastmod>` first (those without one last, in document order), within each
  /// sitemap; an index's children newest first too. Each sitemap's entries are then held in
  /// memory to be sorted: at most ``SitemapManifest/maxSorted`` (the sitemap protocol's own
  /// limit on a sitemap's URLs and an index's sitemaps); a sitemap past it is sorted that many
  /// at a time, in document order from one block to the next.
  case lastmod
}

/// Opens a sitemap that an index names: fetches it and returns a file descriptor to read it
/// from, or throws what went wrong.
typealias SitemapFetch = (URL) throws(ImageCacheError) -> Int32

/// The URLs of a sitemap as manifest entries, following an index to its children one at a
/// time (each fetched once, http and https only, depth-limited). A problem with one sitemap
/// (not well-formed, refused, a child that cannot be fetched) is an error naming the sitemap
/// and line, and a whole input that failed; reading goes on with the next one. A child the
/// index may not name (another scheme, too deep, read already) is a line error.
final class SitemapManifest {
  private struct Frame {
    var document: SitemapDocument
    var name: String
    var depth: Int
    /// An index's children still to read, in the order they will be read.
    var children: Deque<(SitemapLocation, Date?)>?
    /// Read to its end or its problem (`--sitemap-order lastmod` reads it a block at a time).
    var exhausted = false
  }

  /// The most URLs (or an index's sitemaps) of one sitemap held to be sorted newest first: the
  /// sitemap protocol's own limit, which nothing enforces. A 50 MB sitemap of short entries is
  /// two million URLs, 340 bytes each held to be sorted; past this many, the next ones are
  /// sorted as a block of their own once these are handed on.
  static let maxSorted = 50_000

  private let settings: SitemapSettings
  private let limit: UInt64
  private let fetch: SitemapFetch
  /// The sitemaps read or being read in this run, by absolute URL: none is read twice.
  private let visited: VisitedSitemaps
  private var stack: [Frame] = []
  private var ready: Deque<Result<ManifestEntry, ManifestLineError>> = []

  init(
    descriptor: Int32, name: String, settings: SitemapSettings, limit: UInt64,
    visited: VisitedSitemaps, fetch: @escaping SitemapFetch
  ) {
    self.settings = settings
    self.limit = limit
    self.fetch = fetch
    self.visited = visited
    _ = visited.insert(name)
    open(descriptor: descriptor, name: name, depth: 0)
  }

  func next() -> Result<ManifestEntry, ManifestLineError>? {
    while ready.isEmpty {
      guard !stack.isEmpty else { return nil }
      advance()
    }
    return ready.popFirst()
  }

  private func open(descriptor: Int32, name: String, depth: Int) {
    do throws(SitemapProblem) {
      let document = try SitemapDocument(descriptor: descriptor, name: name, limit: limit)
      stack.append(Frame(document: document, name: name, depth: depth))
    } catch {
      ready.append(.failure(lineError(name, error)))
    }
  }

  /// Reads on in the innermost sitemap: one `<url>`'s entries, or the next child of an index.
  private func advance() {
    let top = stack.count - 1
    if stack[top].children != nil {
      // Taken from the frame in place: a copy of the list for each child read is a copy of
      // up to a million children, a million times.
      guard let (location, _) = stack[top].children?.popFirst() else {
        // An index sorted a block at a time: its next block, if it has one.
        if stack[top].exhausted { stack.removeLast() } else { stack[top].children = nil }
        return
      }
      openChild(location, of: stack[top])
      return
    }
    if settings.order == .lastmod {
      // Sorted newest first: read whole (SitemapOrder.lastmod).
      return readWhole(top)
    }
    switch stack[top].document.next() {
    case nil: stack.removeLast()
    case .failure(let problem):
      ready.append(.failure(lineError(stack[top].name, problem)))
      stack.removeLast()
    case .success(let event):
      if case .child(let location, _) = event {
        // An index is read as its children are: a million of them are never held.
        return openChild(location, of: stack[top])
      }
      ready.append(contentsOf: entries(of: event, in: stack[top].name).map { .success($0.0) })
    }
  }

  /// Reads the document at `index` of the stack, to sort it newest first: an index's
  /// children (then read one at a time), or a urlset's entries; at most ``maxSorted`` of them,
  /// the next ones on the next call.
  private func readWhole(_ index: Int) {
    let frame = stack[index]
    var children: [(SitemapLocation, Date?)] = []
    var dated: [(entry: ManifestEntry, date: Date?)] = []
    var problem: SitemapProblem?
    var exhausted = false
    while !exhausted, children.count + dated.count < Self.maxSorted {
      switch frame.document.next() {
      case nil: exhausted = true
      case .failure(let error):
        problem = error
        exhausted = true
      case .success(.child(let location, let date)): children.append((location, date))
      case .success(let event): dated += entries(of: event, in: frame.name)
      }
    }
    children = stableSortedNewestFirst(children, by: \.1)
    dated = stableSortedNewestFirst(dated, by: \.date)
    ready.append(contentsOf: dated.map { .success($0.entry) })
    if let problem { ready.append(.failure(lineError(frame.name, problem))) }
    if frame.document.kind == .index {
      stack[index].children = Deque(children)
      stack[index].exhausted = exhausted
    } else if exhausted {
      stack.removeLast()
    }
  }

  private func stableSortedNewestFirst<T>(_ items: [T], by date: (T) -> Date?) -> [T] {
    items.enumerated().sorted { left, right in
      switch (date(left.element), date(right.element)) {
      case (let l?, let r?) where l != r: return l > r
      case (.some, nil): return true
      case (nil, .some): return false
      default: return left.offset < right.offset
      }
    }.map(\.element)
  }

  /// The URLs one `<url>` contributes: its images, and its page when that is an image and
  /// `pages` is set.
  private func entries(of event: SitemapDocument.Event, in name: String) -> [(
    ManifestEntry, Date?
  )] {
    guard case .url(let page, let date, let images) = event else { return [] }
    var locations = images
    if settings.pages, let page, Self.namesImage(page.text) { locations.insert(page, at: 0) }
    return locations.filter { !$0.text.isEmpty }.map {
      (ManifestEntry(url: $0.text, file: name, line: $0.line), date)
    }
  }

  /// Whether a page URL's path ends in an image file extension.
  static func namesImage(_ url: String) -> Bool {
    guard let ext = URL(string: url)?.pathExtension.lowercased(), !ext.isEmpty else {
      return false
    }
    return imageExtensions.contains(ext)
  }

  static let imageExtensions: Set<String> = [
    "jpg", "jpeg", "jpe", "png", "gif", "webp", "heic", "heif", "avif", "tif", "tiff", "bmp",
    "svg", "ico",
  ]

  private func openChild(_ location: SitemapLocation, of parent: Frame) {
    func refuse(_ message: String, wholeInput: Bool = false) {
      ready.append(
        .failure(
          ManifestLineError(
            file: parent.name, line: location.line, field: "sitemap",
            message: "\(location.text): \(message)", wholeInput: wholeInput)))
    }
    guard let url = URL(string: location.text), let scheme = url.scheme?.lowercased() else {
      return refuse("not a URL")
    }
    guard scheme == "http" || scheme == "https" else {
      return refuse("only http and https sitemaps are fetched, not \(scheme)")
    }
    guard parent.depth + 1 <= settings.maxIndexDepth else {
      return refuse("sitemap indexes nest deeper than \(settings.maxIndexDepth) levels")
    }
    let name = url.absoluteString
    guard visited.insert(name) else {
      return refuse("already read in this run (an index that names itself or a sitemap twice)")
    }
    let descriptor: Int32
    do throws(ImageCacheError) {
      descriptor = try fetch(url)
    } catch {
      return refuse("cannot fetch: \(error.message)", wholeInput: true)
    }
    open(descriptor: descriptor, name: name, depth: parent.depth + 1)
  }

  private func lineError(_ name: String, _ problem: SitemapProblem) -> ManifestLineError {
    ManifestLineError(
      file: name, line: problem.line, field: nil, message: problem.message, wholeInput: true)
  }
}

/// The sitemaps a run has read, shared by the copies of its manifest iterator.
final class VisitedSitemaps: Sendable {
  private let names = Mutex<Set<String>>([])

  /// Adds `name`; `false` when it was there already.
  func insert(_ name: String) -> Bool {
    names.withLock { $0.insert(name).inserted }
  }
}
