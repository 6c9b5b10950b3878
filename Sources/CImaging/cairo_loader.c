#include "cimaging_cairo.h"

#include <dlfcn.h>
#include <pthread.h>

#define IC_CAIRO_POINTER(type, name, parameters, arguments) static type(*name##_pointer) parameters;
IC_CAIRO_FUNCTIONS(IC_CAIRO_POINTER)
#undef IC_CAIRO_POINTER

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded = 0;

static void load(void) {
  void *library = dlopen("libcairo.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!library) return;
  int complete = 1;
#define IC_CAIRO_RESOLVE(type, name, parameters, arguments) \
  name##_pointer = (type(*) parameters)dlsym(library, #name); \
  if (!name##_pointer) complete = 0;
  IC_CAIRO_FUNCTIONS(IC_CAIRO_RESOLVE)
#undef IC_CAIRO_RESOLVE
  loaded = complete;
}

int ic_cairo_load(void) {
  pthread_once(&once, load);
  return loaded;
}

// Callers check ic_cairo_load() first (the renderer does, once per variant).
#define IC_CAIRO_DEFINE(type, name, parameters, arguments) \
  type ic_##name parameters { return name##_pointer arguments; }
IC_CAIRO_FUNCTIONS(IC_CAIRO_DEFINE)
#undef IC_CAIRO_DEFINE
