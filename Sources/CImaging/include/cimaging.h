#ifndef CIMAGING_H
#define CIMAGING_H

#include <stddef.h>

/* Every check below returns 2 (IC_OVER_MAX_PIXELS), not 1, when it refuses an image only for
   being over its `max_pixels`: the caller's limit, not a fault of the data. */

/// Decodes a whole PNG one row at a time (one row buffer, whatever the image's size), with
/// libpng's errors caught here: its error handler longjmps, which must not cross Swift frames.
/// A warning counts as a failure. Refuses an image over `max_pixels` before decoding a row.
/// Returns 0 when the image decodes cleanly; otherwise 1 and a message in `message` (2 for an
/// image over `max_pixels`, as every check here).
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

/// Checks every frame of a GIF from memory as a decode would: giflib walks the blocks (screen,
/// extensions, image descriptors, the trailer required) and each frame's LZW codes are followed
/// to its last pixel, a length kept per table entry and no pixel written. Refuses a screen over
/// `max_pixels` before reading a frame, a frame outside the screen (giflib does not), a code
/// past the table's end, and an end code or an end of data before the last pixel. Returns 0
/// when every frame holds; otherwise 1 and a message in `message` ("truncated: ...", "frame 2:
/// corrupt LZW data: ...", "frame 2: <giflib's words>").
int ic_gif_decode_frames(const unsigned char *data, size_t size, unsigned long long max_pixels,
                         char *message, size_t message_size);

/// giflib's version, as built against ("5.2.1").
const char *ic_gif_version(void);

/// Decodes every frame of a WebP with libwebp (lossy, lossless, with alpha, animated): the
/// container parsed whole by libwebp's demuxer, each frame's bitstream decoded in full (every
/// macroblock's tokens or every pixel's codes, the alpha plane, each row reconstructed) with
/// the output cropped to its bottom right corner (at most 2x2 pixels, from an even column and
/// row as libwebp crops a lossy frame), so that only the corner is converted to RGBA. A frame
/// whose decode holds all its pixels (lossless, or lossy with alpha) is decoded only up to
/// 4096 x 4096 pixels; a larger one is checked to its bitstream header, its pixels not decoded.
/// Refuses a canvas over `max_pixels` before decoding.
/// Returns 0 when every frame decodes; otherwise 1 and a message in `message`.
int ic_webp_decode_frames(const unsigned char *data, size_t size, unsigned long long max_pixels,
                          char *message, size_t message_size);

/// libwebp's decoder version as loaded, as 0xMMmmrr (major, minor, revision).
int ic_webp_version(void);

#endif
