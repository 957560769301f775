/*
 * test_cuda.c — the CUDA backend against the CPU references.
 *
 *   kernels     every op on fresh random data against its CPU reference
 *               (NMSE thresholds, NaN/Inf checks, guard values around outputs),
 *               bitwise where the kernel promises it (chunk sums, selection,
 *               gather, argmax, batch invariance of the decode path);
 *   forward     greedy tokens of the device forward pass equal the CPU's on a
 *               generated model and on stories260K (a divergence is accepted
 *               only at a near-tie of the CPU's logits, and reported);
 *   speculation every decoding mode on the device reproduces the device's
 *               autoregressive greedy output token for token.
 *
 * Without a CUDA build every test prints "skipped: built without CUDA"; with
 * one but no usable device, "skipped: no CUDA device".
 */
#include "testutil.h"

#include <stdio.h>

#ifndef TF_HAVE_CUDA

static void test_cuda_skipped(void **state) {
    (void)state;
    print_message("skipped: built without CUDA (make CUDA=1)\n");
    skip();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cuda_skipped)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

#include "backend/cpu/attn.h"
#include "kv/kv.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quant.h"
#include "backend/cuda/cuda_backend.h"
#include "core/topk.h"
#include "core/fp16.h"
#include "core/mem.h"
#include "kv/retrieval.h"
#include "model/forward.h"
#include "backend/cuda/backend_cuda.h"
#include "model/gen.h"
#include "ref_forward.h"
#include "model/quantize.h"
#include "sampling/sampling.h"
#include "decode/spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static tf_cuda *g_cu;
static tf_backend g_be; /* over g_cu */
static char g_cu_err[TF_ERR_MSG_MAX];
static tf_pool *g_pool;
static tf_rng g_rng;

#define REQUIRE_DEVICE()                                                                                             \
    do {                                                                                                             \
        if (!g_cu) {                                                                                                 \
            print_message("skipped: no CUDA device (%s)\n", g_cu_err);                                               \
            skip();                                                                                                  \
        }                                                                                                            \
    } while (0)

#define CHECK(expr)                                                                                                  \
    do {                                                                                                             \
        tf_err e_ = {0};                                                                                             \
        (void)e_;                                                                                                    \
        tf_status st_ = (expr);                                                                                      \
        if (st_ != TF_OK) {                                                                                          \
            print_error("%s: %s\n", #expr, tf_status_str(st_));                                                      \
            fail();                                                                                                  \
        }                                                                                                            \
    } while (0)

static tf_err g_err;

/* device copies of host arrays (freed by dfree) */
static void *dup_d(const void *h, size_t bytes) {
    void *d;
    assert_int_equal(tf_cuda_malloc(g_cu, &d, bytes, "test buffer", &g_err), TF_OK);
    if (h) assert_int_equal(tf_cuda_h2d(g_cu, d, h, bytes, &g_err), TF_OK);
    else assert_int_equal(tf_cuda_memset0(g_cu, d, bytes, &g_err), TF_OK);
    return d;
}
static void get_d(void *h, const void *d, size_t bytes) {
    if (tf_cuda_d2h(g_cu, h, d, bytes, &g_err) != TF_OK) {
        print_error("device: %s\n", g_err.msg);
        fail();
    }
}
static void dfree(void *d) { tf_cuda_mfree(g_cu, d); }

static float *rnd(size_t n, float lo, float hi) {
    float *x = malloc(sizeof(float) * n);
    tu_fill_uniform(&g_rng, x, n, lo, hi);
    return x;
}

static void expect_close(const char *what, const float *got, const float *ref, size_t n, double max_nmse) {
    assert_false(tu_has_nonfinite(got, n));
    double e = tu_nmse(got, ref, n);
    if (!(e <= max_nmse)) {
        print_error("%s: nmse %g > %g\n", what, e, max_nmse);
        fail();
    }
}

/* ---- elementwise ------------------------------------------------------------------- */

static void test_elementwise(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    const int n = 5, dim = 4096 + 64, n_head = 8, hd = 128, n_rot = 128;
    float *x = rnd((size_t)n * dim, -2, 2), *w = rnd(dim, 0.5f, 1.5f), *ref = malloc(sizeof(float) * n * dim);
    float *got = malloc(sizeof(float) * (n * dim + 64));
    float *dx = dup_d(x, sizeof(float) * n * dim), *dw = dup_d(w, sizeof(float) * dim);
    float *dy = dup_d(NULL, sizeof(float) * (n * dim + 64));
    /* rmsnorm (guard values after the output stay) */
    for (int i = 0; i < n * dim + 64; i++) got[i] = 1234.5f;
    assert_int_equal(tf_cuda_h2d(g_cu, dy, got, sizeof(float) * (n * dim + 64), &g_err), TF_OK);
    tf_cuda_rmsnorm(g_cu, dy, dx, dw, n, dim, 1e-5f);
    get_d(got, dy, sizeof(float) * (n * dim + 64));
    tf_op_rmsnorm(ref, x, w, n, dim, dim, 1e-5f);
    expect_close("rmsnorm", got, ref, (size_t)n * dim, 1e-12);
    for (int i = n * dim; i < n * dim + 64; i++) assert_true(got[i] == 1234.5f);
    /* rope at large positions, YaRN-like frequencies and mscale */
    int32_t pos[5] = {0, 7, 4095, 32768, 131071};
    float freq[64], mscale = 1.1386f;
    for (int i = 0; i < n_rot / 2; i++) freq[i] = (float)pow(10000.0, -2.0 * i / n_rot) / (i > 20 ? 32.0f : 1.0f);
    float *q = rnd((size_t)n * n_head * hd, -1, 1);
    float *dq = dup_d(q, sizeof(float) * n * n_head * hd);
    int32_t *dpos = dup_d(pos, sizeof pos);
    float *dfreq = dup_d(freq, sizeof freq);
    tf_cuda_rope(g_cu, dq, n, n_head * hd, n_head, hd, n_rot, 0, dpos, dfreq, mscale);
    float *qg = malloc(sizeof(float) * n * n_head * hd), *ct = malloc(sizeof(float) * n * 64),
          *st = malloc(sizeof(float) * n * 64);
    get_d(qg, dq, sizeof(float) * n * n_head * hd);
    tf_op_rope_table(ct, st, pos, n, n_rot, freq, mscale);
    tf_op_rope(q, n, n_head * hd, n_head, hd, n_rot, false, ct, st);
    expect_close("rope", qg, q, (size_t)n * n_head * hd, 1e-12);
    /* silu * mul, add */
    float *g = rnd((size_t)n * dim, -6, 6), *u = rnd((size_t)n * dim, -2, 2);
    float *dg = dup_d(g, sizeof(float) * n * dim), *du = dup_d(u, sizeof(float) * n * dim);
    tf_cuda_silu_mul(g_cu, dg, du, (int64_t)n * dim);
    tf_cuda_add(g_cu, dg, du, (int64_t)n * dim);
    get_d(got, dg, sizeof(float) * n * dim);
    tf_op_silu_mul(g, u, (int64_t)n * dim);
    tf_op_add(g, u, (int64_t)n * dim);
    expect_close("silu_mul + add", got, g, (size_t)n * dim, 1e-12);
    void *ds[] = {dx, dw, dy, dq, dpos, dfreq, dg, du};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) dfree(ds[i]);
    free(x), free(w), free(ref), free(got), free(q), free(qg), free(ct), free(st), free(g), free(u);
}

/* ---- matrix products -------------------------------------------------------------------- */

static void matmul_case(tf_dtype type, int rows, int cols, int n, bool force_gemm) {
    size_t row_b = tf_dtype_row_size(type, cols);
    float *wf = rnd((size_t)rows * cols, -1, 1), *x = rnd((size_t)n * cols, -1, 1);
    uint8_t *wq = malloc(row_b * rows);
    float *wdq = malloc(sizeof(float) * cols);
    double *refd = calloc((size_t)n * rows, sizeof(double));
    for (int r = 0; r < rows; r++) {
        if (type == TF_DTYPE_F32) memcpy(wq + r * row_b, wf + (size_t)r * cols, row_b);
        else tf_ref_quantize_row(type, wf + (size_t)r * cols, wq + r * row_b, cols);
        tf_ref_dequantize_row(type, wq + r * row_b, wdq, cols);
        for (int t = 0; t < n; t++) {
            double s = 0;
            for (int c = 0; c < cols; c++) s += (double)wdq[c] * x[(size_t)t * cols + c];
            refd[(size_t)t * rows + r] = s;
        }
    }
    float *ref = malloc(sizeof(float) * n * rows), *got = malloc(sizeof(float) * n * rows);
    for (size_t i = 0; i < (size_t)n * rows; i++) ref[i] = (float)refd[i];
    void *dw = dup_d(wq, row_b * rows);
    float *dx = dup_d(x, sizeof(float) * n * cols), *dy = dup_d(NULL, sizeof(float) * n * rows);
    tf_cuda_mat m = {.data = dw, .type = type, .n_rows = rows, .n_cols = cols};
    void *scr = dup_d(NULL, tf_cuda_matmul_scratch(&m, n) + 16);
    if (force_gemm) CHECK(tf_cuda_gemm(g_cu, &m, dx, n, dy, rows, scr, &g_err));
    else CHECK(tf_cuda_matmul(g_cu, &m, dx, n, dy, rows, scr, &g_err));
    get_d(got, dy, sizeof(float) * n * rows);
    char what[96];
    snprintf(what, sizeof what, "matmul %s %dx%d n=%d%s", tf_dtype_name(type), rows, cols, n,
             force_gemm ? " (cuBLAS)" : "");
    /* GEMM (forced, or a batch beyond the GEMV bound of a float type) rounds activations to the weight type */
    const bool blas = force_gemm || (n > TF_CUDA_GEMV_MAX_ROWS && tf_dtype_block_size(type) == 1);
    double tol = !blas || type == TF_DTYPE_F32 ? 1e-10 : type == TF_DTYPE_F16 ? 1e-6 : 1e-4;
    expect_close(what, got, ref, (size_t)n * rows, tol);
    if (!force_gemm && n <= TF_CUDA_GEMV_MAX_ROWS && n > 1) { /* batch invariance: each row alone, bitwise */
        float *one = malloc(sizeof(float) * rows);
        for (int t = 0; t < n; t++) {
            tf_cuda_gemv(g_cu, &m, dx + (size_t)t * cols, 1, dy, rows);
            get_d(one, dy, sizeof(float) * rows);
            if (memcmp(one, got + (size_t)t * rows, sizeof(float) * rows) != 0) {
                print_error("%s: row %d differs when computed alone (batch invariance)\n", what, t);
                fail();
            }
        }
        free(one);
    }
    dfree(dw), dfree(dx), dfree(dy), dfree(scr);
    free(wf), free(x), free(wq), free(wdq), free(refd), free(ref), free(got);
}

/* One GEMV variant (tf_cuda_gemv_variant) for F16/BF16: close to the
 * double reference and each token alone bit for bit its batched result. */
static void gemv_variant_case(tf_dtype type, int rows, int cols, int n, int variant) {
    size_t row_b = tf_dtype_row_size(type, cols);
    float *wf = rnd((size_t)rows * cols, -1, 1), *x = rnd((size_t)n * cols, -2, 2);
    uint8_t *wq = malloc(row_b * rows);
    float *wdq = malloc(sizeof(float) * cols), *ref = malloc(sizeof(float) * n * rows);
    float *got = malloc(sizeof(float) * n * rows), *one = malloc(sizeof(float) * rows);
    for (int r = 0; r < rows; r++) {
        tf_ref_quantize_row(type, wf + (size_t)r * cols, wq + r * row_b, cols);
        tf_ref_dequantize_row(type, wq + r * row_b, wdq, cols);
        for (int t = 0; t < n; t++) {
            double s = 0;
            for (int c = 0; c < cols; c++) s += (double)wdq[c] * x[(size_t)t * cols + c];
            ref[(size_t)t * rows + r] = (float)s;
        }
    }
    void *dw = dup_d(wq, row_b * rows);
    float *dx = dup_d(x, sizeof(float) * n * cols), *dy = dup_d(NULL, sizeof(float) * n * rows);
    tf_cuda_mat m = {.data = dw, .type = type, .n_rows = rows, .n_cols = cols};
    tf_cuda_gemv_variant(g_cu, &m, dx, n, dy, rows, variant);
    get_d(got, dy, sizeof(float) * n * rows);
    char what[96];
    snprintf(what, sizeof what, "gemv variant %d %s %dx%d n=%d", variant, tf_dtype_name(type), rows, cols, n);
    expect_close(what, got, ref, (size_t)n * rows, 1e-10);
    if (variant == 3) { /* the grouped activation loads: variant 4's bits */
        tf_cuda_gemv_variant(g_cu, &m, dx, n, dy, rows, 4);
        float *four = malloc(sizeof(float) * n * rows);
        get_d(four, dy, sizeof(float) * n * rows);
        if (memcmp(four, got, sizeof(float) * n * rows) != 0) {
            print_error("%s: differs from variant 4\n", what);
            fail();
        }
        free(four);
    }
    for (int t = 0; t < n; t++) {
        tf_cuda_gemv_variant(g_cu, &m, dx + (size_t)t * cols, 1, dy, rows, variant);
        get_d(one, dy, sizeof(float) * rows);
        if (memcmp(one, got + (size_t)t * rows, sizeof(float) * rows) != 0) {
            print_error("%s: row %d differs when computed alone (batch invariance)\n", what, t);
            fail();
        }
    }
    dfree(dw), dfree(dx), dfree(dy);
    free(wf), free(x), free(wq), free(wdq), free(ref), free(got), free(one);
}

static void test_matmul(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    const tf_dtype types[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_Q8_0, TF_DTYPE_Q4_0, TF_DTYPE_Q4_1};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        matmul_case(types[i], 257, 4096, 1, false);
        matmul_case(types[i], 96, 1024, 7, false);
        matmul_case(types[i], 64, 11008, 16, false);
        matmul_case(types[i], 130, 512, 40, false); /* beyond the GEMV bound */
        if (tf_dtype_block_size(types[i]) == 1) matmul_case(types[i], 200, 768, 33, true); /* cuBLAS: float types */
    }
    matmul_case(TF_DTYPE_F16, 33, 172, 3, false); /* a row length without 16-byte loads (stories260K's n_ff) */
    /* F16/BF16 batches of 2..16 take the rows-per-warp kernel: row counts that are not a multiple of its groups */
    for (int i = 0; i < 2; i++) {
        const tf_dtype t = i ? TF_DTYPE_BF16 : TF_DTYPE_F16;
        matmul_case(t, 257, 1024, 2, false);
        matmul_case(t, 90, 2048, 9, false);
        matmul_case(t, 1001, 512, 5, false);
        matmul_case(t, 7, 768, 13, false);
    }
    /* every F16/BF16 GEMV variant by name, whatever TF_CUDA_GEMV selects: the
     * column split (4; 3 with grouped activation loads, 4's bits) and the tensor
     * cores (6; 7 with 32 rows per block; 8 and 9 with 8 and 16 warps), rows and
     * columns that leave partial tiles and chunks */
    const int variants[] = {4, 3, 6, 7, 8, 9};
    for (int i = 0; i < 2; i++)
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
            const tf_dtype t = i ? TF_DTYPE_BF16 : TF_DTYPE_F16;
            gemv_variant_case(t, 1001, 576, 3, variants[v]);
            gemv_variant_case(t, 40, 4096, 8, variants[v]);
            gemv_variant_case(t, 64, 11008, 5, variants[v]);
            gemv_variant_case(t, 257, 1536, 9, variants[v]);
            gemv_variant_case(t, 16, 736, 16, variants[v]);
        }
}

/* ---- attention ------------------------------------------------------------------------------- */

static void attn_case(int n_head, int n_head_kv, int hd, int n_slots, int n_q, bool prefill_kernel) {
    const int kv_dim = n_head_kv * hd, q_dim = n_head * hd;
    float *k = rnd((size_t)n_slots * kv_dim, -2, 2), *v = rnd((size_t)n_slots * kv_dim, -1, 1);
    float *q = rnd((size_t)n_q * q_dim, -1.5f, 1.5f);
    int32_t *len = malloc(sizeof(int32_t) * n_q);
    for (int i = 0; i < n_q; i++)
        len[i] = prefill_kernel ? n_slots - n_q + i + 1 : 1 + (int32_t)(tf_rng_next(&g_rng) % n_slots);
    len[0] = n_slots; /* the longest row, for the split count */
    tf_kv_cache kv;
    assert_int_equal(tf_kv_init(&kv, 1, n_head_kv, hd, n_slots, TF_DTYPE_F16, &g_err), TF_OK);
    tf_kv_store(&kv, 0, 0, n_slots, k, v, kv_dim);
    kv.n_used = n_slots;
    float *ref = malloc(sizeof(float) * n_q * q_dim), *got = malloc(sizeof(float) * n_q * q_dim);
    tf_attn_args a = {.q = q, .ldq = q_dim, .kv = tf_kv_layer_view(&kv, 0), .n_q = n_q, .kv_len = len, .n_head = n_head,
                      .scale = 1.0f / sqrtf((float)hd), .out = ref, .ldo = q_dim};
    tf_ref_attn(&a);
    tf_kv_cache dkv;
    CHECK(tf_kv_init_on(&dkv, &g_be, 1, n_head_kv, hd, n_slots, TF_DTYPE_F16, "test cache", &g_err));
    float *dk = dup_d(k, sizeof(float) * n_slots * kv_dim), *dv = dup_d(v, sizeof(float) * n_slots * kv_dim);
    int32_t zero = 0, *dzero = dup_d(&zero, sizeof zero);
    tf_cuda_kv_store(g_cu, (uint16_t *)dkv.k, (uint16_t *)dkv.v, n_head_kv, hd, dkv.n_slots, dk, dv, kv_dim, n_slots,
                     dzero);
    float *dq = dup_d(q, sizeof(float) * n_q * q_dim), *dout = dup_d(NULL, sizeof(float) * n_q * q_dim);
    int32_t *dlen = dup_d(len, sizeof(int32_t) * n_q);
    void *scr = dup_d(NULL, tf_cuda_attn_scratch(n_q, n_head, hd, n_slots));
    tf_cuda_attn da = {.q = dq, .ldq = q_dim, .k = (const uint16_t *)dkv.k, .v = (const uint16_t *)dkv.v,
                       .n_slots = dkv.n_slots, .n_q = n_q,
                       .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = hd, .kv_len_d = dlen,
                       .max_kv = n_slots, .scale = 1.0f / sqrtf((float)hd), .out = dout, .ldo = q_dim,
                       .scratch = scr};
    /* each kernel variant. Decode: 2, the default; 6, 2 with at most 4 vectors per pass over the values;
     * 7 and 8, 2 with each vector's key count read once per pass over the values (6-8: 2's bits); 3 and 4,
     * the tensor cores (head sizes 64 / 128 / 256, others as 2; 4 gives 3's bits); 0, a block per row.
     * Prefill: 0, CUDA cores; 1, the tensor cores (head sizes 64 and 128, f16 inputs, the default; others
     * as 0) */
    const int dvars[] = {2, 6, 7, 8, 3, 4, 0}, pvars[] = {0, 1};
    float *got2 = malloc(sizeof(float) * n_q * q_dim); /* variant 2's output, which 6-8 must give bit for bit */
    for (int vi = 0; vi < (prefill_kernel ? 2 : 7); vi++) {
        const int var = prefill_kernel ? pvars[vi] : dvars[vi];
        if (prefill_kernel) tf_cuda_attn_prefill_variant(g_cu, &da, var);
        else tf_cuda_attn_decode_variant(g_cu, &da, var);
        CHECK(tf_cuda_check(g_cu, "attention", &g_err));
        get_d(got, dout, sizeof(float) * n_q * q_dim);
        char what[128], kind[24];
        snprintf(kind, sizeof kind, prefill_kernel ? "prefill v%d" : "decode v%d", var);
        snprintf(what, sizeof what, "attention %s heads %d/%d hd %d slots %d rows %d", kind, n_head, n_head_kv, hd,
                 n_slots, n_q);
        const bool f16_inputs = prefill_kernel && var == 1 && (hd == 64 || hd == 128);
        expect_close(what, got, ref, (size_t)n_q * q_dim, f16_inputs ? 1e-5 : 1e-9);
        if (!prefill_kernel && var == 2) memcpy(got2, got, sizeof(float) * n_q * q_dim);
        if (!prefill_kernel && var >= 6 && memcmp(got2, got, sizeof(float) * n_q * q_dim) != 0) {
            print_error("%s: differs from decode v2 (variants 6-8 must give its bits)\n", what);
            fail();
        }
        if (!prefill_kernel && n_q > 1) { /* each row alone gives the same bits */
            float *one = malloc(sizeof(float) * q_dim);
            for (int i = 0; i < n_q; i++) {
                tf_cuda_attn d1 = da;
                d1.q = dq + (size_t)i * q_dim;
                d1.kv_len_d = dlen + i;
                d1.n_q = 1;
                tf_cuda_attn_decode_variant(g_cu, &d1, var);
                get_d(one, dout, sizeof(float) * q_dim);
                if (memcmp(one, got + (size_t)i * q_dim, sizeof(float) * q_dim) != 0) {
                    print_error("%s: row %d differs alone (batch invariance)\n", what, i);
                    fail();
                }
            }
            free(one);
        }
    }
    free(got2);
    tf_kv_free(&dkv);
    dfree(dk), dfree(dv), dfree(dzero), dfree(dq), dfree(dout), dfree(dlen), dfree(scr);
    tf_kv_free(&kv);
    free(k), free(v), free(q), free(len), free(ref), free(got);
}

static void test_attention(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    attn_case(8, 8, 128, 1000, 1, false);
    attn_case(32, 8, 128, 3000, 5, false); /* GQA, several splits, rows of random lengths */
    attn_case(4, 4, 8, 300, 16, false);    /* stories260K's head_dim */
    attn_case(12, 12, 64, 257, 3, false);  /* llama-68m's shape */
    attn_case(8, 2, 256, 700, 2, false);
    attn_case(8, 8, 96, 700, 3, false);    /* head sizes not a power of two: a block per row */
    attn_case(6, 2, 80, 520, 4, false);
    attn_case(2, 1, 128, 40000, 9, false); /* 157 splits: more than the merge's threads */
    attn_case(8, 8, 128, 1500, 8, false);  /* a verification pass of 8 rows */
    attn_case(9, 3, 64, 900, 4, false);    /* SmolLM2's shape, 4 rows: 12 vectors a block */
    attn_case(32, 32, 128, 17000, 8, false); /* 32 x 67 blocks of 8 vectors: the default's 4 per pass over values */
    attn_case(8, 8, 128, 600, 100, true);  /* prefill: causal bottom-right rows */
    attn_case(32, 8, 128, 1030, 70, true);
    attn_case(4, 4, 8, 64, 64, true);
    attn_case(8, 2, 256, 300, 33, true);
    attn_case(12, 12, 64, 700, 300, true); /* prefill on the tensor cores: several blocks of 128 rows */
    attn_case(32, 8, 128, 2000, 257, true);
}

/* ---- retrieval: sums, selection, gather ----------------------------------------------------------- */

static void test_retrieval(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    const int L = 2, Hkv = 2, n_head = 8, hd = 64, n_slots = 4096 + 16, n_tok = 3001;
    tf_rcache_params p = {.chunk = 8, .budget = 512, .recent = 16};
    tf_kv_cache full;
    assert_int_equal(tf_kv_init(&full, L, Hkv, hd, n_slots, TF_DTYPE_F16, &g_err), TF_OK);
    tf_kv_cache dfull;
    CHECK(tf_kv_init_on(&dfull, &g_be, L, Hkv, hd, full.n_slots, TF_DTYPE_F16, "test C_p", &g_err));
    const uint16_t *dfk = (const uint16_t *)dfull.k, *dfv = (const uint16_t *)dfull.v;
    float *k = rnd((size_t)n_tok * Hkv * hd, -1, 1), *v = rnd((size_t)n_tok * Hkv * hd, -1, 1);
    float *dk = dup_d(k, sizeof(float) * n_tok * Hkv * hd), *dv = dup_d(v, sizeof(float) * n_tok * Hkv * hd);
    int32_t zero = 0, *dzero = dup_d(&zero, sizeof zero);
    for (int il = 0; il < L; il++) {
        tf_kv_store(&full, il, 0, n_tok, k, v, Hkv * hd);
        tf_cuda_kv_store(g_cu, (uint16_t *)tf_kv_k(&dfull, il, 0), (uint16_t *)tf_kv_v(&dfull, il, 0), Hkv, hd,
                         full.n_slots, dk, dv, Hkv * hd, n_tok, dzero);
    }
    full.n_used = n_tok;
    tf_rcache rc;
    assert_int_equal(tf_rcache_init(&rc, &full, &p, NULL, &g_err), TF_OK);
    tf_rcache_note_append(&rc, &full, 0, n_tok);
    /* sums: in three appends on the device (bitwise equal to the CPU's) */
    size_t sum_n = (size_t)L * Hkv * rc.n_chunk_cap * hd;
    float *dsum = dup_d(NULL, sizeof(float) * sum_n), *sum = malloc(sizeof(float) * sum_n);
    tf_cuda_chunk_sums(g_cu, dsum, dfk, L * Hkv, full.n_slots, hd, p.chunk, rc.n_chunk_cap, 0, 1000);
    tf_cuda_chunk_sums(g_cu, dsum, dfk, L * Hkv, full.n_slots, hd, p.chunk, rc.n_chunk_cap, 1000, 1003);
    tf_cuda_chunk_sums(g_cu, dsum, dfk, L * Hkv, full.n_slots, hd, p.chunk, rc.n_chunk_cap, 1003, n_tok);
    get_d(sum, dsum, sizeof(float) * sum_n);
    int32_t n_chunks = (n_tok + p.chunk - 1) / p.chunk;
    for (int pr = 0; pr < L * Hkv; pr++)
        if (memcmp(sum + (size_t)pr * rc.n_chunk_cap * hd, tf_rcache_chunk_sum(&rc, pr / Hkv, pr % Hkv, 0),
                   sizeof(float) * (size_t)n_chunks * hd) != 0) {
            print_error("chunk sums of pair %d differ from the CPU's\n", pr);
            fail();
        }
    /* selection and gather */
    float *q = rnd((size_t)L * n_head * hd, -1, 1), *dqv = dup_d(q, sizeof(float) * L * n_head * hd);
    assert_int_equal(tf_rcache_select(&rc, &full, q, n_head, &g_err), TF_OK);
    int32_t *dsel = dup_d(NULL, sizeof(int32_t) * L * Hkv * rc.max_sel);
    void *scr = dup_d(NULL, tf_cuda_select_scratch(L * Hkv, rc.n_chunk_cap));
    int32_t nsc = 0, nsel = 0;
    tf_cuda_chunk_select(g_cu, dsel, scr, dsum, dqv, L, n_head, Hkv, hd, rc.n_chunk_cap, p.chunk, n_tok, p.budget,
                         rc.r_chunks, rc.max_sel, &nsc, &nsel);
    assert_int_equal(nsc, rc.n_sel_chunks);
    assert_int_equal(nsel, rc.n_sel);
    int32_t *sel = malloc(sizeof(int32_t) * L * Hkv * rc.max_sel);
    get_d(sel, dsel, sizeof(int32_t) * L * Hkv * rc.max_sel);
    for (int pr = 0; pr < L * Hkv; pr++)
        if (memcmp(sel + (size_t)pr * rc.max_sel, tf_rcache_selection(&rc, pr / Hkv, pr % Hkv),
                   sizeof(int32_t) * nsc) != 0) {
            print_error("selection of pair %d differs from the CPU's\n", pr);
            fail();
        }
    tf_kv_cache view;
    assert_int_equal(tf_rcache_view_init(&view, &rc, &full, 64, &g_err), TF_OK);
    assert_int_equal(tf_rcache_gather(&rc, &full, &view, &g_err), TF_OK);
    tf_kv_cache dview;
    CHECK(tf_kv_init_on(&dview, &g_be, L, Hkv, hd, view.n_slots, TF_DTYPE_F16, "test C_r", &g_err));
    uint16_t *dvk = (uint16_t *)dview.k, *dvv = (uint16_t *)dview.v;
    tf_cuda_gather(g_cu, dvk, dvv, dview.n_slots, dfk, dfv, dfull.n_slots, L * Hkv, hd, dsel, rc.max_sel, nsc,
                   p.chunk, n_tok);
    uint16_t *gk = malloc(2 * (size_t)dview.n_slots * hd), *gv = malloc(2 * (size_t)dview.n_slots * hd);
    float kr[256], vr[256];
    for (int il = 0; il < L; il++)
        for (int h = 0; h < Hkv; h++) {
            size_t off = ((size_t)il * Hkv + h) * dview.n_slots * hd;
            get_d(gk, dvk + off, 2 * (size_t)dview.n_slots * hd);
            get_d(gv, dvv + off, 2 * (size_t)dview.n_slots * hd);
            for (int s = 0; s < nsel; s++) {
                tf_kv_read(&view, il, h, s, kr, vr);
                for (int d = 0; d < hd; d++)
                    if (tf_f16_to_f32(gk[(size_t)s * hd + d]) != kr[d] || tf_f16_to_f32(gv[(size_t)s * hd + d]) != vr[d]) {
                        print_error("gathered slot %d of layer %d head %d differs\n", s, il, h);
                        fail();
                    }
            }
        }
    tf_kv_free(&dview);
    tf_kv_free(&dfull);
    dfree(dk), dfree(dv), dfree(dzero), dfree(dsum), dfree(dqv), dfree(dsel), dfree(scr);
    tf_kv_free(&view);
    tf_rcache_free(&rc);
    tf_kv_free(&full);
    free(k), free(v), free(sum), free(q), free(sel), free(gk), free(gv);
}

/* ---- sampling ---------------------------------------------------------------------------------- */

static void test_sampling(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    const int rows = 4, V = 32000;
    float *lg = rnd((size_t)rows * V, -8, 8);
    lg[V + 5] = lg[V + 900] = 20.0f;         /* a tie: the lower id wins */
    lg[2 * V + 3] = NAN;                       /* NaN never wins */
    lg[2 * V + 4] = 1e30f;
    float *dl = dup_d(lg, sizeof(float) * rows * V);
    int32_t *dtok = dup_d(NULL, sizeof(int32_t) * rows), tok[4];
    tf_cuda_argmax(g_cu, dtok, dl, rows, V);
    get_d(tok, dtok, sizeof tok);
    for (int r = 0; r < rows; r++) assert_int_equal(tok[r], tf_argmax(lg + (size_t)r * V, V));
    assert_int_equal(tok[1], 5);
    /* sampling's candidates, as core/topk.c selects them (the decoder's path with top-k on) */
    const int k = 40;
    const size_t out_n = (size_t)rows * (2 * k + 1);
    int32_t *dk = dup_d(NULL, sizeof(int32_t) * out_n), *got = malloc(sizeof(int32_t) * out_n);
    int32_t ids[40];
    float z[40];
    tf_cuda_topk(g_cu, dk, dl, rows, V, k, 0.7f);
    get_d(got, dk, sizeof(int32_t) * out_n);
    for (int r = 0; r < rows; r++) {
        int32_t m = tf_topk_scaled(lg + (size_t)r * V, V, 0.7f, k, ids, z);
        assert_int_equal(got[2 * rows * k + r], m);
        assert_memory_equal(got + r * k, ids, sizeof(int32_t) * m);
        assert_memory_equal((const float *)(got + rows * k) + r * k, z, sizeof(float) * m);
    }
    dfree(dl), dfree(dtok), dfree(dk);
    free(lg), free(got);
}

/* ---- whole-model checks ----------------------------------------------------------------------------- */

static tf_arch g_gen_arch = TF_ARCH_LLAMA; /* the architecture gen_model writes */

static const char *gen_model(int n_embd, int n_layer, int n_head, int n_head_kv, tf_dtype type, const char *vocab,
                             uint64_t seed) {
    static char path[4][512];
    static int which;
    char *p = path[which++ & 3];
    snprintf(p, 512, "%s", tu_tmp_path(".gguf"));
    tf_gen_params g = tf_gen_params_default();
    g.n_embd = n_embd, g.n_layer = n_layer, g.n_head = n_head, g.n_head_kv = n_head_kv, g.n_ff = 2 * n_embd + 64;
    g.n_ctx_train = 4096, g.n_vocab = 0, g.wtype = type, g.vocab_from = vocab, g.seed = seed, g.n_threads = 1;
    g.arch = g_gen_arch;
    assert_int_equal(tf_gen_model(&g, p, &g_err), TF_OK);
    return p;
}

static tf_model *load(const char *path) {
    tf_model *m;
    if (tf_model_load(&m, path, NULL, &g_err) != TF_OK) {
        print_error("load: %s\n", g_err.msg);
        fail();
    }
    return m;
}

typedef struct run_cfg { tf_spec_mode mode; int g1, g2, budget, chunk, stride, sinks, window; } run_cfg;

static void run(const tf_model *t, const tf_model *d, const run_cfg *rc, int device, const int32_t *prompt, int np,
                int n, int32_t *out) {
    tf_spec_cfg c = {
        .mode = rc->mode, .gamma1 = rc->g1, .gamma2 = rc->g2, .budget = rc->budget, .chunk = rc->chunk,
        .recent = rc->chunk, .rebuild_stride = rc->stride, .rebuild_accept = 0.3f, .sinks = rc->sinks,
        .window = rc->window, .n_ctx = np + n + 32, .n_batch = 64, .kv_type = TF_DTYPE_F16, .isa = TF_ISA_BEST,
        .sampling = {.temp = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 1}, .device = device,
    };
    tf_spec s;
    tf_err err = {0};
    if (tf_spec_init(&s, t, d, &c, g_pool, &err) != TF_OK) {
        print_error("init (%s, device %d): %s\n", tf_spec_mode_name(rc->mode), device, err.msg);
        fail();
    }
    if (tf_spec_prefill(&s, prompt, np, NULL, NULL) != TF_OK) {
        print_error("prefill: %s\n", s.err.msg);
        fail();
    }
    int got = 0;
    while (got < n) {
        int32_t buf[64], k;
        if (tf_spec_step(&s, buf, 64, &k) != TF_OK) {
            print_error("step (%s, device %d): %s\n", tf_spec_mode_name(rc->mode), device, s.err.msg);
            fail();
        }
        for (int i = 0; i < k && got < n; i++) out[got++] = buf[i];
    }
    tf_spec_free(&s);
}

/* Where the CPU's and the GPU's greedy tokens part (prefix = prompt + the
 * common tokens), each engine's token is judged against the float64
 * reference forward (tests/common/ref_forward.c, independent of both): its
 * logit gap below the reference's best, relative to the largest |logit|.
 * The GPU computes with f32 activations and f32 attention, so its token must
 * be within 1e-3 of the best. The CPU's attention rounds the queries, keys,
 * values and softmax weights to bf16 (8 significant bits) whatever the
 * weights, and its products round activations to 8 bits for Q8_0 / Q4_x
 * weights (q8_0 / q8_1: up to 1/254 per value), so 2e-2 is allowed there
 * (an f16 model on an H200 machine's CPU: 2.4e-3 below, the GPU's token the
 * reference's best). */
static void ref_gaps(const tf_model *m, const int32_t *prompt, int np, const int32_t *gen, int at, int32_t a,
                     int32_t b, double *gap_a, double *gap_b) {
    int n = np + at;
    int32_t *seq = malloc(sizeof(int32_t) * n);
    memcpy(seq, prompt, sizeof(int32_t) * np);
    memcpy(seq + np, gen, sizeof(int32_t) * at);
    double *lg = ref_forward(m, seq, n);
    assert_non_null(lg);
    const double *last = lg + (size_t)(n - 1) * m->hp.n_vocab;
    double best = -INFINITY, scale = 0;
    for (int i = 0; i < m->hp.n_vocab; i++) best = fmax(best, last[i]), scale = fmax(scale, fabs(last[i]));
    if (!(scale > 0)) scale = 1;
    *gap_a = (best - last[a]) / scale;
    *gap_b = (best - last[b]) / scale;
    free(lg), free(seq);
}

static void expect_gpu_matches_cpu(const tf_model *m, const int32_t *prompt, int np, int n, const char *label) {
    int32_t *cpu = malloc(sizeof(int32_t) * n), *gpu = malloc(sizeof(int32_t) * n);
    run_cfg ar = {TF_SPEC_AR, 1, 1, 64, 8, 4, 4, 32};
    run(m, NULL, &ar, TF_SPEC_DEVICE_CPU, prompt, np, n, cpu);
    run(m, NULL, &ar, TF_SPEC_DEVICE_CUDA, prompt, np, n, gpu);
    for (int i = 0; i < n; i++)
        if (cpu[i] != gpu[i]) {
            double g_cpu, g_gpu;
            ref_gaps(m, prompt, np, cpu, i, cpu[i], gpu[i], &g_cpu, &g_gpu);
            const double tol_cpu = 2e-2;
            if (g_gpu > 1e-3 || g_cpu > tol_cpu) {
                print_error("%s: token %d: GPU %d, CPU %d: below the float64 reference's best by %.3g (GPU, "
                            "allowed 1e-3) and %.3g (CPU, allowed %g) of the largest |logit|\n",
                            label, i, gpu[i], cpu[i], g_gpu, g_cpu, tol_cpu);
                fail();
            }
            print_message("note: %s: GPU and CPU part at token %d of %d, both near the float64 reference's best "
                          "(GPU %.2g, CPU %.2g below it)\n", label, i, n, g_gpu, g_cpu);
            break;
        }
    free(cpu), free(gpu);
}

static void test_forward_generated(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    static const struct { int embd, layer, head, head_kv; tf_dtype type; } shapes[] = {
        {256, 2, 8, 8, TF_DTYPE_F32}, {256, 2, 8, 2, TF_DTYPE_F16}, {512, 2, 4, 4, TF_DTYPE_BF16},
        {256, 2, 4, 2, TF_DTYPE_Q8_0}, {256, 2, 4, 2, TF_DTYPE_Q4_0}, {256, 2, 8, 2, TF_DTYPE_Q4_1},
    };
    int32_t prompt[300];
    for (int i = 0; i < 300; i++) prompt[i] = 3 + (int32_t)(tf_rng_next(&g_rng) % 256);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        tf_model *m = load(gen_model(shapes[s].embd, shapes[s].layer, shapes[s].head, shapes[s].head_kv,
                                     shapes[s].type, NULL, 7 + s));
        char label[64];
        snprintf(label, sizeof label, "generated %s %d/%d heads", tf_dtype_name(shapes[s].type), shapes[s].head,
                 shapes[s].head_kv);
        expect_gpu_matches_cpu(m, prompt, 5, 60, label);     /* decode path only */
        expect_gpu_matches_cpu(m, prompt, 300, 60, label);   /* prefill batches of 64 (cuBLAS, prefill attention) */
        tf_model_free(m);
    }
}

/* qwen2 (q/k/v biases, rotate-half RoPE) on the device: the same tokens as
 * the CPU, and every decoding mode (the streaming view's rotate-half pairs
 * included) the same as the device's ar. */
static void test_qwen2(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    g_gen_arch = TF_ARCH_QWEN2;
    tf_model *t = load(gen_model(256, 2, 8, 2, TF_DTYPE_F16, NULL, 21));
    tf_model *d = load(gen_model(128, 1, 4, 4, TF_DTYPE_F16, NULL, 22));
    g_gen_arch = TF_ARCH_LLAMA;
    assert_true(t->hp.arch == TF_ARCH_QWEN2 && t->hp.rope_neox);
    int32_t prompt[300], ref[80], out[80];
    for (int i = 0; i < 300; i++) prompt[i] = 3 + (int32_t)(tf_rng_next(&g_rng) % 256);
    expect_gpu_matches_cpu(t, prompt, 300, 60, "generated qwen2");
    run_cfg ar = {TF_SPEC_AR, 1, 1, 64, 8, 4, 4, 32}, tri = {TF_SPEC_TRIFORCE, 2, 6, 48, 8, 4, 4, 32};
    run(t, NULL, &ar, TF_SPEC_DEVICE_CUDA, prompt, 300, 80, ref);
    run(t, d, &tri, TF_SPEC_DEVICE_CUDA, prompt, 300, 80, out);
    for (int j = 0; j < 80; j++)
        if (out[j] != ref[j]) {
            print_error("qwen2 on the device, triforce: token %d is %d, ar gives %d\n", j, out[j], ref[j]);
            fail();
        }
    tf_model_free(t);
    tf_model_free(d);
}

/* A device decoder started from another's prefilled cache (device copies of
 * C_p and the newest query) decodes what a fresh prefill decodes. */
static void test_prefill_from_device(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    tf_model *t = load(gen_model(256, 2, 8, 2, TF_DTYPE_F16, NULL, 31));
    tf_model *d = load(gen_model(128, 1, 4, 4, TF_DTYPE_F16, NULL, 32));
    enum { NP = 500, N = 60 };
    int32_t prompt[NP], ref[N], out[N];
    for (int i = 0; i < NP; i++) prompt[i] = 3 + (int32_t)(tf_rng_next(&g_rng) % 256);
    run_cfg tri = {TF_SPEC_TRIFORCE, 2, 6, 48, 8, 4, 4, 32};
    run(t, d, &tri, TF_SPEC_DEVICE_CUDA, prompt, NP, N, ref);
    tf_spec_cfg c = {
        .mode = TF_SPEC_RETRIEVAL, .gamma1 = 2, .gamma2 = 6, .budget = 48, .chunk = 8, .recent = 8,
        .rebuild_stride = 4, .rebuild_accept = 0.3f, .sinks = 4, .window = 32, .n_ctx = NP + N + 32, .n_batch = 64,
        .kv_type = TF_DTYPE_F16, .isa = TF_ISA_BEST,
        .sampling = {.temp = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 1}, .device = TF_SPEC_DEVICE_CUDA,
    };
    tf_spec src, dst;
    tf_err err = {0};
    assert_int_equal(tf_spec_init(&src, t, NULL, &c, g_pool, &err), TF_OK);
    assert_int_equal(tf_spec_prefill(&src, prompt, NP, NULL, NULL), TF_OK);
    c.mode = TF_SPEC_TRIFORCE;
    assert_int_equal(tf_spec_init(&dst, t, d, &c, g_pool, &err), TF_OK);
    if (tf_spec_prefill_from(&dst, &src, NULL, NULL) != TF_OK) {
        print_error("prefill from another device decoder: %s\n", dst.err.msg);
        fail();
    }
    int got = 0;
    while (got < N) {
        int32_t buf[64], k;
        assert_int_equal(tf_spec_step(&dst, buf, 64, &k), TF_OK);
        for (int i = 0; i < k && got < N; i++) out[got++] = buf[i];
    }
    for (int j = 0; j < N; j++)
        if (out[j] != ref[j]) {
            print_error("prefill_from on the device: token %d is %d, a fresh prefill gives %d\n", j, out[j], ref[j]);
            fail();
        }
    tf_spec_free(&dst);
    tf_spec_free(&src);
    tf_model_free(t);
    tf_model_free(d);
}

static void test_forward_stories(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    TU_REQUIRE_SHARED(sp, "models/stories260K/stories260K.gguf");
    tf_model *m = load(sp);
    int32_t prompt[200];
    size_t np = 0;
    assert_int_equal(tf_tokenize(m->tok, "Once upon a time, there was a little girl named Lily.", 53, true, false,
                                 prompt, 200, &np, NULL),
                     TF_OK);
    expect_gpu_matches_cpu(m, prompt, (int)np, 120, "stories260K");
    tf_model_free(m);
}

/* Every mode on the device equals the device's autoregressive greedy output. */
static void test_spec_equality(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    tf_model *t = load(gen_model(256, 2, 8, 2, TF_DTYPE_F16, NULL, 11));
    tf_model *d = load(gen_model(128, 1, 4, 4, TF_DTYPE_F16, NULL, 12));
    int32_t prompt[700], ref[100], out[100];
    for (int i = 0; i < 700; i++) prompt[i] = 3 + (int32_t)(tf_rng_next(&g_rng) % 256);
    run_cfg ar = {TF_SPEC_AR, 1, 1, 64, 8, 4, 4, 32};
    run(t, NULL, &ar, TF_SPEC_DEVICE_CUDA, prompt, 700, 100, ref);
    static const run_cfg cfgs[] = {
        {TF_SPEC_DRAFT, 1, 4, 64, 8, 4, 4, 32},     {TF_SPEC_RETRIEVAL, 1, 3, 48, 8, 4, 4, 32},
        {TF_SPEC_RETRIEVAL, 1, 6, 40, 1, 2, 4, 32}, {TF_SPEC_STREAMING, 2, 4, 64, 8, 4, 4, 32},
        {TF_SPEC_TRIFORCE, 2, 6, 48, 8, 4, 4, 32},  {TF_SPEC_TRIFORCE, 4, 8, 64, 1, 3, 4, 32},
        {TF_SPEC_TRIFORCE, 3, 5, 512, 16, 100, 4, 32},
    };
    const tf_model *drafts[] = {d, t};
    for (int di = 0; di < 2; di++)
        for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
            run(t, drafts[di], &cfgs[i], TF_SPEC_DEVICE_CUDA, prompt, 700, 100, out);
            for (int j = 0; j < 100; j++)
                if (out[j] != ref[j]) {
                    print_error("device %s g1 %d g2 %d budget %d chunk %d draft %s: token %d is %d, ar gives %d\n",
                                tf_spec_mode_name(cfgs[i].mode), cfgs[i].g1, cfgs[i].g2, cfgs[i].budget,
                                cfgs[i].chunk, di ? "target" : "random", j, out[j], ref[j]);
                    fail();
                }
        }
    tf_model_free(t);
    tf_model_free(d);
}

static int setup(void **state) {
    (void)state;
    tf_rng_seed(&g_rng, tu_seed());
    tf_err err = {0};
    if (tf_pool_create(&g_pool, 2, &err) != TF_OK) return -1;
    if (tf_cuda_open(&g_cu, 0, &err) != TF_OK) {
        g_cu = NULL;
        snprintf(g_cu_err, sizeof g_cu_err, "%s", err.msg);
    } else if (tf_backend_cuda_wrap(&g_be, g_cu, &err) != TF_OK) {
        return -1;
    } else {
        print_message("device: %s\n", tf_cuda_describe(g_cu));
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tf_backend_free(&g_be);
    tf_cuda_close(g_cu);
    tf_pool_free(g_pool);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise),      cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_attention),        cmocka_unit_test(test_retrieval),
        cmocka_unit_test(test_sampling),         cmocka_unit_test(test_forward_generated),
        cmocka_unit_test(test_forward_stories),  cmocka_unit_test(test_spec_equality),
        cmocka_unit_test(test_qwen2),            cmocka_unit_test(test_prefill_from_device),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

#endif
