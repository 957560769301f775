/*
 * matmul_lab.c — lab for the CPU matrix product: for every weight type and
 * every kernel table this CPU can run, validate tf_cpu_matmul against the
 * scalar reference, then time decode (gemv, n_tok = 1) and prefill (gemm,
 * n_tok = 64) on matrices of realistic sizes, printing GB/s of weights read
 * next to the machine's measured read bandwidth, and GFLOP/s.
 *
 * Build (after `make lib`, from the repository root):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc dev/matmul_lab.c build/libtriforce.a \
 *      -lpcre2-8 -lm -lpthread -o build/matmul_lab
 * Run:
 *   build/matmul_lab [threads=2] [types=all, e.g. q4_0,q8_0] [isa=all, e.g. avx512_vnni]
 *
 * Matrices are filled with random values and re-used across calls: any that
 * fit in the last-level cache are timed hot, as in a decode loop where the
 * same small model is read a thousand times a second.
 */
#include "backend/cpu/quant.h"
#include "core/rng.h"

#include <emmintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double gauss(tf_rng *r) {
    double u1 = tf_rng_uniform(r), u2 = tf_rng_uniform(r);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

/* ---- read bandwidth: sum a 1 GiB float array ------------------------------------ */

typedef struct {
    const float *x;
    long n;
    double part[64];
} sum_job;

static void sum_task(void *arg, int ith, int nth) {
    sum_job *j = arg;
    long lo, hi;
    tf_split_range(j->n / 32, ith, nth, &lo, &hi);
    __m128 a[8];
    for (int k = 0; k < 8; k++) a[k] = _mm_setzero_ps();
    for (long i = lo * 32; i < hi * 32; i += 32)
        for (int k = 0; k < 8; k++) a[k] = _mm_add_ps(a[k], _mm_load_ps(j->x + i + 4 * k));
    for (int k = 1; k < 8; k++) a[0] = _mm_add_ps(a[0], a[k]);
    float t[4];
    _mm_storeu_ps(t, a[0]);
    j->part[ith] = (double)t[0] + t[1] + t[2] + t[3];
}

/* Best of `reps` passes over n floats, GB/s. */
static double read_bandwidth(const float *x, long n, tf_pool *pool, int reps) {
    sum_job j = {.x = x, .n = n};
    double best = 1e30, sink = 0;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now_s();
        tf_pool_run(pool, sum_task, &j);
        double dt = now_s() - t0;
        for (int i = 0; i < tf_pool_size(pool); i++) sink += j.part[i];
        if (dt < best) best = dt;
    }
    if (sink == 42.0) printf(" ");
    return (double)n * sizeof(float) / best / 1e9;
}

/* ---- validation --------------------------------------------------------------------- */

/* tf_cpu_matmul with table k against tf_ref_vec_dot per output, on a shape
 * with partial tiles (rows % 4, tokens % 4) and both thread splits. */
static int validate(const tf_cpu_kernels *k, tf_dtype t, tf_pool *pool, tf_rng *rng) {
    const int64_t rows = 67, cols = 1024, tok = 7;
    size_t ws = tf_dtype_row_size(t, cols), as = tf_act_row_size(t, cols);
    float *xf = malloc(sizeof(float) * rows * cols), *x = malloc(sizeof(float) * tok * cols);
    char *w = malloc(ws * rows), *act = malloc(as * tok), *aref = malloc(as * tok);
    float *y = malloc(sizeof(float) * rows * tok);
    for (int64_t i = 0; i < rows * cols; i++) xf[i] = (float)gauss(rng);
    for (int64_t i = 0; i < tok * cols; i++) x[i] = (float)gauss(rng);
    for (int64_t r = 0; r < rows; r++) tf_ref_quantize_row(t, xf + r * cols, w + r * ws, cols);
    for (int64_t j = 0; j < tok; j++) tf_ref_act_quantize(t, x + j * cols, aref + j * as, cols);
    tf_cpu_matmul(pool, k, t, w, 0, rows, cols, x, tok, y, rows, act);
    double max_err = 0;
    for (int64_t j = 0; j < tok; j++)
        for (int64_t r = 0; r < rows; r++) {
            double ref = tf_ref_vec_dot(t, cols, w + r * ws, aref + j * as);
            double e = fabs(y[j * rows + r] - ref) / (fabs(ref) + 1.0);
            if (!(e <= max_err)) max_err = isnan(e) ? INFINITY : e;
        }
    free(xf);
    free(x);
    free(w);
    free(act);
    free(aref);
    free(y);
    if (max_err > 1e-4) {
        printf("  VALIDATION FAILED %s %s: max relative error %g\n", k->isa, tf_dtype_name(t), max_err);
        return 0;
    }
    return 1;
}

/* ---- timing ----------------------------------------------------------------------------- */

typedef struct { const char *name; int64_t rows, cols; } shape;

/* Seconds per call: calls run in batches of about 20 ms for at least min_s
 * seconds (and min_reps calls); the fastest batch counts, so that other
 * processes on the machine disturb the figure as little as possible. */
static double time_matmul(const tf_cpu_kernels *k, tf_dtype t, tf_pool *pool, const void *w, int64_t rows,
                          int64_t cols, const float *x, int64_t tok, float *y, void *act, int min_reps,
                          double min_s) {
    double t0 = now_s();
    tf_cpu_matmul(pool, k, t, w, 0, rows, cols, x, tok, y, rows, act); /* warm up, and a first estimate */
    double one = now_s() - t0;
    int batch = one > 0.02 ? 1 : (int)(0.02 / (one + 1e-9)) + 1;
    double best = INFINITY, start = now_s();
    int reps = 0;
    do {
        double b0 = now_s();
        for (int i = 0; i < batch; i++) tf_cpu_matmul(pool, k, t, w, 0, rows, cols, x, tok, y, rows, act);
        double per = (now_s() - b0) / batch;
        if (per < best) best = per;
        reps += batch;
    } while (reps < min_reps || now_s() - start < min_s);
    return best;
}

static int in_list(const char *list, const char *name) {
    if (!list || strcmp(list, "all") == 0) return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    int n_threads = argc > 1 ? atoi(argv[1]) : 2;
    const char *type_list = argc > 2 ? argv[2] : "all";
    const char *isa_list = argc > 3 ? argv[3] : "all";
    if (n_threads < 1) n_threads = 1;
    tf_err err = {0};
    tf_pool *pool = NULL, *pool1 = NULL;
    if (tf_pool_create(&pool, n_threads, &err) != TF_OK || tf_pool_create(&pool1, 1, &err) != TF_OK) {
        fprintf(stderr, "matmul_lab: %s\n", err.msg);
        return 1;
    }

    /* machine read bandwidth: DRAM (1 GiB) and a 32 MiB array (last-level cache) */
    long n_big = (1L << 30) / (long)sizeof(float), n_l3 = (32L << 20) / (long)sizeof(float);
    float *big = aligned_alloc(64, (size_t)n_big * sizeof(float));
    if (!big) { fprintf(stderr, "matmul_lab: cannot allocate 1 GiB\n"); return 1; }
    for (long i = 0; i < n_big; i++) big[i] = 1.0f;
    double bw1 = read_bandwidth(big, n_big, pool1, 3), bwn = read_bandwidth(big, n_big, pool, 3);
    double l3_1 = read_bandwidth(big, n_l3, pool1, 20), l3_n = read_bandwidth(big, n_l3, pool, 20);
    free(big);
    printf("read bandwidth (sum of f32): 1 GiB: %.1f GB/s on 1 thread, %.1f GB/s on %d threads; "
           "32 MiB: %.1f / %.1f GB/s\n", bw1, bwn, n_threads, l3_1, l3_n);
    printf("(%%bw below is relative to the 1 GiB figure on %d threads; matrices under ~64 MiB are read from "
           "cache)\n", n_threads);

    const tf_cpu_kernels *tables[8];
    int n_tables = tf_cpu_kernels_all(tables, 8);
    static const tf_dtype types[] = {TF_DTYPE_F32,  TF_DTYPE_F16,  TF_DTYPE_BF16, TF_DTYPE_Q8_0,
                                     TF_DTYPE_Q4_0, TF_DTYPE_Q4_1, TF_DTYPE_Q4_K, TF_DTYPE_Q6_K};
    static const shape shapes[] = {
        {"attn 4096x4096", 4096, 4096},
        {"ffn 5632x2048", 5632, 2048},
        {"vocab 32000x512", 32000, 512},
        {"small 256x256", 256, 256},
        {"vocab 32000x256", 32000, 256},
        {"smol qkv 576x576", 576, 576},
        {"smol ffn 1536x576", 1536, 576},
        {"smol down 576x1536", 576, 1536},
        {"smol vocab 49152x576", 49152, 576},
    };
    const int64_t gemm_tok = 64;
    tf_rng rng;
    tf_rng_seed(&rng, 1234);

    printf("%-6s %-12s %-20s %10s %8s %7s %10s %10s %10s %8s\n", "type", "isa", "shape", "gemv us", "GB/s", "%bw",
           "k=4 x1", "k=8 x1", "gemm ms", "GFLOP/s");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        tf_dtype t = types[ti];
        if (!in_list(type_list, tf_dtype_name(t))) continue;
        for (int ki = 0; ki < n_tables; ki++)
            if (in_list(isa_list, tables[ki]->isa) && !validate(tables[ki], t, pool, &rng)) return 1;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const shape *s = &shapes[si];
            size_t ws = tf_dtype_row_size(t, s->cols);
            char *w = malloc(ws * (size_t)s->rows);
            float *row = malloc(sizeof(float) * s->cols);
            float *x = malloc(sizeof(float) * gemm_tok * s->cols);
            float *y = malloc(sizeof(float) * gemm_tok * s->rows);
            void *act = malloc(gemm_tok * tf_act_scratch_row_size(t, s->cols));
            for (int64_t r = 0; r < s->rows; r++) {
                for (int64_t c = 0; c < s->cols; c++) row[c] = (float)(0.02 * gauss(&rng));
                tf_ref_quantize_row(t, row, w + (size_t)r * ws, s->cols);
            }
            for (int64_t i = 0; i < gemm_tok * s->cols; i++) x[i] = (float)gauss(&rng);
            double bytes = (double)ws * (double)s->rows;
            for (int ki = 0; ki < n_tables; ki++) {
                const tf_cpu_kernels *k = tables[ki];
                if (!in_list(isa_list, k->isa)) continue;
                int scalar = strcmp(k->isa, "scalar") == 0;
                double tv = time_matmul(k, t, pool, w, s->rows, s->cols, x, 1, y, act, scalar ? 1 : 10,
                                        scalar ? 0.0 : 0.3);
                double flop = 2.0 * (double)s->rows * (double)s->cols * gemm_tok;
                double tm = scalar ? NAN
                                   : time_matmul(k, t, pool, w, s->rows, s->cols, x, gemm_tok, y, act, 2, 0.3);
                /* a verification pass's k tokens, as a multiple of one token's time */
                double t4 = scalar ? NAN : time_matmul(k, t, pool, w, s->rows, s->cols, x, 4, y, act, 10, 0.3);
                double t8 = scalar ? NAN : time_matmul(k, t, pool, w, s->rows, s->cols, x, 8, y, act, 10, 0.3);
                printf("%-6s %-12s %-20s %10.1f %8.1f %6.0f%% %10.2f %10.2f %10.2f %8.1f\n", tf_dtype_name(t), k->isa,
                       s->name, tv * 1e6, bytes / tv / 1e9, 100.0 * bytes / tv / 1e9 / bwn, t4 / tv, t8 / tv,
                       tm * 1e3, flop / tm / 1e9);
                fflush(stdout);
            }
            free(w);
            free(row);
            free(x);
            free(y);
            free(act);
        }
    }
    tf_pool_free(pool);
    tf_pool_free(pool1);
    return 0;
}
