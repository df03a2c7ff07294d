#ifndef DEVTRUST_COPENSSL_SHIM_H
#define DEVTRUST_COPENSSL_SHIM_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/decoder.h>
#include <openssl/ec.h>
#include <openssl/encoder.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <sys/random.h>

/* Swift's Glibc module does not import <sys/random.h>. */
static inline ssize_t devtrust_getrandom(void *buffer, size_t length) {
    return getrandom(buffer, length, 0);
}

/* Swift cannot call C macros: these wrap the ones devtrust needs. */

static inline long devtrust_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

static inline int devtrust_EVP_PKEY_KEYPAIR(void) {
    return EVP_PKEY_KEYPAIR;
}

static inline int devtrust_EVP_PKEY_PUBLIC_KEY(void) {
    return EVP_PKEY_PUBLIC_KEY;
}

static inline uint64_t devtrust_OPENSSL_INIT_NO_LOAD_CONFIG(void) {
    return OPENSSL_INIT_NO_LOAD_CONFIG;
}

static inline void devtrust_OPENSSL_cleanse(void *ptr, size_t len) {
    OPENSSL_cleanse(ptr, len);
}

static inline void devtrust_OPENSSL_free(void *ptr) {
    OPENSSL_free(ptr);
}

/* OSSL_DECODER_CTX and EVP_PKEY_CTX keep type names by pointer, so they must
   outlive the context: C literals do, Swift's temporary C strings do not. */
static inline EVP_PKEY_CTX *devtrust_ec_keygen_context(void) {
    return EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
}

static inline OSSL_DECODER_CTX *devtrust_pkcs8_pem_decoder(EVP_PKEY **pkey) {
    return OSSL_DECODER_CTX_new_for_pkey(pkey, "PEM", "PrivateKeyInfo", "EC", EVP_PKEY_KEYPAIR, NULL, NULL);
}

#endif
