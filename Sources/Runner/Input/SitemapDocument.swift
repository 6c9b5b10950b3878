import CXML2
import CZlib
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// The libxml2 and zlib loaded, for `--version`.
public var sitemapLibraryVersions: String {
  let xml = ic_xml_version().map { String(cString: $0) } ?? "not installed (sitemaps need it)"
  return "libxml2 \(xml), zlib \(String(cString: zlibVersion()))"
}

/// Where something was found in a sitemap, for reports.
struct SitemapLocation: Equatable {
  var text: String
  var line: Int
}

/// Why a sitemap could not be read past some point.
struct SitemapProblem: Error, Equatable {
  var line: Int
  var message: String
}

/// One XML sitemap (SPEC section 6), read node by node with libxml2's streaming reader from a
/// file descriptor, plain or gzip-compressed: `<urlset>` (with Google's image extension) or
/// `<sitemapindex>`. Memory stays bounded whatever the file's size; the document is never a
/// tree.
///
/// Sitemaps come from other systems and are not trusted (SPEC section 10): a document type
/// declaration is refused outright (a sitemap needs none, and it is how entities expand without
/// bound, "billion laughs", or read local files and URLs, XXE); no entity is substituted and
/// nothing is fetched by the parser; decompression stops at `limit` bytes (a gzip bomb).
final class SitemapDocument {
  enum Kind: Equatable {
    case urlset
    case index
  }

  enum Event: Equatable {
    /// A `<url>`: its page `<loc>`, its `<lastmod>`, and its images' `<image:loc>`s. A `<url>`
    /// with more than ``imagesPerEvent`` images comes as several, each full batch of images as
    /// it is read: the page goes with the first after its `<loc>`, the `<lastmod>` with each
    /// after it.
    case url(page: SitemapLocation?, lastModified: Date?, images: [SitemapLocation])
    /// A `<sitemap>` of an index.
    case child(SitemapLocation, lastModified: Date?)
  }

  /// The longest `<loc>` or `<lastmod>` text kept, as the longest manifest line.
  static let maxTextLength = LineReader.maxLineLength

  /// The most images of one `<url>` held before they are handed on: the image sitemap
  /// protocol's own limit for a page, which nothing enforces; a `<url>` of a million images
  /// (50 MB of XML, 150 KB gzipped) would otherwise be held whole, several times over.
  static let imagesPerEvent = 1_000

  static let libraryMissing = "libxml2 (libxml2.so.2) could not be loaded; install libxml2"

  static let doctypeRefused =
    "a DOCTYPE declaration is refused: a sitemap needs none, and its entities could expand "
    + "without bound (billion laughs) or read local files and URLs (XXE)"

  private(set) var kind: Kind?
  private let reader: xmlTextReaderPtr
  private let input: InflatingInput
  private var firstError: SitemapProblem?
  private var done = false

  // The element being read.
  private var path: [String] = []
  private var text: String?
  private var textLine = 0
  private var page: SitemapLocation?
  private var lastModified: Date?
  private var images: [SitemapLocation] = []

  /// Takes ownership of `descriptor` (closed when the document is).
  init(descriptor: Int32, name: String, limit: UInt64) throws(SitemapProblem) {
    guard ic_xml_load() != 0 else {
      close(descriptor)
      throw SitemapProblem(line: 0, message: Self.libraryMissing)
    }
    guard let gz = gzdopen(descriptor, "rb") else {
      close(descriptor)
      throw SitemapProblem(line: 0, message: "cannot read: \(String(cString: strerror(errno)))")
    }
    input = InflatingInput(gz: gz, limit: limit)
    let options =
      XML_PARSE_NONET.rawValue | XML_PARSE_BIG_LINES.rawValue | XML_PARSE_NOERROR.rawValue
      | XML_PARSE_NOWARNING.rawValue | XML_PARSE_COMPACT.rawValue
    guard
      let reader = ic_xmlReaderForIO(
        readInput, closeInput, Unmanaged.passUnretained(input).toOpaque(), name, nil,
        Int32(options))
    else {
      gzclose(gz)
      throw SitemapProblem(line: 0, message: "cannot start the XML reader")
    }
    self.reader = reader
    ic_xmlTextReaderSetErrorHandler(reader, recordError, Unmanaged.passUnretained(self).toOpaque())
  }

  deinit {
    ic_xmlFreeTextReader(reader)
  }

  /// The next `<url>` or `<sitemap>`, the problem that ends the document, or `nil` at its end.
  func next() -> Result<Event, SitemapProblem>? {
    guard !done else { return nil }
    while true {
      let status = ic_xmlTextReaderRead(reader)
      if status == 0 {
        done = true
        if kind == nil { return .failure(SitemapProblem(line: 0, message: "empty document")) }
        return nil
      }
      if status < 0 { return fail(parseProblem()) }
      do throws(SitemapProblem) {
        if let event = try handleNode() { return .success(event) }
      } catch {
        return fail(error)
      }
    }
  }

  private func fail(_ problem: SitemapProblem) -> Result<Event, SitemapProblem> {
    done = true
    return .failure(problem)
  }

  private func parseProblem() -> SitemapProblem {
    if var failure = input.failure {
      if failure.line == 0 { failure.line = currentLine }
      return failure
    }
    return firstError ?? SitemapProblem(line: currentLine, message: "not well-formed XML")
  }

  private var currentLine: Int {
    if let node = ic_xmlTextReaderCurrentNode(reader) {
      let line = ic_xmlGetLineNo(node)
      if line > 0 { return line }
    }
    return max(0, Int(ic_xmlTextReaderGetParserLineNumber(reader)))
  }

  private func handleNode() throws(SitemapProblem) -> Event? {
    switch xmlReaderTypes(UInt32(ic_xmlTextReaderNodeType(reader))) {
    case XML_READER_TYPE_DOCUMENT_TYPE:
      throw SitemapProblem(line: currentLine, message: Self.doctypeRefused)
    case XML_READER_TYPE_ENTITY_REFERENCE:
      throw SitemapProblem(line: currentLine, message: "entity references are refused")
    case XML_READER_TYPE_ELEMENT:
      let name = String(cString: ic_xmlTextReaderConstLocalName(reader))
      if path.isEmpty {
        switch name {
        case "urlset": kind = .urlset
        case "sitemapindex": kind = .index
        default:
          throw SitemapProblem(
            line: currentLine,
            message: "not a sitemap: the root element is <\(name)>, not <urlset> or <sitemapindex>")
        }
      }
      path.append(name)
      if collectsText {
        text = ""
        textLine = currentLine
      }
      if ic_xmlTextReaderIsEmptyElement(reader) == 1 { return try endElement() }
    case XML_READER_TYPE_TEXT, XML_READER_TYPE_CDATA, XML_READER_TYPE_SIGNIFICANT_WHITESPACE:
      guard text != nil, let value = ic_xmlTextReaderConstValue(reader) else { return nil }
      text! += String(cString: value)
      if text!.utf8.count > Self.maxTextLength {
        throw SitemapProblem(
          line: textLine,
          message: "<\(path.last ?? "")> is longer than \(Self.maxTextLength / 1024) KiB")
      }
    case XML_READER_TYPE_END_ELEMENT:
      return try endElement()
    default:
      break
    }
    return nil
  }

  /// `loc` and `lastmod` where they count: `urlset/url/loc`, `urlset/url/lastmod`,
  /// `urlset/url/image/loc`, `sitemapindex/sitemap/loc` and `sitemapindex/sitemap/lastmod`.
  private var collectsText: Bool {
    switch path.count {
    case 3:
      return (path[2] == "loc" || path[2] == "lastmod")
        && (path[1] == "url" || path[1] == "sitemap")
    case 4: return kind == .urlset && path[1] == "url" && path[2] == "image" && path[3] == "loc"
    default: return false
    }
  }

  private func endElement() throws(SitemapProblem) -> Event? {
    defer { path.removeLast() }
    let name = path.last ?? ""
    if let value = text {
      text = nil
      let trimmed = value.trimmingWhitespace()
      let location = SitemapLocation(text: trimmed, line: textLine)
      switch (path.count, name) {
      case (3, "loc"): page = location
      case (3, "lastmod"): lastModified = W3CDate.parse(trimmed)
      case (4, _):
        images.append(location)
        if images.count == Self.imagesPerEvent {
          defer {
            page = nil
            images = []
          }
          return .url(page: page, lastModified: lastModified, images: images)
        }
      default: break
      }
      return nil
    }
    guard path.count == 2 else { return nil }
    defer {
      page = nil
      lastModified = nil
      images = []
    }
    switch (kind, name) {
    case (.urlset, "url"):
      return .url(page: page, lastModified: lastModified, images: images)
    case (.index, "sitemap"):
      guard let page, !page.text.isEmpty else {
        throw SitemapProblem(line: currentLine, message: "a <sitemap> without <loc>")
      }
      return .child(page, lastModified: lastModified)
    default:
      return nil
    }
  }

  fileprivate func record(_ message: String, line: Int) {
    guard firstError == nil else { return }
    let text = message.trimmingWhitespace()
    firstError = SitemapProblem(line: line, message: "not well-formed XML: \(text)")
  }
}

/// The bytes of a sitemap file, decompressed when it is gzip (zlib reads plain files as they
/// are), counted so that a small file cannot expand past the limit.
private final class InflatingInput {
  let gz: gzFile
  let limit: UInt64
  var total: UInt64 = 0
  var failure: SitemapProblem?
  var closed = false
  /// What comes before the root element, where a DOCTYPE would be.
  var prolog = PrologScanner()

  init(gz: gzFile, limit: UInt64) {
    self.gz = gz
    self.limit = limit
  }

  func read(into buffer: UnsafeMutablePointer<CChar>, count: Int32) -> Int32 {
    let read = gzread(gz, buffer, UInt32(max(0, count)))
    if read < 0 {
      var code: Int32 = 0
      failure = SitemapProblem(
        line: prolog.line, message: "cannot decompress: " + String(cString: gzerror(gz, &code)))
      return -1
    }
    total += UInt64(read)
    if total > limit {
      failure = SitemapProblem(
        line: 0,
        message: "more than \(limit) bytes once decompressed (the sitemap limit is 50 MB): "
          + "refused as a possible gzip bomb")
      return -1
    }
    if !prolog.isOver {
      let bytes = UnsafeRawBufferPointer(start: buffer, count: Int(read))
      if let line = prolog.scan(bytes) {
        failure = SitemapProblem(line: line, message: SitemapDocument.doctypeRefused)
        return -1
      }
    }
    return read
  }

  func close() {
    guard !closed else { return }
    closed = true
    gzclose(gz)
  }

  deinit { close() }
}
private let readInput: xmlInputReadCallback = { context, buffer, count in
  guard let context, let buffer else { return -1 }
  return Unmanaged<InflatingInput>.fromOpaque(context).takeUnretainedValue().read(
    into: buffer, count: count)
}

private let closeInput: xmlInputCloseCallback = { context in
  guard let context else { return 0 }
  Unmanaged<InflatingInput>.fromOpaque(context).takeUnretainedValue().close()
  return 0
}

private let recordError: xmlTextReaderErrorFunc = { context, message, _, locator in
  guard let context else { return }
  let document = Unmanaged<SitemapDocument>.fromOpaque(context).takeUnretainedValue()
  document.record(
    message.map { String(cString: $0) } ?? "", line: Int(ic_xmlTextReaderLocatorLineNumber(locator))
  )
}
