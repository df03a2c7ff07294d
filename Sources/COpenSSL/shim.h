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
#include <openssl/param_build.h>
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

/* A P-256 key pair from its private scalar and uncompressed public point:
   about 50 us, where OpenSSL's PEM decoder chain takes about 600 us. */
static inline EVP_PKEY *devtrust_ec_p256_keypair(const unsigned char private_key[32], const unsigned char public_key[65]) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    BIGNUM *scalar = BN_secure_new();
    OSSL_PARAM *params = NULL;
    if (context && builder && scalar && BN_bin2bn(private_key, 32, scalar)
            && OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0)
            && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_PRIV_KEY, scalar)
            && OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, public_key, 65)
            && (params = OSSL_PARAM_BLD_to_param(builder)) != NULL
            && EVP_PKEY_fromdata_init(context) == 1) {
        if (EVP_PKEY_fromdata(context, &key, EVP_PKEY_KEYPAIR, params) != 1) key = NULL;
    }
    OSSL_PARAM_free(params);
    BN_clear_free(scalar);
    OSSL_PARAM_BLD_free(builder);
    EVP_PKEY_CTX_free(context);
    return key;
}

/* HASH-DRBG with SHA-256 (NIST SP 800-90A) sets up in about half the time of
   the default CTR-DRBG, which every `devtrust token` pays once. */
static inline int devtrust_use_hash_drbg(void) {
    return RAND_set_DRBG_type(NULL, "HASH-DRBG", NULL, NULL, "SHA256");
}

/* A key pair's private and public parts agree. */
static inline int devtrust_pairwise_check(EVP_PKEY *key) {
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
    int ok = context != NULL && EVP_PKEY_pairwise_check(context) == 1;
    EVP_PKEY_CTX_free(context);
    return ok;
}

static inline OSSL_DECODER_CTX *devtrust_pkcs8_pem_decoder(EVP_PKEY **pkey) {
    return OSSL_DECODER_CTX_new_for_pkey(pkey, "PEM", "PrivateKeyInfo", "EC", EVP_PKEY_KEYPAIR, NULL, NULL);
}

#endif
