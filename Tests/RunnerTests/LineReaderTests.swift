import Foundation
import Runner
import TestSupport
import XCTest

/// The manifest line reader (SPEC sections 6 and 10): lines as their bytes say, numbered from
/// 1, whatever the line endings, the chunk boundaries, or the bytes a hostile file holds.
final class LineReaderTests: TemporaryFolderTestCase {
  private func file(_ bytes: [UInt8]) throws -> String {
    let path = temporary.appending("manifest-\(UUID().uuidString).txt")
    XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
    return path
  }

  /// Every line the reader gives for `bytes`: its number and its text or problem.
  private func lines(_ bytes: [UInt8]) throws -> [(Int, Result<String, LineProblem>)] {
    Array(LineReader(path: try file(bytes)))
  }

  private func texts(_ bytes: [UInt8]) throws -> [String?] {
    try lines(bytes).map { try? $0.1.get() }
  }

  private func numbers(_ bytes: [UInt8]) throws -> [Int] { try lines(bytes).map(\.0) }

  private let limit = LineReader.maxLineLength

  func testTheLastLineNeedsNoNewline() throws {
    XCTAssertEqual(try texts(Array("a\nb".utf8)), ["a", "b"])
    XCTAssertEqual(try texts(Array("a\nb\n".utf8)), ["a", "b"], "no empty line after the last")
    XCTAssertEqual(try numbers(Array("a\nb".utf8)), [1, 2])
  }

  func testAnEmptyFileHasNoLinesAndBlankLinesAreCounted() throws {
    XCTAssertEqual(try texts([]), [])
    XCTAssertEqual(try texts(Array("\n\nc\n".utf8)), ["", "", "c"])
    XCTAssertEqual(try numbers(Array("\n\nc\n".utf8)), [1, 2, 3])
  }

  /// Windows line endings: the reader splits at LF only; the manifest reader drops the CR
  /// that ends a line, so a CRLF manifest gives the same URLs as an LF one, on the same lines.
  func testACRLFManifestGivesTheSameURLsAsAnLFOne() throws {
    let urls = ["https://example.com/a.jpg", "https://example.com/b.png"]
    let crlf = try file(Array((urls.joined(separator: "\r\n") + "\r\n").utf8))
    let entries = ManifestReader(path: crlf).map { try? $0.get() }
    XCTAssertEqual(entries.map { $0?.url }, urls)
    XCTAssertEqual(entries.map { $0?.line }, [1, 2])
  }

  /// A host and port without a scheme (`localhost:8080/a.jpg`, which URL parsers read with
  /// `localhost` as its scheme) is a line error that says the URL likely meant, never sent on;
  /// a URL with a scheme of its own (`data:`, `ftp:`) goes on, for the pipeline to refuse as
  /// SD does.
  func testAHostAndPortWithoutASchemeIsALineErrorNamingTheURLMeant() throws {
    let path = try file(
      Array(
        "localhost:8080/a.jpg\ncdn.example.com:8443/b.png\nhttp://localhost:8080/c.jpg\n"
          .utf8) + Array("data:image/png;base64,iVBORw0KGgo=\nftp://example.com/d.gif\n".utf8))
    let results = Array(ManifestReader(path: path))
    XCTAssertEqual(results.count, 5)
    for (index, meant) in [(0, "localhost:8080/a.jpg"), (1, "cdn.example.com:8443/b.png")] {
      guard case .failure(let error) = results[index] else {
        return XCTFail("line \(index + 1) was taken: \(results[index])")
      }
      XCTAssertEqual(error.message, "no scheme: did you mean https://\(meant)?")
    }
    XCTAssertEqual(
      results.dropFirst(2).map { try? $0.get().url },
      [
        "http://localhost:8080/c.jpg", "data:image/png;base64,iVBORw0KGgo=",
        "ftp://example.com/d.gif",
      ])
  }

  /// The duplicate-key check of a JSON line reads escaped quotes as JSON does: a duplicate
  /// key after a value holding `\"` is still refused, not left for the decoder to keep one
  /// of the two silently.
  func testAnEscapedQuoteDoesNotHideADuplicateKey() throws {
    let line = #"{"url": "https://x/a.jpg?q=\"", "url": "https://x/b.jpg"}"#
    let results = Array(ManifestReader(path: try file(Array((line + "\n").utf8))))
    XCTAssertEqual(results.count, 1)
    guard case .failure(let duplicate) = results.first else { return XCTFail("\(results)") }
    XCTAssertEqual(duplicate.field, "url")
    XCTAssertTrue(duplicate.message.contains("duplicate key"), duplicate.message)
  }

  /// A lone CR inside a line (old Mac endings, or an injected header) is no line break: the
  /// line holds a control character and is refused, never split into two requests.
  func testACarriageReturnInsideALineIsAControlCharacterNotALineBreak() throws {
    let path = try file(Array("https://example.com/a.jpg\rhttps://example.com/b.jpg\n".utf8))
    let results = Array(ManifestReader(path: path))
    XCTAssertEqual(results.count, 1)
    guard case .failure(let error) = results.first else { return XCTFail("\(results)") }
    XCTAssertEqual(error.line, 1)
    XCTAssertTrue(error.message.contains("control character"), error.message)
  }

  func testANulAnywhereInALineMakesItALineErrorAndTheNextLineIsRead() throws {
    let bytes =
      Array("\u{0}https://example.com/a.jpg\n".utf8) + Array("https://example.com/b.jpg".utf8)
      + [0] + Array("\nhttps://example.com/c.jpg".utf8)
    let results = Array(ManifestReader(path: try file(bytes)))
    XCTAssertEqual(results.count, 3)
    for (index, result) in results.prefix(2).enumerated() {
      guard case .failure(let error) = result else { return XCTFail("\(result)") }
      XCTAssertEqual(error.line, index + 1)
      XCTAssertTrue(error.message.contains("NUL"), error.message)
    }
    XCTAssertEqual(try results[2].get().url, "https://example.com/c.jpg")
    XCTAssertEqual(try results[2].get().line, 3)
  }

  func testInvalidUTF8IsALineProblemOfItsOwnLineOnly() throws {
    let cases: [(String, [UInt8])] = [
      ("a lone continuation byte", [0x80]),
      ("an overlong slash", [0xC0, 0xAF]),
      ("a surrogate", [0xED, 0xA0, 0x80]),
      ("past U+10FFFF", [0xF4, 0x90, 0x80, 0x80]),
      ("0xFF", [0xFF]),
    ]
    for (name, bad) in cases {
      let read = try lines(Array("ok\nx".utf8) + bad + Array("y\nnext".utf8))
      XCTAssertEqual(read.count, 3, name)
      XCTAssertEqual(try? read[0].1.get(), "ok", name)
      XCTAssertEqual(read[1].0, 2, name)
      XCTAssertEqual(read[1].1, .failure(.notUTF8), name)
      XCTAssertEqual(try? read[2].1.get(), "next", name)
    }
  }

  func testASequenceCutShortByTheEndOfTheFileIsNotUTF8() throws {
    // "é" is C3 A9: the file ends after its first byte, with no newline.
    let read = try lines(Array("a\nb".utf8) + [0xC3])
    XCTAssertEqual(read.map(\.0), [1, 2])
    XCTAssertEqual(read[1].1, .failure(.notUTF8))
  }

  /// The file is read in 64 KiB chunks: a line that crosses a chunk boundary is one line, and
  /// a character whose bytes straddle the boundary is whole in it.
  func testLinesAndCharactersAcrossTheChunkBoundaryAreWhole() throws {
    // The first line and its newline fill 65534 bytes: the second line's "€" (E2 82 AC) is
    // bytes 65534 to 65536, across the first chunk's end.
    let first = String(repeating: "a", count: 65_533)
    let second = "\u{20AC}" + String(repeating: "c", count: 40_000)
    let read = try texts(Array((first + "\n" + second).utf8))
    XCTAssertEqual(read.map { $0?.utf8.count }, [65_533, 40_003])
    XCTAssertTrue(read == [first, second], "the lines as written")
  }

  func testALineOfExactlyTheLimitIsReadAndOneByteMoreIsTooLong() throws {
    let atLimit = String(repeating: "x", count: limit)
    XCTAssertEqual(try texts(Array((atLimit + "\nz").utf8)), [atLimit, "z"])
    let over = try lines(Array((atLimit + "x\nz").utf8))
    XCTAssertEqual(over.map(\.0), [1, 2])
    XCTAssertEqual(over[0].1, .failure(.tooLong(limit: limit)))
    XCTAssertEqual(try? over[1].1.get(), "z")
  }

  /// A line many chunks long is skipped as it streams past; the lines around it keep their
  /// numbers, also when the long line is the last and has no newline.
  func testAVeryLongLineIsSkippedAndTheLinesAroundItKeepTheirNumbers() throws {
    let huge = [UInt8](repeating: UInt8(ascii: "y"), count: 5 * limit + 123)
    let read = try lines(Array("a\n".utf8) + huge + Array("\nb\n".utf8) + huge)
    XCTAssertEqual(read.map(\.0), [1, 2, 3, 4])
    XCTAssertEqual(try? read[0].1.get(), "a")
    XCTAssertEqual(read[1].1, .failure(.tooLong(limit: limit)))
    XCTAssertEqual(try? read[2].1.get(), "b")
    XCTAssertEqual(read[3].1, .failure(.tooLong(limit: limit)))
  }

  func testAByteOrderMarkIsDroppedFromTheFirstLineOnly() throws {
    let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
    XCTAssertEqual(try texts(bom + Array("a\n".utf8) + bom + Array("b".utf8)), ["a", "\u{FEFF}b"])
    XCTAssertEqual(try texts(bom), [""], "a file that is only a byte order mark: one empty line")
  }

  func testAFileThatCannotBeOpenedIsAWholeInputErrorNamingIt() throws {
    let path = temporary.appending("missing.txt")
    let reader = LineReader(path: path)
    XCTAssertNil(reader.next())
    XCTAssertNotNil(reader.error)
    let results = Array(ManifestReader(path: path))
    XCTAssertEqual(results.count, 1)
    guard case .failure(let error) = results.first else { return XCTFail("\(results)") }
    XCTAssertTrue(error.wholeInput)
    XCTAssertEqual(error.file, path)
  }
}
