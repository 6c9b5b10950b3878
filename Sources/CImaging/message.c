#include "message.h"

#include <stdarg.h>
#include <stdio.h>

int ic_fail(char *message, size_t message_size, const char *format, ...) {
  va_list arguments;
  va_start(arguments, format);
  vsnprintf(message, message_size, format, arguments);
  va_end(arguments);
  return 1;
}

int ic_fail_over_max_pixels(char *message, size_t message_size, unsigned long long width,
                            unsigned long long height, unsigned long long max_pixels) {
  ic_fail(message, message_size,
          "%llux%llu is %llu pixels, over the limit of %llu (maxPixels); not decoded", width,
          height, width * height, max_pixels);
  return IC_OVER_MAX_PIXELS;
}
