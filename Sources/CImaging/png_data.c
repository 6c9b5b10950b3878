#include "cimaging.h"
#include "message.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libdeflate.h>
#include <pthread.h>
#include <zlib.h>

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Whether the four bytes at p are the chunk type `type`. */
static int is_type(const unsigned char *p, const char *type) { return memcmp(p, type, 4) == 0; }

/* The bits of one pixel, or 0 for a colour type and bit depth that PNG does not allow. */
static unsigned pixel_bits(unsigned color_type, unsigned depth) {
  switch (color_type) {
  case 0: return (depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16) ? depth : 0;
  case 3: return (depth == 1 || depth == 2 || depth == 4 || depth == 8) ? depth : 0;
  case 2: return (depth == 8 || depth == 16) ? 3 * depth : 0;
  case 4: return (depth == 8 || depth == 16) ? 2 * depth : 0;
  case 6: return (depth == 8 || depth == 16) ? 4 * depth : 0;
  default: return 0;
  }
}

/* Where the inflated bytes are in the image's rows: each row is a filter-type byte, then
   `row_bytes[pass]` bytes of pixels; Adam7's seven passes one after another. */
struct rows {
  uint64_t row_bytes[7];
  uint64_t rows[7];
  int pass;
  uint64_t row;
  uint64_t at; /* offset in the current row (its filter byte is at 0) */
  int done;
};

static void next_nonempty_pass(struct rows *r) {
  while (r->pass < 7 && r->rows[r->pass] == 0) r->pass++;
  if (r->pass == 7) r->done = 1;
}

/* Walks `count` inflated bytes through the rows; 0, or 1 with a message. */
static int walk(struct rows *r, const unsigned char *bytes, size_t count, char *message,
                size_t message_size) {
  size_t i = 0;
  while (i < count) {
    if (r->done) return ic_fail(message, message_size, "IDAT: too much image data");
    if (r->at == 0) {
      if (bytes[i] > 4) return ic_fail(message, message_size, "bad adaptive filter value");
      i++;
      r->at = 1;
    }
    uint64_t left = r->row_bytes[r->pass] + 1 - r->at;
    size_t take = (uint64_t)(count - i) < left ? count - i : (size_t)left;
    i += take;
    r->at += take;
    if (r->at == r->row_bytes[r->pass] + 1) {
      r->at = 0;
      if (++r->row == r->rows[r->pass]) {
        r->row = 0;
        r->pass++;
        next_nonempty_pass(r);
      }
    }
  }
  return 0;
}

/* The fast path: the image data of a PNG whose rows come to at most `budget` bytes inflated
   whole by libdeflate (about 2.5 times zlib's speed, its Adler-32 checked), into buffers kept
   by each thread and freed when the thread ends. It only ever says yes: data that it finds
   wrong, or cannot hold, goes to zlib's streamed inflate below, whose errors are the ones
   reported, worded as libpng words them. libdeflate reads a few streams that zlib refuses,
   each against the format's letter but decoding to definite bytes: a length symbol 286 or 287,
   a block header declaring more than 286 length or 30 distance codes, a run of code lengths
   past the table, an empty distance code used, a one-symbol code sent as 1. Those pass here;
   damage after the chunk's CRC was computed is found by the CRC, and random damage before it
   makes one of them only by turning a 285 into a 287 (docs/verify.md). */
enum { budget = 4 << 20 };

struct buffer {
  unsigned char *bytes;
  size_t size;
};

/* `buffer` holding at least `size` bytes, grown in powers of two; 0 when out of memory. */
static int reserve(struct buffer *buffer, size_t size) {
  if (buffer->size >= size) return 1;
  size_t grown = buffer->size ? buffer->size : 64 << 10;
  while (grown < size) grown *= 2;
  unsigned char *bytes = realloc(buffer->bytes, grown);
  if (bytes == NULL) return 0;
  buffer->bytes = bytes;
  buffer->size = grown;
  return 1;
}

/* A thread's decompressor and buffers, freed by the thread's end (a worker thread of a pool
   may end before the process does). */
struct fast_path {
  struct libdeflate_decompressor *decompressor;
  struct buffer joined, inflated;
};

static pthread_key_t fast_path_key;
static pthread_once_t fast_path_once = PTHREAD_ONCE_INIT;
static int fast_path_key_made = 0;

static void release_fast_path(void *pointer) {
  struct fast_path *state = pointer;
  if (state->decompressor) libdeflate_free_decompressor(state->decompressor);
  free(state->joined.bytes);
  free(state->inflated.bytes);
  free(state);
}

static void make_fast_path_key(void) {
  fast_path_key_made = pthread_key_create(&fast_path_key, release_fast_path) == 0;
}

/* This thread's state, made on its first use; NULL when memory or a key is short. */
static struct fast_path *this_threads_fast_path(void) {
  pthread_once(&fast_path_once, make_fast_path_key);
  if (!fast_path_key_made) return NULL;
  struct fast_path *state = pthread_getspecific(fast_path_key);
  if (state != NULL) return state;
  state = calloc(1, sizeof *state);
  if (state == NULL) return NULL;
  state->decompressor = libdeflate_alloc_decompressor();
  if (state->decompressor == NULL || pthread_setspecific(fast_path_key, state) != 0) {
    release_fast_path(state);
    return NULL;
  }
  return state;
}

/* 1 when the consecutive IDAT chunks from `offset` (the first) hold one zlib stream, all of it,
   that inflates to exactly `expected` bytes whose rows walk cleanly; 0 for anything else. */
static int inflates_whole(const unsigned char *data, size_t size, size_t offset,
                          uint64_t expected, struct rows rows) {
  if (expected > budget) return 0;
  /* The chunks' bodies: one is the stream itself, more are joined into one. */
  size_t length = 0, chunks = 0, end = offset;
  while (end + 12 <= size && is_type(data + end + 4, "IDAT")) {
    uint32_t chunk = be32(data + end);
    if (chunk > size - end - 12 || length + chunk > budget) return 0;
    length += chunk;
    chunks += 1;
    end += 12 + (size_t)chunk;
  }
  const unsigned char *stream = data + offset + 8;
  struct fast_path *state = this_threads_fast_path();
  if (state == NULL) return 0;
  struct buffer *joined = &state->joined, *inflated = &state->inflated;
  if (chunks > 1) {
    if (!reserve(joined, length)) return 0;
    size_t joined_length = 0;
    for (size_t at = offset; at < end; at += 12 + (size_t)be32(data + at)) {
      memcpy(joined->bytes + joined_length, data + at + 8, be32(data + at));
      joined_length += be32(data + at);
    }
    stream = joined->bytes;
  }
  /* A window of 32 KiB (0x78), as nearly every encoder writes: zlib refuses a distance past a
     smaller window the header declares, libdeflate does not look. */
  if (length < 2 || stream[0] != 0x78) return 0;
  if (!reserve(inflated, (size_t)expected)) return 0;
  size_t read = 0, written = 0;
  enum libdeflate_result result = libdeflate_zlib_decompress_ex(
      state->decompressor, stream, length, inflated->bytes, (size_t)expected, &read, &written);
  if (result != LIBDEFLATE_SUCCESS || read != length || written != expected) return 0;
  char ignored[1];
  return walk(&rows, inflated->bytes, written, ignored, sizeof ignored) == 0 && rows.done;
}

int ic_png_check_data(const unsigned char *data, size_t size, unsigned long long max_pixels,
                      char *message, size_t message_size) {
  /* The structure walk has checked the signature, every chunk's length and CRC, IHDR first
     and IEND last: only what lies inside the chunks is read here. */
  if (size < 33) return ic_fail(message, message_size, "truncated");
  const unsigned char *ihdr = data + 16;
  uint32_t width = be32(ihdr), height = be32(ihdr + 4);
  unsigned depth = ihdr[8], color_type = ihdr[9];
  if (width == 0 || height == 0 || width > 0x7fffffff || height > 0x7fffffff)
    return ic_fail(message, message_size, "IHDR: invalid image size");
  unsigned bits = pixel_bits(color_type, depth);
  if (bits == 0) return ic_fail(message, message_size, "IHDR: invalid bit depth or colour type");
  if (ihdr[10] != 0) return ic_fail(message, message_size, "IHDR: unknown compression method");
  if (ihdr[11] != 0) return ic_fail(message, message_size, "IHDR: unknown filter method");
  if (ihdr[12] > 1) return ic_fail(message, message_size, "IHDR: unknown interlace method");
  if ((unsigned long long)width * height > max_pixels) {
    return ic_fail_over_max_pixels(message, message_size, width, height, max_pixels);
  }

  struct rows r = {{0}, {0}, 0, 0, 0, 0};
  static const unsigned x0[7] = {0, 4, 0, 2, 0, 1, 0}, dx[7] = {8, 8, 4, 4, 2, 2, 1};
  static const unsigned y0[7] = {0, 0, 4, 0, 2, 0, 1}, dy[7] = {8, 8, 8, 4, 4, 2, 2};
  for (int pass = 0; pass < 7; pass++) {
    uint64_t w, h;
    if (ihdr[12] == 0) {
      w = pass == 0 ? width : 0;
      h = pass == 0 ? height : 0;
    } else {
      w = width > x0[pass] ? (width - x0[pass] + dx[pass] - 1) / dx[pass] : 0;
      h = height > y0[pass] ? (height - y0[pass] + dy[pass] - 1) / dy[pass] : 0;
    }
    r.row_bytes[pass] = (w * bits + 7) / 8;
    r.rows[pass] = w == 0 ? 0 : h;
  }
  next_nonempty_pass(&r);
  uint64_t expected = 0; /* the inflated size: every row's filter byte and pixels */
  for (int pass = 0; pass < 7; pass++) expected += r.rows[pass] * (r.row_bytes[pass] + 1);

  /* 64 KiB at a time: zlib copies less of it into its window than of a smaller buffer (8% less
     CPU than 16 KiB), and a larger one gains nothing. */
  enum { out_size = 64 << 10 };
  unsigned char *out = malloc(out_size);
  z_stream z;
  memset(&z, 0, sizeof z);
  if (out == NULL || inflateInit(&z) != Z_OK) {
    free(out);
    return ic_fail(message, message_size, "cannot start zlib");
  }
  int status = 0, ended = 0, seen_plte = 0, idat = 0; /* idat: 0 none yet, 1 in, 2 after */
  size_t offset = 8;
  while (status == 0 && offset + 12 <= size) {
    size_t start = offset;
    uint32_t length = be32(data + offset);
    if (length > size - offset - 12) {
      status = ic_fail(message, message_size, "truncated");
      break;
    }
    const unsigned char *type = data + offset + 4, *body = data + offset + 8;
    offset += 12 + (size_t)length;
    if (is_type(type, "IDAT")) {
      if (idat == 2) {
        status = ic_fail(message, message_size, "IDAT: not consecutive");
        break;
      }
      if (color_type == 3 && !seen_plte) {
        status = ic_fail(message, message_size, "missing PLTE before IDAT");
        break;
      }
      if (idat == 0 && inflates_whole(data, size, start, expected, r)) {
        r.done = 1;
        ended = 1;
      }
      idat = 1;
      if (ended) continue; /* a chunk after the stream's end: libpng skips it too */
      z.next_in = (unsigned char *)body;
      z.avail_in = length;
      /* On while input is left, or while the output was full: zlib may hold more for it. */
      do {
        z.next_out = out;
        z.avail_out = out_size;
        int result = inflate(&z, Z_NO_FLUSH);
        if (result != Z_OK && result != Z_STREAM_END && result != Z_BUF_ERROR) {
          status = ic_fail(message, message_size, "IDAT: %s", z.msg ? z.msg : "zlib error");
          break;
        }
        status = walk(&r, out, out_size - z.avail_out, message, message_size);
        if (status == 0 && result == Z_BUF_ERROR) break; /* the next chunk has the rest */
        if (status == 0 && result == Z_STREAM_END) {
          ended = 1;
          if (z.avail_in > 0) status = ic_fail(message, message_size, "IDAT: extra compressed data");
          break;
        }
      } while (status == 0 && (z.avail_in > 0 || z.avail_out == 0));
    } else {
      if (idat == 1) idat = 2;
      if (is_type(type, "PLTE")) {
        if (length == 0 || length % 3 != 0 || length / 3 > 256 ||
            (color_type == 3 && length / 3 > (1u << depth))) {
          status = ic_fail(message, message_size, "PLTE: invalid length");
        } else if (color_type == 0 || color_type == 4) {
          status = ic_fail(message, message_size, "PLTE: in a greyscale image");
        }
        seen_plte = 1;
      } else if (is_type(type, "IEND")) {
        break;
      } else if (!(type[0] & 0x20) && !is_type(type, "IHDR")) {
        status =
            ic_fail(message, message_size, "%.4s: unknown critical chunk", (const char *)type);
      } else if (is_type(type, "IHDR") && offset != 33) {
        status = ic_fail(message, message_size, "IHDR: more than one");
      }
    }
  }
  inflateEnd(&z);
  free(out);
  if (status != 0) return status;
  if (!idat) return ic_fail(message, message_size, "no IDAT chunk");
  if (!r.done) return ic_fail(message, message_size, "Not enough image data");
  if (!ended) return ic_fail(message, message_size, "IDAT: truncated compressed data");
  return 0;
}
