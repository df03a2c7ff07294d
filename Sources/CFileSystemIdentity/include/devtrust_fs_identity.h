#ifndef DEVTRUST_FS_IDENTITY_H
#define DEVTRUST_FS_IDENTITY_H

#include <sys/types.h>

/* Sets the calling thread's file-system uid and gid (setfsuid, setfsgid: Linux keeps them
   per thread, and glibc does not pass them to other threads), so that the files it opens
   are opened with a user's permissions. The previous ids go to *previous_uid and
   *previous_gid. Returns 0, or -1 when the kernel did not take the ids (the process may
   not set them: it is not root). Swift's Glibc module does not export these calls. */
int devtrust_set_fs_identity(uid_t uid, gid_t gid, uid_t *previous_uid, gid_t *previous_gid);

#endif
