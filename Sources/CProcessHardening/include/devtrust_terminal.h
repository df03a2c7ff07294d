#ifndef DEVTRUST_TERMINAL_H
#define DEVTRUST_TERMINAL_H

/* The window size of the terminal on `fd` (ioctl TIOCGWINSZ, which Swift
   cannot call: ioctl is variadic). Returns 0 and sets *columns and *rows, or
   -1 when `fd` is no terminal. A terminal may report 0 x 0 (a pty whose size
   nobody set): the caller treats that as unknown. */
int devtrust_terminal_size(int fd, int *columns, int *rows);

#endif
