#include "devtrust_qrcode.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The subset of qrencode.h devtrust uses (libqrencode 4). */
typedef struct {
    int version;
    int width;
    unsigned char *data;
} QRcode;

enum { QR_ECLEVEL_M = 1 };
enum { QR_MODE_8 = 2 };

int devtrust_qrcode_encode(const char *text, int *width, unsigned char **modules, char *error, int error_size) {
    void *library = dlopen("libqrencode.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        snprintf(error, error_size, "%s", dlerror());
        return -1;
    }
    QRcode *(*encode)(const char *, int, int, int, int) = (QRcode *(*)(const char *, int, int, int, int))dlsym(library, "QRcode_encodeString");
    void (*release)(QRcode *) = (void (*)(QRcode *))dlsym(library, "QRcode_free");
    if (!encode || !release) {
        snprintf(error, error_size, "libqrencode has no QRcode_encodeString");
        return -1;
    }
    QRcode *code = encode(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1);
    if (!code) {
        snprintf(error, error_size, "the text cannot be encoded as a QR code");
        return -1;
    }
    size_t count = (size_t)code->width * (size_t)code->width;
    *modules = malloc(count);
    if (!*modules) {
        release(code);
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < count; i++) (*modules)[i] = code->data[i] & 1;
    *width = code->width;
    release(code);
    return 0;
}
