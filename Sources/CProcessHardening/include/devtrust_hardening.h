#ifndef DEVTRUST_HARDENING_H
#define DEVTRUST_HARDENING_H

/* Makes the process undumpable: no core file (which would hold passwords,
   tokens or a software key), and no ptrace or /proc/PID/mem access by other
   processes of the same user without CAP_SYS_PTRACE. Returns 0 on success. */
int devtrust_make_undumpable(void);

/* Ctrl-C, SIGTERM and SIGHUP no longer end the process at once: they are
   noted (devtrust_interrupt_signal) so that a long wait can end cleanly, say
   so, and then devtrust_reraise ends the process by the same signal. */
void devtrust_watch_interrupts(void);
/* The signal that arrived since devtrust_watch_interrupts, or 0. */
int devtrust_interrupt_signal(void);
/* Ends the process by `signal`, with its default action. */
void devtrust_reraise(int signal);
/* A write to a closed pipe fails with EPIPE instead of ending the process
   (a native messaging host whose browser stopped reading). */
void devtrust_ignore_broken_pipes(void);

#endif
