#include <stddef.h>
#include <turbojpeg.h>
#include <stdio.h>
#include <jconfig.h>

// The libjpeg-turbo release the build was compiled against (TurboJPEG has no run-time call).
static inline const char *ic_jpeg_turbo_version(void) {
#ifdef LIBJPEG_TURBO_VERSION
#define IC_STRINGIFY_(x) #x
#define IC_STRINGIFY(x) IC_STRINGIFY_(x)
  return IC_STRINGIFY(LIBJPEG_TURBO_VERSION);
#else
  return "unknown";
#endif
}
