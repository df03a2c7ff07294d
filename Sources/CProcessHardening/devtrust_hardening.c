#include "devtrust_hardening.h"

#include <sys/prctl.h>
#include <sys/resource.h>

int devtrust_make_undumpable(void) {
    struct rlimit none = { 0, 0 };
    int result = setrlimit(RLIMIT_CORE, &none);
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) result = -1;
    return result;
}
