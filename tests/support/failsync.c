/* LD_PRELOAD shim for tests: the first fsync() or fdatasync() of the process fails with
 * EIO, as a transient disk error would; later ones reach the C library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>

static int already_failed;

static int fail_first(int fd, const char *name) {
    int (*next)(int) = (int (*)(int))dlsym(RTLD_NEXT, name);
    if (!__atomic_exchange_n(&already_failed, 1, __ATOMIC_SEQ_CST)) {
        errno = EIO;
        return -1;
    }
    return next(fd);
}

int fsync(int fd) { return fail_first(fd, "fsync"); }

int fdatasync(int fd) { return fail_first(fd, "fdatasync"); }
