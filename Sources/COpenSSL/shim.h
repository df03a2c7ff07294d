#ifndef DEVTRUST_COPENSSL_SHIM_H
#define DEVTRUST_COPENSSL_SHIM_H

/* See the signing path below. */
#define OPENSSL_SUPPRESS_DEPRECATED 1

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/encoder.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <string.h>
#include <sys/random.h>

/* Swift's Glibc module does not import <sys/random.h>. */
static inline ssize_t devtrust_getrandom(void *buffer, size_t length) {
    return getrandom(buffer, length, 0);
}

/* Swift cannot call C macros: these wrap the ones devtrust needs. */

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

/* EVP_PKEY_CTX keeps type names by pointer, so they must
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

/* A P-256 EC_KEY from its private scalar and the SEC1 encoding of its public
   point, uncompressed or compressed (NULL: computed from the scalar); NULL
   when the point is not on the curve. */
static inline EC_KEY *devtrust_p256_key(const unsigned char private_key[32], const unsigned char *public_point, size_t public_point_length) {
    EC_KEY *key = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1);
    BIGNUM *scalar = BN_secure_new();
    EC_POINT *computed = NULL;
    int ok = key != NULL && scalar != NULL && BN_bin2bn(private_key, 32, scalar) != NULL && EC_KEY_set_private_key(key, scalar) == 1;
    if (ok && public_point != NULL) {
        ok = EC_KEY_oct2key(key, public_point, public_point_length, NULL) == 1;
    } else if (ok) {
        const EC_GROUP *group = EC_KEY_get0_group(key);
        BN_set_flags(scalar, BN_FLG_CONSTTIME);
        ok = (computed = EC_POINT_new(group)) != NULL && EC_POINT_mul(group, computed, scalar, NULL, NULL, NULL) == 1
            && EC_KEY_set_public_key(key, computed) == 1;
    }
    if (!ok) {
        EC_KEY_free(key);
        key = NULL;
    }
    EC_POINT_free(computed);
    BN_clear_free(scalar);
    return key;
}

/* The EC_KEY inside an EVP_PKEY (a new reference), or NULL when it is not EC. */
static inline EC_KEY *devtrust_ec_key_of(EVP_PKEY *key) {
    return EVP_PKEY_get1_EC_KEY(key);
}

/* 1 when the key is on P-256 and writes its uncompressed public point. */
static inline int devtrust_p256_public_point(const EC_KEY *key, unsigned char point[65]) {
    const EC_GROUP *group = EC_KEY_get0_group(key);
    const EC_POINT *public_point = EC_KEY_get0_public_key(key);
    return group != NULL && public_point != NULL && EC_GROUP_get_curve_name(group) == NID_X9_62_prime256v1
        && EC_POINT_point2oct(group, public_point, POINT_CONVERSION_UNCOMPRESSED, point, 65, NULL) == 65;
}

/* Hedged ECDSA nonces: RFC 6979 section 3.2 (HMAC-SHA256 over the private
   key and the digest) with fresh random bytes as the additional data k' of
   section 3.6. A repeated or predictable random source (a VM snapshot
   restored twice, a broken RNG) then still gives each digest its own nonce,
   and a good one protects against faults in the deterministic part. Built on
   the low-level SHA-256: OpenSSL's own hedged path (BN_generate_dsa_nonce)
   fetches SHA-512 through the provider machinery, which costs more than the
   whole signature on `devtrust token`'s path (docs/performance.md). */

/* Constant time is by construction (masks, no branch or index on a secret),
   but an optimiser may turn `a & mask` back into a branch (clang -O3 made the
   masks of devtrust_signed62_reduce conditional jumps). Every mask derived
   from a secret goes through this barrier, which hides its value from the
   optimiser, as libsecp256k1 and BoringSSL do. The constant-time test
   (Tests/Interop/constant_time.c under valgrind) checks the result. */
static inline uint64_t devtrust_value_barrier(uint64_t value) {
    __asm__("" : "+r"(value));
    return value;
}

/* Marks a secret-derived value public where the code branches on it on
   purpose; the constant-time test defines it to tell valgrind. */
#ifndef DEVTRUST_DECLASSIFY
#define DEVTRUST_DECLASSIFY(pointer, length) ((void)(pointer), (void)(length))
#endif

/* The order n of the P-256 group, big-endian. */
static const unsigned char devtrust_p256_order_bytes[32] = {
    0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
};

/* value - n into difference; 1 when value < n. Constant time. */
static inline unsigned devtrust_p256_minus_order(const unsigned char value[32], unsigned char difference[32]) {
    unsigned borrow = 0;
    for (int i = 31; i >= 0; i--) {
        unsigned d = (unsigned)value[i] - devtrust_p256_order_bytes[i] - borrow;
        difference[i] = (unsigned char)d;
        borrow = (d >> 8) & 1;
    }
    return (unsigned)devtrust_value_barrier(borrow);
}

/* 1 when 0 < value < n (a usable nonce or private scalar). Constant time. */
static inline int devtrust_p256_scalar_in_range(const unsigned char value[32]) {
    unsigned char difference[32], any = 0;
    unsigned below = devtrust_p256_minus_order(value, difference);
    for (int i = 0; i < 32; i++) any |= value[i];
    OPENSSL_cleanse(difference, sizeof difference);
    return (int)(below & (unsigned)devtrust_value_barrier((any + 0xFF) >> 8));
}

typedef struct {
    SHA256_CTX inner, outer;
} devtrust_hmac_sha256;

/* HMAC-SHA256 keyed with 32 bytes (shorter than the block: zero-padded). */
static inline void devtrust_hmac_sha256_start(devtrust_hmac_sha256 *hmac, const unsigned char key[32]) {
    unsigned char pad[64];
    for (int i = 0; i < 64; i++) pad[i] = (unsigned char)((i < 32 ? key[i] : 0) ^ 0x36);
    SHA256_Init(&hmac->inner);
    SHA256_Update(&hmac->inner, pad, sizeof pad);
    for (int i = 0; i < 64; i++) pad[i] ^= 0x36 ^ 0x5C;
    SHA256_Init(&hmac->outer);
    SHA256_Update(&hmac->outer, pad, sizeof pad);
    OPENSSL_cleanse(pad, sizeof pad);
}

static inline void devtrust_hmac_sha256_add(devtrust_hmac_sha256 *hmac, const void *data, size_t length) {
    SHA256_Update(&hmac->inner, data, length);
}

static inline void devtrust_hmac_sha256_finish(devtrust_hmac_sha256 *hmac, unsigned char mac[32]) {
    unsigned char inner[32];
    SHA256_Final(inner, &hmac->inner);
    SHA256_Update(&hmac->outer, inner, sizeof inner);
    SHA256_Final(mac, &hmac->outer);
    OPENSSL_cleanse(inner, sizeof inner);
    OPENSSL_cleanse(hmac, sizeof *hmac);
}

/* The HMAC_DRBG of RFC 6979 section 3.2 for P-256 and SHA-256 (qlen = hlen = 256). */
typedef struct {
    unsigned char K[32], V[32];
    int started;
} devtrust_rfc6979;

/* K = HMAC_K(V || separator || seed), then V = HMAC_K(V): steps d to g
   (with the seed x || h1 || k') and the retry of step h.3 (with none). */
static inline void devtrust_rfc6979_reseed(devtrust_rfc6979 *drbg, unsigned char separator, const unsigned char *x, const unsigned char *h,
                                           const unsigned char *additional, size_t additional_length) {
    devtrust_hmac_sha256 hmac;
    devtrust_hmac_sha256_start(&hmac, drbg->K);
    devtrust_hmac_sha256_add(&hmac, drbg->V, 32);
    devtrust_hmac_sha256_add(&hmac, &separator, 1);
    if (x != NULL) devtrust_hmac_sha256_add(&hmac, x, 32);
    if (h != NULL) devtrust_hmac_sha256_add(&hmac, h, 32);
    if (additional_length > 0) devtrust_hmac_sha256_add(&hmac, additional, additional_length);
    devtrust_hmac_sha256_finish(&hmac, drbg->K);
    devtrust_hmac_sha256_start(&hmac, drbg->K);
    devtrust_hmac_sha256_add(&hmac, drbg->V, 32);
    devtrust_hmac_sha256_finish(&hmac, drbg->V);
}

/* Steps b to g: private key x, the digest h1, and k' (the additional data of
   section 3.6; empty for plain RFC 6979). */
static inline void devtrust_rfc6979_start(devtrust_rfc6979 *drbg, const unsigned char x[32], const unsigned char digest[32],
                                          const unsigned char *additional, size_t additional_length) {
    unsigned char h[32], reduced[32];
    /* bits2octets(h1): h1 mod n, as 32 bytes (h1 < 2^256 < 2n: one subtraction at most). */
    unsigned mask = 0u - devtrust_p256_minus_order(digest, reduced);
    for (int i = 0; i < 32; i++) h[i] = (unsigned char)((digest[i] & mask) | (reduced[i] & ~mask));
    memset(drbg->V, 0x01, 32);
    memset(drbg->K, 0x00, 32);
    drbg->started = 0;
    devtrust_rfc6979_reseed(drbg, 0x00, x, h, additional, additional_length);
    devtrust_rfc6979_reseed(drbg, 0x01, x, h, additional, additional_length);
    OPENSSL_cleanse(h, sizeof h);
    OPENSSL_cleanse(reduced, sizeof reduced);
}

/* Step h: the next nonce in [1, n-1]. A later call is the step h.3 retry, for
   a candidate the caller could not use (r or s zero). */
static inline void devtrust_rfc6979_next(devtrust_rfc6979 *drbg, unsigned char k[32]) {
    devtrust_hmac_sha256 hmac;
    int usable;
    do {
        if (drbg->started) devtrust_rfc6979_reseed(drbg, 0x00, NULL, NULL, NULL, 0);
        drbg->started = 1;
        devtrust_hmac_sha256_start(&hmac, drbg->K);
        devtrust_hmac_sha256_add(&hmac, drbg->V, 32);
        devtrust_hmac_sha256_finish(&hmac, drbg->V);
        memcpy(k, drbg->V, 32);
        /* A candidate out of range (probability 2^-32) is drawn again: that it was is all this tells. */
        usable = devtrust_p256_scalar_in_range(k);
        DEVTRUST_DECLASSIFY(&usable, sizeof usable);
    } while (!usable);
}

/* The first RFC 6979 nonce for a private key and digest (for the tests' vectors). */
static inline void devtrust_rfc6979_p256_nonce(const unsigned char x[32], const unsigned char digest[32],
                                               const unsigned char *additional, size_t additional_length, unsigned char k[32]) {
    devtrust_rfc6979 drbg;
    devtrust_rfc6979_start(&drbg, x, digest, additional, additional_length);
    devtrust_rfc6979_next(&drbg, k);
    OPENSSL_cleanse(&drbg, sizeof drbg);
}

/* k^-1 mod n for the nonce, in constant time: Bernstein and Yang's safegcd
   ("Fast constant-time gcd computation and modular inversion", 2019), 744
   divsteps (the bound for 256-bit inputs is 741) in 12 batches of 62 on
   signed 62-bit limbs. OpenSSL's own P-256 inversion (ecp_nistz256_inv_mod_ord)
   is internal; its public generic one, Fermat with BN_mod_exp_mont_consttime,
   costs 15 us per signature and Fermat in portable C 8 us, where this takes
   about 3 (docs/performance.md). Checked against BN_mod_inverse by the tests. */

/* A signed integer as five 62-bit limbs, least significant first: limbs 0-3
   in [0, 2^62), limb 4 signed. */
typedef struct {
    int64_t limb[5];
} devtrust_signed62;

static const devtrust_signed62 devtrust_p256_order_62 = {{0x33B9CAC2FC632551, 0x339BEAB69C5E7A13, 0x3FFFFFFFFFFFFFFB, 0x3FFFFFC00000003F, 0xFF}};
/* n^-1 mod 2^62. */
static const uint64_t devtrust_p256_order_inverse_62 = 0x332E375511FF43B1u;
static const uint64_t devtrust_mask_62 = UINT64_MAX >> 2;

/* The transition matrix of 62 divsteps, scaled by 2^62: |u| + |v| and |q| + |r| <= 2^62. */
typedef struct {
    int64_t u, v, q, r;
} devtrust_divstep_matrix;

/* 62 divsteps on the low 64 bits of f (odd) and g; returns the new delta.
   divstep(delta, f, g) = (1 - delta, g, (g - f) / 2) when delta > 0 and g is odd,
   else (1 + delta, f, (g + (g mod 2) f) / 2); computed without branches. */
static inline int64_t devtrust_divsteps_62(int64_t delta, uint64_t f, uint64_t g, devtrust_divstep_matrix *matrix) {
    uint64_t u = 1, v = 0, q = 0, r = 1;
    for (int i = 0; i < 62; i++) {
        uint64_t positive = devtrust_value_barrier((uint64_t)((-delta) >> 63)), odd = devtrust_value_barrier(0 - (g & 1));
        /* When g is odd: g += f, or g -= f when delta > 0 (each row of the matrix alike) ... */
        g += ((f ^ positive) - positive) & odd;
        q += ((u ^ positive) - positive) & odd;
        r += ((v ^ positive) - positive) & odd;
        /* ... and when both, f takes the old g: f += (g - f). */
        uint64_t swap = devtrust_value_barrier(positive & odd);
        delta = (int64_t)(((uint64_t)delta ^ swap) - swap) + 1;
        f += g & swap;
        u += q & swap;
        v += r & swap;
        g >>= 1;
        u <<= 1;
        v <<= 1;
    }
    matrix->u = (int64_t)u;
    matrix->v = (int64_t)v;
    matrix->q = (int64_t)q;
    matrix->r = (int64_t)r;
    return delta;
}

/* x in (-n, 2n) to [0, n). */
static inline void devtrust_signed62_reduce(devtrust_signed62 *x) {
    const int64_t *n = devtrust_p256_order_62.limb;
    int64_t negative = (int64_t)devtrust_value_barrier((uint64_t)(x->limb[4] >> 63)), carry = 0;
    for (int i = 0; i < 5; i++) {
        int64_t sum = x->limb[i] + (n[i] & negative) + carry;
        x->limb[i] = i < 4 ? (int64_t)((uint64_t)sum & devtrust_mask_62) : sum;
        carry = sum >> 62;
    }
    int64_t reduced[5];
    carry = 0;
    for (int i = 0; i < 5; i++) {
        int64_t difference = x->limb[i] - n[i] + carry;
        reduced[i] = i < 4 ? (int64_t)((uint64_t)difference & devtrust_mask_62) : difference;
        carry = difference >> 62;
    }
    int64_t keep = (int64_t)devtrust_value_barrier((uint64_t)(reduced[4] >> 63));
    for (int i = 0; i < 5; i++) x->limb[i] = (x->limb[i] & keep) | (reduced[i] & ~keep);
}

/* (x, y) = matrix (x, y) / 2^62: exactly for (f, g); modulo n for (d, e) in
   [0, n), where the multiple of n added first makes the division exact. */
static inline void devtrust_apply_divsteps(devtrust_signed62 *x, devtrust_signed62 *y, const devtrust_divstep_matrix *matrix, int modulo_order) {
    typedef __int128 wide;
    const int64_t *n = devtrust_p256_order_62.limb;
    wide cx = (wide)matrix->u * x->limb[0] + (wide)matrix->v * y->limb[0];
    wide cy = (wide)matrix->q * x->limb[0] + (wide)matrix->r * y->limb[0];
    int64_t mx = 0, my = 0;
    if (modulo_order) {
        mx = (int64_t)((0 - (uint64_t)cx * devtrust_p256_order_inverse_62) & devtrust_mask_62);
        my = (int64_t)((0 - (uint64_t)cy * devtrust_p256_order_inverse_62) & devtrust_mask_62);
    }
    cx += (wide)mx * n[0];
    cy += (wide)my * n[0];
    cx >>= 62;
    cy >>= 62;
    for (int i = 1; i < 5; i++) {
        cx += (wide)matrix->u * x->limb[i] + (wide)matrix->v * y->limb[i] + (wide)mx * n[i];
        cy += (wide)matrix->q * x->limb[i] + (wide)matrix->r * y->limb[i] + (wide)my * n[i];
        x->limb[i - 1] = (int64_t)((uint64_t)cx & devtrust_mask_62);
        y->limb[i - 1] = (int64_t)((uint64_t)cy & devtrust_mask_62);
        cx >>= 62;
        cy >>= 62;
    }
    x->limb[4] = (int64_t)cx;
    y->limb[4] = (int64_t)cy;
    if (modulo_order) {
        devtrust_signed62_reduce(x);
        devtrust_signed62_reduce(y);
    }
}

/* inverse = value^-1 mod n, both 32 bytes big-endian, value in [1, n-1]. */
static inline void devtrust_p256_invert_mod_order(const unsigned char value[32], unsigned char inverse[32]) {
    uint64_t word[4];
    for (int j = 0; j < 4; j++) {
        word[j] = 0;
        for (int b = 0; b < 8; b++) word[j] = word[j] << 8 | value[24 - 8 * j + b];
    }
    devtrust_signed62 f = devtrust_p256_order_62, d = {{0, 0, 0, 0, 0}}, e = {{1, 0, 0, 0, 0}};
    devtrust_signed62 g = {{
        (int64_t)(word[0] & devtrust_mask_62), (int64_t)((word[0] >> 62 | word[1] << 2) & devtrust_mask_62),
        (int64_t)((word[1] >> 60 | word[2] << 4) & devtrust_mask_62), (int64_t)((word[2] >> 58 | word[3] << 6) & devtrust_mask_62),
        (int64_t)(word[3] >> 56),
    }};
    devtrust_divstep_matrix matrix;
    int64_t delta = 1;
    /* Invariants: f = d value and g = e value (mod n); at the end g = 0 and f = +-1. */
    for (int batch = 0; batch < 12; batch++) {
        delta = devtrust_divsteps_62(delta, (uint64_t)f.limb[0] | (uint64_t)f.limb[1] << 62,
                                     (uint64_t)g.limb[0] | (uint64_t)g.limb[1] << 62, &matrix);
        devtrust_apply_divsteps(&d, &e, &matrix, 1);
        devtrust_apply_divsteps(&f, &g, &matrix, 0);
    }
    /* f = -1: the inverse is -d, in (-n, 0]. */
    int64_t negative = (int64_t)devtrust_value_barrier((uint64_t)(f.limb[4] >> 63)), carry = 0;
    for (int i = 0; i < 5; i++) {
        int64_t limb = ((d.limb[i] ^ negative) - negative) + carry;
        d.limb[i] = i < 4 ? (int64_t)((uint64_t)limb & devtrust_mask_62) : limb;
        carry = limb >> 62;
    }
    devtrust_signed62_reduce(&d);
    word[0] = (uint64_t)d.limb[0] | (uint64_t)d.limb[1] << 62;
    word[1] = (uint64_t)d.limb[1] >> 2 | (uint64_t)d.limb[2] << 60;
    word[2] = (uint64_t)d.limb[2] >> 4 | (uint64_t)d.limb[3] << 58;
    word[3] = (uint64_t)d.limb[3] >> 6 | (uint64_t)d.limb[4] << 56;
    for (int j = 0; j < 4; j++) {
        for (int b = 0; b < 8; b++) inverse[31 - 8 * j - b] = (unsigned char)(word[j] >> (8 * b));
    }
    OPENSSL_cleanse(word, sizeof word);
    OPENSSL_cleanse(&f, sizeof f);
    OPENSSL_cleanse(&g, sizeof g);
    OPENSSL_cleanse(&d, sizeof d);
    OPENSSL_cleanse(&e, sizeof e);
    OPENSSL_cleanse(&matrix, sizeof matrix);
}

/* ECDSA with the nonce k (32 bytes, in [1, n-1]): r = x(kG) mod n and
   k^-1 (above), then ECDSA_do_sign_ex, which with kinv and r supplied draws no
   randomness. 1: signed; 0: r or s is zero, try the next nonce; -1: error. */
static inline int devtrust_p256_sign_with_nonce(EC_KEY *key, const unsigned char digest[32], const unsigned char k_bytes[32],
                                                BN_CTX *context, unsigned char r[32], unsigned char s[32]) {
    const EC_GROUP *group = EC_KEY_get0_group(key);
    const BIGNUM *order = EC_GROUP_get0_order(group);
    BIGNUM *k = BN_secure_new(), *kinv = BN_secure_new(), *rp = BN_new(), *point_x = BN_new();
    EC_POINT *point = EC_POINT_new(group);
    unsigned char kinv_bytes[32];
    ECDSA_SIG *signature = NULL;
    int result = -1;
    if (k == NULL || kinv == NULL || rp == NULL || point_x == NULL || point == NULL || order == NULL) goto done;
    if (BN_bin2bn(k_bytes, 32, k) == NULL) goto done;
    BN_set_flags(k, BN_FLG_CONSTTIME);
    if (EC_POINT_mul(group, point, k, NULL, NULL, context) != 1
            || EC_POINT_get_affine_coordinates(group, point, point_x, NULL, context) != 1
            || BN_nnmod(rp, point_x, order, context) != 1) goto done;
    if (BN_is_zero(rp)) {
        result = 0;
        goto done;
    }
    devtrust_p256_invert_mod_order(k_bytes, kinv_bytes);
    if (BN_bin2bn(kinv_bytes, 32, kinv) == NULL) goto done;
    signature = ECDSA_do_sign_ex(digest, 32, kinv, rp, key);
    if (signature == NULL) {
        /* s == 0 (probability 2^-256): OpenSSL asks for another nonce. */
        result = ERR_GET_REASON(ERR_peek_last_error()) == EC_R_NEED_NEW_SETUP_VALUES ? 0 : -1;
        if (result == 0) ERR_clear_error();
        goto done;
    }
    result = BN_bn2binpad(ECDSA_SIG_get0_r(signature), r, 32) == 32 && BN_bn2binpad(ECDSA_SIG_get0_s(signature), s, 32) == 32 ? 1 : -1;
done:
    ECDSA_SIG_free(signature);
    EC_POINT_clear_free(point);
    BN_clear_free(k);
    BN_clear_free(kinv);
    BN_free(rp);
    BN_clear_free(point_x);
    OPENSSL_cleanse(kinv_bytes, sizeof kinv_bytes);
    return result;
}

/* ECDSA over a SHA-256 digest with a hedged RFC 6979 nonce; `additional`
   is fresh randomness (k'); r and s as 32 big-endian bytes each. */
static inline int devtrust_p256_sign(EC_KEY *key, const unsigned char digest[32], const unsigned char *additional, size_t additional_length,
                                     unsigned char r[32], unsigned char s[32]) {
    const BIGNUM *private_key = EC_KEY_get0_private_key(key);
    unsigned char x[32], k[32];
    devtrust_rfc6979 drbg;
    BN_CTX *context = BN_CTX_secure_new();
    int result = -1;
    if (private_key != NULL && context != NULL && BN_bn2binpad(private_key, x, 32) == 32) {
        devtrust_rfc6979_start(&drbg, x, digest, additional, additional_length);
        for (int attempt = 0; attempt < 4 && result != 1; attempt++) {
            devtrust_rfc6979_next(&drbg, k);
            result = devtrust_p256_sign_with_nonce(key, digest, k, context, r, s);
            if (result < 0) break;
        }
    }
    OPENSSL_cleanse(x, sizeof x);
    OPENSSL_cleanse(k, sizeof k);
    OPENSSL_cleanse(&drbg, sizeof drbg);
    BN_CTX_free(context);
    return result == 1;
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

#endif
