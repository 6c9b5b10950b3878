#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include "cfilestat.h"

#include <fcntl.h>
#include <sys/stat.h>

static int64_t ic_ns(struct statx_timestamp ts) {
  return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

int ic_stat_at(int dirfd, const char *path, ic_file_stat *out) {
  struct statx sx;
  unsigned int mask = STATX_TYPE | STATX_MODE | STATX_SIZE | STATX_BLOCKS | STATX_ATIME |
                      STATX_MTIME | STATX_CTIME | STATX_BTIME;
  if (statx(dirfd, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, mask, &sx) != 0) {
    return -1;
  }
  out->mode = sx.stx_mode;
  out->size = sx.stx_size;
  out->blocks = sx.stx_blocks;
  out->access_ns = ic_ns(sx.stx_atime);
  out->modification_ns = ic_ns(sx.stx_mtime);
  out->change_ns = ic_ns(sx.stx_ctime);
  out->has_birth = (sx.stx_mask & STATX_BTIME) ? 1 : 0;
  out->birth_ns = out->has_birth ? ic_ns(sx.stx_btime) : 0;
  return 0;
}

int ic_touch_access_time(const char *path) {
  struct timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
  return utimensat(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW);
}

void ic_keep_freed_memory(size_t trim_threshold, size_t top_pad, size_t mmap_threshold) {
  mallopt(M_TRIM_THRESHOLD, (int)trim_threshold);
  mallopt(M_TOP_PAD, (int)top_pad);
  mallopt(M_MMAP_THRESHOLD, (int)mmap_threshold);
}

void ic_cap_malloc_arenas(int count) {
  mallopt(M_ARENA_MAX, count);
}

int ic_set_thread_name(const char *name) {
  return pthread_setname_np(pthread_self(), name);
}
