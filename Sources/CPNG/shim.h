#include <png.h>
#include <zlib.h>

// Function-like macros do not reach Swift; these name the values we use.
static const png_uint_32 ic_png_format_rgba = PNG_FORMAT_RGBA;
static const png_uint_32 ic_png_image_version = PNG_IMAGE_VERSION;
static const png_uint_32 ic_png_format_bgra = PNG_FORMAT_BGRA;
static const png_uint_32 ic_png_format_bgr = PNG_FORMAT_BGR;
