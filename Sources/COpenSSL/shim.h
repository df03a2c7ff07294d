#ifndef DEVTRUST_COPENSSL_SHIM_H
#define DEVTRUST_COPENSSL_SHIM_H

/* See the signing path below. */
#define OPENSSL_SUPPRESS_DEPRECATED 1

#include <errno.h>
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
#include <openssl/sha.h>
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

/* The signing path (`devtrust token`, `sign-challenge`) uses EC_KEY and
   ECDSA_do_sign_ex directly: the same P-256 code the default provider wraps,
   without the provider fetches, whose first use builds OpenSSL's name map and
   a DRBG (about 1.2 ms of every `devtrust token`). These functions are
   deprecated in OpenSSL 3 but present through 3.x; OPENSSL_SUPPRESS_DEPRECATED
   above keeps the warnings out of every module that imports this header. */

/* A P-256 EC_KEY from its private scalar and uncompressed public point; NULL
   when the point is not on the curve. */
static inline EC_KEY *devtrust_p256_key(const unsigned char private_key[32], const unsigned char public_point[65]) {
    EC_KEY *key = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1);
    BIGNUM *scalar = BN_secure_new();
    if (key == NULL || scalar == NULL || BN_bin2bn(private_key, 32, scalar) == NULL
            || EC_KEY_set_private_key(key, scalar) != 1
            || EC_KEY_oct2key(key, public_point, 65, NULL) != 1) {
        EC_KEY_free(key);
        key = NULL;
    }
    BN_clear_free(scalar);
    return key;
}

/* The EC_KEY inside an EVP_PKEY (a new reference), or NULL when it is not EC. */
static inline EC_KEY *devtrust_ec_key_of(EVP_PKEY *key) {
    return EVP_PKEY_get1_EC_KEY(key);
}

/* An EVP_PKEY sharing `key`, for OpenSSL's encoders. */
static inline EVP_PKEY *devtrust_evp_of_ec_key(EC_KEY *key) {
    EVP_PKEY *pkey = EVP_PKEY_new();
    if (pkey != NULL && EVP_PKEY_set1_EC_KEY(pkey, key) != 1) {
        EVP_PKEY_free(pkey);
        pkey = NULL;
    }
    return pkey;
}

/* 1 when the key is on P-256 and writes its uncompressed public point. */
static inline int devtrust_p256_public_point(const EC_KEY *key, unsigned char point[65]) {
    const EC_GROUP *group = EC_KEY_get0_group(key);
    const EC_POINT *public_point = EC_KEY_get0_public_key(key);
    return group != NULL && public_point != NULL && EC_GROUP_get_curve_name(group) == NID_X9_62_prime256v1
        && EC_POINT_point2oct(group, public_point, POINT_CONVERSION_UNCOMPRESSED, point, 65, NULL) == 65;
}

/* ECDSA over a SHA-256 digest; r and s as 32 big-endian bytes each. The nonce
   is uniform in [1, n-1] from the RAND method (the kernel CSPRNG, below). */
static inline int devtrust_p256_sign(EC_KEY *key, const unsigned char digest[32], unsigned char r[32], unsigned char s[32]) {
    for (int attempt = 0; attempt < 4; attempt++) {
        BIGNUM *kinv = NULL, *rp = NULL;
        ECDSA_SIG *signature = NULL;
        int ok = ECDSA_sign_setup(key, NULL, &kinv, &rp) == 1
            && (signature = ECDSA_do_sign_ex(digest, 32, kinv, rp, key)) != NULL
            && BN_bn2binpad(ECDSA_SIG_get0_r(signature), r, 32) == 32
            && BN_bn2binpad(ECDSA_SIG_get0_s(signature), s, 32) == 32;
        ECDSA_SIG_free(signature);
        BN_clear_free(kinv);
        BN_clear_free(rp);
        if (ok) return 1;
        /* s == 0 for this nonce (probability 2^-256): OpenSSL asks for a new setup. */
    }
    return 0;
}

/* The private key belongs to the public key, and both are valid. */
static inline int devtrust_p256_check(const EC_KEY *key) {
    return EC_KEY_check_key(key);
}

static inline void devtrust_sha256(const void *data, size_t length, unsigned char digest[32]) {
    SHA256_CTX context;
    SHA256_Init(&context);
    SHA256_Update(&context, data, length);
    SHA256_Final(digest, &context);
    OPENSSL_cleanse(&context, sizeof context);
}

/* OpenSSL's randomness straight from getrandom(2), the kernel CSPRNG that
   OpenSSL's own DRBG seeds from; instantiating that DRBG costs ~0.5 ms. */
static inline int devtrust_kernel_random_bytes(unsigned char *buffer, int length) {
    while (length > 0) {
        ssize_t got = getrandom(buffer, (size_t)length, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return 0;
        }
        buffer += got;
        length -= (int)got;
    }
    return 1;
}

static inline int devtrust_kernel_random_status(void) {
    return 1;
}

static inline int devtrust_use_kernel_random(void) {
    static const RAND_METHOD method = {
        NULL, devtrust_kernel_random_bytes, NULL, NULL, devtrust_kernel_random_bytes, devtrust_kernel_random_status,
    };
    return RAND_set_rand_method(&method);
}

static inline OSSL_DECODER_CTX *devtrust_pkcs8_pem_decoder(EVP_PKEY **pkey) {
    return OSSL_DECODER_CTX_new_for_pkey(pkey, "PEM", "PrivateKeyInfo", "EC", EVP_PKEY_KEYPAIR, NULL, NULL);
}

#endif
