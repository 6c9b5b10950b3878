import CFileStat

/// How this process's allocator treats freed memory.
package enum ProcessMemory {
  /// Keeps memory that is freed for the next allocation instead of handing it back to the
  /// kernel at once. By default glibc trims a heap's free top past 128 KiB and maps blocks
  /// past 128 KiB on their own: each download's buffers (libcurl's receive buffer, the body)
  /// were then given back and faulted in again, page by page, for the next one: 3.5 page
  /// faults an image and about 5% of a prefetch's CPU (docs/benchmarks.md). The peak is
  /// unchanged; what the peak held stays mapped until the process ends. Blocks of 8 MiB and
  /// more still get mappings of their own, returned when freed.
  package static func keepFreedMemory() {
    ic_keep_freed_memory(256 << 20, 16 << 20, 8 << 20)
  }

  /// Caps glibc's malloc at 2 arenas. By default each thread that allocates may get an arena
  /// of its own, up to 8 per core, and each reserves 64 MiB of address space: under a small
  /// `ulimit -v` (250 MB) the reservations fail, and runs hung before their first download or
  /// died of SIGSEGV or SIGABRT (issue 38). Two arenas keep the main thread's heap and one
  /// shared by the others; the threads' allocations are short and few.
  package static func capArenas() {
    ic_cap_malloc_arenas(2)
  }
}
