// libcurl, with typed wrappers for its variadic setopt and getinfo calls, which Swift cannot
// call directly. Nothing but Prefetcher's Downloader imports this module.
#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

static inline CURLcode ic_easy_setopt_long(CURL *handle, CURLoption option, long value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ic_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ic_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ic_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ic_easy_setopt_slist(CURL *handle, CURLoption option,
                                            struct curl_slist *value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ic_easy_setopt_write_function(CURL *handle, CURLoption option,
                                                     curl_write_callback callback) {
  return curl_easy_setopt(handle, option, callback);
}

static inline CURLcode ic_easy_setopt_xferinfo_function(CURL *handle,
                                                       curl_xferinfo_callback callback) {
  return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
}

static inline CURLcode ic_easy_setopt_prereq_function(CURL *handle,
                                                      curl_prereq_callback callback) {
  return curl_easy_setopt(handle, CURLOPT_PREREQFUNCTION, callback);
}

static inline CURLcode ic_easy_setopt_debug_function(CURL *handle,
                                                     curl_debug_callback callback) {
  return curl_easy_setopt(handle, CURLOPT_DEBUGFUNCTION, callback);
}

static inline CURLcode ic_easy_setopt_opensocket_function(CURL *handle,
                                                          curl_opensocket_callback callback) {
  return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, callback);
}

/// The IP address of a socket libcurl is about to open, copied into `bytes` (room for 16), in
/// network order: returns 4 or 16, or 0 for a family that is neither IPv4 nor IPv6.
static inline int ic_sockaddr_bytes(const struct curl_sockaddr *address, unsigned char *bytes) {
  if (address->family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)&address->addr;
    memcpy(bytes, &in->sin_addr, 4);
    return 4;
  }
  if (address->family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&address->addr;
    memcpy(bytes, &in6->sin6_addr, 16);
    return 16;
  }
  return 0;
}

/// Opens the socket libcurl asked for, as libcurl does when no callback is set.
static inline curl_socket_t ic_open_socket(const struct curl_sockaddr *address) {
  return socket(address->family, address->socktype, address->protocol);
}

static const curl_socket_t ic_socket_bad = CURL_SOCKET_BAD;
static const int ic_prereq_ok = CURL_PREREQFUNC_OK;
static const int ic_prereq_abort = CURL_PREREQFUNC_ABORT;

static inline CURLcode ic_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
  return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode ic_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
  return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode ic_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
  return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode ic_easy_getinfo_socket(CURL *handle, curl_socket_t *socket) {
  return curl_easy_getinfo(handle, CURLINFO_ACTIVESOCKET, socket);
}

/// Milliseconds since data last arrived on the TCP socket `socket` (the kernel's
/// `tcpi_last_data_recv`, counted in its clock ticks), or -1 when the kernel does not say.
static inline long ic_tcp_last_data_received(curl_socket_t socket) {
  struct tcp_info info;
  socklen_t length = sizeof info;
  if (getsockopt(socket, IPPROTO_TCP, TCP_INFO, &info, &length) != 0 ||
      length < offsetof(struct tcp_info, tcpi_last_data_recv) + sizeof info.tcpi_last_data_recv) {
    return -1;
  }
  return (long)info.tcpi_last_data_recv;
}

static inline CURLMcode ic_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
  return curl_multi_setopt(multi, option, value);
}

static inline CURLSHcode ic_share_setopt_long(CURLSH *share, CURLSHoption option, long value) {
  return curl_share_setopt(share, option, value);
}

/// The `result` of a finished transfer's message (a union member Swift reads awkwardly).
static inline CURLcode ic_message_result(const CURLMsg *message) { return message->data.result; }

static const long ic_global_all = CURL_GLOBAL_ALL;
static const long ic_pipe_multiplex = CURLPIPE_MULTIPLEX;
static const long ic_http_version_2tls = CURL_HTTP_VERSION_2TLS;
static const long ic_http_version_2_0 = CURL_HTTP_VERSION_2_0;
static const long ic_http_version_1_1 = CURL_HTTP_VERSION_1_1;
static const int ic_error_size = CURL_ERROR_SIZE;
static const CURLversion ic_curl_version_now = CURLVERSION_NOW;
/// What a write callback returns to pause its transfer (the data is handed over again later).
static const size_t ic_writefunc_pause = CURL_WRITEFUNC_PAUSE;
static const int ic_pause_cont = CURLPAUSE_CONT;
