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
