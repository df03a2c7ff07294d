/* LD_PRELOAD library for the tests: getrandom(2) that always returns the same
   bytes, as two runs of a VM restored from one snapshot may see (and as a
   broken generator would). The byte is STUCK_RANDOM_BYTE (hex), 5a by default.
   Build: gcc -shared -fPIC -o stuck_getrandom.so stuck_getrandom.c */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

ssize_t getrandom(void *buffer, size_t length, unsigned int flags) {
    (void)flags;
    const char *byte = getenv("STUCK_RANDOM_BYTE");
    memset(buffer, byte ? (int)strtol(byte, NULL, 16) : 0x5A, length);
    return (ssize_t)length;
}
