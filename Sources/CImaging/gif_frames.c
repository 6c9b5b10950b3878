#include "cimaging.h"
#include "message.h"

#include <gif_lib.h>
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

static int decode(GifFileType *gif, unsigned long long max_pixels, GifPixelType **row,
                  char *message, size_t message_size) {
  unsigned long long screen_width = gif->SWidth > 0 ? (unsigned long long)gif->SWidth : 0;
  unsigned long long screen_height = gif->SHeight > 0 ? (unsigned long long)gif->SHeight : 0;
  if (screen_width == 0 || screen_height == 0) {
    return ic_fail(message, message_size, "image has zero pixels (%llux%llu)", screen_width,
                   screen_height);
  }
  if (screen_width * screen_height > max_pixels) {
    return ic_fail(message, message_size,
                   "%llux%llu is %llu pixels, over the limit of %llu (maxPixels); not decoded",
                   screen_width, screen_height, screen_width * screen_height, max_pixels);
  }
  /* One row of the logical screen, reused by every row of every frame: a frame must lie inside
     the screen (checked below, as giflib does not), so no row is wider. giflib's own memory is
     its LZW tables and, kept for each frame read, its descriptor and colour table: in
     proportion to the data, not to what a header claims. */
  *row = malloc(screen_width);
  if (*row == NULL) return ic_fail(message, message_size, "out of memory for one row");
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
      /* Interlaced rows come in pass order; decoding them in that order decodes them all. */
      for (int y = 0; y < frame->Height; y++) {
        if (DGifGetLine(gif, *row, frame->Width) == GIF_ERROR) {
          return failed(gif, where, message, message_size);
        }
      }
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
  GifPixelType *row = NULL;
  int status = decode(gif, max_pixels, &row, message, message_size);
  free(row);
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
