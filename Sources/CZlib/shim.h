// zlib's gz* file API: reads gzip-compressed and plain files alike, decompressing as it goes.
#include <zlib.h>
