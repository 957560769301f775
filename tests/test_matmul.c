/* test_matmul.c — the threaded matrix product (tf_cpu_matmul, matmul.c)
 * against a double-precision product over the dequantized weights, its
 * exact rows, its batch invariance, and several matrices of one input in
 * one job (tf_cpu_matmul_n), in every kernel table, for every type. */
#include "testutil.h"

#include "quant_testutil.h"

#include "core/threads.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- matrix product ---------------------------------------------------------------- */

typedef struct { int rows, cols, tok; } mm_shape;

/* tf_cpu_matmul is checked twice:
 *  - per case against the double product over the dequantized weights and
 *    the dequantized activations it consumes (X itself for float weights):
 *    NMSE < 1e-9, only float rounding. The squared error is divided by the
 *    larger of sum(ref^2) and the sum over outputs and columns of
 *    (w_c xq_c)^2: a single short dot product can cancel to nearly zero, and
 *    its rounding error scales with its terms, not with its result;
 *  - against the double product with the unquantized X: the squared error,
 *    relative to the sum over outputs and columns of (w_c x_c)^2, is about
 *    the squared relative error of the 8-bit activations whatever the shape
 *    (Gaussian X: measured 3e-5 for Q8_0 blocks, 5e-5 for Q8_K). Pooled over
 *    all shapes of a type the bound is tight; a single small case (one dot of
 *    32 products) is noisy and only checked for gross errors (a wrong scale
 *    or layout gives O(1)). */
typedef struct { double err, mag; } act_err_sum;

static double mm_act_bound(tf_dtype t) {
    switch ((int)tf_act_type(t)) {
    case TF_DTYPE_F32: return 1e-11; /* float rounding: 4e-13 seen */
    case TF_DTYPE_Q8_0: case TF_DTYPE_Q8_1: return 1e-4;
    default: return 1.5e-4;
    }
}
#define MM_CASE_ACT_BOUND 2e-2

/* The activation blocks table k's products of type t consume: those of the
 * packed path where it has one (Q4_K's and Q5_K's differ from tf_act_type's),
 * else tf_act_type's. */
static tf_dtype mm_act_of(const tf_cpu_kernels *k, tf_dtype t) {
    return k->packed_tile[t] && k->act_pack[t] ? tf_act_pack_type(t) : tf_act_type(t);
}

static void run_matmul_case(const tf_cpu_kernels *k, tf_pool *pool, tf_dtype t, const mm_shape *s, tf_rng *rng,
                            act_err_sum *sum) {
    int64_t cols = (s->cols + block_of(t) - 1) / block_of(t) * block_of(t);
    int64_t rows = s->rows, tok = s->tok, ldy = rows + 3;
    const tf_dtype at = mm_act_of(k, t);
    size_t ws = tf_dtype_row_size(t, cols), as = tf_act_format_row_size(at, cols);
    float *wf = malloc(sizeof(float) * rows * cols), *x = malloc(sizeof(float) * tok * cols);
    float *xq = malloc(sizeof(float) * tok * cols);
    char *w = malloc(ws * rows), *aref = malloc(as * tok);
    fill_gauss(rng, wf, rows * cols, 0.1);
    for (int64_t i = 0; i < tok * cols; i++) x[i] = (float)(2.0 * gauss(rng)); /* no outliers: see mm_act_bound */
    for (int64_t r = 0; r < rows; r++) tf_ref_quantize_row(t, wf + r * cols, w + r * ws, cols);
    for (int64_t r = 0; r < rows; r++) tf_ref_dequantize_row(t, w + r * ws, wf + r * cols, cols);
    for (int64_t j = 0; j < tok; j++) {
        tf_ref_quantize_row(at, x + j * cols, aref + j * as, cols);
        tf_ref_dequantize_row(at, aref + j * as, xq + j * cols, cols);
    }
    size_t act_bytes = (size_t)tok * tf_act_scratch_row_size(t, cols);
    void *act = alloc_guarded(act_bytes);
    size_t y_bytes = sizeof(float) * (size_t)(tok * ldy);
    float *y = alloc_guarded(y_bytes);
    for (int64_t i = 0; i < tok * ldy; i++) y[i] = CANARY;
    tf_cpu_matmul(pool, k, t, w, 0, rows, cols, x, tok, y, ldy, act);
    check_guard(act, act_bytes);
    check_guard(y, y_bytes);
    double num = 0, den = 0, den_terms = 0, num_x = 0, mag = 0;
    for (int64_t j = 0; j < tok; j++) {
        for (int64_t r = 0; r < rows; r++) {
            double ref = 0, ref_x = 0, m = 0;
            for (int64_t c = 0; c < cols; c++) {
                double wv = wf[r * cols + c];
                ref += wv * xq[j * cols + c];
                ref_x += wv * x[j * cols + c];
                m += (wv * x[j * cols + c]) * (wv * x[j * cols + c]);
                den_terms += (wv * xq[j * cols + c]) * (wv * xq[j * cols + c]);
            }
            float v = y[j * ldy + r];
            if (!isfinite(v)) {
                print_error("matmul %s %s: non-finite Y[%lld][%lld]\n", k->isa, tf_dtype_name(t), (long long)j,
                            (long long)r);
                fail();
            }
            num += (v - ref) * (v - ref);
            den += ref * ref;
            num_x += (v - ref_x) * (v - ref_x);
            mag += m;
        }
        for (int64_t r = rows; r < ldy; r++) assert_true(y[j * ldy + r] == CANARY);
    }
    double nmse = num / fmax(den, den_terms), act_err = num_x / mag;
    sum->err += num_x;
    sum->mag += mag;
    if (nmse > 1e-9 || act_err > MM_CASE_ACT_BOUND) {
        print_error("matmul %s %s rows %lld cols %lld tok %lld threads %d: nmse %g (bound 1e-9), error vs f32 "
                    "activations %g (bound %g)\n",
                    k->isa, tf_dtype_name(t), (long long)rows, (long long)cols, (long long)tok, tf_pool_size(pool),
                    nmse, act_err, MM_CASE_ACT_BOUND);
        fail();
    }
    free(wf);
    free(x);
    free(xq);
    free(w);
    free(aref);
    free(act);
    free(y);
}

static void test_matmul(void **state) {
    (void)state;
    static const mm_shape shapes[] = {
        {1, 32, 1},    {1, 256, 2},   {3, 224, 5},    {4, 33, 3},     {5, 1056, 1},  {7, 4096, 1},
        {17, 512, 17}, {67, 256, 1},  {67, 1056, 5},  {2, 512, 64},   {13, 4096, 17}, {67, 256, 64},
        {9, 2048, 9},  {64, 96, 33},
    };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x33);
    tf_pool *pools[2];
    tf_err err = {0};
    assert_int_equal(tf_pool_create(&pools[0], 1, &err), TF_OK);
    assert_int_equal(tf_pool_create(&pools[1], 2, &err), TF_OK);
    for (int ki = 0; ki < g_n_tables; ki++)
        for (int ti = 0; ti < N_TYPES; ti++) {
            act_err_sum sum = {0, 0};
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                run_matmul_case(g_tables[ki], pools[si % 2], k_types[ti], &shapes[si], &rng, &sum);
                if (si % 3 == 0) run_matmul_case(g_tables[ki], NULL, k_types[ti], &shapes[si], &rng, &sum);
            }
            double e = sum.err / sum.mag;
            if (ki == g_n_tables - 1)
                print_message("matmul %-5s error vs f32 activations %.3g (bound %.3g)\n", tf_dtype_name(k_types[ti]),
                              e, mm_act_bound(k_types[ti]));
            if (e > mm_act_bound(k_types[ti])) {
                print_error("matmul %s %s: error vs f32 activations %g > %g\n", g_tables[ki]->isa,
                            tf_dtype_name(k_types[ti]), e, mm_act_bound(k_types[ti]));
                fail();
            }
        }
    tf_pool_free(pools[0]);
    tf_pool_free(pools[1]);
}

/* The tiled, threaded product equals per-row reference dot products on the
 * same activations (catches tiling/threading mistakes the NMSE could hide):
 * to rounding, or on the packed path bit for bit tf_ref_packed_dot. */
static void test_matmul_exact_rows(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x44);
    tf_pool *pool;
    tf_err err = {0};
    assert_int_equal(tf_pool_create(&pool, 2, &err), TF_OK);
    const int64_t rows = 37, cols = 512, tok = 11;
    const tf_cpu_kernels *k = tf_cpu_kernels_get(TF_ISA_BEST);
    for (int ti = 0; ti < N_TYPES; ti++) {
        tf_dtype t = k_types[ti];
        size_t ws = tf_dtype_row_size(t, cols), as = tf_act_row_size(t, cols);
        float *wf = malloc(sizeof(float) * rows * cols), *x = malloc(sizeof(float) * tok * cols);
        char *w = malloc(ws * rows), *act = malloc(tf_act_scratch_row_size(t, cols) * tok), *aref = malloc(as * tok);
        float *y = malloc(sizeof(float) * rows * tok);
        fill_gauss(&rng, wf, rows * cols, 1.0);
        fill_gauss(&rng, x, tok * cols, 1.0);
        for (int64_t r = 0; r < rows; r++) tf_ref_quantize_row(t, wf + r * cols, w + r * ws, cols);
        for (int64_t j = 0; j < tok; j++) tf_ref_act_quantize(t, x + j * cols, aref + j * as, cols);
        tf_cpu_matmul(pool, k, t, w, 0, rows, cols, x, tok, y, rows, act);
        /* the packed path (where the table has it): bitwise its reference */
        const int packed = k->packed_tile[t] && k->act_pack[t];
        char *pk = packed ? malloc(tf_act_packed_row_size(t, cols)) : NULL;
        for (int64_t j = 0; j < tok; j++) {
            if (packed) tf_ref_act_pack(t, x + j * cols, pk, cols);
            for (int64_t r = 0; r < rows; r++) {
                if (packed) {
                    float ref = tf_ref_packed_dot(t, cols, w + r * ws, pk);
                    if (memcmp(&ref, &y[j * rows + r], sizeof ref) != 0) {
                        print_error("matmul row %s %s [%lld][%lld]: %.9g vs packed reference %.9g\n", k->isa,
                                    tf_dtype_name(t), (long long)j, (long long)r, y[j * rows + r], ref);
                        fail();
                    }
                    continue;
                }
                float ref = tf_ref_vec_dot(t, cols, w + r * ws, aref + j * as);
                check_dot("matmul row", k, t, cols, y[j * rows + r], ref,
                          dot_magnitude(t, cols, w + r * ws, aref + j * as));
            }
        }
        free(pk);
        free(wf);
        free(x);
        free(w);
        free(act);
        free(aref);
        free(y);
    }
    tf_pool_free(pool);
}

/* Every token's row of a batch's product (batch) bitwise equal to the same
 * token's product alone (alone): n rows of `rows` floats each. */
static void expect_batch_as_alone(const tf_cpu_kernels *k, tf_dtype t, int layout, int64_t cols, int threads, int n,
                                  const float *batch, const float *alone, int64_t rows) {
    for (int j = 0; j < n; j++)
        if (memcmp(batch + j * rows, alone + j * rows, sizeof(float) * rows) != 0) {
            print_error("matmul %s %s layout %d, %lld columns, threads %d: token %d of a batch of %d differs from the "
                        "same token alone\n",
                        k->isa, tf_dtype_name(t), layout, (long long)cols, threads, j, n);
            fail();
        }
}

/* Batch invariance of tf_cpu_matmul: a token's output row is bitwise the
 * same whether it is computed alone (the decode path) or as row i of a
 * batch of 2..16 tokens (prefill / verification tiles), in every table, for
 * every type, with and without threads, at 512 columns and (float types,
 * whose wide rows the product splits into column chunks) at 1,024 and
 * 2,048. Greedy speculative decoding relies on it (test_model checks the
 * same property end to end). */
static void test_matmul_batch_invariance(void **state) {
    (void)state;
    enum { MAX_TOK = 16, MAX_COLS = 2048 };
    const int64_t rows = 37;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x55);
    tf_pool *pool;
    tf_err err = {0};
    assert_int_equal(tf_pool_create(&pool, 2, &err), TF_OK);
    float *wf = malloc(sizeof(float) * rows * MAX_COLS), *x = malloc(sizeof(float) * MAX_TOK * MAX_COLS);
    float *alone = malloc(sizeof(float) * MAX_TOK * rows), *batch = malloc(sizeof(float) * MAX_TOK * rows);
    for (int ci = 0; ci < 3; ci++)
    for (int ti = 0; ti < N_TYPES; ti++) {
        tf_dtype t = k_types[ti];
        const int64_t cols = (int64_t)512 << ci;
        if (ci > 0 && tf_act_type(t) != TF_DTYPE_F32) continue; /* quantized rows are not split */
        size_t ws = tf_dtype_row_size(t, cols), as = tf_act_scratch_row_size(t, cols);
        char *w = malloc(ws * rows), *act = malloc(as * MAX_TOK);
        fill_gauss(&rng, wf, rows * cols, 0.5);
        fill_gauss(&rng, x, MAX_TOK * cols, 1.0);
        for (int64_t r = 0; r < rows; r++) tf_ref_quantize_row(t, wf + r * cols, w + r * ws, cols);
        for (int ki = 0; ki < g_n_tables; ki++)
            for (int pi = 0; pi < 2; pi++) {
                tf_pool *p = pi ? pool : NULL;
                const tf_cpu_kernels *k = g_tables[ki];
                for (int j = 0; j < MAX_TOK; j++)
                    tf_cpu_matmul(p, k, t, w, 0, rows, cols, x + j * cols, 1, alone + j * rows, rows, act);
                for (int n = 2; n <= MAX_TOK; n++) {
                    tf_cpu_matmul(p, k, t, w, 0, rows, cols, x, n, batch, rows, act);
                    expect_batch_as_alone(k, t, TF_WLAYOUT_FILE, cols, pi ? 2 : 1, n, batch, alone, rows);
                }
            }
        free(w);
        free(act);
    }
    free(wf);
    free(x);
    free(alone);
    free(batch);
    tf_pool_free(pool);
}

/* tf_cpu_matmul_n (several matrices of one input in one job: a layer's
 * q/k/v and gate/up) gives each matrix the bits tf_cpu_matmul gives it alone,
 * in every table, for every type, in the file layout and (where the table
 * has it) the packed weight layout, with and without threads, for 1..16
 * tokens, with row counts that end inside a tile and output strides wider
 * than the rows. Fresh random weights and activations. */
static void test_matmul_n(void **state) {
    (void)state;
    enum { MAX_TOK = 16, N_W = 3 };
    const int64_t rows[N_W] = {37, 5, 64}, cols = 512, ldy[N_W] = {40, 9, 64};
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x77);
    tf_pool *pool;
    tf_err err = {0};
    assert_int_equal(tf_pool_create(&pool, 2, &err), TF_OK);
    float *wf = malloc(sizeof(float) * 64 * cols), *x = malloc(sizeof(float) * MAX_TOK * cols);
    float *one[N_W], *many[N_W];
    for (int i = 0; i < N_W; i++) {
        one[i] = malloc(sizeof(float) * MAX_TOK * ldy[i]);
        many[i] = malloc(sizeof(float) * MAX_TOK * ldy[i]);
    }
    int n_checked = 0;
    for (int ti = 0; ti < N_TYPES; ti++) {
        tf_dtype t = k_types[ti];
        size_t ws = tf_dtype_row_size(t, cols), as = tf_act_scratch_row_size(t, cols);
        char *w[N_W], *wp[N_W], *act = malloc(as * MAX_TOK);
        for (int i = 0; i < N_W; i++) {
            w[i] = malloc(ws * (size_t)rows[i]);
            wp[i] = malloc(ws * (size_t)rows[i]);
            fill_gauss(&rng, wf, rows[i] * cols, 0.5);
            for (int64_t r = 0; r < rows[i]; r++) tf_ref_quantize_row(t, wf + r * cols, w[i] + r * ws, cols);
            if (tf_weight_packs(t)) tf_weight_pack_rows(t, w[i], wp[i], rows[i], cols);
        }
        fill_gauss(&rng, x, MAX_TOK * cols, 1.0);
        for (int ki = 0; ki < g_n_tables; ki++)
            for (int layout = 0; layout < 2; layout++) {
                const tf_cpu_kernels *k = g_tables[ki];
                if (layout == TF_WLAYOUT_PACKED && !(tf_weight_packs(t) && k->wpacked_tile[t] && k->act_pack[t]))
                    continue;
                const void *W[N_W] = {layout ? wp[0] : w[0], layout ? wp[1] : w[1], layout ? wp[2] : w[2]};
                for (int pi = 0; pi < 2; pi++) {
                    tf_pool *p = pi ? pool : NULL;
                    static const int toks[] = {1, 2, 3, 8, 13, 16};
                    for (size_t ni = 0; ni < sizeof toks / sizeof toks[0]; ni++) {
                        const int n = toks[ni];
                        for (int i = 0; i < N_W; i++) {
                            for (int64_t e = 0; e < MAX_TOK * ldy[i]; e++) one[i][e] = many[i][e] = -1.0f;
                            tf_cpu_matmul(p, k, t, W[i], layout, rows[i], cols, x, n, one[i], ldy[i], act);
                        }
                        tf_cpu_matmul_n(p, k, t, layout, N_W, W, rows, cols, x, n, many, ldy, act);
                        for (int i = 0; i < N_W; i++) {
                            for (int64_t e = 0; e < n * ldy[i]; e++) assert_false(isnan(many[i][e]));
                            if (memcmp(one[i], many[i], sizeof(float) * (size_t)(n * ldy[i])) != 0) {
                                print_error("matmul_n %s %s layout %d threads %d, %d tokens: matrix %d differs from "
                                            "its product alone\n",
                                            k->isa, tf_dtype_name(t), layout, pi ? 2 : 1, n, i);
                                fail();
                            }
                        }
                        n_checked++;
                    }
                }
            }
        for (int i = 0; i < N_W; i++) free(w[i]), free(wp[i]);
        free(act);
    }
    print_message("matmul_n: %d cases equal to the products alone\n", n_checked);
    for (int i = 0; i < N_W; i++) free(one[i]), free(many[i]);
    free(wf);
    free(x);
    tf_pool_free(pool);
}

/* Prefill over the packed weight layout: tiles of up to TF_WPACK_TOKS_MAX
 * tokens (and the blocks of tokens that fit L2) at a width where the register
 * tiles run (4,096 columns), a batch of 100 tokens (two 48-token tiles and a
 * remainder of 4) with and without threads: every token's output row is
 * bitwise the same as the token alone (decode). Fresh random weights and
 * activations, every type the table packs. */
static void test_matmul_packed_prefill(void **state) {
    (void)state;
    enum { N_TOK = 100 };
    const int64_t rows = 37, cols = 4096;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x99);
    tf_pool *pool;
    tf_err err = {0};
    assert_int_equal(tf_pool_create(&pool, 2, &err), TF_OK);
    float *wf = malloc(sizeof(float) * rows * cols), *x = malloc(sizeof(float) * N_TOK * cols);
    float *alone = malloc(sizeof(float) * N_TOK * rows), *batch = malloc(sizeof(float) * N_TOK * rows);
    int n_checked = 0;
    for (int ti = 0; ti < N_TYPES; ti++) {
        tf_dtype t = k_types[ti];
        if (!tf_weight_packs(t)) continue;
        size_t ws = tf_dtype_row_size(t, cols), as = tf_act_scratch_row_size(t, cols);
        char *w = malloc(ws * rows), *wp = malloc(ws * rows), *act = malloc(as * N_TOK);
        fill_gauss(&rng, wf, rows * cols, 0.5);
        fill_gauss(&rng, x, N_TOK * cols, 1.0);
        for (int64_t r = 0; r < rows; r++) tf_ref_quantize_row(t, wf + r * cols, w + r * ws, cols);
        tf_weight_pack_rows(t, w, wp, rows, cols);
        for (int ki = 0; ki < g_n_tables; ki++) {
            const tf_cpu_kernels *k = g_tables[ki];
            if (!k->wpacked_tile[t] || !k->act_pack[t]) continue;
            for (int pi = 0; pi < 2; pi++) {
                tf_pool *p = pi ? pool : NULL;
                for (int j = 0; j < N_TOK; j++)
                    tf_cpu_matmul(p, k, t, wp, TF_WLAYOUT_PACKED, rows, cols, x + j * cols, 1, alone + j * rows,
                                  rows, act);
                for (int64_t e = 0; e < N_TOK * rows; e++) batch[e] = -1.0f;
                tf_cpu_matmul(p, k, t, wp, TF_WLAYOUT_PACKED, rows, cols, x, N_TOK, batch, rows, act);
                expect_batch_as_alone(k, t, TF_WLAYOUT_PACKED, cols, pi ? 2 : 1, N_TOK, batch, alone, rows);
                n_checked++;
            }
        }
        free(w);
        free(wp);
        free(act);
    }
    print_message("packed prefill: %d batches of %d tokens equal to the tokens alone\n", n_checked, N_TOK);
    free(wf);
    free(x);
    free(alone);
    free(batch);
    tf_pool_free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_exact_rows),
        cmocka_unit_test(test_matmul_batch_invariance),
        cmocka_unit_test(test_matmul_n),
        cmocka_unit_test(test_matmul_packed_prefill),
    };
    return cmocka_run_group_tests(tests, quant_group_setup, NULL);
}
