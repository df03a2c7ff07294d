#ifndef DEVTRUST_TSS2_H
#define DEVTRUST_TSS2_H

#include <stddef.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

/* The TSS functions devtrust calls. */
#define DEVTRUST_TSS2_FUNCTIONS(F) \
    F(Esys_Initialize) F(Esys_Finalize) F(Esys_Free) F(Esys_FlushContext) \
    F(Esys_TR_FromTPMPublic) F(Esys_TR_Serialize) F(Esys_TR_Deserialize) F(Esys_TR_Close) \
    F(Esys_ReadPublic) F(Esys_CreatePrimary) F(Esys_EvictControl) F(Esys_Create) F(Esys_Load) \
    F(Esys_Sign) F(Esys_GetCapability) \
    F(Tss2_TctiLdr_Initialize) F(Tss2_TctiLdr_Finalize) F(Tss2_RC_Decode) \
    F(Tss2_MU_TPM2B_PUBLIC_Marshal) F(Tss2_MU_TPM2B_PUBLIC_Unmarshal) \
    F(Tss2_MU_TPM2B_PRIVATE_Marshal) F(Tss2_MU_TPM2B_PRIVATE_Unmarshal)

struct devtrust_tss2 {
#define DEVTRUST_TSS2_MEMBER(name) __typeof__(&name) _Nonnull name;
    DEVTRUST_TSS2_FUNCTIONS(DEVTRUST_TSS2_MEMBER)
#undef DEVTRUST_TSS2_MEMBER
};

/* The TSS functions, loaded on first use; NULL when tpm2-tss is not
   installed, with the loader's reason in `error`. */
const struct devtrust_tss2 *_Nullable devtrust_tss2_load(char *_Nonnull error, size_t error_size);

/* TPM2_Sign of a SHA-256 digest with ECDSA-SHA256 and a null hashcheck ticket
   (allowed for unrestricted keys); r and s are copied out as the TPM gives them. */
TSS2_RC devtrust_sign_digest(const struct devtrust_tss2 *_Nonnull tss, ESYS_CONTEXT *_Nonnull context, ESYS_TR key,
                             const uint8_t digest[_Nonnull 32], uint8_t r[_Nonnull 66], uint16_t *_Nonnull r_size,
                             uint8_t s[_Nonnull 66], uint16_t *_Nonnull s_size);

/* One fixed TPM property (TPM2_PT_*) by GetCapability. */
TSS2_RC devtrust_tpm_property(const struct devtrust_tss2 *_Nonnull tss, ESYS_CONTEXT *_Nonnull context,
                              uint32_t property, uint32_t *_Nonnull value);

#endif
