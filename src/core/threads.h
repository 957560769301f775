/*
 * threads.h — a small persistent thread pool.
 *
 * tf_pool_run(pool, fn, arg) calls fn(arg, ith, nth) once for every ith in
 * [0, nth) — the calling thread runs ith == 0 — and returns when all are done.
 * Workers spin briefly between jobs (decode issues dozens of jobs per token)
 * and then sleep on a condition variable. One pool serves one caller at a time.
 */
#ifndef TF_CORE_THREADS_H
#define TF_CORE_THREADS_H

#include "core/error.h"

typedef struct tf_pool tf_pool;
typedef void (*tf_task_fn)(void *arg, int ith, int nth);

/* n_threads >= 1 (1 = no workers, everything runs on the caller). */
tf_status tf_pool_create(tf_pool **out, int n_threads, tf_err *err);
void tf_pool_free(tf_pool *pool);
int tf_pool_size(const tf_pool *pool);
void tf_pool_run(tf_pool *pool, tf_task_fn fn, void *arg);

/* Split [0, n) into nth nearly equal parts; part ith is [*lo, *hi). */
static inline void tf_split_range(long n, int ith, int nth, long *lo, long *hi) {
    long base = n / nth, rem = n % nth;
    *lo = ith * base + (ith < rem ? ith : rem);
    *hi = *lo + base + (ith < rem ? 1 : 0);
}

/* Number of online CPUs (>= 1). */
#define TF_MAX_THREADS 1024 /* the most threads a pool takes */
int tf_cpu_count(void);

#endif
