/* quant_testutil.h — what the weight-format tests share (test_quant.c,
 * test_matmul.c): every type of the registry, the CPU kernel tables, random
 * data with outliers and guarded buffers. Include after testutil.h. */
#ifndef TF_TESTS_QUANT_TESTUTIL_H
#define TF_TESTS_QUANT_TESTUTIL_H

#include "backend/cpu/quant.h"
#include "core/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64          /* guard bytes after every output */
#define GUARD_BYTE 0xA5
#define CANARY 12345.678f /* value of the unused floats of Y */

/* Every type of the registry, so a new row is tested by every test that walks it. */
static const tf_dtype k_types[] = {
#define TYPE_(ID, ...) TF_DTYPE_##ID,
    TF_DTYPE_LIST(TYPE_)
#undef TYPE_
};
#define N_TYPES ((int)(sizeof k_types / sizeof k_types[0]))

static const tf_cpu_kernels *g_tables[8];
static int g_n_tables;

/* ---- helpers ------------------------------------------------------------------ */

static inline double gauss(tf_rng *r) {
    double u1 = tf_rng_uniform(r), u2 = tf_rng_uniform(r);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

/* Gaussian values times `scale`, with rare outliers (x8) so blocks see both
 * a dominant value and small ones. */
static inline void fill_gauss(tf_rng *r, float *x, int64_t n, double scale) {
    for (int64_t i = 0; i < n; i++) {
        double v = gauss(r) * scale;
        if (tf_rng_next(r) % 61 == 0) v *= 8.0;
        x[i] = (float)v;
    }
}

/* malloc with GUARD guard bytes after `bytes`. */
static inline void *alloc_guarded(size_t bytes) {
    unsigned char *p = malloc(bytes + GUARD);
    assert_non_null(p);
    memset(p, 0, bytes);
    memset(p + bytes, GUARD_BYTE, GUARD);
    return p;
}

static inline void check_guard(const void *p, size_t bytes) {
    const unsigned char *g = (const unsigned char *)p + bytes;
    for (int i = 0; i < GUARD; i++) {
        if (g[i] != GUARD_BYTE) {
            print_error("guard byte %d after %zu bytes overwritten\n", i, bytes);
            fail();
        }
    }
}

static inline int64_t block_of(tf_dtype t) { return tf_dtype_block_size(t); }

static inline void setup_tables(void) {
    if (!g_n_tables) g_n_tables = tf_cpu_kernels_all(g_tables, 8);
}

/* cmocka group setup of these tests: the tables, once. */
static inline int quant_group_setup(void **state) {
    (void)state;
    setup_tables();
    return 0;
}

/* Bound on the rounding error of a dot product: tol * sum |w_i a_i| over the
 * dequantized operands (in double). */
static inline double dot_magnitude(tf_dtype t, int64_t n, const void *w, const void *a) {
    float *wf = malloc(sizeof(float) * n), *af = malloc(sizeof(float) * n);
    tf_ref_dequantize_row(t, w, wf, n);
    tf_ref_dequantize_row(tf_act_type(t), a, af, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)wf[i] * af[i]);
    free(wf);
    free(af);
    return s;
}

/* The dot product of a weight row of type t and an activation row of type
 * at, both dequantized, in float64; *mag gets dot_magnitude's sum. */
static inline double dot_f64(tf_dtype t, tf_dtype at, int64_t n, const void *w, const void *a, double *mag) {
    float *wf = malloc(sizeof(float) * n), *af = malloc(sizeof(float) * n);
    tf_ref_dequantize_row(t, w, wf, n);
    tf_ref_dequantize_row(at, a, af, n);
    double s = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        s += (double)wf[i] * af[i];
        m += fabs((double)wf[i] * af[i]);
    }
    free(wf);
    free(af);
    *mag = m;
    return s;
}

static inline void check_dot(const char *what, const tf_cpu_kernels *k, tf_dtype t, int64_t n, float got, float ref,
                      double mag) {
    double tol = 2e-5 * mag + 1e-30;
    if (!isfinite(got) || fabs((double)got - ref) > tol) {
        print_error("%s %s %s n=%lld: %.9g vs reference %.9g (tolerance %g)\n", what, k->isa, tf_dtype_name(t),
                    (long long)n, got, ref, tol);
        fail();
    }
}

#endif
