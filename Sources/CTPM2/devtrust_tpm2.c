#include "devtrust_tpm2.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static struct devtrust_tss2 api;
static int loaded;
static char load_error[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void *open_library(const char *name) {
    void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL && load_error[0] == 0) snprintf(load_error, sizeof load_error, "%s", dlerror());
    return library;
}

static void load(void) {
    void *esys = open_library(DEVTRUST_TSS2_ESYS_LIBRARY);
    void *tctildr = open_library(DEVTRUST_TSS2_TCTILDR_LIBRARY);
    void *mu = open_library(DEVTRUST_TSS2_MU_LIBRARY);
    void *rc = open_library(DEVTRUST_TSS2_RC_LIBRARY);
    if (esys == NULL || tctildr == NULL || mu == NULL || rc == NULL) return;
    void *libraries[] = { esys, tctildr, mu, rc };
    /* Each name is looked up in every library: which one exports it is the TSS's business. */
#define DEVTRUST_TSS2_RESOLVE(name) \
    for (size_t i = 0; i < sizeof libraries / sizeof libraries[0] && *(void **)&api.name == NULL; i++) \
        *(void **)&api.name = dlsym(libraries[i], #name); \
    if (*(void **)&api.name == NULL) { \
        snprintf(load_error, sizeof load_error, "the installed tpm2-tss has no %s", #name); \
        return; \
    }
    DEVTRUST_TSS2_FUNCTIONS(DEVTRUST_TSS2_RESOLVE)
#undef DEVTRUST_TSS2_RESOLVE
    loaded = 1;
}

const struct devtrust_tss2 *devtrust_tss2_load(char *error, size_t error_size) {
    pthread_once(&load_once, load);
    if (loaded) return &api;
    snprintf(error, error_size, "%s", load_error[0] ? load_error : "tpm2-tss could not be loaded");
    return NULL;
}

TSS2_RC devtrust_sign_digest(const struct devtrust_tss2 *tss, ESYS_CONTEXT *context, ESYS_TR key, ESYS_TR session, const uint8_t digest[32],
                             uint8_t r[66], uint16_t *r_size, uint8_t s[66], uint16_t *s_size) {
    TPM2B_DIGEST message;
    memset(&message, 0, sizeof message);
    message.size = 32;
    memcpy(message.buffer, digest, 32);
    TPMT_SIG_SCHEME scheme;
    memset(&scheme, 0, sizeof scheme);
    scheme.scheme = TPM2_ALG_ECDSA;
    scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    TPMT_TK_HASHCHECK ticket;
    memset(&ticket, 0, sizeof ticket);
    ticket.tag = TPM2_ST_HASHCHECK;
    ticket.hierarchy = TPM2_RH_NULL;
    TPMT_SIGNATURE *signature = NULL;
    TSS2_RC rc = tss->Esys_Sign(context, key, session, ESYS_TR_NONE, ESYS_TR_NONE, &message, &scheme, &ticket, &signature);
    if (rc != TSS2_RC_SUCCESS) return rc;
    const TPMS_SIGNATURE_ECC *ecdsa = &signature->signature.ecdsa;
    if (signature->sigAlg != TPM2_ALG_ECDSA || ecdsa->signatureR.size > 66 || ecdsa->signatureS.size > 66) {
        tss->Esys_Free(signature);
        return TSS2_ESYS_RC_MALFORMED_RESPONSE;
    }
    memcpy(r, ecdsa->signatureR.buffer, ecdsa->signatureR.size);
    memcpy(s, ecdsa->signatureS.buffer, ecdsa->signatureS.size);
    *r_size = ecdsa->signatureR.size;
    *s_size = ecdsa->signatureS.size;
    tss->Esys_Free(signature);
    return TSS2_RC_SUCCESS;
}

TSS2_RC devtrust_tpm_property(const struct devtrust_tss2 *tss, ESYS_CONTEXT *context, uint32_t property, uint32_t *value) {
    TPMS_CAPABILITY_DATA *data = NULL;
    TPMI_YES_NO more = 0;
    TSS2_RC rc = tss->Esys_GetCapability(context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                         TPM2_CAP_TPM_PROPERTIES, property, 1, &more, &data);
    if (rc != TSS2_RC_SUCCESS) return rc;
    int found = data->data.tpmProperties.count >= 1 && data->data.tpmProperties.tpmProperty[0].property == property;
    if (found) *value = data->data.tpmProperties.tpmProperty[0].value;
    tss->Esys_Free(data);
    return found ? TSS2_RC_SUCCESS : TSS2_ESYS_RC_MALFORMED_RESPONSE;
}

TSS2_RC devtrust_start_salted_session(const struct devtrust_tss2 *tss, ESYS_CONTEXT *context, ESYS_TR salt_key, ESYS_TR *session) {
    TPMT_SYM_DEF symmetric;
    memset(&symmetric, 0, sizeof symmetric);
    symmetric.algorithm = TPM2_ALG_AES;
    symmetric.keyBits.aes = 128;
    symmetric.mode.aes = TPM2_ALG_CFB;
    TSS2_RC rc = tss->Esys_StartAuthSession(context, salt_key, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                            NULL, TPM2_SE_HMAC, &symmetric, TPM2_ALG_SHA256, session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = tss->Esys_TRSess_SetAttributes(context, *session, TPMA_SESSION_CONTINUESESSION, 0xFF);
    if (rc != TSS2_RC_SUCCESS) {
        tss->Esys_FlushContext(context, *session);
        *session = ESYS_TR_NONE;
    }
    return rc;
}

TSS2_RC devtrust_read_public_in_session(const struct devtrust_tss2 *tss, ESYS_CONTEXT *context, ESYS_TR object,
                                        ESYS_TR session, uint8_t public[1024], size_t *public_size) {
    TSS2_RC rc = tss->Esys_TRSess_SetAttributes(context, session, TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_ENCRYPT, 0xFF);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_PUBLIC *area = NULL;
    rc = tss->Esys_ReadPublic(context, object, session, ESYS_TR_NONE, ESYS_TR_NONE, &area, NULL, NULL);
    TSS2_RC restored = tss->Esys_TRSess_SetAttributes(context, session, TPMA_SESSION_CONTINUESESSION, 0xFF);
    if (rc == TSS2_RC_SUCCESS) {
        *public_size = 0;
        rc = tss->Tss2_MU_TPM2B_PUBLIC_Marshal(area, public, 1024, public_size);
    }
    tss->Esys_Free(area);
    return rc != TSS2_RC_SUCCESS ? rc : restored;
}

TSS2_RC devtrust_object_name(const struct devtrust_tss2 *tss, ESYS_CONTEXT *context, ESYS_TR object, uint8_t name[68], uint16_t *name_size) {
    TPM2B_NAME *value = NULL;
    TSS2_RC rc = tss->Esys_TR_GetName(context, object, &value);
    if (rc != TSS2_RC_SUCCESS) return rc;
    if (value->size > 68) {
        tss->Esys_Free(value);
        return TSS2_ESYS_RC_MALFORMED_RESPONSE;
    }
    memcpy(name, value->name, value->size);
    *name_size = value->size;
    tss->Esys_Free(value);
    return TSS2_RC_SUCCESS;
}

TSS2_RC devtrust_create_primary_from(const struct devtrust_tss2 *tss, ESYS_CONTEXT *context,
                                     const uint8_t *public, size_t public_size, int zero_unique, ESYS_TR *object) {
    TPM2B_PUBLIC template;
    memset(&template, 0, sizeof template);
    size_t offset = 0;
    TSS2_RC rc = tss->Tss2_MU_TPM2B_PUBLIC_Unmarshal(public, public_size, &offset, &template);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPMT_PUBLIC *area = &template.publicArea;
    /* A zero-filled unique field has the size the template's summary gives;
       a template without one (an unusual curve) has no such variant. */
    struct devtrust_template_summary summary;
    UINT16 size = 0;
    if (zero_unique) {
        if (!devtrust_template_summary(&template, &summary)) return TSS2_ESYS_RC_BAD_VALUE;
        size = summary.zero_unique_size;
    }
    switch (area->type) {
    case TPM2_ALG_ECC:
        memset(&area->unique.ecc, 0, sizeof area->unique.ecc);
        area->unique.ecc.x.size = size;
        area->unique.ecc.y.size = size;
        break;
    case TPM2_ALG_RSA:
        memset(&area->unique.rsa, 0, sizeof area->unique.rsa);
        area->unique.rsa.size = size;
        break;
    default:
        return TSS2_ESYS_RC_BAD_VALUE;
    }
    TPM2B_SENSITIVE_CREATE sensitive;
    memset(&sensitive, 0, sizeof sensitive);
    TPM2B_DATA outside_info;
    memset(&outside_info, 0, sizeof outside_info);
    TPML_PCR_SELECTION creation_pcr;
    memset(&creation_pcr, 0, sizeof creation_pcr);
    return tss->Esys_CreatePrimary(context, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                   &sensitive, &template, &outside_info, &creation_pcr, object, NULL, NULL, NULL, NULL);
}

TSS2_RC devtrust_read_public_names(const struct devtrust_tss2 *tss, ESYS_CONTEXT *context, ESYS_TR object,
                                   uint8_t name[68], uint16_t *name_size, uint8_t qualified_name[68], uint16_t *qualified_name_size) {
    TPM2B_NAME *read_name = NULL, *read_qualified_name = NULL;
    TSS2_RC rc = tss->Esys_ReadPublic(context, object, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL, &read_name, &read_qualified_name);
    if (rc == TSS2_RC_SUCCESS && (read_name->size > 68 || read_qualified_name->size > 68)) rc = TSS2_ESYS_RC_MALFORMED_RESPONSE;
    if (rc == TSS2_RC_SUCCESS) {
        memcpy(name, read_name->name, read_name->size);
        *name_size = read_name->size;
        memcpy(qualified_name, read_qualified_name->name, read_qualified_name->size);
        *qualified_name_size = read_qualified_name->size;
    }
    tss->Esys_Free(read_name);
    tss->Esys_Free(read_qualified_name);
    return rc;
}

TSS2_RC devtrust_transient_handles(const struct devtrust_tss2 *tss, ESYS_CONTEXT *context, uint32_t *handles, uint32_t capacity, uint32_t *count) {
    *count = 0;
    TPM2_HANDLE next = TPM2_TRANSIENT_FIRST;
    TPMI_YES_NO more = TPM2_YES;
    while (more == TPM2_YES && *count < capacity) {
        TPMS_CAPABILITY_DATA *data = NULL;
        TSS2_RC rc = tss->Esys_GetCapability(context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                             TPM2_CAP_HANDLES, next, TPM2_MAX_CAP_HANDLES, &more, &data);
        if (rc != TSS2_RC_SUCCESS) return rc;
        const TPML_HANDLE *listed = &data->data.handles;
        uint32_t added = 0;
        for (uint32_t i = 0; i < listed->count && i < TPM2_MAX_CAP_HANDLES && *count < capacity; i++) {
            TPM2_HANDLE handle = listed->handle[i];
            /* Only transient objects, in ascending order (a TPM that answers otherwise ends the list). */
            if (handle >> 24 != TPM2_HT_TRANSIENT || handle < next) continue;
            handles[(*count)++] = handle;
            next = handle + 1;
            added++;
        }
        tss->Esys_Free(data);
        if (added == 0) break;
    }
    return TSS2_RC_SUCCESS;
}
