/* threads.c — persistent worker pool: generation counter + spin/condvar wait. */
#include "core/threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TF_PAUSE() _mm_pause()
#else
#define TF_PAUSE() ((void)0)
#endif

/* Waiting for work (workers) or for the workers (caller): spin with pause for
 * about 0.1 ms (decode hands out jobs microseconds apart), then yield the core
 * a while (another process may need it: spinning would starve the very thread
 * being waited for), then sleep on the condition variable. */
#define TF_SPIN_ITERS 2000
#define TF_YIELD_ITERS 64

typedef struct tf_worker {
    tf_pool *pool;
    int ith;
    pthread_t tid;
} tf_worker;

struct tf_pool {
    int n_threads;
    tf_worker *workers; /* n_threads - 1 entries */
    pthread_mutex_t mu;
    pthread_cond_t cv_start;
    pthread_cond_t cv_done;
    atomic_uint generation; /* bumped once per job */
    atomic_int n_pending;   /* workers still running the current job */
    atomic_int stop;
    tf_task_fn fn;
    void *arg;
};

static void *worker_main(void *p) {
    tf_worker *w = p;
    tf_pool *pool = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen &&
               !atomic_load(&pool->stop)) {
            if (++spins < TF_SPIN_ITERS) { TF_PAUSE(); continue; }
            if (spins < TF_SPIN_ITERS + TF_YIELD_ITERS) { sched_yield(); continue; }
            pthread_mutex_lock(&pool->mu);
            while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop))
                pthread_cond_wait(&pool->cv_start, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load(&pool->stop)) return NULL;
        seen = gen;
        pool->fn(pool->arg, w->ith, pool->n_threads);
        if (atomic_fetch_sub_explicit(&pool->n_pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->cv_done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
}

int tf_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

tf_status tf_pool_create(tf_pool **out, int n_threads, tf_err *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > TF_MAX_THREADS)
        return tf_errf(err, TF_ERR_INVALID_ARG, "thread count %d: expected 1..%d", n_threads, TF_MAX_THREADS);
    tf_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return tf_errf(err, TF_ERR_NOMEM, "thread pool: out of memory");
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv_start, NULL);
    pthread_cond_init(&pool->cv_done, NULL);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->n_pending, 0);
    atomic_init(&pool->stop, 0);
    if (n_threads > 1) {
        pool->workers = calloc((size_t)n_threads - 1, sizeof *pool->workers);
        if (!pool->workers) {
            tf_pool_free(pool);
            return tf_errf(err, TF_ERR_NOMEM, "thread pool: out of memory");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            tf_worker *w = &pool->workers[i];
            w->pool = pool;
            w->ith = i + 1;
            if (pthread_create(&w->tid, NULL, worker_main, w) != 0) {
                pool->n_threads = i + 1; /* only i workers exist */
                tf_pool_free(pool);
                return tf_errf(err, TF_ERR_NOMEM, "thread pool: cannot start thread %d", i + 1);
            }
        }
    }
    *out = pool;
    return TF_OK;
}

void tf_pool_free(tf_pool *pool) {
    if (!pool) return;
    if (pool->workers) {
        pthread_mutex_lock(&pool->mu);
        atomic_store(&pool->stop, 1);
        pthread_cond_broadcast(&pool->cv_start);
        pthread_mutex_unlock(&pool->mu);
        for (int i = 0; i < pool->n_threads - 1; i++) pthread_join(pool->workers[i].tid, NULL);
        free(pool->workers);
    }
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv_start);
    pthread_cond_destroy(&pool->cv_done);
    free(pool);
}

int tf_pool_size(const tf_pool *pool) { return pool ? pool->n_threads : 1; }

void tf_pool_run(tf_pool *pool, tf_task_fn fn, void *arg) {
    if (!pool || pool->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->n_pending, pool->n_threads - 1, memory_order_relaxed);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->cv_start);
    pthread_mutex_unlock(&pool->mu);
    fn(arg, 0, pool->n_threads);
    int spins = 0;
    while (atomic_load_explicit(&pool->n_pending, memory_order_acquire) != 0) {
        if (++spins < TF_SPIN_ITERS) { TF_PAUSE(); continue; }
        if (spins < TF_SPIN_ITERS + TF_YIELD_ITERS) { sched_yield(); continue; }
        pthread_mutex_lock(&pool->mu);
        while (atomic_load(&pool->n_pending) != 0) pthread_cond_wait(&pool->cv_done, &pool->mu);
        pthread_mutex_unlock(&pool->mu);
    }
}
