/* membw.c — the read-bandwidth probe (see membw.h). */
#include "membw.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

typedef struct bw_arg {
    const uint64_t *p; /* this thread's part of the buffer */
    size_t n;          /* its length in 8-byte words */
    uint64_t out;      /* a checksum, so the loads cannot be dropped */
} bw_arg;

/* Read loop with 256-bit loads and four independent accumulators, so the
 * probe measures the memory system rather than the adder. */
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 16 <= n; i += 16) {
        a0 = _mm256_add_epi64(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
        a2 = _mm256_add_epi64(a2, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
        a3 = _mm256_add_epi64(a3, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)out, s);
    return out[0] ^ out[1] ^ out[2] ^ out[3];
}

static void *bw_read(void *a_) {
    bw_arg *a = a_;
    if (__builtin_cpu_supports("avx2")) {
        a->out = read_avx2(a->p, a->n);
        return NULL;
    }
    uint64_t acc[8] = {0};
    for (size_t i = 0; i + 8 <= a->n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a->p[i + j];
    a->out = acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7];
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double membw_read_gbs(int n_threads, size_t bytes, int reps) {
    enum { MAX_THREADS = 64 };
    if (n_threads < 1) n_threads = 1;
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    size_t n = bytes / 8;
    if (n < (size_t)n_threads * 16 || reps < 1) return -1;
    uint64_t *buf = malloc(n * 8);
    if (!buf) return -1;
    for (size_t i = 0; i < n; i++) buf[i] = i * 2654435761u;
    double best = 0;
    for (int rep = 0; rep < reps; rep++) {
        pthread_t th[MAX_THREADS];
        bw_arg args[MAX_THREADS];
        int started = 0;
        double t0 = now_s();
        for (int t = 0; t < n_threads; t++) {
            args[t] = (bw_arg){buf + n / (size_t)n_threads * (size_t)t, n / (size_t)n_threads, 0};
            if (pthread_create(&th[t], NULL, bw_read, &args[t]) != 0) break;
            started++;
        }
        for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
        if (started < n_threads) {
            free(buf);
            return -1;
        }
        double gbs = (double)(n / (size_t)n_threads * (size_t)n_threads * 8) / (now_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    free(buf);
    return best;
}
