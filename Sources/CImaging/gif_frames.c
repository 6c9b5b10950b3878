#include "cimaging.h"
#include "message.h"

#include <gif_lib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct source {
  const unsigned char *data;
  size_t size;
  size_t offset;
};

/* giflib's read callback, over the bytes in memory: a short read is the end of the data. */
static int read_bytes(GifFileType *gif, GifByteType *out, int length) {
  struct source *source = gif->UserData;
  size_t left = source->size - source->offset;
  size_t count = length < 0 ? 0 : (size_t)length < left ? (size_t)length : left;
  memcpy(out, source->data + source->offset, count);
  source->offset += count;
  return (int)count;
}

/* giflib's error, and where it met it (`where`: "frame 2", "an extension after frame 1"):
   running out of bytes is truncation, the rest in giflib's words. */
static int failed(GifFileType *gif, const char *where, char *message, size_t message_size) {
  if (gif->Error == D_GIF_ERR_READ_FAILED) {
    return ic_fail(message, message_size, "truncated: the data ends in %s", where);
  }
  const char *text = GifErrorString(gif->Error);
  return ic_fail(message, message_size, "%s: %s", where, text ? text : "unknown error");
}

/* A frame's LZW codes followed to its last pixel without writing one: what a decode finds in
   the data (a code the table does not hold, the end code or the end of the data before the
   last pixel) at a cost per code, not per pixel. Each table entry keeps only the length of the
   string it stands for. The code width grows as giflib grows it (after the code that takes
   its running code past the width's last value), so what giflib reads, this reads; it refuses
   a code past the table's end, which giflib turns into pixels of another string (browsers
   refuse it too). Codes past the last pixel are not read, as giflib does not read them. */
struct lzw {
  int clear, end, min_bits, bits, running, next, previous;
  uint32_t accumulator;
  int held;
  unsigned long long pixels, total;
  uint16_t length[4096];
};

static void lzw_reset(struct lzw *lzw) {
  lzw->bits = lzw->min_bits + 1;
  lzw->running = lzw->end + 1;
  lzw->next = lzw->clear + 2;
  lzw->previous = -1;
}

/* 1 when the frame's pixels are all decoded, -1 and a message on bad data, 0 for more. */
static int lzw_feed(struct lzw *lzw, const GifByteType *bytes, int count, int frame,
                    char *message, size_t message_size) {
  for (int index = 0; index < count; index++) {
    lzw->accumulator |= (uint32_t)bytes[index] << lzw->held;
    lzw->held += 8;
    while (lzw->held >= lzw->bits) {
      int code = (int)(lzw->accumulator & ((1u << lzw->bits) - 1));
      lzw->accumulator >>= lzw->bits;
      lzw->held -= lzw->bits;
      if (lzw->running < 4097 && ++lzw->running > (1 << lzw->bits) && lzw->bits < 12) {
        lzw->bits += 1;
      }
      if (code == lzw->clear) {
        lzw_reset(lzw);
        continue;
      }
      if (code == lzw->end) {
        ic_fail(message, message_size,
                "frame %d: corrupt LZW data: the end code after %llu of its %llu pixels", frame,
                lzw->pixels, lzw->total);
        return -1;
      }
      int length;
      if (code < lzw->clear || (code > lzw->end && code < lzw->next)) {
        length = lzw->length[code];
      } else if (code == lzw->next && lzw->previous >= 0 && lzw->next < 4096) {
        length = lzw->length[lzw->previous] + 1;
      } else {
        ic_fail(message, message_size,
                "frame %d: corrupt LZW data: code %d where the table ends at %d", frame, code,
                lzw->next - 1);
        return -1;
      }
      if (lzw->previous >= 0 && lzw->next < 4096) {
        lzw->length[lzw->next] = (uint16_t)(lzw->length[lzw->previous] + 1);
        lzw->next += 1;
      }
      lzw->previous = code;
      lzw->pixels += (unsigned long long)length;
      if (lzw->pixels >= lzw->total) return 1;
    }
  }
  return 0;
}

/* Follows frame `frame`'s LZW data (its descriptor just read) to its last pixel, then skips
   the rest of its sub-blocks as giflib does. */
static int follow_frame(GifFileType *gif, int frame, const char *where, char *message,
                        size_t message_size) {
  struct lzw lzw; /* 8 KiB: the table of lengths */
  int min_bits;
  GifByteType *block;
  if (DGifGetCode(gif, &min_bits, &block) == GIF_ERROR) {
    return failed(gif, where, message, message_size);
  }
  lzw.min_bits = min_bits;
  lzw.clear = 1 << min_bits;
  lzw.end = lzw.clear + 1;
  for (int code = 0; code < lzw.clear; code++) lzw.length[code] = 1;
  lzw_reset(&lzw);
  lzw.accumulator = 0;
  lzw.held = 0;
  lzw.pixels = 0;
  lzw.total = (unsigned long long)gif->Image.Width * (unsigned long long)gif->Image.Height;
  int state = 0;
  while (block != NULL) {
    if (state == 0) {
      state = lzw_feed(&lzw, block + 1, block[0], frame, message, message_size);
      if (state < 0) return 1;
    }
    if (DGifGetCodeNext(gif, &block) == GIF_ERROR) {
      return failed(gif, where, message, message_size);
    }
  }
  if (state == 0) {
    return ic_fail(message, message_size,
                   "frame %d: corrupt LZW data: the data ends after %llu of its %llu pixels",
                   frame, lzw.pixels, lzw.total);
  }
  return 0;
}

static int decode(GifFileType *gif, unsigned long long max_pixels, char *message,
                  size_t message_size) {
  unsigned long long screen_width = gif->SWidth > 0 ? (unsigned long long)gif->SWidth : 0;
  unsigned long long screen_height = gif->SHeight > 0 ? (unsigned long long)gif->SHeight : 0;
  if (screen_width == 0 || screen_height == 0) {
    return ic_fail(message, message_size, "image has zero pixels (%llux%llu)", screen_width,
                   screen_height);
  }
  if (screen_width * screen_height > max_pixels) {
    return ic_fail_over_max_pixels(message, message_size, screen_width, screen_height,
                                   max_pixels);
  }
  /* A frame must lie inside the screen (checked below, as giflib does not). giflib keeps each
     frame's descriptor and colour table it reads (SavedImages, about 4 times the bytes of a
     1x1 frame): they are freed after each frame, so that its memory is one frame's, not in
     proportion to the number of frames. */
  int frames = 0;
  char where[48];
  GifRecordType type;
  do {
    if (DGifGetRecordType(gif, &type) == GIF_ERROR) {
      /* A GIF must end with its trailer (0x3B). Browsers show one that lacks only that byte, and
         so may ImageIO; we do not, as the structure walk does not: in a cache file, data that
         stops at a frame's end is most likely a download cut short there, whose later frames
         are lost, and a refetch costs one download. */
      if (gif->Error == D_GIF_ERR_READ_FAILED) {
        return ic_fail(message, message_size, "truncated: no trailer after frame %d", frames);
      }
      snprintf(where, sizeof where, "the block after frame %d", frames);
      return failed(gif, where, message, message_size);
    }
    switch (type) {
    case IMAGE_DESC_RECORD_TYPE: {
      frames += 1;
      snprintf(where, sizeof where, "frame %d", frames);
      if (DGifGetImageDesc(gif) == GIF_ERROR) return failed(gif, where, message, message_size);
      GifImageDesc *frame = &gif->Image;
      if (frame->Left < 0 || frame->Top < 0 || frame->Width <= 0 || frame->Height <= 0 ||
          (unsigned long long)frame->Left + (unsigned long long)frame->Width > screen_width ||
          (unsigned long long)frame->Top + (unsigned long long)frame->Height > screen_height) {
        return ic_fail(message, message_size,
                       "frame %d: %dx%d at (%d, %d) is outside the %llux%llu screen", frames,
                       frame->Width, frame->Height, frame->Left, frame->Top, screen_width,
                       screen_height);
      }
      if (follow_frame(gif, frames, where, message, message_size) != 0) return 1;
      /* GifFreeSavedImages leaves ImageCount, the index the next descriptor is kept at. */
      GifFreeSavedImages(gif);
      gif->ImageCount = 0;
      break;
    }
    case EXTENSION_RECORD_TYPE: {
      int code;
      GifByteType *block;
      snprintf(where, sizeof where, "an extension after frame %d", frames);
      if (DGifGetExtension(gif, &code, &block) == GIF_ERROR) {
        return failed(gif, where, message, message_size);
      }
      while (block != NULL) {
        if (DGifGetExtensionNext(gif, &block) == GIF_ERROR) {
          return failed(gif, where, message, message_size);
        }
      }
      break;
    }
    case TERMINATE_RECORD_TYPE:
      break;
    default:
      return ic_fail(message, message_size, "corrupt: unknown block after frame %d", frames);
    }
  } while (type != TERMINATE_RECORD_TYPE);
  if (frames == 0) return ic_fail(message, message_size, "corrupt: no image in the file");
  return 0;
}

int ic_gif_decode_frames(const unsigned char *data, size_t size, unsigned long long max_pixels,
                         char *message, size_t message_size) {
  struct source source = {data, size, 0};
  int error = 0;
  GifFileType *gif = DGifOpen(&source, read_bytes, &error);
  if (gif == NULL) {
    if (error == D_GIF_ERR_READ_FAILED) {
      return ic_fail(message, message_size, "truncated: the data ends in the screen descriptor");
    }
    const char *text = GifErrorString(error);
    return ic_fail(message, message_size, "screen descriptor: %s", text ? text : "error");
  }
  int status = decode(gif, max_pixels, message, message_size);
  DGifCloseFile(gif, &error);
  return status;
}

const char *ic_gif_version(void) {
#define IC_TEXT(x) #x
#define IC_VERSION(major, minor, release) IC_TEXT(major) "." IC_TEXT(minor) "." IC_TEXT(release)
  return IC_VERSION(GIFLIB_MAJOR, GIFLIB_MINOR, GIFLIB_RELEASE);
#undef IC_VERSION
#undef IC_TEXT
}
