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
    F(Esys_TR_FromTPMPublic) F(Esys_TR_Serialize) F(Esys_TR_Close) \
    F(Esys_ReadPublic) F(Esys_CreatePrimary) F(Esys_EvictControl) F(Esys_Create) F(Esys_Load) \
    F(Esys_Sign) F(Esys_GetCapability) F(Esys_StartAuthSession) F(Esys_TRSess_SetAttributes) F(Esys_TR_GetName) F(Esys_TR_GetTpmHandle) \
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
   (allowed for unrestricted keys), authorized by `session` (ESYS_TR_PASSWORD
   or an HMAC session); r and s are copied out as the TPM gives them. */
TSS2_RC devtrust_sign_digest(const struct devtrust_tss2 *_Nonnull tss, ESYS_CONTEXT *_Nonnull context, ESYS_TR key, ESYS_TR session,
                             const uint8_t digest[_Nonnull 32], uint8_t r[_Nonnull 66], uint16_t *_Nonnull r_size,
                             uint8_t s[_Nonnull 66], uint16_t *_Nonnull s_size);

/* An HMAC session salted to `salt_key` (a storage key whose public area ESAPI
   holds): only that key's owner, the TPM, can derive the session key, so a
   response whose HMAC verifies came from that TPM unchanged. SHA-256,
   AES-128-CFB for parameter encryption, kept open across commands
   (continueSession): the caller flushes it. */
TSS2_RC devtrust_start_salted_session(const struct devtrust_tss2 *_Nonnull tss, ESYS_CONTEXT *_Nonnull context, ESYS_TR salt_key,
                                      ESYS_TR *_Nonnull session);

/* TPM2_ReadPublic of `object` inside `session` (with response encryption, as
   a session that authorizes nothing must do something), so that its answer
   is authenticated; `public` receives the marshalled TPM2B_PUBLIC. */
TSS2_RC devtrust_read_public_in_session(const struct devtrust_tss2 *_Nonnull tss, ESYS_CONTEXT *_Nonnull context, ESYS_TR object,
                                        ESYS_TR session, uint8_t public[_Nonnull 1024], size_t *_Nonnull public_size);

/* A primary key in the owner hierarchy made from `public` (a marshalled
   TPM2B_PUBLIC, as read from an existing primary) as its template, with the
   unique field emptied (zero_unique 0: tpm2-tools' and devtrust's way) or
   zero-filled to the key's size (1: the TCG templates' way): the TPM derives
   the same key from the same template and seed every time. TSS2_ESYS_RC_BAD_VALUE
   when the template has no zero-filled variant devtrust knows (see
   devtrust_template_summary) or is not an ECC or RSA key. */
TSS2_RC devtrust_create_primary_from(const struct devtrust_tss2 *_Nonnull tss, ESYS_CONTEXT *_Nonnull context,
                                     const uint8_t *_Nonnull public, size_t public_size, int zero_unique, ESYS_TR *_Nonnull object);

/* The name ESAPI holds for `object` (nameAlg || hash of its public area). */
TSS2_RC devtrust_object_name(const struct devtrust_tss2 *_Nonnull tss, ESYS_CONTEXT *_Nonnull context, ESYS_TR object,
                             uint8_t name[_Nonnull 68], uint16_t *_Nonnull name_size);

/* TPM2_ReadPublic of `object` without a session: the name and the qualified
   name the TPM gives the object it holds at that handle now (ESAPI checks the
   name against the public area it returns, and takes them as the object's). */
TSS2_RC devtrust_read_public_names(const struct devtrust_tss2 *_Nonnull tss, ESYS_CONTEXT *_Nonnull context, ESYS_TR object,
                                   uint8_t name[_Nonnull 68], uint16_t *_Nonnull name_size,
                                   uint8_t qualified_name[_Nonnull 68], uint16_t *_Nonnull qualified_name_size);

/* The handles of the transient objects the TPM holds (GetCapability
   TPM2_CAP_HANDLES from TPM2_TRANSIENT_FIRST), at most `capacity` of them; a
   resource manager lists only the connection's own. */
TSS2_RC devtrust_transient_handles(const struct devtrust_tss2 *_Nonnull tss, ESYS_CONTEXT *_Nonnull context,
                                   uint32_t *_Nonnull handles, uint32_t capacity, uint32_t *_Nonnull count);

/* One fixed TPM property (TPM2_PT_*) by GetCapability. */
TSS2_RC devtrust_tpm_property(const struct devtrust_tss2 *_Nonnull tss, ESYS_CONTEXT *_Nonnull context,
                              uint32_t property, uint32_t *_Nonnull value);

#endif
