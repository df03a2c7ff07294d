#include "devtrust_deadline.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

/* The last words: written by the SIGALRM handler, so kept in static storage. */
static unsigned char deadline_words[DEVTRUST_DEADLINE_WORDS_MAX];
static volatile size_t deadline_words_length;
static unsigned char deadline_on_terminal[DEVTRUST_DEADLINE_WORDS_MAX];
static volatile size_t deadline_on_terminal_length;
static volatile int deadline_fd = -1;
static volatile int deadline_status = 1;
/* Whether this thread armed the deadline and has not disarmed it (for tests: the alarm is the
   process's, and other threads may arm their own meanwhile). */
static _Thread_local int armed_on_this_thread;

static void write_all(int fd, const unsigned char *bytes, size_t length) {
    size_t written = 0;
    while (written < length) {
        ssize_t count = write(fd, bytes + written, length - written);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) break;
        written += (size_t)count;
    }
}

static void deadline_passed(int signal) {
    (void)signal;
    struct termios settings;
    if (deadline_on_terminal_length > 0 && tcgetattr(deadline_fd, &settings) == 0) {
        write_all(deadline_fd, deadline_on_terminal, deadline_on_terminal_length);
    } else {
        write_all(deadline_fd, deadline_words, deadline_words_length);
    }
    _exit(deadline_status);
}

int devtrust_deadline_arm(unsigned seconds, int fd, const unsigned char *words, size_t length,
                          const unsigned char *on_terminal, size_t on_terminal_length, int status) {
    if (length > DEVTRUST_DEADLINE_WORDS_MAX || on_terminal_length > DEVTRUST_DEADLINE_WORDS_MAX) return -1;
    alarm(0);
    memcpy(deadline_words, words, length);
    deadline_words_length = length;
    if (on_terminal_length > 0) memcpy(deadline_on_terminal, on_terminal, on_terminal_length);
    deadline_on_terminal_length = on_terminal_length;
    deadline_fd = fd;
    deadline_status = status;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = deadline_passed;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGALRM, &action, NULL) != 0) return -1;
    /* A parent may have left SIGALRM blocked (the mask is inherited). */
    sigset_t alarm_only;
    sigemptyset(&alarm_only);
    sigaddset(&alarm_only, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &alarm_only, NULL);
    alarm(seconds);
    armed_on_this_thread = 1;
    return 0;
}

void devtrust_deadline_disarm(void) {
    alarm(0);
    armed_on_this_thread = 0;
}

int devtrust_deadline_armed_on_this_thread(void) {
    return armed_on_this_thread;
}
