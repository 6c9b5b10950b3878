#include "cimaging.h"
#include "message.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reader {
  const unsigned char *data;
  size_t size;
  size_t offset;
  char *message;
  size_t message_size;
  jmp_buf jump;
};

static void fail(png_structp png, const char *text) {
  struct reader *reader = png_get_error_ptr(png);
  snprintf(reader->message, reader->message_size, "%s", text);
  longjmp(reader->jump, 1);
}

/* libpng's warnings (a CRC error in an ancillary chunk, extra data...) fail validation too. */
static void warn(png_structp png, const char *text) { fail(png, text); }

static void read_bytes(png_structp png, png_bytep out, size_t length) {
  struct reader *reader = png_get_io_ptr(png);
  if (length > reader->size - reader->offset) {
    png_error(png, "premature end of data");
  }
  memcpy(out, reader->data + reader->offset, length);
  reader->offset += length;
}

int ic_png_decode_rows(const unsigned char *data, size_t size, unsigned long long max_pixels,
                       char *message, size_t message_size) {
  struct reader reader = {data, size, 0, message, message_size};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, fail, warn);
  if (png == NULL) {
    snprintf(message, message_size, "cannot start the decoder");
    return 1;
  }
  png_infop info = png_create_info_struct(png);
  /* Volatile: read again after a longjmp back here. */
  png_bytep volatile row = NULL;
  if (info == NULL || setjmp(reader.jump)) {
    if (info == NULL) snprintf(message, message_size, "cannot start the decoder");
    free(row);
    png_destroy_read_struct(&png, info ? &info : NULL, NULL);
    return 1;
  }
  png_set_read_fn(png, &reader, read_bytes);
  /* libpng's own limits would otherwise refuse large images with a message of its own. */
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
  png_read_info(png, info);
  unsigned long long width = png_get_image_width(png, info);
  unsigned long long height = png_get_image_height(png, info);
  if (width * height > max_pixels) {
    png_destroy_read_struct(&png, &info, NULL);
    return ic_fail_over_max_pixels(message, message_size, width, height, max_pixels);
  }
  int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  row = malloc(png_get_rowbytes(png, info));
  if (row == NULL) png_error(png, "out of memory for one row");
  for (int pass = 0; pass < passes; pass++) {
    for (png_uint_32 y = 0; y < height; y++) png_read_row(png, row, NULL);
  }
  png_read_end(png, NULL);
  free(row);
  row = NULL;
  png_destroy_read_struct(&png, &info, NULL);
  return 0;
}
