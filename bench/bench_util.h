/* bench_util.h — small helpers shared by the benchmark programs of bench/. */
#ifndef TF_BENCH_UTIL_H
#define TF_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Monotonic seconds. */
static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sorts t[0..n) in place and returns its median (the upper one for even n). */
static inline int bench_cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static inline double bench_median(double *t, int n) {
    qsort(t, (size_t)n, sizeof(double), bench_cmp_d);
    return t[n / 2];
}

/* A comma-separated list of positive integers ("1,7"): how many were written to
 * out (at most cap), or -1 on anything else. */
static inline int bench_parse_list(const char *s, int *out, int cap) {
    int n = 0;
    while (s && *s && n < cap) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 30) return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

#endif
