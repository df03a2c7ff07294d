#define _GNU_SOURCE
#include "devtrust_peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* This connection's two ends: ours (local) and the peer's (remote). */
struct ends {
    int family;
    struct sockaddr_storage local, remote;
};

static int read_ends(int fd, struct ends *ends) {
    socklen_t length = sizeof ends->local;
    if (getsockname(fd, (struct sockaddr *)&ends->local, &length) != 0) return -1;
    length = sizeof ends->remote;
    if (getpeername(fd, (struct sockaddr *)&ends->remote, &length) != 0) return -1;
    ends->family = ends->local.ss_family;
    if (ends->family != AF_INET && ends->family != AF_INET6) { errno = EAFNOSUPPORT; return -1; }
    return 0;
}

/* NETLINK_SOCK_DIAG: one exact lookup of the peer's socket. The kernel finds
   it as it would for a packet arriving there: `src` is that socket's local
   end (our peer), `dst` its remote end (us). */
static int from_sock_diag(const struct ends *ends, unsigned int *uid) {
    int descriptor = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (descriptor < 0) return -1;
    struct timeval wait = {.tv_sec = 1, .tv_usec = 0};
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);

    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.header.nlmsg_seq = 1;
    message.request.sdiag_family = (unsigned char)ends->family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U;
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (ends->family == AF_INET) {
        const struct sockaddr_in *local = (const struct sockaddr_in *)&ends->local;
        const struct sockaddr_in *remote = (const struct sockaddr_in *)&ends->remote;
        message.request.id.idiag_sport = remote->sin_port;
        message.request.id.idiag_dport = local->sin_port;
        memcpy(message.request.id.idiag_src, &remote->sin_addr, 4);
        memcpy(message.request.id.idiag_dst, &local->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *local = (const struct sockaddr_in6 *)&ends->local;
        const struct sockaddr_in6 *remote = (const struct sockaddr_in6 *)&ends->remote;
        message.request.id.idiag_sport = remote->sin6_port;
        message.request.id.idiag_dport = local->sin6_port;
        memcpy(message.request.id.idiag_src, &remote->sin6_addr, 16);
        memcpy(message.request.id.idiag_dst, &local->sin6_addr, 16);
    }
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(descriptor, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel) != (ssize_t)sizeof message) {
        int code = errno;
        close(descriptor);
        errno = code;
        return -1;
    }
    long buffer[2048];
    int result = 1;
    for (;;) {
        ssize_t count = recv(descriptor, buffer, sizeof buffer, 0);
        if (count < 0) {
            if (errno == EINTR) continue;
            result = -1;
            break;
        }
        struct nlmsghdr *header = (struct nlmsghdr *)buffer;
        int done = 0;
        for (; NLMSG_OK(header, (unsigned int)count); header = NLMSG_NEXT(header, count)) {
            if (header->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *error = NLMSG_DATA(header);
                /* ENOENT: no such socket (the peer is gone). Anything else: this source cannot answer. */
                if (error->error == -ENOENT) { result = 1; } else { errno = -error->error; result = -1; }
                done = 1;
                break;
            }
            if (header->nlmsg_type == NLMSG_DONE) { done = 1; break; }
            if (header->nlmsg_type == SOCK_DIAG_BY_FAMILY && header->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
                const struct inet_diag_msg *found = NLMSG_DATA(header);
                /* A socket with no file (orphaned, TIME_WAIT) reports inode 0 and uid 0: no owner. */
                if (found->idiag_inode != 0) {
                    *uid = found->idiag_uid;
                    result = 0;
                } else {
                    result = 1;
                }
                done = 1;
                break;
            }
        }
        if (done) break;
    }
    int code = errno;
    close(descriptor);
    errno = code;
    return result;
}

/* /proc/net/tcp(6) writes each address as the 32-bit words it holds, in hex. */
static void address_text(const struct sockaddr_storage *address, char *text, size_t size) {
    if (address->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)address;
        snprintf(text, size, "%08X:%04X", (unsigned int)v4->sin_addr.s_addr, (unsigned int)ntohs(v4->sin_port));
    } else {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)address;
        unsigned int words[4];
        memcpy(words, &v6->sin6_addr, 16);
        snprintf(text, size, "%08X%08X%08X%08X:%04X", words[0], words[1], words[2], words[3], (unsigned int)ntohs(v6->sin6_port));
    }
}

/* An IPv4 end as an IPv6 socket connected to it sees it: ::ffff:a.b.c.d. */
static void mapped(const struct sockaddr_storage *v4, struct sockaddr_storage *v6) {
    const struct sockaddr_in *from = (const struct sockaddr_in *)v4;
    struct sockaddr_in6 *to = (struct sockaddr_in6 *)v6;
    memset(v6, 0, sizeof *v6);
    to->sin6_family = AF_INET6;
    to->sin6_port = from->sin_port;
    to->sin6_addr.s6_addr[10] = 0xFF;
    to->sin6_addr.s6_addr[11] = 0xFF;
    memcpy(&to->sin6_addr.s6_addr[12], &from->sin_addr, 4);
}

static int from_proc_file(const char *path, const struct sockaddr_storage *remote, const struct sockaddr_storage *local, unsigned int *uid) {
    FILE *file = fopen(path, "re");
    if (!file) return -1;
    char peer[64], us[64], line[512];
    address_text(remote, peer, sizeof peer);
    address_text(local, us, sizeof us);
    int result = 1;
    while (fgets(line, sizeof line, file)) {
        char local[64], remote[64];
        unsigned int state, owner;
        unsigned long inode;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*s %63s %63s %x %*s %*s %*s %u %*s %lu", local, remote, &state, &owner, &inode) != 5) continue;
        if (strcmp(local, peer) != 0 || strcmp(remote, us) != 0) continue;
        if (inode != 0) {
            *uid = owner;
            result = 0;
        }
        break;
    }
    fclose(file);
    return result;
}

static int from_proc(const struct ends *ends, unsigned int *uid) {
    if (ends->family == AF_INET6) return from_proc_file("/proc/net/tcp6", &ends->remote, &ends->local, uid);
    int result = from_proc_file("/proc/net/tcp", &ends->remote, &ends->local, uid);
    if (result != 1) return result;
    /* The peer may be an IPv6 socket talking to us through an IPv4-mapped address:
       the kernel lists it in tcp6, with both ends mapped. */
    struct sockaddr_storage remote, local;
    mapped(&ends->remote, &remote);
    mapped(&ends->local, &local);
    int mappedResult = from_proc_file("/proc/net/tcp6", &remote, &local, uid);
    return mappedResult < 0 ? 1 : mappedResult;
}

int devtrust_loopback_peer_uid_from(int fd, int source, unsigned int *uid) {
    struct ends ends;
    if (read_ends(fd, &ends) != 0) return -1;
    return source == 0 ? from_sock_diag(&ends, uid) : from_proc(&ends, uid);
}

int devtrust_loopback_peer_uid(int fd, unsigned int *uid) {
    struct ends ends;
    if (read_ends(fd, &ends) != 0) return -1;
    int result = from_sock_diag(&ends, uid);
    if (result >= 0) return result;
    return from_proc(&ends, uid);
}
