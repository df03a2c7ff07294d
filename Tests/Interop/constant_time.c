/* ctgrind-style check of the secret-dependent C in Sources/COpenSSL/shim.h:
   the nonce inversion (safegcd) and the RFC 6979 nonce derivation. The secret
   inputs are marked undefined for valgrind's memcheck, which then reports any
   branch or memory index that depends on them ("Conditional jump or move
   depends on uninitialised value(s)"). What the compiler makes of the masks
   decides it, so the tests build this with several compilers and flags.
   Build: cc -O2 -I Sources/COpenSSL constant_time.c -lcrypto
   Run:   valgrind --error-exitcode=3 ./a.out [control]
   With "control" it also branches on a secret itself, which valgrind must
   report: the check is not blind. */
#include <valgrind/memcheck.h>

/* Where shim.h branches on a secret-derived value on purpose (a nonce
   candidate out of range is drawn again: that reveals only the rejection). */
#define DEVTRUST_DECLASSIFY(pointer, length) VALGRIND_MAKE_MEM_DEFINED(pointer, length)
#include "shim.h"

#include <stdio.h>

#define ROUNDS 24

static void random_scalar(unsigned char value[32]) {
    do {
        if (getrandom(value, 32, 0) != 32) abort();
    } while (!devtrust_p256_scalar_in_range(value));
}

int main(int argc, char **argv) {
    unsigned char value[32], inverse[32], x[32], digest[32], additional[32], k[32];
    BN_CTX *context = BN_CTX_new();
    BIGNUM *order = BN_bin2bn(devtrust_p256_order_bytes, 32, NULL), *expected = BN_new(), *number = BN_new();
    int wrong = 0;
    for (int round = 0; round < ROUNDS; round++) {
        random_scalar(value);
        /* Edge values too: 1 and n - 1. */
        if (round == 0) memset(value, 0, 32), value[31] = 1;
        if (round == 1) memcpy(value, devtrust_p256_order_bytes, 32), value[31] -= 1;
        BN_bin2bn(value, 32, number);
        BN_mod_inverse(expected, number, order, context);

        VALGRIND_MAKE_MEM_UNDEFINED(value, 32);
        if (argc > 1 && strcmp(argv[1], "control") == 0 && (value[7] & 1)) {
            static volatile int branched;
            branched = 1;
        }
        devtrust_p256_invert_mod_order(value, inverse);
        VALGRIND_MAKE_MEM_DEFINED(inverse, 32);
        unsigned char expected_bytes[32];
        BN_bn2binpad(expected, expected_bytes, 32);
        wrong += memcmp(inverse, expected_bytes, 32) != 0;

        random_scalar(x);
        if (getrandom(digest, 32, 0) != 32 || getrandom(additional, 32, 0) != 32) abort();
        VALGRIND_MAKE_MEM_UNDEFINED(x, 32);
        VALGRIND_MAKE_MEM_UNDEFINED(additional, 32);
        /* The digest is public, and RFC 6979 alone (no k') too. */
        devtrust_rfc6979_p256_nonce(x, digest, additional, 32, k);
        devtrust_rfc6979_p256_nonce(x, digest, NULL, 0, k);
        int in_range = devtrust_p256_scalar_in_range(x);
        VALGRIND_MAKE_MEM_DEFINED(&in_range, sizeof in_range);
        wrong += in_range != 1;
    }
    printf("%d rounds, %d wrong\n", ROUNDS, wrong);
    BN_free(order);
    BN_free(expected);
    BN_free(number);
    BN_CTX_free(context);
    return wrong != 0;
}
