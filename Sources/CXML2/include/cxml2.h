#ifndef CXML2_H
#define CXML2_H

// libxml2's streaming reader (xmlTextReader): sitemaps are read node by node, never as a tree.
// libxml2 is loaded with dlopen(3) the first time a sitemap is read, not linked: with it the
// loader maps libxml2 and, through Debian's build of it, ICU (libicuuc and its 30 MB of data) at
// every start, though only sitemaps need it. Its headers are not included either (they live in
// /usr/include/libxml2, which only pkg-config names, and SwiftPM links whatever pkg-config
// names): what is used of libxml2.so.2's ABI is declared here, the names and values as in
// libxml2's own headers (xmlreader.h, parser.h, xmlIO.h, tree.h), unchanged since 2.9.
// Each ic_xml* function calls the libxml2 function of the same name without the prefix.

typedef unsigned char xmlChar;
typedef struct _xmlTextReader *xmlTextReaderPtr;
typedef struct _xmlNode *xmlNodePtr;
typedef void *xmlTextReaderLocatorPtr;

typedef enum {
  XML_PARSER_SEVERITY_VALIDITY_WARNING = 1,
  XML_PARSER_SEVERITY_VALIDITY_ERROR = 2,
  XML_PARSER_SEVERITY_WARNING = 3,
  XML_PARSER_SEVERITY_ERROR = 4
} xmlParserSeverities;

/// The parser options used (parser.h's xmlParserOption).
typedef enum {
  XML_PARSE_NOERROR = 1 << 5,
  XML_PARSE_NOWARNING = 1 << 6,
  XML_PARSE_NONET = 1 << 11,
  XML_PARSE_COMPACT = 1 << 16,
  XML_PARSE_BIG_LINES = 1 << 22
} xmlParserOption;

typedef enum {
  XML_READER_TYPE_NONE = 0,
  XML_READER_TYPE_ELEMENT = 1,
  XML_READER_TYPE_ATTRIBUTE = 2,
  XML_READER_TYPE_TEXT = 3,
  XML_READER_TYPE_CDATA = 4,
  XML_READER_TYPE_ENTITY_REFERENCE = 5,
  XML_READER_TYPE_ENTITY = 6,
  XML_READER_TYPE_PROCESSING_INSTRUCTION = 7,
  XML_READER_TYPE_COMMENT = 8,
  XML_READER_TYPE_DOCUMENT = 9,
  XML_READER_TYPE_DOCUMENT_TYPE = 10,
  XML_READER_TYPE_DOCUMENT_FRAGMENT = 11,
  XML_READER_TYPE_NOTATION = 12,
  XML_READER_TYPE_WHITESPACE = 13,
  XML_READER_TYPE_SIGNIFICANT_WHITESPACE = 14,
  XML_READER_TYPE_END_ELEMENT = 15,
  XML_READER_TYPE_END_ENTITY = 16,
  XML_READER_TYPE_XML_DECLARATION = 17
} xmlReaderTypes;

typedef int (*xmlInputReadCallback)(void *context, char *buffer, int len);
typedef int (*xmlInputCloseCallback)(void *context);
typedef void (*xmlTextReaderErrorFunc)(
    void *arg, const char *msg, xmlParserSeverities severity, xmlTextReaderLocatorPtr locator);

/// Loads libxml2.so.2 and its functions once, initialises its parser and silences the errors
/// that no reader's handler takes (libxml2 would print them on stderr; each reader reports its
/// own to its caller); 1 when they are all there, 0 otherwise.
int ic_xml_load(void);

/// The version of the libxml2 loaded ("2.9.14"), or NULL when it cannot be loaded.
const char *ic_xml_version(void);

#define IC_XML_FUNCTIONS(X) \
  X(xmlTextReaderPtr, xmlReaderForIO, (xmlInputReadCallback ioread, xmlInputCloseCallback ioclose, void *ioctx, const char *URL, const char *encoding, int options), (ioread, ioclose, ioctx, URL, encoding, options)) \
  X(void, xmlTextReaderSetErrorHandler, (xmlTextReaderPtr reader, xmlTextReaderErrorFunc f, void *arg), (reader, f, arg)) \
  X(void, xmlFreeTextReader, (xmlTextReaderPtr reader), (reader)) \
  X(int, xmlTextReaderRead, (xmlTextReaderPtr reader), (reader)) \
  X(xmlNodePtr, xmlTextReaderCurrentNode, (xmlTextReaderPtr reader), (reader)) \
  X(int, xmlTextReaderGetParserLineNumber, (xmlTextReaderPtr reader), (reader)) \
  X(int, xmlTextReaderNodeType, (xmlTextReaderPtr reader), (reader)) \
  X(const xmlChar *, xmlTextReaderConstLocalName, (xmlTextReaderPtr reader), (reader)) \
  X(const xmlChar *, xmlTextReaderConstValue, (xmlTextReaderPtr reader), (reader)) \
  X(int, xmlTextReaderIsEmptyElement, (xmlTextReaderPtr reader), (reader)) \
  X(int, xmlTextReaderLocatorLineNumber, (xmlTextReaderLocatorPtr locator), (locator)) \
  X(long, xmlGetLineNo, (const struct _xmlNode *node), (node))

#define IC_XML_DECLARE(type, name, parameters, arguments) type ic_##name parameters;
IC_XML_FUNCTIONS(IC_XML_DECLARE)
#undef IC_XML_DECLARE

#endif
