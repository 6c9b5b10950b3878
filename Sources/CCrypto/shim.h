// OpenSSL's libcrypto (already loaded for libcurl's TLS), for the one digest the cache format
// needs: MD5 of a cache key. MD5() is marked deprecated in OpenSSL 3 in favour of EVP, whose
// per-call algorithm fetch costs more than the digest of a short key.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/md5.h>

static inline void ic_md5(const unsigned char *bytes, size_t count, unsigned char *digest) {
  MD5(bytes, count, digest);
}

#include <openssl/crypto.h>

// Initialises libcrypto without its exit-time cleanup: exit() from one thread would otherwise
// free OpenSSL's tables while other threads (a key's MD5, libcurl's TLS) still use them. Only
// the first initialisation decides, so this is called before anything else uses OpenSSL.
static inline int ic_crypto_init_without_exit_cleanup(void) {
  return OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}
