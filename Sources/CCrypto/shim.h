// OpenSSL's libcrypto (already loaded for libcurl's TLS), for the one digest the cache format
// needs: MD5 of a cache key. MD5() is marked deprecated in OpenSSL 3 in favour of EVP, whose
// per-call algorithm fetch costs more than the digest of a short key.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/md5.h>

static inline void ic_md5(const unsigned char *bytes, size_t count, unsigned char *digest) {
  MD5(bytes, count, digest);
}
