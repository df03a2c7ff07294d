/* Each C call the fast tier's guard refuses, one mode per call, for its self-test
   (scripts/run-tests.py): under the guard every mode but "plain" must end refused, and
   "plain" (the waits and sockets the tier allows) must run through. Built by `make check`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/netlink.h>

extern char **environ;
pid_t _Fork(void);

static const struct timespec ten_ms = { 0, 10 * 1000 * 1000 };

static struct timespec in_ten_ms(clockid_t clock) {
    struct timespec deadline;
    clock_gettime(clock, &deadline);
    deadline.tv_nsec += 10 * 1000 * 1000;
    if (deadline.tv_nsec >= 1000000000) { deadline.tv_sec += 1; deadline.tv_nsec -= 1000000000; }
    return deadline;
}

static int child(void *argument) { (void)argument; return 0; }

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "plain";
    char *const arguments[] = { "/bin/true", NULL };
    pid_t pid;
    if (!strcmp(mode, "plain")) {
        int pipe_ends[2];
        if (pipe(pipe_ends) != 0 || write(pipe_ends[1], "x", 1) != 1) return 2;
        struct pollfd ready = { pipe_ends[0], POLLIN, 0 };
        if (poll(&ready, 1, -1) != 1 || poll(&ready, 1, 0) != 1) return 3;   /* blocks until ready; only looks */
        int netlink = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);           /* devtrust's own look-ups */
        if (netlink < 0) return 4;
        close(netlink);
        pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
        pthread_cond_t condition = PTHREAD_COND_INITIALIZER;
        sem_t semaphore;
        sem_init(&semaphore, 0, 1);
        struct timespec deadline = in_ten_ms(CLOCK_REALTIME);
        if (sem_timedwait(&semaphore, &deadline) != 0) return 5;              /* woken in time */
        (void)mutex; (void)condition;
        puts("plain");
        return 0;
    }
    if (!strcmp(mode, "sleep")) sleep(1);
    else if (!strcmp(mode, "usleep")) usleep(10000);
    else if (!strcmp(mode, "nanosleep")) nanosleep(&ten_ms, NULL);
    else if (!strcmp(mode, "clock_nanosleep")) clock_nanosleep(CLOCK_MONOTONIC, 0, &ten_ms, NULL);
    else if (!strcmp(mode, "poll")) poll(NULL, 0, 10);
    else if (!strcmp(mode, "ppoll")) ppoll(NULL, 0, &ten_ms, NULL);
    else if (!strcmp(mode, "select")) { struct timeval wait = { 0, 10000 }; select(0, NULL, NULL, NULL, &wait); }
    else if (!strcmp(mode, "pselect")) pselect(0, NULL, NULL, NULL, &ten_ms, NULL);
    else if (!strcmp(mode, "epoll_wait")) { struct epoll_event event; epoll_wait(epoll_create1(0), &event, 1, 10); }
    else if (!strcmp(mode, "epoll_pwait")) { struct epoll_event event; epoll_pwait(epoll_create1(0), &event, 1, 10, NULL); }
    else if (!strcmp(mode, "epoll_pwait2")) { struct epoll_event event; epoll_pwait2(epoll_create1(0), &event, 1, &ten_ms, NULL); }
    else if (!strcmp(mode, "pthread_cond_timedwait") || !strcmp(mode, "pthread_cond_clockwait")) {
        pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
        pthread_cond_t condition = PTHREAD_COND_INITIALIZER;
        pthread_mutex_lock(&mutex);
        if (!strcmp(mode, "pthread_cond_timedwait")) { struct timespec deadline = in_ten_ms(CLOCK_REALTIME); pthread_cond_timedwait(&condition, &mutex, &deadline); }
        else { struct timespec deadline = in_ten_ms(CLOCK_MONOTONIC); pthread_cond_clockwait(&condition, &mutex, CLOCK_MONOTONIC, &deadline); }
    }
    else if (!strcmp(mode, "sem_timedwait")) { sem_t semaphore; sem_init(&semaphore, 0, 0); struct timespec deadline = in_ten_ms(CLOCK_REALTIME); sem_timedwait(&semaphore, &deadline); }
    else if (!strcmp(mode, "sem_clockwait")) { sem_t semaphore; sem_init(&semaphore, 0, 0); struct timespec deadline = in_ten_ms(CLOCK_MONOTONIC); sem_clockwait(&semaphore, CLOCK_MONOTONIC, &deadline); }
    else if (!strcmp(mode, "sigtimedwait")) { sigset_t set; sigemptyset(&set); sigaddset(&set, SIGUSR1); sigprocmask(SIG_BLOCK, &set, NULL); sigtimedwait(&set, NULL, &ten_ms); }
    else if (!strcmp(mode, "fork")) { if (fork() == 0) _exit(0); }
    else if (!strcmp(mode, "_Fork")) { if (_Fork() == 0) _exit(0); }
    else if (!strcmp(mode, "vfork")) { if (vfork() == 0) _exit(0); }
    else if (!strcmp(mode, "clone")) { static char stack[65536]; clone(child, stack + sizeof stack, SIGCHLD, NULL); }
    else if (!strcmp(mode, "posix_spawn")) posix_spawn(&pid, "/bin/true", NULL, NULL, arguments, environ);
    else if (!strcmp(mode, "posix_spawnp")) posix_spawnp(&pid, "true", NULL, NULL, arguments, environ);
    else if (!strcmp(mode, "execve")) execve("/bin/true", arguments, environ);
    else if (!strcmp(mode, "execv")) execv("/bin/true", arguments);
    else if (!strcmp(mode, "execvp")) execvp("true", arguments);
    else if (!strcmp(mode, "execvpe")) execvpe("true", arguments, environ);
    else if (!strcmp(mode, "execl")) execl("/bin/true", "true", (char *)NULL);
    else if (!strcmp(mode, "execlp")) execlp("true", "true", (char *)NULL);
    else if (!strcmp(mode, "execle")) execle("/bin/true", "true", (char *)NULL, environ);
    else if (!strcmp(mode, "fexecve")) fexecve(open("/bin/true", O_RDONLY), arguments, environ);
    else if (!strcmp(mode, "execveat")) execveat(AT_FDCWD, "/bin/true", arguments, environ, 0);
    else if (!strcmp(mode, "system")) system("true");
    else if (!strcmp(mode, "popen")) popen("true", "r");
    else if (!strcmp(mode, "socket")) socket(AF_INET, SOCK_STREAM, 0);
    else if (!strcmp(mode, "socket-unix")) socket(AF_UNIX, SOCK_STREAM, 0);
    else if (!strcmp(mode, "socketpair")) { int pair[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, pair); }
    else if (!strcmp(mode, "getaddrinfo")) { struct addrinfo *found; getaddrinfo("localhost", "80", NULL, &found); }
    else if (!strcmp(mode, "gethostbyname")) gethostbyname("localhost");
    else if (!strcmp(mode, "gethostbyname2")) gethostbyname2("localhost", AF_INET);
    else if (!strcmp(mode, "gethostbyname_r") || !strcmp(mode, "gethostbyname2_r")) {
        struct hostent entry, *result; char buffer[1024]; int error;
        if (!strcmp(mode, "gethostbyname_r")) gethostbyname_r("localhost", &entry, buffer, sizeof buffer, &result, &error);
        else gethostbyname2_r("localhost", AF_INET, &entry, buffer, sizeof buffer, &result, &error);
    }
    else if (!strcmp(mode, "gethostbyaddr")) { struct in_addr loopback = { htonl(0x7f000001) }; gethostbyaddr(&loopback, sizeof loopback, AF_INET); }
    else if (!strcmp(mode, "getnameinfo")) {
        struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons(80), .sin_addr = { htonl(0x7f000001) } };
        char host[256];
        getnameinfo((struct sockaddr *)&address, sizeof address, host, sizeof host, NULL, 0, 0);
    }
    else { fprintf(stderr, "unknown mode %s\n", mode); return 64; }
    printf("%s ran through\n", mode);
    return 0;
}
