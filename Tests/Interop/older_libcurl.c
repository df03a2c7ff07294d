/* An older libcurl, for the tests: a libcurl.so.4 that forwards to the real
   one (REAL_LIBCURL, given when it is built) but reports the version in
   OLDER_LIBCURL_VERSION (say 7.81.0, Ubuntu 22.04's) and, below 7.85.0,
   answers CURLOPT_PROTOCOLS_STR and CURLOPT_REDIR_PROTOCOLS_STR with
   CURLE_UNKNOWN_OPTION, as those versions do. Found before the real one
   through LD_LIBRARY_PATH (devtrust dlopens "libcurl.so.4").

   Each CURLOPT_PROTOCOLS(_STR) it is given is a line in OLDER_LIBCURL_LOG.
   Built with -DWITHOUT_URL_API, it lacks curl_url and its siblings, as libcurl
   before 7.62.0 does. */
#define CURL_DISABLE_TYPECHECK 1
#define CURL_DISABLE_DEPRECATION 1
/* The header's own declarations under other names: their exact types (const
   or not) change between curl versions, and these definitions replace them. */
#define curl_url_get curl_url_get_declared
#define curl_url_set curl_url_set_declared
#include <curl/curl.h>
#undef curl_url_get
#undef curl_url_set
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void *symbol(const char *name) {
    static void *real;
    if (!real && !(real = dlopen(REAL_LIBCURL, RTLD_NOW | RTLD_LOCAL))) {
        fprintf(stderr, "older_libcurl: %s\n", dlerror());
        abort();
    }
    void *found = dlsym(real, name);
    if (!found) {
        fprintf(stderr, "older_libcurl: no %s\n", name);
        abort();
    }
    return found;
}

static unsigned int version_num(void) {
    unsigned int major = 0, minor = 0, patch = 0;
    const char *text = getenv("OLDER_LIBCURL_VERSION");
    if (text) sscanf(text, "%u.%u.%u", &major, &minor, &patch);
    return major << 16 | minor << 8 | patch;
}

static void record(const char *format, long value) {
    const char *path = getenv("OLDER_LIBCURL_LOG");
    FILE *log = path ? fopen(path, "a") : NULL;
    if (!log) return;
    fprintf(log, format, value);
    fputc('\n', log);
    fclose(log);
}

curl_version_info_data *curl_version_info(CURLversion age) {
    static curl_version_info_data older;
    curl_version_info_data *(*real)(CURLversion) = (curl_version_info_data * (*)(CURLversion)) symbol("curl_version_info");
    older = *real(age);
    older.version = getenv("OLDER_LIBCURL_VERSION") ? getenv("OLDER_LIBCURL_VERSION") : "0.0.0";
    older.version_num = version_num();
    return &older;
}

/* Every option's argument is a long, a pointer or a curl_off_t: one 64-bit word here. */
CURLcode curl_easy_setopt(CURL *handle, CURLoption option, ...) {
    va_list arguments;
    va_start(arguments, option);
    void *argument = va_arg(arguments, void *);
    va_end(arguments);
    if (option == CURLOPT_PROTOCOLS_STR || option == CURLOPT_REDIR_PROTOCOLS_STR) {
        record("CURLOPT_PROTOCOLS_STR", 0);
        if (version_num() < 0x075500) return CURLE_UNKNOWN_OPTION;
    }
    if (option == CURLOPT_PROTOCOLS) record("CURLOPT_PROTOCOLS %ld", (long)argument);
    CURLcode (*real)(CURL *, CURLoption, ...) = (CURLcode (*)(CURL *, CURLoption, ...))symbol("curl_easy_setopt");
    return real(handle, option, argument);
}

CURLcode curl_easy_getinfo(CURL *handle, CURLINFO info, ...) {
    va_list arguments;
    va_start(arguments, info);
    void *argument = va_arg(arguments, void *);
    va_end(arguments);
    CURLcode (*real)(CURL *, CURLINFO, ...) = (CURLcode (*)(CURL *, CURLINFO, ...))symbol("curl_easy_getinfo");
    return real(handle, info, argument);
}

#define FORWARD(result, name, parameters, arguments) \
    result name parameters { return ((result (*) parameters)symbol(#name)) arguments; }
#define FORWARD_VOID(name, parameters, arguments) \
    void name parameters { ((void (*) parameters)symbol(#name)) arguments; }

FORWARD(CURL *, curl_easy_init, (void), ())
FORWARD_VOID(curl_easy_cleanup, (CURL *handle), (handle))
FORWARD(CURLcode, curl_easy_perform, (CURL *handle), (handle))
FORWARD(const char *, curl_easy_strerror, (CURLcode code), (code))
FORWARD(CURLcode, curl_global_init, (long flags), (flags))
FORWARD(struct curl_slist *, curl_slist_append, (struct curl_slist *list, const char *text), (list, text))
FORWARD_VOID(curl_slist_free_all, (struct curl_slist *list), (list))
#ifndef WITHOUT_URL_API
FORWARD(CURLU *, curl_url, (void), ())
FORWARD_VOID(curl_url_cleanup, (CURLU *url), (url))
FORWARD(CURLUcode, curl_url_set, (CURLU *url, CURLUPart part, const char *content, unsigned int flags), (url, part, content, flags))
FORWARD(CURLUcode, curl_url_get, (const CURLU *url, CURLUPart part, char **content, unsigned int flags), (url, part, content, flags))
#endif
FORWARD_VOID(curl_free, (void *pointer), (pointer))
