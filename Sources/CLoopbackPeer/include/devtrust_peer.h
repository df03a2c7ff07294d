#ifndef DEVTRUST_PEER_H
#define DEVTRUST_PEER_H

/* The uid that owns the other end of an accepted TCP connection over the
   loopback, as the kernel says: the socket whose local address is this
   connection's peer address, looked up through NETLINK_SOCK_DIAG, else read
   from /proc/net/tcp or /proc/net/tcp6.

   Only a socket that still belongs to an open file answers: a peer that
   closed its end already (an orphaned socket, or one in TIME_WAIT) has no
   owner the kernel reports (it says uid 0 for those), so it is "unknown".

   Returns 0 and sets *uid; 1 when no such socket with an owner was found; -1
   when neither source could be read (errno set). */
int devtrust_loopback_peer_uid(int fd, unsigned int *uid);

/* The same for `count` connections at once (results[i] as the return above, uids[i]
   set when it is 0): where NETLINK_SOCK_DIAG cannot answer, the /proc files are read
   once for all of them, so that a file another user made long costs one read. */
void devtrust_loopback_peer_uids(const int *fds, int count, int *results, unsigned int *uids);

/* The same, through one source only (for tests): 0 sock_diag, 1 /proc/net. */
int devtrust_loopback_peer_uid_from(int fd, int source, unsigned int *uid);

#endif
