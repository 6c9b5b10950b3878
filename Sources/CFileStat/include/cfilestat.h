#ifndef CFILESTAT_H
#define CFILESTAT_H

#include <stddef.h>
#include <stdint.h>

/// The attributes imagecache needs of one directory entry, read with statx(2) without following
/// symbolic links. Times are nanoseconds since the epoch.
typedef struct ic_file_stat {
  uint32_t mode;
  uint64_t size;
  uint64_t blocks;  // 512-byte units, as st_blocks
  int64_t access_ns;
  int64_t modification_ns;
  int64_t change_ns;
  int64_t birth_ns;
  int has_birth;  // 1 when the filesystem reported a birth time
} ic_file_stat;

/// statx(dirfd, path, AT_SYMLINK_NOFOLLOW) into `out`. Returns 0, or -1 with errno set.
int ic_stat_at(int dirfd, const char *path, ic_file_stat *out);

/// Sets the access time of `path` to now and leaves the modification time alone
/// (utimensat with UTIME_NOW and UTIME_OMIT, not following a final symbolic link).
/// Returns 0, or -1 with errno set.
int ic_touch_access_time(const char *path);

/// Sets glibc's malloc to keep freed memory for later allocations (mallopt's trim threshold,
/// top pad and mmap threshold, which Swift's Glibc module does not import): see
/// `ProcessMemory.keepFreedMemory()`.
void ic_keep_freed_memory(size_t trim_threshold, size_t top_pad, size_t mmap_threshold);

/// Caps glibc's malloc arenas at `count` (mallopt's M_ARENA_MAX): see
/// `ProcessMemory.capArenas()`.
void ic_cap_malloc_arenas(int count);

/// Names the calling thread for the kernel (`pthread_setname_np`, a GNU extension Swift's Glibc
/// module does not import); `name` is at most 15 bytes. See `ThreadName.set(_:)`.
int ic_set_thread_name(const char *name);

#endif
