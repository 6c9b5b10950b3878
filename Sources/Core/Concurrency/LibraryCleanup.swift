import CCrypto

/// What the shared libraries do when the process ends.
package enum LibraryCleanup {
  /// Keeps OpenSSL from freeing its tables in an `atexit` handler. A run that ends early (exit 4
  /// when a thread cannot start, exit 2 on a bad line) calls `exit` while other threads may
  /// still hash keys or speak TLS: the handler freed what they used, and the process died of
  /// SIGSEGV in libcrypto instead of exiting with its code (seen under `ulimit -v`). The kernel
  /// frees the memory anyway. Call it first, before anything uses OpenSSL: only OpenSSL's first
  /// initialisation decides.
  package static func skipOpenSSLCleanupAtExit() {
    _ = ic_crypto_init_without_exit_cleanup()
  }
}
