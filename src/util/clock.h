/* Monotonic wall time in milliseconds, for timing passes and reports (never for logic). */
#ifndef AF_UTIL_CLOCK_H
#define AF_UTIL_CLOCK_H

#include <time.h>

static inline double af_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

#endif
