/* LD_PRELOAD library for the tests: the wall clock is set while the program
   runs, as an administrator, NTP stepping the clock, or a VM resumed from a
   snapshot would do. JUMP_CLOCK_AFTER_MS milliseconds after the program
   started, CLOCK_REALTIME (clock_gettime, gettimeofday, time) reads
   JUMP_CLOCK_SECONDS later (earlier when negative). The monotonic clocks
   (CLOCK_MONOTONIC, CLOCK_BOOTTIME) are left alone, as the kernel does.
   Build: gcc -shared -fPIC -o jumping_clock.so jumping_clock.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static struct timespec started;

__attribute__((constructor)) static void remember_start(void) {
    real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    real_clock_gettime(CLOCK_MONOTONIC, &started);
}

static long offset(void) {
    const char *seconds = getenv("JUMP_CLOCK_SECONDS");
    const char *after = getenv("JUMP_CLOCK_AFTER_MS");
    struct timespec now;
    real_clock_gettime(CLOCK_MONOTONIC, &now);
    long elapsed = (now.tv_sec - started.tv_sec) * 1000 + (now.tv_nsec - started.tv_nsec) / 1000000;
    return elapsed >= (after ? atol(after) : 0) && seconds ? atol(seconds) : 0;
}

int clock_gettime(clockid_t clock, struct timespec *time) {
    if (!real_clock_gettime) remember_start();
    int result = real_clock_gettime(clock, time);
    if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) time->tv_sec += offset();
    return result;
}

int gettimeofday(struct timeval *restrict value, void *restrict zone) {
    (void)zone;
    struct timespec now;
    int result = clock_gettime(CLOCK_REALTIME, &now);
    if (result == 0) {
        value->tv_sec = now.tv_sec;
        value->tv_usec = now.tv_nsec / 1000;
    }
    return result;
}

time_t time(time_t *value) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (value) *value = now.tv_sec;
    return now.tv_sec;
}
