#ifndef DEVTRUST_DEADLINE_H
#define DEVTRUST_DEADLINE_H

#include <stddef.h>

/* A bound on one step that may hang (a TPM that accepts a connection and never
   answers): after `seconds`, unless devtrust_deadline_disarm comes first, the
   prepared last words are written to `fd` and the process exits with `status`.
   The words are made beforehand, as a SIGALRM handler may only call
   async-signal-safe functions (tcgetattr, write, _exit): `on_terminal` (colour,
   when `on_terminal_length` is not 0) is written when `fd` is a terminal at
   that moment, else `words`. So arming asks nothing of the terminal: only a
   deadline that passes does. Each text at most DEVTRUST_DEADLINE_WORDS_MAX
   bytes (copied). Returns 0 when armed, -1 when not. The seconds, descriptors
   and statuses are Swift's to choose (DevtrustCore's SigningDeadline). */
#define DEVTRUST_DEADLINE_WORDS_MAX 4096
int devtrust_deadline_arm(unsigned seconds, int fd, const unsigned char *words, size_t length,
                          const unsigned char *on_terminal, size_t on_terminal_length, int status);
void devtrust_deadline_disarm(void);
/* 1 while the calling thread's arming stands (armed, not yet disarmed): for tests. */
int devtrust_deadline_armed_on_this_thread(void);

#endif
