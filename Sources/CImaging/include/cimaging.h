#ifndef CIMAGING_H
#define CIMAGING_H

#include <stddef.h>

/// Decodes a whole PNG one row at a time (one row buffer, whatever the image's size), with
/// libpng's errors caught here: its error handler longjmps, which must not cross Swift frames.
/// A warning counts as a failure. Refuses an image over `max_pixels` before decoding a row.
/// Returns 0 when the image decodes cleanly; otherwise 1 and a message in `message`.
int ic_png_decode_rows(const unsigned char *data, size_t size, unsigned long long max_pixels,
                       char *message, size_t message_size);

#endif
