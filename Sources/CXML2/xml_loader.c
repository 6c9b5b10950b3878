#include "cxml2.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define IC_XML_POINTER(type, name, parameters, arguments) static type(*name##_pointer) parameters;
IC_XML_FUNCTIONS(IC_XML_POINTER)
#undef IC_XML_POINTER

typedef void (*generic_error_function)(void *context, const char *message, ...);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded = 0;
static char version[32];

static void ignore_error(void *context, const char *message, ...) {
  (void)context;
  (void)message;
}

static void load(void) {
  void *library = dlopen("libxml2.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!library) return;
  void (*init_parser)(void) = (void (*)(void))dlsym(library, "xmlInitParser");
  void (*set_generic_error)(void *, generic_error_function) =
      (void (*)(void *, generic_error_function))dlsym(library, "xmlSetGenericErrorFunc");
  // A const char * holding "20914" for 2.9.14.
  const char *const *parser_version = (const char *const *)dlsym(library, "xmlParserVersion");
  int complete = init_parser && set_generic_error && parser_version && *parser_version;
#define IC_XML_RESOLVE(type, name, parameters, arguments) \
  name##_pointer = (type(*) parameters)dlsym(library, #name); \
  if (!name##_pointer) complete = 0;
  IC_XML_FUNCTIONS(IC_XML_RESOLVE)
#undef IC_XML_RESOLVE
  if (!complete) return;
  int number = 0;
  sscanf(*parser_version, "%d", &number);
  snprintf(version, sizeof version, "%d.%d.%d", number / 10000, number / 100 % 100, number % 100);
  init_parser();
  set_generic_error(NULL, ignore_error);
  loaded = 1;
}

int ic_xml_load(void) {
  pthread_once(&once, load);
  return loaded;
}

const char *ic_xml_version(void) { return ic_xml_load() ? version : NULL; }

// Callers check ic_xml_load() first (a sitemap's document does, before its reader is made).
#define IC_XML_DEFINE(type, name, parameters, arguments) \
  type ic_##name parameters { return name##_pointer arguments; }
IC_XML_FUNCTIONS(IC_XML_DEFINE)
#undef IC_XML_DEFINE
