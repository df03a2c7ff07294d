/* CURLOPT_PROTOCOLS is deprecated from 7.85 on, and still the only way to
   restrict protocols on older libcurl (devtrust picks by the runtime version). */
#define CURL_DISABLE_DEPRECATION 1
/* The calls go through pointers named as curl's own functions (api.curl_easy_setopt),
   which typecheck-gcc.h's function-like macros of the same names would rewrite;
   the typed wrappers below do its checking. */
#define CURL_DISABLE_TYPECHECK 1
#include "devtrust_curl.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The libcurl functions devtrust calls, all required. A libcurl older than
   DEVTRUST_CURL_MINIMUM_VERSION has no curl_url*: every name is looked up
   first and its version checked before any missing one is an error, so such a
   libcurl is reported as too old. */
#define DEVTRUST_CURL_FUNCTIONS(F) \
    F(curl_global_init) F(curl_version_info) \
    F(curl_easy_init) F(curl_easy_cleanup) F(curl_easy_perform) F(curl_easy_strerror) \
    F(curl_easy_setopt) F(curl_easy_getinfo) \
    F(curl_slist_append) F(curl_slist_free_all) F(curl_free) \
    F(curl_url) F(curl_url_cleanup) F(curl_url_set) F(curl_url_get)

static struct {
#define DEVTRUST_CURL_MEMBER(name) __typeof__(&name) name;
    DEVTRUST_CURL_FUNCTIONS(DEVTRUST_CURL_MEMBER)
#undef DEVTRUST_CURL_MEMBER
} api;

static unsigned int runtime_version;
static int load_result = -1;
static char load_error[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen(DEVTRUST_CURL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        snprintf(load_error, sizeof load_error, "%s", dlerror());
        return;
    }
#define DEVTRUST_CURL_RESOLVE(name) *(void **)&api.name = dlsym(library, #name);
    DEVTRUST_CURL_FUNCTIONS(DEVTRUST_CURL_RESOLVE)
#undef DEVTRUST_CURL_RESOLVE
    if (api.curl_version_info == NULL) {
        snprintf(load_error, sizeof load_error, "libcurl has no curl_version_info");
        return;
    }
    curl_version_info_data *info = api.curl_version_info(CURLVERSION_NOW);
    runtime_version = info ? info->version_num : 0;
    if (!devtrust_curl_version_is_supported(runtime_version)) {
        snprintf(load_error, sizeof load_error, "%s", info && info->version ? info->version : "(unknown version)");
        load_result = -2;
        return;
    }
#define DEVTRUST_CURL_REQUIRE(name) \
    if (api.name == NULL) { \
        snprintf(load_error, sizeof load_error, "libcurl has no %s", #name); \
        return; \
    }
    DEVTRUST_CURL_FUNCTIONS(DEVTRUST_CURL_REQUIRE)
#undef DEVTRUST_CURL_REQUIRE
    if (api.curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(load_error, sizeof load_error, "curl_global_init failed");
        return;
    }
    load_result = 0;
}

int devtrust_curl_load(char *error, size_t error_size) {
    pthread_once(&load_once, load);
    if (load_result == 0) return 0;
    snprintf(error, error_size, "%s", load_error[0] ? load_error : "libcurl could not be loaded");
    return load_result;
}

CURL *devtrust_curl_easy_init(void) { return api.curl_easy_init(); }
void devtrust_curl_easy_cleanup(CURL *handle) { api.curl_easy_cleanup(handle); }
CURLcode devtrust_curl_easy_perform(CURL *handle) { return api.curl_easy_perform(handle); }
const char *devtrust_curl_easy_strerror(CURLcode code) { return api.curl_easy_strerror(code); }

CURLcode devtrust_curl_setopt_long(CURL *handle, CURLoption option, long value) { return api.curl_easy_setopt(handle, option, value); }
CURLcode devtrust_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) { return api.curl_easy_setopt(handle, option, value); }
CURLcode devtrust_curl_setopt_string(CURL *handle, CURLoption option, const char *value) { return api.curl_easy_setopt(handle, option, value); }
CURLcode devtrust_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) { return api.curl_easy_setopt(handle, option, value); }

CURLcode devtrust_curl_set_write_callback(CURL *handle, devtrust_curl_data_callback callback, void *context) {
    CURLcode code = api.curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
    return code != CURLE_OK ? code : api.curl_easy_setopt(handle, CURLOPT_WRITEDATA, context);
}

CURLcode devtrust_curl_set_header_callback(CURL *handle, devtrust_curl_data_callback callback, void *context) {
    CURLcode code = api.curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
    return code != CURLE_OK ? code : api.curl_easy_setopt(handle, CURLOPT_HEADERDATA, context);
}

CURLcode devtrust_curl_set_progress_callback(CURL *handle, devtrust_curl_progress_callback callback, void *context) {
    CURLcode code = api.curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
    if (code == CURLE_OK) code = api.curl_easy_setopt(handle, CURLOPT_XFERINFODATA, context);
    return code != CURLE_OK ? code : api.curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
}

int devtrust_curl_version_is_supported(unsigned int version) {
    return version >= DEVTRUST_CURL_MINIMUM_VERSION;
}

unsigned int devtrust_curl_runtime_version(void) { return runtime_version; }

int devtrust_curl_url_error_is_bad_host(CURLUcode code) {
#if LIBCURL_VERSION_NUM >= 0x075100
    if (code == CURLUE_BAD_HOSTNAME || code == CURLUE_BAD_IPV6) return 1;
#endif
    return code == CURLUE_NO_HOST;
}

int devtrust_curl_protocols_option_is_string(unsigned int version) {
    return version >= 0x075500; /* CURLOPT_PROTOCOLS_STR: 7.85.0 */
}

/* Built against headers older than 7.85, the option's number is still known. */
#if LIBCURL_VERSION_NUM < 0x075500
#define DEVTRUST_CURLOPT_PROTOCOLS_STR ((CURLoption)(CURLOPTTYPE_STRINGPOINT + 318))
#else
#define DEVTRUST_CURLOPT_PROTOCOLS_STR CURLOPT_PROTOCOLS_STR
#endif

CURLcode devtrust_curl_restrict_protocols(CURL *handle, int as_string) {
    if (as_string) return api.curl_easy_setopt(handle, DEVTRUST_CURLOPT_PROTOCOLS_STR, "https,http");
    return api.curl_easy_setopt(handle, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTPS | CURLPROTO_HTTP));
}

CURLU *devtrust_curl_url(void) { return api.curl_url(); }
void devtrust_curl_url_cleanup(CURLU *url) { api.curl_url_cleanup(url); }
CURLUcode devtrust_curl_url_set(CURLU *url, CURLUPart part, const char *value) { return api.curl_url_set(url, part, value, 0); }

CURLUcode devtrust_curl_url_get(CURLU *url, CURLUPart part, char *buffer, size_t size) {
    char *value = NULL;
    CURLUcode code = api.curl_url_get(url, part, &value, 0);
    if (code != CURLUE_OK) return code;
    size_t length = value ? strlen(value) : 0;
    if (length >= size) code = CURLUE_OUT_OF_MEMORY;
    else {
        memcpy(buffer, value, length);
        buffer[length] = 0;
    }
    if (value) {
        explicit_bzero(value, length);
        api.curl_free(value);
    }
    return code;
}

CURLcode devtrust_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) { return api.curl_easy_getinfo(handle, info, value); }
CURLcode devtrust_curl_getinfo_string(CURL *handle, CURLINFO info, const char **value) { return api.curl_easy_getinfo(handle, info, value); }

struct curl_slist *devtrust_curl_slist_append(struct curl_slist *list, const char *value) { return api.curl_slist_append(list, value); }

void devtrust_curl_slist_free_all(struct curl_slist *list) {
    for (struct curl_slist *item = list; item != NULL; item = item->next) {
        if (item->data != NULL) explicit_bzero(item->data, strlen(item->data));
    }
    api.curl_slist_free_all(list);
}

void devtrust_curl_wipe(void *memory, size_t length) {
    if (memory != NULL) explicit_bzero(memory, length);
}

static size_t header_name_length(const char *line, size_t length, const char *const *names, size_t count) {
    for (size_t n = 0; n < count; n++) {
        size_t name_length = strlen(names[n]);
        if (length >= name_length && strncasecmp(line, names[n], name_length) == 0) return name_length;
    }
    return 0;
}

/* Names whose value is a secret: credentials, cookies, the device token, a
   DPoP proof. Looked for anywhere in a line, not only at its start: curl also
   shows HTTP/2 and HTTP/3 request headers in its own info lines
   ("h2h3 [x-device-token: ...]", "[HTTP/2] [1] [authorization: ...]").
   proxy-authorization and set-cookie contain two of them. */
static const char *const secret_names[] = { "authorization", "cookie", "x-device-token", "dpop" };

/* Where the first secret name followed by ':' ends in the line, or NULL. */
static const char *secret_name_end(const char *line, size_t length) {
    for (size_t i = 0; i < length; i++) {
        for (size_t n = 0; n < sizeof secret_names / sizeof secret_names[0]; n++) {
            size_t name_length = strlen(secret_names[n]);
            if (length - i < name_length || strncasecmp(line + i, secret_names[n], name_length) != 0) continue;
            size_t after = i + name_length;
            while (after < length && (line[after] == ' ' || line[after] == '\t')) after++;
            if (after < length && line[after] == ':') return line + after + 1;
        }
    }
    return NULL;
}

/* Headers whose value is a URL: where a redirect sends a code or a token. */
static size_t header_is_url(const char *line, size_t length) {
    static const char *const names[] = { "location:", "content-location:" };
    return header_name_length(line, length, names, sizeof names / sizeof names[0]);
}

/* A URL without what may carry a secret: user and password, query, fragment.
   "https://user:pw@host/path?code=x#token=y" is "https://[redacted]@host/path?[redacted]#[redacted]".
   Whatever its form ("//u:p@host", "https:u:p@host"), all before the last '@'
   ahead of the query goes, but the scheme. */
static void write_redacted_url(const char *url, size_t length) {
    const char *end = url + length;
    const char *before_query = url;
    while (before_query < end && *before_query != '?' && *before_query != '#') before_query++;
    const char *at = NULL;
    for (const char *p = url; p < before_query; p++) if (*p == '@') at = p;
    const char *rest = url;
    if (at) {
        const char *scheme_end = url;
        while (scheme_end < at && (isalnum((unsigned char)*scheme_end) || *scheme_end == '+' || *scheme_end == '-' || *scheme_end == '.')) scheme_end++;
        if (scheme_end < at && *scheme_end == ':' && scheme_end > url) {
            fprintf(stderr, "%.*s", (int)(scheme_end + 1 - url), url);
            if (at - scheme_end > 2 && scheme_end[1] == '/' && scheme_end[2] == '/') fprintf(stderr, "//");
        } else if (at - url > 1 && url[0] == '/' && url[1] == '/') {
            fprintf(stderr, "//");
        }
        fprintf(stderr, "[redacted]@");
        rest = at + 1;
    }
    fprintf(stderr, "%.*s", (int)(before_query - rest), rest);
    const char *query = memchr(before_query, '?', (size_t)(end - before_query));
    const char *fragment = memchr(before_query, '#', (size_t)(end - before_query));
    if (query && (!fragment || query < fragment)) fprintf(stderr, "?[redacted]");
    if (fragment) fprintf(stderr, "#[redacted]");
}

/* A line of curl's own account with the user and password of every URL in it
   left out ("Uses proxy env variable https_proxy == 'http://u:p@proxy:3128'"),
   and a query string (codes, tokens) too. */
static void write_text_line(const char *prefix, const char *line, size_t length) {
    fprintf(stderr, "%s", prefix);
    size_t i = 0;
    while (i < length) {
        if (line[i] == '?') {
            fprintf(stderr, "?[redacted]");
            while (i < length && line[i] != ' ' && line[i] != '\'' && line[i] != '"') i++;
            continue;
        }
        if (i + 3 <= length && memcmp(line + i, "://", 3) == 0) {
            size_t stop = i + 3;
            while (stop < length && !strchr(" '\"/?#", line[stop])) stop++;
            const char *at = NULL;
            for (size_t k = i + 3; k < stop; k++) if (line[k] == '@') at = line + k;
            fprintf(stderr, "://");
            i += 3;
            if (at) {
                fprintf(stderr, "[redacted]@");
                i = (size_t)(at - line) + 1;
            }
            continue;
        }
        fputc(line[i], stderr);
        i++;
    }
    fputc('\n', stderr);
}

/* One line of the account, its secret parts left out: a secret header's value
   (wherever its name appears), the user and password, query and fragment of a
   URL, and any line a terminal could be driven by (control bytes, or anything
   not ASCII: C1 controls, bidirectional overrides). */
static void write_header_line(const char *prefix, const char *line, size_t length) {
    while (length > 0 && (line[length - 1] == '\n' || line[length - 1] == '\r')) length--;
    if (length == 0) return;
    const char *secret = secret_name_end(line, length);
    if (secret) {
        fprintf(stderr, "%s%.*s [redacted]\n", prefix, (int)(secret - line), line);
        return;
    }
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)line[i];
        if (c < 0x20 || c >= 0x7F) { fprintf(stderr, "%s(a line with control or non-ASCII characters, not shown)\n", prefix); return; }
    }
    size_t url_header = header_is_url(line, length);
    if (url_header) {
        size_t start = url_header;
        while (start < length && (line[start] == ' ' || line[start] == '\t')) start++;
        fprintf(stderr, "%s%.*s ", prefix, (int)url_header, line);
        write_redacted_url(line + start, length - start);
        fprintf(stderr, "\n");
        return;
    }
    write_text_line(prefix, line, length);
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
        /* A folded line continues the header before it, which may be a secret one. */
        if (size > 0 && (data[0] == ' ' || data[0] == '\t')) {
            fprintf(stderr, "devtrust: http: < (a folded header line, not shown)\n");
            break;
        }
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
    CURLcode code = api.curl_easy_setopt(handle, CURLOPT_DEBUGFUNCTION, debug_callback);
    return code != CURLE_OK ? code : api.curl_easy_setopt(handle, CURLOPT_VERBOSE, 1L);
}
