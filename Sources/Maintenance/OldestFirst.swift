import Core
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// How much of the trim is held in memory at once. The defaults keep a trim of any size to a
/// few MB; tests make them tiny so that a small cache goes through every path.
struct TrimLimits: Sendable {
  /// The most survivors sorted in memory at once (each about 30 bytes plus its path).
  var sortBudget = 1 << 16
  /// Buckets of one histogram of dates (16 bytes each).
  var buckets = 1 << 14
  /// Bytes of survivors kept in memory before they go to a temporary file.
  var spillBuffer = 1 << 20
}

/// The survivors of the expire pass, in walk order, as records of date, allocated size and
/// relative path: in memory while they are few, then in a temporary file, unlinked at once so
/// that nothing is left behind whatever happens to the run. When no temporary file can be
/// made or written (a full disk is when maintenance matters most), they stay in memory, as
/// they always did, rather than the trim failing; ``memoryFallback`` says why, for the pass to
/// warn of it (``MaintenanceWarning/trimInMemory(_:)``).
final class SurvivorSpill {
  /// One survivor, valid only while the visitor runs.
  struct Record {
    var date: Int64
    var size: UInt64
    /// Its place in the walk, which breaks ties in date.
    var sequence: Int
    var path: UnsafeRawBufferPointer

    /// The order-preserving unsigned form of the date, which the histograms divide.
    var key: UInt64 { SurvivorSpill.key(date) }
  }

  private static let headerSize = 20
  private let memoryLimit: Int
  private var descriptor: Int32 = -1
  private var fileLength = 0
  /// Records not yet in the file; all of them once the file is given up.
  private var pending: [UInt8] = []
  private var memoryOnly = false
  /// Why the records stay in memory: the first failure to make or write the file.
  private(set) var memoryFallback: FileSystemError?
  private(set) var count = 0
  private(set) var lowestKey = UInt64.max
  private(set) var highestKey = UInt64.min

  init(memoryLimit: Int) { self.memoryLimit = memoryLimit }

  deinit { if descriptor >= 0 { close(descriptor) } }

  static func key(_ date: Int64) -> UInt64 { UInt64(bitPattern: date) ^ (1 << 63) }

  func append(path: String, date: Int64, size: UInt64) throws {
    withUnsafeBytes(of: date.littleEndian) { pending.append(contentsOf: $0) }
    withUnsafeBytes(of: size.littleEndian) { pending.append(contentsOf: $0) }
    let start = pending.count
    withUnsafeBytes(of: UInt32(0)) { pending.append(contentsOf: $0) }
    pending.append(contentsOf: path.utf8)
    let length = UInt32(pending.count - start - 4).littleEndian
    withUnsafeBytes(of: length) { header in
      pending.withUnsafeMutableBytes {
        $0.baseAddress!.advanced(by: start).copyMemory(
          from: header.baseAddress!, byteCount: 4)
      }
    }
    count += 1
    let key = Self.key(date)
    lowestKey = min(lowestKey, key)
    highestKey = max(highestKey, key)
    if !memoryOnly && pending.count >= memoryLimit { try spill() }
  }

  /// Moves the pending records to the file, or gives the file up.
  private func spill() throws {
    if descriptor < 0 {
      // No file is no loss: the records stay in memory, as the type's comment says.
      do throws(FileSystemError) {
        descriptor = try FileSystem.makeScratchFile(for: "trim")
      } catch {
        memoryOnly = true
        memoryFallback = error
        return
      }
    }
    do throws(FileSystemError) {
      try FileSystem.writeAll(pending, to: descriptor, path: "trim temporary file")
      fileLength += pending.count
      pending.removeAll(keepingCapacity: true)
    } catch {
      // What the file holds comes back in front of the rest (a short write may have left
      // more than `fileLength`: only that much counts).
      var written = [UInt8](repeating: 0, count: fileLength)
      try read(into: &written, 0..<fileLength, at: 0)
      pending = written + pending
      close(descriptor)
      descriptor = -1
      fileLength = 0
      memoryOnly = true
      memoryFallback = error
    }
  }

  /// Fills `range` of `buffer` from the file at `offset`.
  private func read(into buffer: inout [UInt8], _ range: Range<Int>, at offset: Int) throws {
    var done = 0
    while done < range.count {
      let got = buffer.withUnsafeMutableBytes {
        pread(
          descriptor, $0.baseAddress! + range.lowerBound + done, range.count - done,
          off_t(offset + done))
      }
      if got < 0 {
        let failure = errno
        if failure == EINTR { continue }
        throw FileSystemError("read", path: "trim temporary file", errno: failure)
      }
      guard got > 0 else {
        throw FileSystemError.unexpectedEnd("read", path: "trim temporary file")
      }
      done += got
    }
  }

  /// Calls `visit` with every record in walk order, until it returns false.
  func forEach(_ visit: (Record) throws -> Bool) throws {
    var sequence = 0
    /// Visits the whole records at the start of `bytes`; returns how many bytes they took,
    /// or nil once `visit` said to stop.
    func visitRecords(_ bytes: UnsafeRawBufferPointer) throws -> Int? {
      var offset = 0
      while bytes.count - offset >= Self.headerSize {
        let length = Int(
          UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt32.self)))
        guard bytes.count - offset >= Self.headerSize + length else { break }
        let record = Record(
          date: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: Int64.self)),
          size: UInt64(
            littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)),
          sequence: sequence,
          path: UnsafeRawBufferPointer(
            rebasing: bytes[(offset + Self.headerSize)..<(offset + Self.headerSize + length)]))
        sequence += 1
        offset += Self.headerSize + length
        guard try visit(record) else { return nil }
      }
      return offset
    }

    if descriptor >= 0 && fileLength > 0 {
      var chunk = [UInt8](repeating: 0, count: max(memoryLimit, 64))
      // Bytes at the start of `chunk` read but not yet visited: a record cut by the chunk's end.
      var filled = 0
      var offset = 0
      while offset < fileLength {
        // A record longer than the chunk (a very long path): the chunk grows.
        if filled == chunk.count { chunk += [UInt8](repeating: 0, count: chunk.count) }
        let wanted = min(chunk.count - filled, fileLength - offset)
        try read(into: &chunk, filled..<(filled + wanted), at: offset)
        offset += wanted
        filled += wanted
        guard
          let used = try chunk.withUnsafeBytes({
            try visitRecords(UnsafeRawBufferPointer(rebasing: $0[..<filled]))
          })
        else { return }
        chunk.withUnsafeMutableBytes {
          $0.baseAddress!.copyMemory(from: $0.baseAddress! + used, byteCount: filled - used)
        }
        filled -= used
      }
    }
    _ = try pending.withUnsafeBytes { try visitRecords($0) }
  }
}

/// The trim over the survivors (SPEC section 4): delete oldest first (by date, ties in walk
/// order) until the total is strictly below `desired`; a failed delete subtracts nothing and
/// the next file goes instead. Only the files of the next dates to go are sorted, at most
/// ``TrimLimits/sortBudget`` at a time; which dates those are comes from histograms of dates
/// weighted by size, over all survivors and then, where one bucket holds too many, over the
/// bucket alone.
struct OldestFirst {
  let survivors: SurvivorSpill
  let limits: TrimLimits
  let diskCachePath: String
  let dryRun: Bool
  var remainingBytes: UInt64
  let desired: UInt64

  /// Returns false once `stop` did.
  mutating func run<Trim: MaintenanceRecorder>(trim: inout Trim, stop: () -> Bool) throws -> Bool {
    guard survivors.count > 0 else { return true }
    return try deleteOldestFirst(
      in: survivors.lowestKey...survivors.highestKey, trim: &trim, stop: stop)
  }

  private var done: Bool { remainingBytes < desired }

  /// Deletes oldest first among the survivors whose dates fall in `keys`, every older one
  /// having had its turn already.
  private mutating func deleteOldestFirst<Trim: MaintenanceRecorder>(
    in keys: ClosedRange<UInt64>, trim: inout Trim, stop: () -> Bool
  ) throws -> Bool {
    let width = (keys.upperBound - keys.lowerBound) / UInt64(limits.buckets) + 1
    let bucketCount = Int((keys.upperBound - keys.lowerBound) / width) + 1
    var bytes = [UInt64](repeating: 0, count: bucketCount)
    var counts = [Int](repeating: 0, count: bucketCount)
    try survivors.forEach { record in
      let key = record.key
      if keys.contains(key) {
        let bucket = Int((key - keys.lowerBound) / width)
        bytes[bucket] += record.size
        counts[bucket] += 1
      }
      return true
    }
    func range(_ first: Int, _ last: Int) -> ClosedRange<UInt64> {
      let start = keys.lowerBound + UInt64(first) * width
      let lastStart = keys.lowerBound + UInt64(last) * width
      let end = keys.upperBound - lastStart < width ? keys.upperBound : lastStart + (width - 1)
      return start...end
    }

    var bucket = 0
    while bucket < bucketCount && !done {
      if counts[bucket] == 0 {
        bucket += 1
        continue
      }
      if counts[bucket] > limits.sortBudget {
        let dates = range(bucket, bucket)
        let finished =
          dates.lowerBound == dates.upperBound
          ? try deleteInWalkOrder(key: dates.lowerBound, trim: &trim, stop: stop)
          : try deleteOldestFirst(in: dates, trim: &trim, stop: stop)
        guard finished else { return false }
        bucket += 1
        continue
      }
      // As many buckets as fit the budget, but no more than would reach the target if every
      // delete succeeds: a failed one leaves the next buckets to the next round.
      var last = bucket
      var count = counts[bucket]
      var freed = bytes[bucket]
      while last + 1 < bucketCount && freed <= remainingBytes - desired
        && count + counts[last + 1] <= limits.sortBudget
      {
        last += 1
        count += counts[last]
        freed += bytes[last]
      }
      guard try deleteSorted(in: range(bucket, last), count: count, trim: &trim, stop: stop) else {
        return false
      }
      bucket = last + 1
    }
    return true
  }

  /// Collects the `count` survivors whose dates fall in `keys`, sorts them by
  /// date and walk order, and deletes them in that order until the target is reached.
  private mutating func deleteSorted<Trim: MaintenanceRecorder>(
    in keys: ClosedRange<UInt64>, count: Int, trim: inout Trim, stop: () -> Bool
  ) throws -> Bool {
    var entries: [SortedEntry] = []
    entries.reserveCapacity(count)
    var paths: [UInt8] = []
    try survivors.forEach { record in
      if keys.contains(record.key) {
        entries.append(
          SortedEntry(
            date: record.date, sequence: record.sequence, size: record.size,
            pathStart: paths.count, pathLength: record.path.count))
        paths.append(contentsOf: record.path)
      }
      return true
    }
    entries.sort { ($0.date, $0.sequence) < ($1.date, $1.sequence) }
    for entry in entries {
      if done { break }
      if stop() { return false }
      let relativePath = String(
        decoding: paths[entry.pathStart..<(entry.pathStart + entry.pathLength)], as: UTF8.self)
      delete(relativePath, date: entry.date, size: entry.size, trim: &trim)
    }
    return true
  }

  private struct SortedEntry {
    var date: Int64
    var sequence: Int
    var size: UInt64
    var pathStart: Int
    var pathLength: Int
  }

  /// The survivors of one single date, too many to sort: the walk's order is their order.
  private mutating func deleteInWalkOrder<Trim: MaintenanceRecorder>(
    key: UInt64, trim: inout Trim, stop: () -> Bool
  ) throws -> Bool {
    var stopped = false
    try survivors.forEach { record in
      guard record.key == key else { return true }
      if done { return false }
      if stop() {
        stopped = true
        return false
      }
      delete(
        String(decoding: record.path, as: UTF8.self), date: record.date, size: record.size,
        trim: &trim)
      return true
    }
    return !stopped
  }

  private mutating func delete<Trim: MaintenanceRecorder>(
    _ relativePath: String, date: Int64, size: UInt64, trim: inout Trim
  ) {
    let path = diskCachePath + "/" + relativePath
    if !dryRun && unlink(path) != 0 {
      trim.recordNotRemoved(FileSystemError("remove", path: path, errno: errno))
      return
    }
    trim.recordDelete(path: relativePath, bytes: size, date: CacheCleaner.date(date))
    remainingBytes -= size
  }
}
