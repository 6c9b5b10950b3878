import Core
import Foundation

// Test helper: stores two different large payloads under one key, alternately, until killed.
// The atomic-store test kills it at random moments and checks what is left under the cache name.
let arguments = CommandLine.arguments
guard arguments.count == 3 else {
  FileHandle.standardError.write(Data("usage: cache-writer DISK_CACHE_PATH KEY\n".utf8))
  exit(2)
}
let cache = DiskCache(path: arguments[1])
let payloads = [Data(repeating: 0x41, count: 8 << 20), Data(repeating: 0x42, count: 8 << 20)]
var round = 0
while true {
  try cache.store(payloads[round % 2], forKey: arguments[2])
  if round == 0 {
    FileHandle.standardOutput.write(Data("stored\n".utf8))
  }
  round += 1
}
