#ifndef CIMAGING_MESSAGE_H
#define CIMAGING_MESSAGE_H

#include <stddef.h>

/* Writes a decoder's failure into the caller's `message` buffer, printf-style; returns 1, the
   status of a failed check, so that `return ic_fail(...)` reports and fails at once. */
int ic_fail(char *message, size_t message_size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* The status of a check that refused an image for the caller's own limit, not its data. */
#define IC_OVER_MAX_PIXELS 2

/* ic_fail for an image of `width` x `height` over `max_pixels`, in the words every decoder
   uses before it decodes anything; returns IC_OVER_MAX_PIXELS. */
int ic_fail_over_max_pixels(char *message, size_t message_size, unsigned long long width,
                            unsigned long long height, unsigned long long max_pixels);

#endif
