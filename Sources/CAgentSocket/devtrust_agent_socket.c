#define _GNU_SOURCE
#include "devtrust_agent_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

static int fill_address(const char *path, struct sockaddr_un *address, socklen_t *length) {
    size_t size = strlen(path);
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    if (size == 0 || size >= sizeof address->sun_path) {
        errno = size == 0 ? ENOENT : ENAMETOOLONG;
        return -1;
    }
    memcpy(address->sun_path, path, size);
    *length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + size + 1);
    return 0;
}

int devtrust_agent_listen(const char *path, int backlog, unsigned int mode) {
    struct sockaddr_un address;
    socklen_t length;
    if (fill_address(path, &address, &length) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    /* The file is made with the mode asked for, whatever the umask: bind creates it. */
    mode_t previous = umask(0777 & ~mode);
    int bound = bind(fd, (struct sockaddr *)&address, length);
    umask(previous);
    if (bound != 0 || chmod(path, mode) != 0 || listen(fd, backlog) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int devtrust_agent_connect(const char *path, int timeout_ms) {
    struct sockaddr_un address;
    socklen_t length;
    if (fill_address(path, &address, &length) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct timeval timeout = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
    if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout) != 0
        || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    int result;
    do {
        result = connect(fd, (struct sockaddr *)&address, length);
    } while (result != 0 && errno == EINTR);
    if (result != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int devtrust_agent_accept(int listener) {
    int fd;
    do {
        fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

int devtrust_agent_peer_credentials(int fd, uint32_t *uid, uint32_t *gid, int32_t *pid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    if (length != sizeof credentials) {
        errno = EPROTO;
        return -1;
    }
    *uid = credentials.uid;
    *gid = credentials.gid;
    *pid = credentials.pid;
    return 0;
}

int devtrust_agent_is_listening_unix_stream(int fd) {
    if (fcntl(fd, F_GETFD) < 0) return -1;
    int type = 0, listening = 0;
    socklen_t length = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM) return 0;
    length = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 || !listening) return 0;
    struct sockaddr_storage address;
    length = sizeof address;
    if (getsockname(fd, (struct sockaddr *)&address, &length) != 0 || address.ss_family != AF_UNIX) return 0;
    return 1;
}

int devtrust_agent_prepare_passed(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return -1;
    int descriptor_flags = fcntl(fd, F_GETFD);
    if (descriptor_flags < 0 || fcntl(fd, F_SETFD, descriptor_flags | FD_CLOEXEC) != 0) return -1;
    return 0;
}

static int termination_write_end = -1;

static void termination_requested(int signal) {
    int saved = errno;
    unsigned char number = (unsigned char)signal;
    if (termination_write_end >= 0) {
        ssize_t ignored = write(termination_write_end, &number, 1);
        (void)ignored;
    }
    errno = saved;
}

int devtrust_agent_termination_pipe(void) {
    int ends[2];
    if (pipe2(ends, O_NONBLOCK | O_CLOEXEC) != 0) return -1;
    termination_write_end = ends[1];
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = termination_requested;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &action, NULL) != 0 || sigaction(SIGINT, &action, NULL) != 0) return -1;
    /* A parent may have left them blocked (the mask is inherited through exec): the agent's stop must arrive. */
    sigset_t stopping;
    sigemptyset(&stopping);
    sigaddset(&stopping, SIGTERM);
    sigaddset(&stopping, SIGINT);
    if (sigprocmask(SIG_UNBLOCK, &stopping, NULL) != 0) return -1;
    return ends[0];
}

int devtrust_agent_wake_pipe(int ends[2]) {
    return pipe2(ends, O_NONBLOCK | O_CLOEXEC);
}
