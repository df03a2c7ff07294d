#ifndef DEVTRUST_TPM2_H
#define DEVTRUST_TPM2_H

/* tpm2-tss, loaded with dlopen when a command needs the TPM: the software key
   path (`devtrust token` on most machines) then never maps the five TSS
   libraries (about 0.5 ms of every start), and devtrust runs where tpm2-tss
   is not installed. The headers give the types; the functions come through
   `struct devtrust_tss2`, whose members carry the TSS's own names
   (devtrust_tss2.h). */

#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

#include "devtrust_tss2.h"

/* The TSS headers define their constants as casts (`((TPM2_RH) 0x40000001)`),
   which Swift cannot import; these give Swift the few it needs, and build the
   templates as the C reference code does. */

static inline uint32_t devtrust_TPM2_RH_OWNER(void) { return TPM2_RH_OWNER; }
static inline uint32_t devtrust_TPM2_PERSISTENT_FIRST(void) { return TPM2_PERSISTENT_FIRST; }
static inline uint32_t devtrust_TPM2_CAP_TPM_PROPERTIES(void) { return TPM2_CAP_TPM_PROPERTIES; }
static inline uint32_t devtrust_TPM2_PT_MANUFACTURER(void) { return TPM2_PT_MANUFACTURER; }
static inline uint32_t devtrust_TPM2_PT_FIRMWARE_VERSION_1(void) { return TPM2_PT_FIRMWARE_VERSION_1; }
static inline uint32_t devtrust_TPM2_PT_FIRMWARE_VERSION_2(void) { return TPM2_PT_FIRMWARE_VERSION_2; }

/* The ECC P-256 storage root key template of tpm2-openssl (and so of any key
   file with parent 0x40000001): restricted decrypt, AES-128-CFB, noDA, empty unique. */
static inline TPM2B_PUBLIC devtrust_srk_template(void) {
    TPM2B_PUBLIC template;
    memset(&template, 0, sizeof template);
    template.publicArea.type = TPM2_ALG_ECC;
    template.publicArea.nameAlg = TPM2_ALG_SHA256;
    template.publicArea.objectAttributes = TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT
        | TPMA_OBJECT_NODA | TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN;
    template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    template.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    template.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    return template;
}

/* The device key: an unrestricted ECC P-256 signing key, ECDSA with SHA-256,
   that cannot leave this TPM (fixedTPM, fixedParent, sensitiveDataOrigin). */
static inline TPM2B_PUBLIC devtrust_signing_key_template(void) {
    TPM2B_PUBLIC template;
    memset(&template, 0, sizeof template);
    template.publicArea.type = TPM2_ALG_ECC;
    template.publicArea.nameAlg = TPM2_ALG_SHA256;
    template.publicArea.objectAttributes = TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
        | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH;
    template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDSA;
    template.publicArea.parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    return template;
}

/* 0 when `public` is a key devtrust can sign with; otherwise why not:
   1 not ECC, 2 not P-256, 3 no sign attribute, 4 restricted, 5 a scheme other than ECDSA-SHA256. */
static inline int devtrust_signing_key_problem(const TPM2B_PUBLIC *public) {
    const TPMT_PUBLIC *area = &public->publicArea;
    if (area->type != TPM2_ALG_ECC) return 1;
    if (area->parameters.eccDetail.curveID != TPM2_ECC_NIST_P256) return 2;
    if (!(area->objectAttributes & TPMA_OBJECT_SIGN_ENCRYPT)) return 3;
    if (area->objectAttributes & TPMA_OBJECT_RESTRICTED) return 4;
    TPMI_ALG_ECC_SCHEME scheme = area->parameters.eccDetail.scheme.scheme;
    if (scheme != TPM2_ALG_NULL && !(scheme == TPM2_ALG_ECDSA
            && area->parameters.eccDetail.scheme.details.ecdsa.hashAlg == TPM2_ALG_SHA256)) return 5;
    return 0;
}

/* A parent devtrust can create keys under: a restricted decryption (storage) key. */
static inline int devtrust_is_storage_key(const TPM2B_PUBLIC *public) {
    TPMA_OBJECT attributes = public->publicArea.objectAttributes;
    return (attributes & TPMA_OBJECT_RESTRICTED) && (attributes & TPMA_OBJECT_DECRYPT)
        && !(attributes & TPMA_OBJECT_SIGN_ENCRYPT);
}

/* Copies the ECC public point; returns 0 when it is not an ECC key or too long. */
static inline int devtrust_public_point(const TPM2B_PUBLIC *public, uint8_t x[32], uint16_t *x_size,
                                        uint8_t y[32], uint16_t *y_size) {
    const TPMS_ECC_POINT *point = &public->publicArea.unique.ecc;
    if (public->publicArea.type != TPM2_ALG_ECC || point->x.size > 32 || point->y.size > 32) return 0;
    memcpy(x, point->x.buffer, point->x.size);
    memcpy(y, point->y.buffer, point->y.size);
    *x_size = point->x.size;
    *y_size = point->y.size;
    return 1;
}

/* The empty sensitive part (emptyAuth) and the empty creation inputs. */
static inline TPM2B_SENSITIVE_CREATE devtrust_empty_sensitive(void) {
    TPM2B_SENSITIVE_CREATE sensitive;
    memset(&sensitive, 0, sizeof sensitive);
    return sensitive;
}

#endif
