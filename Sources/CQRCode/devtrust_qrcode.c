#include "devtrust_qrcode.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libqrencode-dev is not a build dependency (only the library, libqrencode4,
   is installed), so the part of qrencode.h (libqrencode 4) devtrust uses is
   copied here. Where qrencode.h is installed it is used instead, and the
   declarations of DEVTRUST_QRENCODE_FUNCTIONS are checked against it. */
#if __has_include(<qrencode.h>)
#include <qrencode.h>
#else
typedef enum {
    QR_MODE_NUL = -1,
    QR_MODE_NUM = 0,
    QR_MODE_AN,
    QR_MODE_8,
    QR_MODE_KANJI,
    QR_MODE_STRUCTURE,
    QR_MODE_ECI,
    QR_MODE_FNC1FIRST,
    QR_MODE_FNC1SECOND,
} QRencodeMode;

typedef enum {
    QR_ECLEVEL_L = 0,
    QR_ECLEVEL_M,
    QR_ECLEVEL_Q,
    QR_ECLEVEL_H
} QRecLevel;

typedef struct {
    int version;
    int width;
    unsigned char *data;
} QRcode;
#endif

/* The libqrencode functions devtrust calls: result, name, parameters, as qrencode.h declares them. */
#define DEVTRUST_QRENCODE_FUNCTIONS(F) \
    F(QRcode *, QRcode_encodeString, (const char *string, int version, QRecLevel level, QRencodeMode hint, int casesensitive)) \
    F(void, QRcode_free, (QRcode *qrcode))

#define DEVTRUST_QRENCODE_DECLARATION(result, name, parameters) extern result name parameters;
DEVTRUST_QRENCODE_FUNCTIONS(DEVTRUST_QRENCODE_DECLARATION)
#undef DEVTRUST_QRENCODE_DECLARATION

static struct {
#define DEVTRUST_QRENCODE_MEMBER(result, name, parameters) __typeof__(&name) name;
    DEVTRUST_QRENCODE_FUNCTIONS(DEVTRUST_QRENCODE_MEMBER)
#undef DEVTRUST_QRENCODE_MEMBER
} api;

static int loaded;
static char load_error[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen(DEVTRUST_QRENCODE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        snprintf(load_error, sizeof load_error, "%s", dlerror());
        return;
    }
#define DEVTRUST_QRENCODE_RESOLVE(result, name, parameters) \
    if ((*(void **)&api.name = dlsym(library, #name)) == NULL) { \
        snprintf(load_error, sizeof load_error, "libqrencode has no %s", #name); \
        return; \
    }
    DEVTRUST_QRENCODE_FUNCTIONS(DEVTRUST_QRENCODE_RESOLVE)
#undef DEVTRUST_QRENCODE_RESOLVE
    loaded = 1;
}

int devtrust_qrcode_encode(const char *text, int *width, unsigned char **modules, char *error, int error_size) {
    pthread_once(&load_once, load);
    if (!loaded) {
        snprintf(error, error_size, "%s", load_error[0] ? load_error : "libqrencode could not be loaded");
        return -1;
    }
    /* Error correction L (7 %), as qrencode's own default: a code on a screen is not
       worn or stained, and the smaller code (a version less for a typical verification
       URI) keeps its 4-module quiet zone within an 80x24 window. */
    QRcode *code = api.QRcode_encodeString(text, 0, QR_ECLEVEL_L, QR_MODE_8, 1);
    if (!code) {
        snprintf(error, error_size, "the text cannot be encoded as a QR code");
        return -2;
    }
    size_t count = (size_t)code->width * (size_t)code->width;
    *modules = malloc(count);
    if (!*modules) {
        api.QRcode_free(code);
        snprintf(error, error_size, "out of memory");
        return -2;
    }
    for (size_t i = 0; i < count; i++) (*modules)[i] = code->data[i] & 1;
    *width = code->width;
    api.QRcode_free(code);
    return 0;
}
