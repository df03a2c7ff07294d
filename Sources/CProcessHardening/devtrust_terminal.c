#include "devtrust_hardening.h"

#include <sys/ioctl.h>

int devtrust_terminal_size(int fd, int *columns, int *rows) {
    struct winsize size = { 0 };
    if (ioctl(fd, TIOCGWINSZ, &size) != 0) return -1;
    *columns = size.ws_col;
    *rows = size.ws_row;
    return 0;
}
