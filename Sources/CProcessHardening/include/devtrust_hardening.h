#ifndef DEVTRUST_HARDENING_H
#define DEVTRUST_HARDENING_H

/* Makes the process undumpable: no core file (which would hold passwords,
   tokens or a software key), and no ptrace or /proc/PID/mem access by other
   processes of the same user without CAP_SYS_PTRACE. Returns 0 on success. */
int devtrust_make_undumpable(void);

#endif
