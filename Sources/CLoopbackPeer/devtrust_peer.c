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

/* What one NETLINK_SOCK_DIAG lookup found. */
struct found_socket {
    unsigned int uid, state, family;
    unsigned long inode;
    struct inet_diag_sockid id;
};

static void put_end(const struct sockaddr_storage *address, __be16 *port, __be32 *words) {
    if (address->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)address;
        *port = v4->sin_port;
        memcpy(words, &v4->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)address;
        *port = v6->sin6_port;
        memcpy(words, &v6->sin6_addr, 16);
    }
}

/* One exact lookup of the TCP socket whose local end is `source` and remote end
   `destination` (the kernel finds it as it would for a packet arriving there).
   Returns 0 (found), 1 (the kernel says ENOENT) or -1 (errno set). */
static int sock_diag_lookup(int family, const struct sockaddr_storage *source, const struct sockaddr_storage *destination,
                            struct found_socket *found) {
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
    message.request.sdiag_family = (unsigned char)family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U;
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    put_end(source, &message.request.id.idiag_sport, message.request.id.idiag_src);
    put_end(destination, &message.request.id.idiag_dport, message.request.id.idiag_dst);
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(descriptor, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel) != (ssize_t)sizeof message) {
        int code = errno;
        close(descriptor);
        errno = code;
        return -1;
    }
    long buffer[2048];
    int result = -1;
    errno = EPROTO;
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
                if (error->error == -ENOENT) { result = 1; } else { errno = -error->error; result = -1; }
                done = 1;
                break;
            }
            if (header->nlmsg_type == NLMSG_DONE) { done = 1; break; }
            if (header->nlmsg_type == SOCK_DIAG_BY_FAMILY && header->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
                const struct inet_diag_msg *message = NLMSG_DATA(header);
                found->uid = message->idiag_uid;
                found->family = message->idiag_family;
                found->state = message->idiag_state;
                found->inode = message->idiag_inode;
                found->id = message->id;
                result = 0;
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

/* Whether the found socket's remote (`local_side` 0: our end) or local (1: the peer's)
   end is `address`, also when the found socket is an IPv6 one talking IPv4 through
   mapped addresses (::ffff:a.b.c.d). */
static int same_end(const struct found_socket *found, const struct sockaddr_storage *address, int local_side) {
    __be16 port;
    __be32 words[4] = {0, 0, 0, 0};
    put_end(address, &port, words);
    const __be32 *theirs = local_side ? found->id.idiag_src : found->id.idiag_dst;
    __be16 their_port = local_side ? found->id.idiag_sport : found->id.idiag_dport;
    if (their_port != port) return 0;
    if (address->ss_family == AF_INET6) return memcmp(theirs, words, 16) == 0;
    if (found->family == AF_INET6)
        return theirs[0] == 0 && theirs[1] == 0 && theirs[2] == htonl(0xFFFF) && theirs[3] == words[0];
    return theirs[0] == words[0];
}

/* NETLINK_SOCK_DIAG: the peer's socket, looked up exactly. */
static int from_sock_diag(const struct ends *ends, unsigned int *uid) {
    struct found_socket peer;
    int result = sock_diag_lookup(ends->family, &ends->remote, &ends->local, &peer);
    if (result < 0) return -1;
    if (result == 1) {
        /* ENOENT is also the kernel's answer when it has no TCP diagnostics (inet_diag or
           tcp_diag not loaded): then it does not find our own end either, and /proc must answer. */
        struct found_socket ours;
        return sock_diag_lookup(ends->family, &ends->local, &ends->remote, &ours) == 0 ? 1 : -1;
    }
    /* Only the connected socket at the other end answers: the lookup falls back to a
       listener on that address when no connection matches (not our peer), and a socket
       with no file (orphaned, TIME_WAIT) reports inode 0 and uid 0 (no owner). */
    if (peer.state == 10 /* TCP_LISTEN */ || peer.inode == 0) return 1;
    if (!same_end(&peer, &ends->local, 0) || !same_end(&peer, &ends->remote, 1)) return 1;
    *uid = peer.uid;
    return 0;
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

/* One connection the /proc files are searched for: its peer's end and ours as those
   files write them, and (IPv4) as an IPv6 socket talking through mapped addresses would. */
struct proc_query {
    char peer[64], us[64], mapped_peer[64], mapped_us[64];
    int family, result;
    unsigned int uid;
};

static void proc_query_make(const struct ends *ends, struct proc_query *query) {
    memset(query, 0, sizeof *query);
    query->family = ends->family;
    query->result = 1;
    address_text(&ends->remote, query->peer, sizeof query->peer);
    address_text(&ends->local, query->us, sizeof query->us);
    if (ends->family == AF_INET) {
        struct sockaddr_storage remote, local;
        mapped(&ends->remote, &remote);
        mapped(&ends->local, &local);
        address_text(&remote, query->mapped_peer, sizeof query->mapped_peer);
        address_text(&local, query->mapped_us, sizeof query->mapped_us);
    }
}

/* One pass over a /proc/net file for every query still open: a file made long by another
   user costs one read per round, not one per connection. Returns -1 when it cannot be read. */
static int proc_scan(const char *path, int ipv6, struct proc_query *queries, int count) {
    FILE *file = fopen(path, "re");
    if (!file) return -1;
    char line[512];
    while (fgets(line, sizeof line, file)) {
        char local[64], remote[64];
        unsigned int state, owner;
        unsigned long inode;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*s %63s %63s %x %*s %*s %*s %u %*s %lu", local, remote, &state, &owner, &inode) != 5) continue;
        for (int index = 0; index < count; index++) {
            struct proc_query *query = &queries[index];
            if (query->result != 1) continue;
            const char *peer = ipv6 && query->family == AF_INET ? query->mapped_peer : query->peer;
            const char *us = ipv6 && query->family == AF_INET ? query->mapped_us : query->us;
            if (!ipv6 && query->family != AF_INET) continue;
            if (strcmp(local, peer) != 0 || strcmp(remote, us) != 0) continue;
            /* A socket with no file (orphaned, TIME_WAIT: inode 0, uid 0) has no owner. */
            if (inode != 0) {
                query->uid = owner;
                query->result = 0;
            } else {
                query->result = 2;
            }
        }
    }
    fclose(file);
    return 0;
}

/* tcp for IPv4 connections, then tcp6 for IPv6 ones and IPv4 ones whose peer is an IPv6
   socket (the kernel lists those in tcp6, both ends mapped). */
static void from_proc_many(struct proc_query *queries, int count) {
    int v4 = 0;
    for (int index = 0; index < count; index++) if (queries[index].family == AF_INET) v4++;
    int tcp = v4 ? proc_scan("/proc/net/tcp", 0, queries, count) : 0;
    int tcp6 = proc_scan("/proc/net/tcp6", 1, queries, count);
    for (int index = 0; index < count; index++) {
        struct proc_query *query = &queries[index];
        if (query->result == 2) query->result = 1;
        else if (query->result == 1 && (query->family == AF_INET ? tcp < 0 && tcp6 < 0 : tcp6 < 0)) query->result = -1;
    }
}

static int from_proc(const struct ends *ends, unsigned int *uid) {
    struct proc_query query;
    proc_query_make(ends, &query);
    from_proc_many(&query, 1);
    if (query.result == 0) *uid = query.uid;
    return query.result;
}

int devtrust_loopback_peer_uid_from(int fd, int source, unsigned int *uid) {
    struct ends ends;
    if (read_ends(fd, &ends) != 0) return -1;
    return source == 0 ? from_sock_diag(&ends, uid) : from_proc(&ends, uid);
}

int devtrust_loopback_peer_uid(int fd, unsigned int *uid) {
    int result;
    devtrust_loopback_peer_uids(&fd, 1, &result, uid);
    return result;
}

void devtrust_loopback_peer_uids(const int *fds, int count, int *results, unsigned int *uids) {
    struct proc_query queries[64];
    int asked[64], pending = 0;
    for (int index = 0; index < count; index++) {
        struct ends ends;
        if (read_ends(fds[index], &ends) != 0) { results[index] = -1; continue; }
        results[index] = from_sock_diag(&ends, &uids[index]);
        if (results[index] >= 0) continue;
        /* No socket diagnostics here: these are looked up together in /proc, 64 at a time. */
        if (pending == 64) {
            from_proc_many(queries, pending);
            for (int each = 0; each < pending; each++) { results[asked[each]] = queries[each].result; uids[asked[each]] = queries[each].uid; }
            pending = 0;
        }
        proc_query_make(&ends, &queries[pending]);
        asked[pending++] = index;
    }
    if (pending) {
        from_proc_many(queries, pending);
        for (int each = 0; each < pending; each++) { results[asked[each]] = queries[each].result; uids[asked[each]] = queries[each].uid; }
    }
}
