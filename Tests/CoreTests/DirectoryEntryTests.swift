import Core
import Foundation
import TestSupport
import XCTest

/// Directory scans read each name `readdir(3)` returns, in place: a record is only as long as
/// its name, and the last one in glibc's buffer may end where the mapping ends.
final class DirectoryEntryTests: TemporaryFolderTestCase {
  func testANameIsReadWithinItsRecordEvenAtTheEndOfAMapping() throws {
    let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    // Two pages, the second unreadable: a read past the first one faults.
    let memory = try XCTUnwrap(
      mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
    XCTAssertNotEqual(memory, MAP_FAILED)
    defer { munmap(memory, 2 * page) }
    XCTAssertEqual(mprotect(memory + page, page, PROT_NONE), 0)

    // A record of the name "a", as the kernel lays it out: the fixed fields, the name and its
    // NUL, rounded up to 8 bytes, ending exactly at the end of the readable page.
    let nameOffset = MemoryLayout<dirent>.offset(of: \.d_name)!
    let length = (nameOffset + 2 + 7) / 8 * 8
    let record = memory + page - length
    memset(record, 0, length)
    record.storeBytes(
      of: UInt16(length), toByteOffset: MemoryLayout<dirent>.offset(of: \.d_reclen)!,
      as: UInt16.self)
    record.storeBytes(of: UInt8(ascii: "a"), toByteOffset: nameOffset, as: UInt8.self)

    let entry = record.bindMemory(to: dirent.self, capacity: 1)
    XCTAssertEqual(FileSystem.entryName(entry), "a")
    // The type, as CacheScanner reads it: one field, not a copy of the record.
    XCTAssertEqual(entry.pointee.d_type, 0)
  }

  func testEveryNameOfAFolderIsReadWhole() throws {
    let folder = temporary.path
    // Names of every length up to the longest a file system allows.
    let names = (1...255).map { String(repeating: "x", count: $0) } + ["é.jpg", ".hidden"]
    for name in names {
      XCTAssertTrue(FileManager.default.createFile(atPath: folder + "/" + name, contents: nil))
    }
    let directory = try XCTUnwrap(opendir(folder))
    defer { closedir(directory) }
    var found: Set<String> = []
    while let entry = readdir(directory) { found.insert(FileSystem.entryName(entry)) }
    XCTAssertEqual(found, Set(names + [".", ".."]))
  }
}
