/* LD_PRELOAD shim for benches/durable.sh (STEADY_FSYNC_US=n): every fsync() and
 * fdatasync() takes n microseconds more, then reaches the C library. With the servers'
 * files on tmpfs (where a sync itself is nearly free) it models a disk whose sync
 * always takes n us, the same for every server measured: this VM's disk switches by
 * itself between ~0.2 ms and ~4 ms syncs, which moves a whole run by 2-10x. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static void wait_us(void) {
    const char *v = getenv("STEADY_FSYNC_US");
    long us = v ? atol(v) : 1000;
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&t, &t) != 0) {
    }
}

int fsync(int fd) {
    int (*next)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    wait_us();
    return next(fd);
}

int fdatasync(int fd) {
    int (*next)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    wait_us();
    return next(fd);
}
