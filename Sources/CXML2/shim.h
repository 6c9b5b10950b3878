// libxml2's streaming reader (xmlTextReader): sitemaps are read node by node, never as a tree.
#include <libxml/xmlversion.h>
// Debian builds libxml2 with ICU, whose headers clash with Foundation's own copy of ICU; no ICU
// type is used here (sitemaps are UTF-8), so its headers are left out.
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/xmlreader.h>

static void ic_xml_ignore_error(void *context, const char *message, ...) {
  (void)context;
  (void)message;
}

/// libxml2 prints errors that no reader's handler takes to stderr; these are silenced (each
/// reader reports its own errors to its caller). The handler is variadic: Swift cannot be one.
static inline void ic_xml_silence_generic_errors(void) {
  xmlSetGenericErrorFunc(NULL, ic_xml_ignore_error);
}
