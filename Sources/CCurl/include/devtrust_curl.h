#ifndef DEVTRUST_CURL_H
#define DEVTRUST_CURL_H

/* libcurl, loaded with dlopen on first use: linking it would load libcurl and
   its ~30 dependencies into every process, `devtrust token` included, which
   never makes a request. The wrappers also give Swift typed versions of the
   variadic curl_easy_setopt and curl_easy_getinfo. */

#include <stddef.h>
#include <curl/curl.h>

/* 0 when libcurl is loaded; otherwise writes why into `error`. */
int devtrust_curl_load(char *error, size_t error_size);

CURL *devtrust_curl_easy_init(void);
void devtrust_curl_easy_cleanup(CURL *handle);
CURLcode devtrust_curl_easy_perform(CURL *handle);
const char *devtrust_curl_easy_strerror(CURLcode code);

CURLcode devtrust_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode devtrust_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
CURLcode devtrust_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode devtrust_curl_setopt_pointer(CURL *handle, CURLoption option, void *value);

typedef size_t (*devtrust_curl_data_callback)(char *data, size_t size, size_t count, void *context);
/* CURLOPT_WRITEFUNCTION + CURLOPT_WRITEDATA, or the HEADER pair. */
CURLcode devtrust_curl_set_write_callback(CURL *handle, devtrust_curl_data_callback callback, void *context);
CURLcode devtrust_curl_set_header_callback(CURL *handle, devtrust_curl_data_callback callback, void *context);

CURLcode devtrust_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode devtrust_curl_getinfo_string(CURL *handle, CURLINFO info, const char **value);

struct curl_slist *devtrust_curl_slist_append(struct curl_slist *list, const char *value);
/* Overwrites every string of the list (headers carry bearer tokens), then frees it. */
void devtrust_curl_slist_free_all(struct curl_slist *list);

/* Overwrites memory that held a secret (explicit_bzero: the compiler keeps it). */
void devtrust_curl_wipe(void *memory, size_t length);

/* DEVTRUST_HTTP_DEBUG: curl's own account of a request on stderr (connection,
   TLS, request and response headers), with what would leak a secret left
   out: the values of Authorization, Cookie, Set-Cookie and Proxy-Authorization
   headers, query strings, and every body (only their sizes are shown). */
CURLcode devtrust_curl_enable_redacted_debug(CURL *handle);

#endif
