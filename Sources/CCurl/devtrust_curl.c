#include "devtrust_curl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static struct {
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    CURLcode (*easy_perform)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLcode (*global_init)(long);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256];

static void load(void) {
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        snprintf(load_error, sizeof load_error, "%s", dlerror());
        return;
    }
#define RESOLVE(field, symbol) \
    if (!(*(void **)&api.field = dlsym(library, symbol))) { \
        snprintf(load_error, sizeof load_error, "libcurl has no %s", symbol); \
        return; \
    }
    RESOLVE(easy_init, "curl_easy_init")
    RESOLVE(easy_cleanup, "curl_easy_cleanup")
    RESOLVE(easy_perform, "curl_easy_perform")
    RESOLVE(easy_strerror, "curl_easy_strerror")
    RESOLVE(easy_setopt, "curl_easy_setopt")
    RESOLVE(easy_getinfo, "curl_easy_getinfo")
    RESOLVE(global_init, "curl_global_init")
    RESOLVE(slist_append, "curl_slist_append")
    RESOLVE(slist_free_all, "curl_slist_free_all")
#undef RESOLVE
    if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(load_error, sizeof load_error, "curl_global_init failed");
        api.easy_init = NULL;
    }
}

int devtrust_curl_load(char *error, size_t error_size) {
    pthread_once(&load_once, load);
    if (api.easy_init && load_error[0] == 0) return 0;
    snprintf(error, error_size, "%s", load_error[0] ? load_error : "libcurl could not be loaded");
    return -1;
}

CURL *devtrust_curl_easy_init(void) { return api.easy_init(); }
void devtrust_curl_easy_cleanup(CURL *handle) { api.easy_cleanup(handle); }
CURLcode devtrust_curl_easy_perform(CURL *handle) { return api.easy_perform(handle); }
const char *devtrust_curl_easy_strerror(CURLcode code) { return api.easy_strerror(code); }

CURLcode devtrust_curl_setopt_long(CURL *handle, CURLoption option, long value) { return api.easy_setopt(handle, option, value); }
CURLcode devtrust_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) { return api.easy_setopt(handle, option, value); }
CURLcode devtrust_curl_setopt_string(CURL *handle, CURLoption option, const char *value) { return api.easy_setopt(handle, option, value); }
CURLcode devtrust_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) { return api.easy_setopt(handle, option, value); }

CURLcode devtrust_curl_set_write_callback(CURL *handle, devtrust_curl_data_callback callback, void *context) {
    CURLcode code = api.easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
    return code != CURLE_OK ? code : api.easy_setopt(handle, CURLOPT_WRITEDATA, context);
}

CURLcode devtrust_curl_set_header_callback(CURL *handle, devtrust_curl_data_callback callback, void *context) {
    CURLcode code = api.easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
    return code != CURLE_OK ? code : api.easy_setopt(handle, CURLOPT_HEADERDATA, context);
}

CURLcode devtrust_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) { return api.easy_getinfo(handle, info, value); }
CURLcode devtrust_curl_getinfo_string(CURL *handle, CURLINFO info, const char **value) { return api.easy_getinfo(handle, info, value); }

struct curl_slist *devtrust_curl_slist_append(struct curl_slist *list, const char *value) { return api.slist_append(list, value); }

void devtrust_curl_slist_free_all(struct curl_slist *list) {
    for (struct curl_slist *item = list; item != NULL; item = item->next) {
        if (item->data != NULL) explicit_bzero(item->data, strlen(item->data));
    }
    api.slist_free_all(list);
}

void devtrust_curl_wipe(void *memory, size_t length) {
    if (memory != NULL) explicit_bzero(memory, length);
}

static int header_is_secret(const char *line, size_t length) {
    static const char *const names[] = { "authorization:", "proxy-authorization:", "cookie:", "set-cookie:" };
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        size_t name_length = strlen(names[n]);
        if (length >= name_length && strncasecmp(line, names[n], name_length) == 0) return (int)name_length;
    }
    return 0;
}

/* One header line, its secret parts left out: a request line loses its query,
   a secret header its value. */
static void write_header_line(const char *prefix, const char *line, size_t length) {
    while (length > 0 && (line[length - 1] == '\n' || line[length - 1] == '\r')) length--;
    if (length == 0) return;
    int secret = header_is_secret(line, length);
    if (secret) {
        fprintf(stderr, "%s%.*s [redacted]\n", prefix, secret, line);
        return;
    }
    /* Query strings carry codes and tokens (request lines, Location headers). */
    const char *query = memchr(line, '?', length);
    if (query) {
        const char *end = memchr(query, ' ', length - (size_t)(query - line));
        size_t tail = end ? length - (size_t)(end - line) : 0;
        fprintf(stderr, "%s%.*s?[redacted]%.*s\n", prefix, (int)(query - line), line, (int)tail, end ? end : "");
        return;
    }
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)line[i];
        if (c < 0x20 || c == 0x7F) { fprintf(stderr, "%s(a header line with control characters)\n", prefix); return; }
    }
    fprintf(stderr, "%s%.*s\n", prefix, (int)length, line);
}

static int debug_callback(CURL *handle, curl_infotype type, char *data, size_t size, void *context) {
    (void)handle;
    (void)context;
    switch (type) {
    case CURLINFO_TEXT:
        write_header_line("devtrust: http: * ", data, size);
        break;
    case CURLINFO_HEADER_OUT: {
        /* curl hands the whole request head at once: one line at a time. */
        size_t start = 0;
        for (size_t i = 0; i < size; i++) {
            if (data[i] == '\n') {
                write_header_line("devtrust: http: > ", data + start, i + 1 - start);
                start = i + 1;
            }
        }
        if (start < size) write_header_line("devtrust: http: > ", data + start, size - start);
        break;
    }
    case CURLINFO_HEADER_IN:
        write_header_line("devtrust: http: < ", data, size);
        break;
    case CURLINFO_DATA_OUT:
        fprintf(stderr, "devtrust: http: > [%zu bytes of body, not shown]\n", size);
        break;
    case CURLINFO_DATA_IN:
        fprintf(stderr, "devtrust: http: < [%zu bytes of body, not shown]\n", size);
        break;
    default:
        break; /* TLS records: binary */
    }
    return 0;
}

CURLcode devtrust_curl_enable_redacted_debug(CURL *handle) {
    CURLcode code = api.easy_setopt(handle, CURLOPT_DEBUGFUNCTION, debug_callback);
    return code != CURLE_OK ? code : api.easy_setopt(handle, CURLOPT_VERBOSE, 1L);
}
