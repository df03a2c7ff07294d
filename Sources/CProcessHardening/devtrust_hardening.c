#include "devtrust_hardening.h"

#include <pthread.h>
#include <signal.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>

int devtrust_make_undumpable(void) {
    struct rlimit none = { 0, 0 };
    int result = setrlimit(RLIMIT_CORE, &none);
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) result = -1;
    return result;
}

static volatile sig_atomic_t interrupt_signal;

static void note_interrupt(int signal) {
    interrupt_signal = signal;
}

void devtrust_watch_interrupts(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = note_interrupt;
    sigemptyset(&action.sa_mask);
    /* No SA_RESTART: a sleep ends at once. */
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGHUP, &action, NULL);
    /* A parent may have started devtrust with them blocked (threads of test
       runners and daemons often block signals, and children inherit the mask). */
    sigset_t watched;
    sigemptyset(&watched);
    sigaddset(&watched, SIGINT);
    sigaddset(&watched, SIGTERM);
    sigaddset(&watched, SIGHUP);
    sigprocmask(SIG_UNBLOCK, &watched, NULL);
}

int devtrust_interrupt_signal(void) {
    return interrupt_signal;
}

void devtrust_reraise(int signal) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(signal, &action, NULL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signal);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    raise(signal);
}

void devtrust_ignore_broken_pipes(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_IGN;
    sigemptyset(&action.sa_mask);
    sigaction(SIGPIPE, &action, NULL);
}

/* The watchdog's last words: written by the SIGALRM handler, so kept in static
   storage (a handler may only call async-signal-safe functions: write, _exit). */
static unsigned char watchdog_reply[DEVTRUST_WATCHDOG_REPLY_MAX];
static volatile size_t watchdog_reply_length;
static volatile int watchdog_fd = STDOUT_FILENO;
static volatile int watchdog_status = 1;

static void watchdog_fired(int signal) {
    (void)signal;
    size_t written = 0;
    while (written < watchdog_reply_length) {
        ssize_t count = write(watchdog_fd, watchdog_reply + written, watchdog_reply_length - written);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) break;
        written += (size_t)count;
    }
    _exit(watchdog_status);
}

int devtrust_arm_watchdog(unsigned seconds, const unsigned char *reply, size_t length) {
    return devtrust_arm_watchdog_writing(seconds, STDOUT_FILENO, reply, length, 1);
}

int devtrust_arm_watchdog_writing(unsigned seconds, int fd, const unsigned char *reply, size_t length, int status) {
    if (length > DEVTRUST_WATCHDOG_REPLY_MAX) return -1;
    alarm(0);
    memcpy(watchdog_reply, reply, length);
    watchdog_reply_length = length;
    watchdog_fd = fd;
    watchdog_status = status;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = watchdog_fired;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGALRM, &action, NULL) != 0) return -1;
    /* A parent may have left SIGALRM blocked (the mask is inherited). */
    sigset_t alarm_only;
    sigemptyset(&alarm_only);
    sigaddset(&alarm_only, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &alarm_only, NULL);
    alarm(seconds);
    return 0;
}

void devtrust_disarm_watchdog(void) {
    alarm(0);
}
