#ifndef DEVTRUST_CURL_H
#define DEVTRUST_CURL_H

/* libcurl, loaded with dlopen on first use: linking it would load libcurl and
   its ~30 dependencies into every process, `devtrust token` included, which
   never makes a request. The wrappers also give Swift typed versions of the
   variadic curl_easy_setopt and curl_easy_getinfo. */

#include <stddef.h>
#include <curl/curl.h>

/* The oldest libcurl devtrust runs with: 7.63.0, for its URL parser
   (curl_url, CURLOPT_CURLU), so that the URL devtrust checks is the URL curl
   connects to. */
#define DEVTRUST_CURL_MINIMUM_VERSION 0x073F00

/* The name libcurl is loaded by (`devtrust doctor` probes the same one). */
#define DEVTRUST_CURL_LIBRARY "libcurl.so.4"

/* 0 when libcurl is loaded. Otherwise -1, with why in `error`; or -2 for a
   libcurl older than DEVTRUST_CURL_MINIMUM_VERSION, with its version in `error`. */
int devtrust_curl_load(char *error, size_t error_size);

/* Whether devtrust runs with a libcurl of this version (LIBCURL_VERSION_NUM form, 0xXXYYZZ). */
int devtrust_curl_version_is_supported(unsigned int version);
/* The loaded libcurl's version (curl_version_info), 0 before it is loaded. */
unsigned int devtrust_curl_runtime_version(void);

/* 1 when a URL parse error says the host is bad (CURLUE_BAD_HOSTNAME and
   CURLUE_BAD_IPV6 exist from libcurl 7.81's headers on: older ones build too). */
int devtrust_curl_url_error_is_bad_host(CURLUcode code);
/* Whether this version has CURLOPT_PROTOCOLS_STR (7.85.0); older ones have only CURLOPT_PROTOCOLS. */
int devtrust_curl_protocols_option_is_string(unsigned int version);
/* Allows http and https only: CURLOPT_PROTOCOLS_STR when `as_string`, else the
   CURLOPT_PROTOCOLS bit mask (libcurl before 7.85). */
CURLcode devtrust_curl_restrict_protocols(CURL *handle, int as_string);

/* libcurl's URL parser: the URL is checked as curl reads it, and the same
   parsed handle is what the transfer uses (CURLOPT_CURLU). */
CURLU *devtrust_curl_url(void);
void devtrust_curl_url_cleanup(CURLU *url);
CURLUcode devtrust_curl_url_set(CURLU *url, CURLUPart part, const char *value);
/* Copies the part into `buffer` (NUL-terminated); CURLUE_OUT_OF_MEMORY when it does not fit. */
CURLUcode devtrust_curl_url_get(CURLU *url, CURLUPart part, char *buffer, size_t size);

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

/* CURLOPT_XFERINFOFUNCTION + CURLOPT_XFERINFODATA, and CURLOPT_NOPROGRESS off
   so that curl calls it: repeatedly during a transfer, also while it waits
   for the server (about once a second or more often). A non-zero return
   aborts the transfer. */
typedef int (*devtrust_curl_progress_callback)(void *context, curl_off_t download_total, curl_off_t download_now,
                                               curl_off_t upload_total, curl_off_t upload_now);
CURLcode devtrust_curl_set_progress_callback(CURL *handle, devtrust_curl_progress_callback callback, void *context);

CURLcode devtrust_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode devtrust_curl_getinfo_string(CURL *handle, CURLINFO info, const char **value);

struct curl_slist *devtrust_curl_slist_append(struct curl_slist *list, const char *value);
/* Overwrites every string of the list (headers carry bearer tokens), then frees it. */
void devtrust_curl_slist_free_all(struct curl_slist *list);

/* Overwrites memory that held a secret (explicit_bzero: the compiler keeps it). */
void devtrust_curl_wipe(void *memory, size_t length);

/* DEVTRUST_HTTP_DEBUG: curl's own account of a request on stderr (connection,
   TLS, request and response headers), with what would leak a secret left
   out: the values of Authorization, Cookie, Set-Cookie, Proxy-Authorization
   and X-Device-Token headers, query strings, the user, query and fragment of
   Location URLs, and every body (only their sizes are shown). */
CURLcode devtrust_curl_enable_redacted_debug(CURL *handle);

#endif
