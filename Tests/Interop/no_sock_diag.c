/* LD_PRELOAD library for the tests: a kernel without TCP socket diagnostics, in one of
   two ways (NO_SOCK_DIAG):
   - "refuse" (default): socket(AF_NETLINK, ...) fails, as where netlink is filtered out;
   - "enoent": NETLINK_SOCK_DIAG answers every lookup with ENOENT, as a kernel whose
     inet_diag/tcp_diag modules are not loaded does (for sockets that exist too).
   devtrust must then find a loopback connection's owner in /proc/net/tcp(6).
   Build: gcc -shared -fPIC -o no_sock_diag.so no_sock_diag.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/netlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

static int netlink_fd = -1;

static int enoent_mode(void) {
    const char *mode = getenv("NO_SOCK_DIAG");
    return mode && strcmp(mode, "enoent") == 0;
}

int socket(int domain, int type, int protocol) {
    static int (*real)(int, int, int);
    if (!real) real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
    if (domain == AF_NETLINK && !enoent_mode()) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    int fd = real(domain, type, protocol);
    if (domain == AF_NETLINK) netlink_fd = fd;
    return fd;
}

ssize_t recv(int fd, void *buffer, size_t length, int flags) {
    static ssize_t (*real)(int, void *, size_t, int);
    if (!real) real = (ssize_t (*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
    if (fd != netlink_fd || !enoent_mode()) return real(fd, buffer, length, flags);
    /* Drain the kernel's real answer, then answer ENOENT in its place. */
    char ignored[8192];
    real(fd, ignored, sizeof ignored, flags);
    struct {
        struct nlmsghdr header;
        struct nlmsgerr error;
    } answer;
    memset(&answer, 0, sizeof answer);
    answer.header.nlmsg_len = sizeof answer;
    answer.header.nlmsg_type = NLMSG_ERROR;
    answer.error.error = -ENOENT;
    size_t size = length < sizeof answer ? length : sizeof answer;
    memcpy(buffer, &answer, size);
    return (ssize_t)size;
}
