#include "devtrust_fs_identity.h"

#include <sys/fsuid.h>

int devtrust_set_fs_identity(uid_t uid, gid_t gid, uid_t *previous_uid, gid_t *previous_gid) {
    /* The gid first: once the uid is not root's, the thread may no longer change its gid. */
    *previous_gid = (gid_t)setfsgid(gid);
    *previous_uid = (uid_t)setfsuid(uid);
    /* setfsuid reports no error: asking again returns the id in force. */
    if ((uid_t)setfsuid(uid) != uid || (gid_t)setfsgid(gid) != gid) {
        setfsuid(*previous_uid);
        setfsgid(*previous_gid);
        return -1;
    }
    return 0;
}
