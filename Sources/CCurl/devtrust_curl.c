#include "devtrust_curl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

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
void devtrust_curl_slist_free_all(struct curl_slist *list) { api.slist_free_all(list); }
