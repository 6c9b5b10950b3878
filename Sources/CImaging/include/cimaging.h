#ifndef CIMAGING_H
#define CIMAGING_H

#include <stddef.h>

/// Decodes a whole PNG one row at a time (one row buffer, whatever the image's size), with
/// libpng's errors caught here: its error handler longjmps, which must not cross Swift frames.
/// A warning counts as a failure. Refuses an image over `max_pixels` before decoding a row.
/// Returns 0 when the image decodes cleanly; otherwise 1 and a message in `message`.
int ic_png_decode_rows(const unsigned char *data, size_t size, unsigned long long max_pixels,
                       char *message, size_t message_size);

/// Checks a PNG's image data without decoding its pixels, for `verify --level full`: the IHDR's
/// fields, a PLTE where the colour type needs one and nowhere else, no unknown critical chunk,
/// the IDAT chunks one run, their zlib stream inflated whole (its Adler-32 checked, 64 KiB at a
/// time, whatever the image's size) to exactly the bytes the header's rows take, and every
/// row's filter type valid. The unfiltered pixels are never made: a filter of the right type
/// cannot fail. `data` must have passed the structure walk (every chunk whole, its CRC right,
/// IHDR first). Refuses an image over `max_pixels`. Returns 0 when the data holds together;
/// otherwise 1 and a message in `message`, worded as libpng words the same failure.
int ic_png_check_data(const unsigned char *data, size_t size, unsigned long long max_pixels,
                      char *message, size_t message_size);

#endif
