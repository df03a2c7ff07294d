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

/* The same, through one source only (for tests): 0 sock_diag, 1 /proc/net. */
int devtrust_loopback_peer_uid_from(int fd, int source, unsigned int *uid);

#endif
