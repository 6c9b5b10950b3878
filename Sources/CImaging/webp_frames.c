#include "cimaging.h"
#include "message.h"

#include <stdio.h>
#include <stdlib.h>
#include <webp/decode.h>
#include <webp/demux.h>

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

/* An eighth of a side, rounded up: the scaled output's size. */
static int eighth(int side) { return (side + 7) / 8; }

static int decode(WebPDemuxer *demux, unsigned long long max_pixels, uint8_t **pixels,
                  char *message, size_t message_size) {
  unsigned long long width = WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH);
  unsigned long long height = WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT);
  if (width * height > max_pixels) {
    return ic_fail(message, message_size,
                   "%llux%llu is %llu pixels, over the limit of %llu (maxPixels); not decoded",
                   width, height, width * height, max_pixels);
  }
  /* One output of an eighth of the canvas on each side, reused by every frame (the demuxer has
     checked that each lies inside the canvas). libwebp's own memory is rows and, for a lossy
     frame with alpha, its alpha plane (a byte a pixel). */
  size_t stride = (size_t)eighth((int)width) * 4;
  size_t size = stride * (size_t)eighth((int)height);
  *pixels = malloc(size);
  if (*pixels == NULL) return ic_fail(message, message_size, "out of memory for the output");
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
    if (found == VP8_STATUS_OK) {
      /* libwebp scales after decoding, a row at a time: every macroblock (VP8) or pixel (VP8L)
         and the alpha data are decoded, and the output takes 1/64 of the full size. */
      config.options.use_scaling = 1;
      config.options.scaled_width = eighth(frame.width);
      config.options.scaled_height = eighth(frame.height);
      config.output.colorspace = MODE_RGBA;
      config.output.is_external_memory = 1;
      config.output.u.RGBA.rgba = *pixels;
      config.output.u.RGBA.stride = (int)stride;
      config.output.u.RGBA.size = size;
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
  uint8_t *pixels = NULL;
  int status = decode(demux, max_pixels, &pixels, message, message_size);
  free(pixels);
  WebPDemuxDelete(demux);
  return status;
}

int ic_webp_version(void) { return WebPGetDecoderVersion(); }
