#ifndef DEVTRUST_QRCODE_H
#define DEVTRUST_QRCODE_H

/* libqrencode, loaded with dlopen when a QR code is drawn (never on the token path). */

/* The name it is loaded by (`devtrust doctor` probes the same one). */
#define DEVTRUST_QRENCODE_LIBRARY "libqrencode.so.4"

/* Encodes `text`; on success returns 0, sets *width and a malloc'd width*width
   array of modules (1 = dark) that the caller frees. Otherwise writes why into `error`
   and returns -1 when libqrencode cannot be loaded, -2 when the text cannot be drawn. */
int devtrust_qrcode_encode(const char *text, int *width, unsigned char **modules, char *error, int error_size);

#endif
