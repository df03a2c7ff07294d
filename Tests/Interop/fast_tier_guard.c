/* LD_PRELOAD library for `make check`, the fast tier (scripts/run-tests.py --tier fast):
   its tests run in the test process alone, against in-process fakes. A test that starts
   a process, opens a network or Unix socket, or sleeps is in the wrong tier: the guard
   names the call on stderr and aborts the test process, so the suite fails.
   Build: cc -shared -fPIC -o fast_tier_guard.so fast_tier_guard.c */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* libdispatch's worker threads back off with usleep of their own: only the tests' sleeps count. */
static int called_from_dispatch(void *caller) {
    Dl_info info;
    return dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, "libdispatch.so");
}

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
