#ifndef DEVTRUST_AGENT_SOCKET_H
#define DEVTRUST_AGENT_SOCKET_H

#include <stdint.h>

/* Unix stream sockets for the devtrust agent and its clients: what Swift cannot
   call (fcntl is variadic; struct ucred needs _GNU_SOURCE; sockaddr_un is a
   fixed array to fill), and the agent's termination pipe (a signal handler).
   Every descriptor made here is close-on-exec. Functions return -1 with errno
   set on failure. */

/* A listening socket bound to `path` (which must not exist: the caller removes
   a stale one), non-blocking, with mode `mode` given to the socket file.
   ENAMETOOLONG when the path does not fit a sockaddr_un. */
int devtrust_agent_listen(const char *path, int backlog, unsigned int mode);

/* A connected socket to `path`, blocking, whose connect, reads and writes each
   give up after `timeout_ms` (SO_SNDTIMEO, SO_RCVTIMEO: EAGAIN then). */
int devtrust_agent_connect(const char *path, int timeout_ms);

/* The next connection of a listening socket, non-blocking; -1 with EAGAIN when
   there is none waiting. */
int devtrust_agent_accept(int listener);

/* The credentials the kernel recorded for the other end of a connected Unix
   socket when it connected (SO_PEERCRED): never anything the peer sends. */
int devtrust_agent_peer_credentials(int fd, uint32_t *uid, uint32_t *gid, int32_t *pid);

/* 1 when `fd` is a listening Unix stream socket (what socket activation must
   pass), 0 when it is something else, -1 when it is no open descriptor. */
int devtrust_agent_is_listening_unix_stream(int fd);

/* Makes `fd` non-blocking and close-on-exec (a socket systemd passed). */
int devtrust_agent_prepare_passed(int fd);

/* Installs handlers for SIGTERM and SIGINT that write the signal's number (one
   byte) to a pipe, unblocks the two (a parent's mask is inherited), and returns the pipe's read end (non-blocking): the agent's
   loop polls it with its connections. (SIGPIPE is left alone, so that the
   programs the agent runs get the default; its writes use MSG_NOSIGNAL.) */
int devtrust_agent_termination_pipe(void);

/* A pipe whose two ends are non-blocking and close-on-exec: the agent's loop
   and its worker thread wake each other with a byte (poll, then read). */
int devtrust_agent_wake_pipe(int ends[2]);

#endif
