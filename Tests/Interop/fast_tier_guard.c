/* LD_PRELOAD library for `make check`, the fast tier (scripts/run-tests.py --tier fast):
   its tests run in the test process alone, against in-process fakes. A test that starts
   a process, opens a network or Unix socket, or sleeps is in the wrong tier: the guard
   names the call on stderr and aborts the test process, so the suite fails.
   Build: cc -shared -fPIC -o fast_tier_guard.so fast_tier_guard.c */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <netdb.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int called_from(void *caller, const char *library) {
    Dl_info info;
    return dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, library);
}

/* libdispatch's worker threads back off with usleep of their own, and its event loop waits in
   epoll_wait: only the tests' sleeps and waits count. */
static int called_from_dispatch(void *caller) {
    return called_from(caller, "libdispatch.so");
}

/* The next definition of `name` (libc's, libdispatch's), looked up once. */
#define REAL(name) static __typeof__(&name) real_##name; if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

static void refuse(const char *what, const char *detail) {
    fprintf(stderr, "\nfast tier: a test %s (%s): it belongs in `make test`, not in Tests/fast-tier.txt\n",
            what, detail ? detail : "");
    /* Where: the test's frames are among these (swift demangle reads them). */
    void *frames[48];
    backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
    fflush(stderr);
    abort();
}

int execve(const char *path, char *const argv[], char *const envp[]) {
    (void)argv; (void)envp;
    refuse("started a process", path);
    return -1;
}

int execvp(const char *file, char *const argv[]) {
    (void)argv;
    refuse("started a process", file);
    return -1;
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
                const posix_spawnattr_t *attributes, char *const argv[], char *const envp[]) {
    (void)pid; (void)actions; (void)attributes; (void)argv; (void)envp;
    refuse("started a process", path);
    return -1;
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
                 const posix_spawnattr_t *attributes, char *const argv[], char *const envp[]) {
    (void)pid; (void)actions; (void)attributes; (void)argv; (void)envp;
    refuse("started a process", file);
    return -1;
}

pid_t fork(void) {
    refuse("forked", "fork");
    return -1;
}

int socket(int domain, int type, int protocol) {
    (void)type; (void)protocol;
    if (domain == AF_INET || domain == AF_INET6 || domain == AF_UNIX)
        refuse("opened a socket", domain == AF_UNIX ? "AF_UNIX" : "AF_INET/AF_INET6");
    /* Others (netlink) are devtrust's own look-ups of the machine, not the network. */
    static int (*real)(int, int, int);
    if (!real) real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
    return real(domain, type, protocol);
}

int nanosleep(const struct timespec *duration, struct timespec *remaining) {
    static int (*real)(const struct timespec *, struct timespec *);
    if (!real) real = (int (*)(const struct timespec *, struct timespec *))dlsym(RTLD_NEXT, "nanosleep");
    if (!called_from_dispatch(__builtin_return_address(0))) refuse("slept", "nanosleep");
    return real(duration, remaining);
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *duration, struct timespec *remaining) {
    static int (*real)(clockid_t, int, const struct timespec *, struct timespec *);
    if (!real) real = (int (*)(clockid_t, int, const struct timespec *, struct timespec *))dlsym(RTLD_NEXT, "clock_nanosleep");
    if (!called_from_dispatch(__builtin_return_address(0))) refuse("slept", "clock_nanosleep");
    return real(clock, flags, duration, remaining);
}

int usleep(useconds_t microseconds) {
    static int (*real)(useconds_t);
    if (!real) real = (int (*)(useconds_t))dlsym(RTLD_NEXT, "usleep");
    if (!called_from_dispatch(__builtin_return_address(0))) refuse("slept", "usleep");
    return real(microseconds);
}

/* sleep(0) is a yield, not a wait: CoreFoundation's spinlock (__CFLock) calls it while another
   thread holds the lock (two tests' first use of a predefined CFCharacterSet at once). */
unsigned int sleep(unsigned int seconds) {
    static unsigned int (*real)(unsigned int);
    if (!real) real = (unsigned int (*)(unsigned int))dlsym(RTLD_NEXT, "sleep");
    if (seconds != 0) refuse("slept", "sleep");
    return real(seconds);
}


/* The other ways to start a process: vfork, clone (pthread_create does not call the public
   clone), the rest of the exec family, and the shell of system() and popen(). */
pid_t vfork(void) {
    refuse("started a process", "vfork");
    return -1;
}

int clone(int (*function)(void *), void *stack, int flags, void *argument, ...) {
    (void)function; (void)stack; (void)flags; (void)argument;
    refuse("started a process", "clone");
    return -1;
}

int execv(const char *path, char *const argv[]) {
    (void)argv;
    refuse("started a process", path);
    return -1;
}

int execvpe(const char *file, char *const argv[], char *const envp[]) {
    (void)argv; (void)envp;
    refuse("started a process", file);
    return -1;
}

int execl(const char *path, const char *argument, ...) {
    (void)argument;
    refuse("started a process", path);
    return -1;
}

int execlp(const char *file, const char *argument, ...) {
    (void)argument;
    refuse("started a process", file);
    return -1;
}

int execle(const char *path, const char *argument, ...) {
    (void)argument;
    refuse("started a process", path);
    return -1;
}

int fexecve(int fd, char *const argv[], char *const envp[]) {
    (void)fd; (void)argv; (void)envp;
    refuse("started a process", "fexecve");
    return -1;
}

int execveat(int directory, const char *path, char *const argv[], char *const envp[], int flags) {
    (void)directory; (void)argv; (void)envp; (void)flags;
    refuse("started a process", path);
    return -1;
}

int system(const char *command) {
    refuse("started a process", command ? command : "system");
    return -1;
}

FILE *popen(const char *command, const char *type) {
    (void)type;
    refuse("started a process", command);
    return NULL;
}

/* A connected pair is a socket too, and a host name look-up is the network (or nscd's socket). */
int socketpair(int domain, int type, int protocol, int pair[2]) {
    /* libcurl's own wake-up pair for a transfer (a refused URL's, in TransportPolicyTests) reaches nothing. */
    int curls = called_from(__builtin_return_address(0), "libcurl.so");
    if ((domain == AF_INET || domain == AF_INET6 || domain == AF_UNIX) && !curls) refuse("opened a socket", "socketpair");
    REAL(socketpair);
    return real_socketpair(domain, type, protocol, pair);
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **result) {
    (void)service; (void)hints; (void)result;
    refuse("looked up a host name", node ? node : "getaddrinfo");
    return EAI_FAIL;
}

/* Waits with a timeout are sleeps too (poll(NULL, 0, 1000) is one); a zero timeout only looks,
   and none (-1, NULL) blocks until the descriptors are ready, which is no timed wait. */
int poll(struct pollfd *fds, nfds_t count, int timeout) {
    if (timeout > 0 && !called_from_dispatch(__builtin_return_address(0))) refuse("waited", "poll with a timeout");
    REAL(poll);
    return real_poll(fds, count, timeout);
}

int ppoll(struct pollfd *fds, nfds_t count, const struct timespec *timeout, const sigset_t *mask) {
    int waits = timeout != NULL && (timeout->tv_sec != 0 || timeout->tv_nsec != 0);
    if (waits && !called_from_dispatch(__builtin_return_address(0))) refuse("waited", "ppoll with a timeout");
    REAL(ppoll);
    return real_ppoll(fds, count, timeout, mask);
}

int select(int count, fd_set *read, fd_set *write, fd_set *error, struct timeval *timeout) {
    int waits = timeout != NULL && (timeout->tv_sec != 0 || timeout->tv_usec != 0);
    if (waits && !called_from_dispatch(__builtin_return_address(0))) refuse("waited", "select with a timeout");
    REAL(select);
    return real_select(count, read, write, error, timeout);
}

int pselect(int count, fd_set *read, fd_set *write, fd_set *error, const struct timespec *timeout, const sigset_t *mask) {
    int waits = timeout != NULL && (timeout->tv_sec != 0 || timeout->tv_nsec != 0);
    if (waits && !called_from_dispatch(__builtin_return_address(0))) refuse("waited", "pselect with a timeout");
    REAL(pselect);
    return real_pselect(count, read, write, error, timeout, mask);
}

int epoll_wait(int epoll, struct epoll_event *events, int count, int timeout) {
    if (timeout > 0 && !called_from_dispatch(__builtin_return_address(0))) refuse("waited", "epoll_wait with a timeout");
    REAL(epoll_wait);
    return real_epoll_wait(epoll, events, count, timeout);
}

int epoll_pwait(int epoll, struct epoll_event *events, int count, int timeout, const sigset_t *mask) {
    if (timeout > 0 && !called_from_dispatch(__builtin_return_address(0))) refuse("waited", "epoll_pwait with a timeout");
    REAL(epoll_pwait);
    return real_epoll_pwait(epoll, events, count, timeout, mask);
}

/* Task.sleep: Swift's concurrency runtime hands the job to libdispatch to run later; and
   DispatchQueue.asyncAfter, through Swift's Dispatch overlay. */
typedef void *dispatch_opaque;
void dispatch_after_f(unsigned long long when, dispatch_opaque queue, void *context, void (*work)(void *)) {
    if (called_from(__builtin_return_address(0), "libswift_Concurrency")) refuse("slept", "Task.sleep");
    REAL(dispatch_after_f);
    real_dispatch_after_f(when, queue, context, work);
}

void dispatch_after(unsigned long long when, dispatch_opaque queue, void *block) {
    if (called_from(__builtin_return_address(0), "libswiftDispatch")) refuse("slept", "DispatchQueue.asyncAfter");
    REAL(dispatch_after);
    real_dispatch_after(when, queue, block);
}

/* A semaphore wait that ran out its timeout slept for it (one that was signalled in time did not). */
long dispatch_semaphore_wait(dispatch_opaque semaphore, unsigned long long timeout) {
    REAL(dispatch_semaphore_wait);
    long timedOut = real_dispatch_semaphore_wait(semaphore, timeout);
    if (timedOut && timeout != 0 && timeout != ~0ull && !called_from_dispatch(__builtin_return_address(0)))
        refuse("slept", "a semaphore wait that ran out its timeout");
    return timedOut;
}

int epoll_pwait2(int epoll, struct epoll_event *events, int count, const struct timespec *timeout, const sigset_t *mask) {
    int waits = timeout != NULL && (timeout->tv_sec != 0 || timeout->tv_nsec != 0);
    if (waits && !called_from_dispatch(__builtin_return_address(0))) refuse("waited", "epoll_pwait2 with a timeout");
    REAL(epoll_pwait2);
    return real_epoll_pwait2(epoll, events, count, timeout, mask);
}

/* Timed waits on a condition or a semaphore: a wait that ran out its time slept for it (one that
   was woken in time did not). */
int pthread_cond_timedwait(pthread_cond_t *condition, pthread_mutex_t *mutex, const struct timespec *deadline) {
    REAL(pthread_cond_timedwait);
    int result = real_pthread_cond_timedwait(condition, mutex, deadline);
    if (result == ETIMEDOUT && !called_from_dispatch(__builtin_return_address(0))) refuse("slept", "a condition wait that ran out its time");
    return result;
}

int pthread_cond_clockwait(pthread_cond_t *condition, pthread_mutex_t *mutex, clockid_t clock, const struct timespec *deadline) {
    REAL(pthread_cond_clockwait);
    int result = real_pthread_cond_clockwait(condition, mutex, clock, deadline);
    if (result == ETIMEDOUT && !called_from_dispatch(__builtin_return_address(0))) refuse("slept", "a condition wait that ran out its time");
    return result;
}

int sem_timedwait(sem_t *semaphore, const struct timespec *deadline) {
    REAL(sem_timedwait);
    int result = real_sem_timedwait(semaphore, deadline);
    if (result != 0 && errno == ETIMEDOUT && !called_from_dispatch(__builtin_return_address(0))) refuse("slept", "sem_timedwait that ran out its time");
    return result;
}

int sem_clockwait(sem_t *semaphore, clockid_t clock, const struct timespec *deadline) {
    REAL(sem_clockwait);
    int result = real_sem_clockwait(semaphore, clock, deadline);
    if (result != 0 && errno == ETIMEDOUT && !called_from_dispatch(__builtin_return_address(0))) refuse("slept", "sem_clockwait that ran out its time");
    return result;
}

int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *timeout) {
    REAL(sigtimedwait);
    int result = real_sigtimedwait(set, info, timeout);
    if (result < 0 && errno == EAGAIN && !called_from_dispatch(__builtin_return_address(0))) refuse("slept", "sigtimedwait that ran out its time");
    return result;
}

/* glibc's public fork without the atfork handlers. */
pid_t _Fork(void) {
    refuse("forked", "_Fork");
    return -1;
}

/* The older host name look-ups: glibc reaches the resolver's socket inside itself. */
struct hostent *gethostbyname(const char *name) {
    refuse("looked up a host name", name);
    return NULL;
}

struct hostent *gethostbyname2(const char *name, int family) {
    (void)family;
    refuse("looked up a host name", name);
    return NULL;
}

int gethostbyname_r(const char *name, struct hostent *entry, char *buffer, size_t length, struct hostent **result, int *error) {
    (void)entry; (void)buffer; (void)length; (void)result; (void)error;
    refuse("looked up a host name", name);
    return -1;
}

int gethostbyname2_r(const char *name, int family, struct hostent *entry, char *buffer, size_t length, struct hostent **result, int *error) {
    (void)family; (void)entry; (void)buffer; (void)length; (void)result; (void)error;
    refuse("looked up a host name", name);
    return -1;
}

struct hostent *gethostbyaddr(const void *address, socklen_t length, int family) {
    (void)address; (void)length; (void)family;
    refuse("looked up a host name", "gethostbyaddr");
    return NULL;
}

int getnameinfo(const struct sockaddr *address, socklen_t length, char *host, socklen_t hostLength, char *service, socklen_t serviceLength, int flags) {
    (void)address; (void)length; (void)host; (void)hostLength; (void)service; (void)serviceLength; (void)flags;
    refuse("looked up a host name", "getnameinfo");
    return EAI_FAIL;
}

/* The other ways libdispatch waits for a caller: a group or a work item whose wait ran out its
   time, and a timer source (Task.sleep with a tolerance, DispatchSource timers). */
long dispatch_group_wait(dispatch_opaque group, unsigned long long timeout) {
    REAL(dispatch_group_wait);
    long timedOut = real_dispatch_group_wait(group, timeout);
    if (timedOut && timeout != 0 && timeout != ~0ull && !called_from_dispatch(__builtin_return_address(0)))
        refuse("slept", "a group wait that ran out its timeout");
    return timedOut;
}

long dispatch_block_wait(void *block, unsigned long long timeout) {
    REAL(dispatch_block_wait);
    long timedOut = real_dispatch_block_wait(block, timeout);
    if (timedOut && timeout != 0 && timeout != ~0ull && !called_from_dispatch(__builtin_return_address(0)))
        refuse("slept", "a work item wait that ran out its timeout");
    return timedOut;
}

void dispatch_source_set_timer(dispatch_opaque source, unsigned long long start, unsigned long long interval, unsigned long long leeway) {
    if (!called_from_dispatch(__builtin_return_address(0))) refuse("slept", "a timer source");
    REAL(dispatch_source_set_timer);
    real_dispatch_source_set_timer(source, start, interval, leeway);
}
