#include "cimaging.h"
#include "message.h"

#include <stdio.h>
#include <stdlib.h>
#include <webp/decode.h>
#include <webp/demux.h>

/* The most pixels of a frame decoded when the decode holds the whole frame: 4096 x 4096, 64 MiB
   of ARGB. libwebp's lossless (VP8L) decoder decodes a frame into one ARGB buffer of all its
   pixels (4 bytes each) before it outputs a row: a backward reference may reach about a million
   pixels back, and it keeps the whole image rather than a window. A lossy frame's alpha plane
   is one byte a pixel, held whole too, and when it is compressed losslessly it is a VP8L
   bitstream of its own, decoded the same way: up to 5 bytes a pixel. libwebp has no option that
   bounds this (cropping, the incremental decoder and WebPDecoderOptions all leave it), and a
   header of a few bytes claims it: a 37 KB lossless 10000x10000 file took 430 MB. A larger
   frame of this kind gets what the structure level checks (its chunks by the demuxer, its
   bitstream header by WebPGetFeatures, its size the frame's) and its pixels are not decoded:
   a large lossless image is legitimate, so it is not refused. A lossy frame without alpha is
   decoded whatever its size: libwebp holds rows of it. */
#define IC_WEBP_WHOLE_FRAME_BUDGET (4096ULL * 4096)

static const char *describe(VP8StatusCode status) {
  switch (status) {
  case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
  case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
  case VP8_STATUS_BITSTREAM_ERROR: return "corrupt bitstream";
  case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
  case VP8_STATUS_SUSPENDED: return "truncated bitstream (decoding suspended)";
  case VP8_STATUS_USER_ABORT: return "aborted";
  case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated bitstream (not enough data)";
  default: return "decoder error";
  }
}

static int decode(WebPDemuxer *demux, unsigned long long max_pixels, char *message,
                  size_t message_size) {
  unsigned long long width = WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH);
  unsigned long long height = WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT);
  if (width * height > max_pixels) {
    return ic_fail_over_max_pixels(message, message_size, width, height, max_pixels);
  }
  /* One output of at most 2x2 pixels, reused by every frame: each frame is decoded whole and
     only its bottom right corner is written (see below). libwebp's own memory is rows for a
     lossy frame, and the whole frame for a lossless one or a lossy one's alpha plane, which are
     decoded only within IC_WEBP_WHOLE_FRAME_BUDGET. */
  uint8_t corner[2 * 2 * 4];
  WebPIterator frame;
  if (!WebPDemuxGetFrame(demux, 1, &frame)) {
    return ic_fail(message, message_size, "corrupt: no image in the file");
  }
  int status = 0;
  do {
    /* "image 1" for a still image, "frame 2" in an animation. */
    const char *what = frame.num_frames > 1 ? "frame" : "image";
    WebPDecoderConfig config;
    VP8StatusCode found = WebPInitDecoderConfig(&config)
                              ? WebPGetFeatures(frame.fragment.bytes, frame.fragment.size,
                                                &config.input)
                              : VP8_STATUS_INVALID_PARAM;
    if (found == VP8_STATUS_OK &&
        (config.input.width != frame.width || config.input.height != frame.height)) {
      status = ic_fail(message, message_size, "%s %d: its bitstream is %dx%d, its frame %dx%d",
                       what, frame.frame_num, config.input.width, config.input.height,
                       frame.width, frame.height);
      break;
    }
    int holds_whole_frame = config.input.format != 1 || config.input.has_alpha;
    if (found == VP8_STATUS_OK && holds_whole_frame &&
        (unsigned long long)frame.width * frame.height > IC_WEBP_WHOLE_FRAME_BUDGET) {
      continue;
    }
    if (found == VP8_STATUS_OK) {
      /* Cropped to the frame's bottom right corner: libwebp still reads every macroblock's
         tokens (VP8) or every pixel's codes (VP8L) and the alpha plane down to the crop's
         bottom, the last row, and so meets what is cut short or corrupt anywhere; it
         reconstructs every row but converts only the corner to RGBA, not the frame. The corner
         starts on an even column and row: libwebp rounds a lossy frame's crop down to them, and
         a crop of the last row alone would then end a row short, its alpha's last row unread.
         The loop filter, which smooths pixels and can find nothing wrong, is skipped (14% less
         CPU). */
      config.options.use_cropping = 1;
      config.options.crop_left = (frame.width - 1) & ~1;
      config.options.crop_top = (frame.height - 1) & ~1;
      config.options.crop_width = frame.width - config.options.crop_left;
      config.options.crop_height = frame.height - config.options.crop_top;
      config.options.bypass_filtering = 1;
      config.output.colorspace = MODE_RGBA;
      config.output.is_external_memory = 1;
      config.output.u.RGBA.rgba = corner;
      config.output.u.RGBA.stride = 2 * 4;
      config.output.u.RGBA.size = sizeof corner;
      found = WebPDecode(frame.fragment.bytes, frame.fragment.size, &config);
      WebPFreeDecBuffer(&config.output);
    }
    if (found != VP8_STATUS_OK) {
      status = ic_fail(message, message_size, "%s %d: %s", what, frame.frame_num,
                       describe(found));
      break;
    }
  } while (WebPDemuxNextFrame(&frame));
  WebPDemuxReleaseIterator(&frame);
  return status;
}

int ic_webp_decode_frames(const unsigned char *data, size_t size, unsigned long long max_pixels,
                          char *message, size_t message_size) {
  WebPData bytes = {data, size};
  WebPDemuxState state;
  /* Partial, so that a container cut short is told from one that does not hold together. */
  WebPDemuxer *demux = WebPDemuxPartial(&bytes, &state);
  if (demux == NULL || state != WEBP_DEMUX_DONE) {
    WebPDemuxDelete(demux);
    if (state != WEBP_DEMUX_PARSE_ERROR) {
      return ic_fail(message, message_size, "truncated: the container ends early");
    }
    return ic_fail(message, message_size,
                   "corrupt: the container or a frame header does not hold together "
                   "(libwebp's demuxer)");
  }
  int status = decode(demux, max_pixels, message, message_size);
  WebPDemuxDelete(demux);
  return status;
}

int ic_webp_version(void) { return WebPGetDecoderVersion(); }
