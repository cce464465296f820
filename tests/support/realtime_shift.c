/* The realtime clock shifted by an offset a test sets: preloaded into a daemon
 * (LD_PRELOAD) by tests/support/daemon_clock.py.
 *
 * clock_gettime for the realtime clocks, gettimeofday and time read the real clock
 * plus the offset, in seconds, written in the file CONE_TEST_CLOCK_FILE names (read
 * again at most every READ_EVERY_NS of monotonic time). The monotonic clocks, and so
 * every sleep, timer and timeout, are left alone. (Debian's libfaketime 0.9.10, tried
 * first, makes Python's time.sleep fail with EINVAL once the monotonic clock is left
 * real, and hangs timed waits when it is not.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define READ_EVERY_NS 200000000LL

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime(void) {
    static clock_gettime_fn real;
    if (!real) real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    return real;
}

static long long now_ns(clockid_t clock) {
    struct timespec ts;
    real_clock_gettime()(clock, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The file's "+12.345" (or "-3.5") as nanoseconds: plain syscalls, no allocation. */
static long long read_offset_ns(long long previous) {
    const char *path = getenv("CONE_TEST_CLOCK_FILE");
    if (!path) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return previous;
    char text[64];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return previous;
    text[n] = 0;
    const char *p = text;
    int sign = 1;
    if (*p == '+' || *p == '-') sign = *p++ == '-' ? -1 : 1;
    long long whole = 0, frac = 0, scale = 1000000000LL;
    while (*p >= '0' && *p <= '9') whole = whole * 10 + (*p++ - '0');
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9' && scale > 1) {
            scale /= 10;
            frac += (*p++ - '0') * scale;
        }
    }
    return sign * (whole * 1000000000LL + frac);
}

static long long offset_ns(void) {
    static long long offset, next_read;
    long long mono = now_ns(CLOCK_MONOTONIC);
    if (mono >= __atomic_load_n(&next_read, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&offset, read_offset_ns(offset), __ATOMIC_RELEASE);
        __atomic_store_n(&next_read, mono + READ_EVERY_NS, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&offset, __ATOMIC_ACQUIRE);
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int rc = real_clock_gettime()(clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_ns();
        ts->tv_sec = t / 1000000000LL;
        ts->tv_nsec = t % 1000000000LL;
    }
    return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0) { /* glibc declares tv non-null */
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
