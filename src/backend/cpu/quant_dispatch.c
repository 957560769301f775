/*
 * quant_dispatch.c — the kernel tables of quant.h and the run-time choice
 * among them.
 *
 * Four static tables: scalar (the tf_ref_* functions behind adapters), avx2,
 * avx512 and avx512 with VNNI (avx512 float kernels, VNNI integer dot
 * products). tf_cpu_kernels_get caps the request to what the CPU reports
 * through __builtin_cpu_supports (which also checks that the OS saves the
 * vector state), so a table is never handed out on a CPU that cannot run it.
 */
#include "backend/cpu/quant_impl.h"

#include <string.h>

void tf_cpu_copy_f32(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }
void tf_cpu_dequantize_f32(const void *x, float *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

/* ---- scalar adapters: table signatures over the references ------------------ */

static void ref_quantize_q8_0(const float *x, void *y, int64_t n) { tf_ref_quantize_row(TF_DTYPE_Q8_0, x, y, n); }
static void ref_quantize_q8_1(const float *x, void *y, int64_t n) { tf_ref_quantize_row(TF_DTYPE_Q8_1, x, y, n); }
static void ref_quantize_q8_k(const float *x, void *y, int64_t n) { tf_ref_quantize_row(TF_DTYPE_Q8_K, x, y, n); }

static void ref_dequantize_f16(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_F16, x, y, n); }
static void ref_dequantize_bf16(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_BF16, x, y, n); }
static void ref_dequantize_q8_0(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_Q8_0, x, y, n); }
static void ref_dequantize_q4_0(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_Q4_0, x, y, n); }
static void ref_dequantize_q4_1(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_Q4_1, x, y, n); }
static void ref_dequantize_q5_0(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_Q5_0, x, y, n); }
static void ref_dequantize_q5_1(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_Q5_1, x, y, n); }
static void ref_dequantize_q2_k(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_Q2_K, x, y, n); }
static void ref_dequantize_q3_k(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_Q3_K, x, y, n); }
static void ref_dequantize_q5_k(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_Q5_K, x, y, n); }
static void ref_dequantize_q4_k(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_Q4_K, x, y, n); }
static void ref_dequantize_q6_k(const void *x, float *y, int64_t n) { tf_ref_dequantize_row(TF_DTYPE_Q6_K, x, y, n); }
static void ref_dequantize_iq4_nl(const void *x, float *y, int64_t n) {
    tf_ref_dequantize_row(TF_DTYPE_IQ4_NL, x, y, n);
}
static void ref_dequantize_iq4_xs(const void *x, float *y, int64_t n) {
    tf_ref_dequantize_row(TF_DTYPE_IQ4_XS, x, y, n);
}

static float ref_dot_f32(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_F32, n, w, a); }
static float ref_dot_f16(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_F16, n, w, a); }
static float ref_dot_bf16(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_BF16, n, w, a); }
static float ref_dot_q8_0(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_Q8_0, n, w, a); }
static float ref_dot_q4_0(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_Q4_0, n, w, a); }
static float ref_dot_q4_1(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_Q4_1, n, w, a); }
static float ref_dot_q5_0(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_Q5_0, n, w, a); }
static float ref_dot_q5_1(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_Q5_1, n, w, a); }
static float ref_dot_q2_k(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_Q2_K, n, w, a); }
static float ref_dot_q3_k(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_Q3_K, n, w, a); }
static float ref_dot_q5_k(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_Q5_K, n, w, a); }
static float ref_dot_q4_k(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_Q4_K, n, w, a); }
static float ref_dot_q6_k(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_Q6_K, n, w, a); }
static float ref_dot_iq4_nl(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_IQ4_NL, n, w, a); }
static float ref_dot_iq4_xs(int64_t n, const void *w, const void *a) { return tf_ref_vec_dot(TF_DTYPE_IQ4_XS, n, w, a); }

/* The tile contract by nr x nt calls of the reference dot product. */
static void ref_tile(tf_dtype type, int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
                     float *out, int64_t ldo) {
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++)
            out[t * ldo + r] = tf_ref_vec_dot(type, n, (const char *)w + r * ws, (const char *)a + t * as);
}

static void ref_tile_f32(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                         int64_t ldo) {
    ref_tile(TF_DTYPE_F32, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_f16(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                         int64_t ldo) {
    ref_tile(TF_DTYPE_F16, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_bf16(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                          int64_t ldo) {
    ref_tile(TF_DTYPE_BF16, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_q8_0(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                          int64_t ldo) {
    ref_tile(TF_DTYPE_Q8_0, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_q4_0(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                          int64_t ldo) {
    ref_tile(TF_DTYPE_Q4_0, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_q4_1(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                          int64_t ldo) {
    ref_tile(TF_DTYPE_Q4_1, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_q5_0(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                          int64_t ldo) {
    ref_tile(TF_DTYPE_Q5_0, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_q5_1(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                          int64_t ldo) {
    ref_tile(TF_DTYPE_Q5_1, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_q2_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                          int64_t ldo) {
    ref_tile(TF_DTYPE_Q2_K, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_q3_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                          int64_t ldo) {
    ref_tile(TF_DTYPE_Q3_K, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_q5_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                          int64_t ldo) {
    ref_tile(TF_DTYPE_Q5_K, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_q4_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                          int64_t ldo) {
    ref_tile(TF_DTYPE_Q4_K, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_q6_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, float *out,
                          int64_t ldo) {
    ref_tile(TF_DTYPE_Q6_K, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_iq4_nl(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
                            float *out, int64_t ldo) {
    ref_tile(TF_DTYPE_IQ4_NL, n, w, ws, nr, a, as, nt, out, ldo);
}
static void ref_tile_iq4_xs(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
                            float *out, int64_t ldo) {
    ref_tile(TF_DTYPE_IQ4_XS, n, w, ws, nr, a, as, nt, out, ldo);
}

/* ---- tables ------------------------------------------------------------------- */

static const tf_cpu_kernels k_scalar = {
    .isa = "scalar",
    .act_quantize = {[TF_DTYPE_F32] = tf_cpu_copy_f32, [TF_DTYPE_F16] = tf_cpu_copy_f32,
                     [TF_DTYPE_BF16] = tf_cpu_copy_f32, [TF_DTYPE_Q8_0] = ref_quantize_q8_0,
                     [TF_DTYPE_Q4_0] = ref_quantize_q8_0, [TF_DTYPE_Q4_1] = ref_quantize_q8_1,
                     [TF_DTYPE_Q5_0] = ref_quantize_q8_0, [TF_DTYPE_Q5_1] = ref_quantize_q8_1,
                     [TF_DTYPE_Q2_K] = ref_quantize_q8_k, [TF_DTYPE_Q3_K] = ref_quantize_q8_k,
                     [TF_DTYPE_Q4_K] = ref_quantize_q8_k, [TF_DTYPE_Q5_K] = ref_quantize_q8_k,
                     [TF_DTYPE_Q6_K] = ref_quantize_q8_k,
                     [TF_DTYPE_IQ4_NL] = ref_quantize_q8_0, [TF_DTYPE_IQ4_XS] = ref_quantize_q8_0},
    .vec_dot = {[TF_DTYPE_F32] = ref_dot_f32, [TF_DTYPE_F16] = ref_dot_f16, [TF_DTYPE_BF16] = ref_dot_bf16,
                [TF_DTYPE_Q8_0] = ref_dot_q8_0, [TF_DTYPE_Q4_0] = ref_dot_q4_0, [TF_DTYPE_Q4_1] = ref_dot_q4_1,
                [TF_DTYPE_Q5_0] = ref_dot_q5_0, [TF_DTYPE_Q5_1] = ref_dot_q5_1, [TF_DTYPE_Q2_K] = ref_dot_q2_k,
                [TF_DTYPE_Q3_K] = ref_dot_q3_k, [TF_DTYPE_Q4_K] = ref_dot_q4_k, [TF_DTYPE_Q5_K] = ref_dot_q5_k,
                [TF_DTYPE_Q6_K] = ref_dot_q6_k,
                [TF_DTYPE_IQ4_NL] = ref_dot_iq4_nl, [TF_DTYPE_IQ4_XS] = ref_dot_iq4_xs},
    .dequantize = {[TF_DTYPE_F32] = tf_cpu_dequantize_f32, [TF_DTYPE_F16] = ref_dequantize_f16,
                   [TF_DTYPE_BF16] = ref_dequantize_bf16, [TF_DTYPE_Q8_0] = ref_dequantize_q8_0,
                   [TF_DTYPE_Q4_0] = ref_dequantize_q4_0, [TF_DTYPE_Q4_1] = ref_dequantize_q4_1,
                   [TF_DTYPE_Q5_0] = ref_dequantize_q5_0, [TF_DTYPE_Q5_1] = ref_dequantize_q5_1,
                   [TF_DTYPE_Q2_K] = ref_dequantize_q2_k, [TF_DTYPE_Q3_K] = ref_dequantize_q3_k,
                   [TF_DTYPE_Q4_K] = ref_dequantize_q4_k, [TF_DTYPE_Q5_K] = ref_dequantize_q5_k,
                   [TF_DTYPE_Q6_K] = ref_dequantize_q6_k,
                   [TF_DTYPE_IQ4_NL] = ref_dequantize_iq4_nl, [TF_DTYPE_IQ4_XS] = ref_dequantize_iq4_xs},
    .vec_dot_tile = {[TF_DTYPE_F32] = ref_tile_f32, [TF_DTYPE_F16] = ref_tile_f16, [TF_DTYPE_BF16] = ref_tile_bf16,
                     [TF_DTYPE_Q8_0] = ref_tile_q8_0, [TF_DTYPE_Q4_0] = ref_tile_q4_0,
                     [TF_DTYPE_Q4_1] = ref_tile_q4_1, [TF_DTYPE_Q5_0] = ref_tile_q5_0,
                     [TF_DTYPE_Q5_1] = ref_tile_q5_1, [TF_DTYPE_Q2_K] = ref_tile_q2_k,
                     [TF_DTYPE_Q3_K] = ref_tile_q3_k, [TF_DTYPE_Q4_K] = ref_tile_q4_k,
                     [TF_DTYPE_Q5_K] = ref_tile_q5_k, [TF_DTYPE_Q6_K] = ref_tile_q6_k,
                     [TF_DTYPE_IQ4_NL] = ref_tile_iq4_nl, [TF_DTYPE_IQ4_XS] = ref_tile_iq4_xs},
    .tile_rows = {[TF_DTYPE_F32] = 4, [TF_DTYPE_F16] = 4, [TF_DTYPE_BF16] = 4, [TF_DTYPE_Q8_0] = 4,
                  [TF_DTYPE_Q4_0] = 4, [TF_DTYPE_Q4_1] = 4, [TF_DTYPE_Q5_0] = 4, [TF_DTYPE_Q5_1] = 4,
                  [TF_DTYPE_Q2_K] = 4, [TF_DTYPE_Q3_K] = 4, [TF_DTYPE_Q4_K] = 4, [TF_DTYPE_Q5_K] = 4,
                  [TF_DTYPE_Q6_K] = 4,
                  [TF_DTYPE_IQ4_NL] = 4, [TF_DTYPE_IQ4_XS] = 4},
    .tile_toks = {[TF_DTYPE_F32] = 4, [TF_DTYPE_F16] = 4, [TF_DTYPE_BF16] = 4, [TF_DTYPE_Q8_0] = 4,
                  [TF_DTYPE_Q4_0] = 4, [TF_DTYPE_Q4_1] = 4, [TF_DTYPE_Q5_0] = 4, [TF_DTYPE_Q5_1] = 4,
                  [TF_DTYPE_Q2_K] = 4, [TF_DTYPE_Q3_K] = 4, [TF_DTYPE_Q4_K] = 4, [TF_DTYPE_Q5_K] = 4,
                  [TF_DTYPE_Q6_K] = 4,
                  [TF_DTYPE_IQ4_NL] = 4, [TF_DTYPE_IQ4_XS] = 4},
};

static const tf_cpu_kernels k_avx2 = {
    .isa = "avx2",
    .act_quantize = {[TF_DTYPE_F32] = tf_cpu_copy_f32, [TF_DTYPE_F16] = tf_cpu_copy_f32,
                     [TF_DTYPE_BF16] = tf_cpu_copy_f32, [TF_DTYPE_Q8_0] = tf_avx2_quantize_q8_0,
                     [TF_DTYPE_Q4_0] = tf_avx2_quantize_q8_0, [TF_DTYPE_Q4_1] = tf_avx2_quantize_q8_1,
                     [TF_DTYPE_Q5_0] = tf_avx2_quantize_q8_0, [TF_DTYPE_Q5_1] = tf_avx2_quantize_q8_1,
                     [TF_DTYPE_Q2_K] = tf_avx2_quantize_q8_k, [TF_DTYPE_Q3_K] = tf_avx2_quantize_q8_k,
                     [TF_DTYPE_Q4_K] = tf_avx2_quantize_q8_k, [TF_DTYPE_Q5_K] = tf_avx2_quantize_q8_k,
                     [TF_DTYPE_Q6_K] = tf_avx2_quantize_q8_k,
                     [TF_DTYPE_IQ4_NL] = tf_avx2_quantize_q8_0, [TF_DTYPE_IQ4_XS] = tf_avx2_quantize_q8_0},
    .vec_dot = {[TF_DTYPE_F32] = tf_avx2_vec_dot_f32, [TF_DTYPE_F16] = tf_avx2_vec_dot_f16,
                [TF_DTYPE_BF16] = tf_avx2_vec_dot_bf16, [TF_DTYPE_Q8_0] = tf_avx2_vec_dot_q8_0,
                [TF_DTYPE_Q4_0] = tf_avx2_vec_dot_q4_0, [TF_DTYPE_Q4_1] = tf_avx2_vec_dot_q4_1,
                [TF_DTYPE_Q5_0] = tf_avx2_vec_dot_q5_0, [TF_DTYPE_Q5_1] = tf_avx2_vec_dot_q5_1,
                [TF_DTYPE_Q2_K] = tf_avx2_vec_dot_q2_k, [TF_DTYPE_Q3_K] = tf_avx2_vec_dot_q3_k,
                [TF_DTYPE_Q4_K] = tf_avx2_vec_dot_q4_k, [TF_DTYPE_Q5_K] = tf_avx2_vec_dot_q5_k,
                [TF_DTYPE_Q6_K] = tf_avx2_vec_dot_q6_k,
                [TF_DTYPE_IQ4_NL] = tf_avx2_vec_dot_iq4_nl, [TF_DTYPE_IQ4_XS] = tf_avx2_vec_dot_iq4_xs},
    .dequantize = {[TF_DTYPE_F32] = tf_cpu_dequantize_f32, [TF_DTYPE_F16] = tf_avx2_dequantize_f16,
                   [TF_DTYPE_BF16] = tf_avx2_dequantize_bf16, [TF_DTYPE_Q8_0] = tf_avx2_dequantize_q8_0,
                   [TF_DTYPE_Q4_0] = tf_avx2_dequantize_q4_0, [TF_DTYPE_Q4_1] = tf_avx2_dequantize_q4_1,
                   [TF_DTYPE_Q5_0] = tf_avx2_dequantize_q5_0, [TF_DTYPE_Q5_1] = tf_avx2_dequantize_q5_1,
                   [TF_DTYPE_Q2_K] = tf_avx2_dequantize_q2_k, [TF_DTYPE_Q3_K] = tf_avx2_dequantize_q3_k,
                   [TF_DTYPE_Q4_K] = tf_avx2_dequantize_q4_k, [TF_DTYPE_Q5_K] = tf_avx2_dequantize_q5_k,
                   [TF_DTYPE_Q6_K] = tf_avx2_dequantize_q6_k,
                   [TF_DTYPE_IQ4_NL] = tf_avx2_dequantize_iq4_nl, [TF_DTYPE_IQ4_XS] = tf_avx2_dequantize_iq4_xs},
    .vec_dot_tile = {[TF_DTYPE_F32] = tf_avx2_tile_f32, [TF_DTYPE_F16] = tf_avx2_tile_f16,
                     [TF_DTYPE_BF16] = tf_avx2_tile_bf16, [TF_DTYPE_Q8_0] = tf_avx2_tile_q8_0,
                     [TF_DTYPE_Q4_0] = tf_avx2_tile_q4_0, [TF_DTYPE_Q4_1] = tf_avx2_tile_q4_1,
                     [TF_DTYPE_Q5_0] = tf_avx2_tile_q5_0, [TF_DTYPE_Q5_1] = tf_avx2_tile_q5_1,
                     [TF_DTYPE_Q2_K] = tf_avx2_tile_q2_k, [TF_DTYPE_Q3_K] = tf_avx2_tile_q3_k,
                     [TF_DTYPE_Q4_K] = tf_avx2_tile_q4_k, [TF_DTYPE_Q5_K] = tf_avx2_tile_q5_k,
                     [TF_DTYPE_Q6_K] = tf_avx2_tile_q6_k,
                     [TF_DTYPE_IQ4_NL] = tf_avx2_tile_iq4_nl, [TF_DTYPE_IQ4_XS] = tf_avx2_tile_iq4_xs},
    .tile_rows = {[TF_DTYPE_F32] = 4, [TF_DTYPE_F16] = 4, [TF_DTYPE_BF16] = 4, [TF_DTYPE_Q8_0] = 4,
                  [TF_DTYPE_Q4_0] = 4, [TF_DTYPE_Q4_1] = 4, [TF_DTYPE_Q5_0] = 4, [TF_DTYPE_Q5_1] = 4,
                  [TF_DTYPE_Q2_K] = 4, [TF_DTYPE_Q3_K] = 4, [TF_DTYPE_Q4_K] = 4, [TF_DTYPE_Q5_K] = 4,
                  [TF_DTYPE_Q6_K] = 4,
                  [TF_DTYPE_IQ4_NL] = 4, [TF_DTYPE_IQ4_XS] = 4},
    .tile_toks = {[TF_DTYPE_F32] = 2, [TF_DTYPE_F16] = 2, [TF_DTYPE_BF16] = 2, [TF_DTYPE_Q8_0] = 2,
                  [TF_DTYPE_Q4_0] = 2, [TF_DTYPE_Q4_1] = 2, [TF_DTYPE_Q5_0] = 2, [TF_DTYPE_Q5_1] = 2,
                  [TF_DTYPE_Q2_K] = 2, [TF_DTYPE_Q3_K] = 2, [TF_DTYPE_Q4_K] = 2, [TF_DTYPE_Q5_K] = 2,
                  [TF_DTYPE_Q6_K] = 2,
                  [TF_DTYPE_IQ4_NL] = 2, [TF_DTYPE_IQ4_XS] = 2},
};

static const tf_cpu_kernels k_avx512 = {
    .isa = "avx512",
    .act_quantize = {[TF_DTYPE_F32] = tf_cpu_copy_f32, [TF_DTYPE_F16] = tf_cpu_copy_f32,
                     [TF_DTYPE_BF16] = tf_cpu_copy_f32, [TF_DTYPE_Q8_0] = tf_avx512_quantize_q8_0,
                     [TF_DTYPE_Q4_0] = tf_avx512_quantize_q8_0, [TF_DTYPE_Q4_1] = tf_avx512_quantize_q8_1,
                     [TF_DTYPE_Q5_0] = tf_avx512_quantize_q8_0, [TF_DTYPE_Q5_1] = tf_avx512_quantize_q8_1,
                     [TF_DTYPE_Q2_K] = tf_avx512_quantize_q8_k, [TF_DTYPE_Q3_K] = tf_avx512_quantize_q8_k,
                     [TF_DTYPE_Q4_K] = tf_avx512_quantize_q8_k, [TF_DTYPE_Q5_K] = tf_avx512_quantize_q8_k,
                     [TF_DTYPE_Q6_K] = tf_avx512_quantize_q8_k,
                     [TF_DTYPE_IQ4_NL] = tf_avx512_quantize_q8_0, [TF_DTYPE_IQ4_XS] = tf_avx512_quantize_q8_0},
    .vec_dot = {[TF_DTYPE_F32] = tf_avx512_vec_dot_f32, [TF_DTYPE_F16] = tf_avx512_vec_dot_f16,
                [TF_DTYPE_BF16] = tf_avx512_vec_dot_bf16, [TF_DTYPE_Q8_0] = tf_avx512_vec_dot_q8_0,
                [TF_DTYPE_Q4_0] = tf_avx512_vec_dot_q4_0, [TF_DTYPE_Q4_1] = tf_avx512_vec_dot_q4_1,
                [TF_DTYPE_Q5_0] = tf_avx512_vec_dot_q5_0, [TF_DTYPE_Q5_1] = tf_avx512_vec_dot_q5_1,
                [TF_DTYPE_Q2_K] = tf_avx512_vec_dot_q2_k, [TF_DTYPE_Q3_K] = tf_avx512_vec_dot_q3_k,
                [TF_DTYPE_Q4_K] = tf_avx512_vec_dot_q4_k, [TF_DTYPE_Q5_K] = tf_avx512_vec_dot_q5_k,
                [TF_DTYPE_Q6_K] = tf_avx512_vec_dot_q6_k,
                [TF_DTYPE_IQ4_NL] = tf_avx512_vec_dot_iq4_nl, [TF_DTYPE_IQ4_XS] = tf_avx512_vec_dot_iq4_xs},
    .dequantize = {[TF_DTYPE_F32] = tf_cpu_dequantize_f32, [TF_DTYPE_F16] = tf_avx512_dequantize_f16,
                   [TF_DTYPE_BF16] = tf_avx512_dequantize_bf16, [TF_DTYPE_Q8_0] = tf_avx512_dequantize_q8_0,
                   [TF_DTYPE_Q4_0] = tf_avx512_dequantize_q4_0, [TF_DTYPE_Q4_1] = tf_avx512_dequantize_q4_1,
                   [TF_DTYPE_Q5_0] = tf_avx512_dequantize_q5_0, [TF_DTYPE_Q5_1] = tf_avx512_dequantize_q5_1,
                   [TF_DTYPE_Q2_K] = tf_avx512_dequantize_q2_k, [TF_DTYPE_Q3_K] = tf_avx512_dequantize_q3_k,
                   [TF_DTYPE_Q4_K] = tf_avx512_dequantize_q4_k, [TF_DTYPE_Q5_K] = tf_avx512_dequantize_q5_k,
                   [TF_DTYPE_Q6_K] = tf_avx512_dequantize_q6_k,
                   [TF_DTYPE_IQ4_NL] = tf_avx512_dequantize_iq4_nl, [TF_DTYPE_IQ4_XS] = tf_avx512_dequantize_iq4_xs},
    .vec_dot_tile = {[TF_DTYPE_F32] = tf_avx512_tile_f32, [TF_DTYPE_F16] = tf_avx512_tile_f16,
                     [TF_DTYPE_BF16] = tf_avx512_tile_bf16, [TF_DTYPE_Q8_0] = tf_avx512_tile_q8_0,
                     [TF_DTYPE_Q4_0] = tf_avx512_tile_q4_0, [TF_DTYPE_Q4_1] = tf_avx512_tile_q4_1,
                     [TF_DTYPE_Q5_0] = tf_avx512_tile_q5_0, [TF_DTYPE_Q5_1] = tf_avx512_tile_q5_1,
                     [TF_DTYPE_Q2_K] = tf_avx512_tile_q2_k, [TF_DTYPE_Q3_K] = tf_avx512_tile_q3_k,
                     [TF_DTYPE_Q4_K] = tf_avx512_tile_q4_k, [TF_DTYPE_Q5_K] = tf_avx512_tile_q5_k,
                     [TF_DTYPE_Q6_K] = tf_avx512_tile_q6_k,
                     [TF_DTYPE_IQ4_NL] = tf_avx512_tile_iq4_nl, [TF_DTYPE_IQ4_XS] = tf_avx512_tile_iq4_xs},
    .tile_rows = {[TF_DTYPE_F32] = 8, [TF_DTYPE_F16] = 8, [TF_DTYPE_BF16] = 8, [TF_DTYPE_Q8_0] = 4,
                  [TF_DTYPE_Q4_0] = 4, [TF_DTYPE_Q4_1] = 4, [TF_DTYPE_Q5_0] = 4, [TF_DTYPE_Q5_1] = 4,
                  [TF_DTYPE_Q2_K] = 4, [TF_DTYPE_Q3_K] = 4, [TF_DTYPE_Q4_K] = 4, [TF_DTYPE_Q5_K] = 4,
                  [TF_DTYPE_Q6_K] = 4,
                  [TF_DTYPE_IQ4_NL] = 4, [TF_DTYPE_IQ4_XS] = 4},
    .tile_toks = {[TF_DTYPE_F32] = 3, [TF_DTYPE_F16] = 3, [TF_DTYPE_BF16] = 3, [TF_DTYPE_Q8_0] = 4,
                  [TF_DTYPE_Q4_0] = 4, [TF_DTYPE_Q4_1] = 4, [TF_DTYPE_Q5_0] = 4, [TF_DTYPE_Q5_1] = 4,
                  [TF_DTYPE_Q2_K] = 4, [TF_DTYPE_Q3_K] = 4, [TF_DTYPE_Q4_K] = 4, [TF_DTYPE_Q5_K] = 4,
                  [TF_DTYPE_Q6_K] = 4,
                  [TF_DTYPE_IQ4_NL] = 4, [TF_DTYPE_IQ4_XS] = 4},
};

static const tf_cpu_kernels k_avx512_vnni = {
    .isa = "avx512_vnni",
    .act_quantize = {[TF_DTYPE_F32] = tf_cpu_copy_f32, [TF_DTYPE_F16] = tf_cpu_copy_f32,
                     [TF_DTYPE_BF16] = tf_cpu_copy_f32, [TF_DTYPE_Q8_0] = tf_avx512_quantize_q8_0,
                     [TF_DTYPE_Q4_0] = tf_avx512_quantize_q8_0, [TF_DTYPE_Q4_1] = tf_avx512_quantize_q8_1,
                     [TF_DTYPE_Q5_0] = tf_avx512_quantize_q8_0, [TF_DTYPE_Q5_1] = tf_avx512_quantize_q8_1,
                     [TF_DTYPE_Q2_K] = tf_avx512_quantize_q8_k, [TF_DTYPE_Q3_K] = tf_avx512_quantize_q8_k,
                     [TF_DTYPE_Q4_K] = tf_avx512_quantize_q8_k, [TF_DTYPE_Q5_K] = tf_avx512_quantize_q8_k,
                     [TF_DTYPE_Q6_K] = tf_avx512_quantize_q8_k,
                     [TF_DTYPE_IQ4_NL] = tf_avx512_quantize_q8_0, [TF_DTYPE_IQ4_XS] = tf_avx512_quantize_q8_0},
    .vec_dot = {[TF_DTYPE_F32] = tf_avx512_vec_dot_f32, [TF_DTYPE_F16] = tf_avx512_vec_dot_f16,
                [TF_DTYPE_BF16] = tf_avx512_vec_dot_bf16, [TF_DTYPE_Q8_0] = tf_avx512vnni_vec_dot_q8_0,
                [TF_DTYPE_Q4_0] = tf_avx512vnni_vec_dot_q4_0, [TF_DTYPE_Q4_1] = tf_avx512vnni_vec_dot_q4_1,
                [TF_DTYPE_Q5_0] = tf_avx512vnni_vec_dot_q5_0, [TF_DTYPE_Q5_1] = tf_avx512vnni_vec_dot_q5_1,
                [TF_DTYPE_Q2_K] = tf_avx512vnni_vec_dot_q2_k, [TF_DTYPE_Q3_K] = tf_avx512vnni_vec_dot_q3_k,
                [TF_DTYPE_Q4_K] = tf_avx512vnni_vec_dot_q4_k, [TF_DTYPE_Q5_K] = tf_avx512vnni_vec_dot_q5_k,
                [TF_DTYPE_Q6_K] = tf_avx512vnni_vec_dot_q6_k,
                [TF_DTYPE_IQ4_NL] = tf_avx512vnni_vec_dot_iq4_nl, [TF_DTYPE_IQ4_XS] = tf_avx512vnni_vec_dot_iq4_xs},
    .dequantize = {[TF_DTYPE_F32] = tf_cpu_dequantize_f32, [TF_DTYPE_F16] = tf_avx512_dequantize_f16,
                   [TF_DTYPE_BF16] = tf_avx512_dequantize_bf16, [TF_DTYPE_Q8_0] = tf_avx512_dequantize_q8_0,
                   [TF_DTYPE_Q4_0] = tf_avx512_dequantize_q4_0, [TF_DTYPE_Q4_1] = tf_avx512_dequantize_q4_1,
                   [TF_DTYPE_Q5_0] = tf_avx512_dequantize_q5_0, [TF_DTYPE_Q5_1] = tf_avx512_dequantize_q5_1,
                   [TF_DTYPE_Q2_K] = tf_avx512_dequantize_q2_k, [TF_DTYPE_Q3_K] = tf_avx512_dequantize_q3_k,
                   [TF_DTYPE_Q4_K] = tf_avx512_dequantize_q4_k, [TF_DTYPE_Q5_K] = tf_avx512_dequantize_q5_k,
                   [TF_DTYPE_Q6_K] = tf_avx512_dequantize_q6_k,
                   [TF_DTYPE_IQ4_NL] = tf_avx512_dequantize_iq4_nl, [TF_DTYPE_IQ4_XS] = tf_avx512_dequantize_iq4_xs},
    .vec_dot_tile = {[TF_DTYPE_F32] = tf_avx512_tile_f32, [TF_DTYPE_F16] = tf_avx512_tile_f16,
                     [TF_DTYPE_BF16] = tf_avx512_tile_bf16, [TF_DTYPE_Q8_0] = tf_avx512vnni_tile_q8_0,
                     [TF_DTYPE_Q4_0] = tf_avx512vnni_tile_q4_0, [TF_DTYPE_Q4_1] = tf_avx512vnni_tile_q4_1,
                     [TF_DTYPE_Q5_0] = tf_avx512vnni_tile_q5_0, [TF_DTYPE_Q5_1] = tf_avx512vnni_tile_q5_1,
                     [TF_DTYPE_Q2_K] = tf_avx512vnni_tile_q2_k, [TF_DTYPE_Q3_K] = tf_avx512vnni_tile_q3_k,
                     [TF_DTYPE_Q4_K] = tf_avx512vnni_tile_q4_k, [TF_DTYPE_Q5_K] = tf_avx512vnni_tile_q5_k,
                     [TF_DTYPE_Q6_K] = tf_avx512vnni_tile_q6_k,
                     [TF_DTYPE_IQ4_NL] = tf_avx512vnni_tile_iq4_nl, [TF_DTYPE_IQ4_XS] = tf_avx512vnni_tile_iq4_xs},
    .tile_rows = {[TF_DTYPE_F32] = 8, [TF_DTYPE_F16] = 8, [TF_DTYPE_BF16] = 8, [TF_DTYPE_Q8_0] = 4,
                  [TF_DTYPE_Q4_0] = 4, [TF_DTYPE_Q4_1] = 4, [TF_DTYPE_Q5_0] = 4, [TF_DTYPE_Q5_1] = 4,
                  [TF_DTYPE_Q2_K] = 4, [TF_DTYPE_Q3_K] = 4, [TF_DTYPE_Q4_K] = 4, [TF_DTYPE_Q5_K] = 4,
                  [TF_DTYPE_Q6_K] = 4,
                  [TF_DTYPE_IQ4_NL] = 4, [TF_DTYPE_IQ4_XS] = 4},
    .tile_toks = {[TF_DTYPE_F32] = 3, [TF_DTYPE_F16] = 3, [TF_DTYPE_BF16] = 3, [TF_DTYPE_Q8_0] = 4,
                  [TF_DTYPE_Q4_0] = 4, [TF_DTYPE_Q4_1] = 4, [TF_DTYPE_Q5_0] = 4, [TF_DTYPE_Q5_1] = 4,
                  [TF_DTYPE_Q2_K] = 4, [TF_DTYPE_Q3_K] = 4, [TF_DTYPE_Q4_K] = 4, [TF_DTYPE_Q5_K] = 4,
                  [TF_DTYPE_Q6_K] = 4,
                  [TF_DTYPE_IQ4_NL] = 4, [TF_DTYPE_IQ4_XS] = 4},
    .act_pack = {[TF_DTYPE_Q8_0] = tf_avx512_act_pack_q8_0, [TF_DTYPE_Q4_0] = tf_avx512_act_pack_q4_0,
                 [TF_DTYPE_Q4_1] = tf_avx512_act_pack_q4_1, [TF_DTYPE_Q5_0] = tf_avx512_act_pack_q5_0,
                 [TF_DTYPE_Q5_1] = tf_avx512_act_pack_q5_1,
                 [TF_DTYPE_IQ4_NL] = tf_avx512_act_pack_iq4_nl, [TF_DTYPE_IQ4_XS] = tf_avx512_act_pack_iq4_xs},
    .packed_tile = {[TF_DTYPE_Q8_0] = tf_avx512vnni_packed_tile_q8_0, [TF_DTYPE_Q4_0] = tf_avx512vnni_packed_tile_q4_0,
                    [TF_DTYPE_Q4_1] = tf_avx512vnni_packed_tile_q4_1, [TF_DTYPE_Q5_0] = tf_avx512vnni_packed_tile_q5_0,
                    [TF_DTYPE_Q5_1] = tf_avx512vnni_packed_tile_q5_1,
                    [TF_DTYPE_IQ4_NL] = tf_avx512vnni_packed_tile_iq4_nl,
                    [TF_DTYPE_IQ4_XS] = tf_avx512vnni_packed_tile_iq4_xs},
};

/* ---- run-time choice ------------------------------------------------------------ */

static int cpu_has_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    return 0;
#endif
}

static int cpu_has_avx512(void) {
#if defined(__x86_64__) || defined(__i386__)
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

static int cpu_has_avx512_vnni(void) {
#if defined(__x86_64__) || defined(__i386__)
    return cpu_has_avx512() && __builtin_cpu_supports("avx512vnni");
#else
    return 0;
#endif
}

tf_isa tf_cpu_best_isa(void) {
    if (cpu_has_avx512()) return TF_ISA_AVX512;
    if (cpu_has_avx2()) return TF_ISA_AVX2;
    return TF_ISA_SCALAR;
}

const tf_cpu_kernels *tf_cpu_kernels_get(tf_isa isa) {
    tf_isa best = tf_cpu_best_isa();
    if (isa > best) isa = best;
    switch (isa) {
    case TF_ISA_AVX512: return cpu_has_avx512_vnni() ? &k_avx512_vnni : &k_avx512;
    case TF_ISA_AVX2: return &k_avx2;
    default: return &k_scalar;
    }
}

int tf_cpu_kernels_all(const tf_cpu_kernels **out, int max) {
    const tf_cpu_kernels *all[4];
    int n = 0;
    all[n++] = &k_scalar;
    if (cpu_has_avx2()) all[n++] = &k_avx2;
    if (cpu_has_avx512()) all[n++] = &k_avx512;
    if (cpu_has_avx512_vnni()) all[n++] = &k_avx512_vnni;
    for (int i = 0; i < n && i < max; i++) out[i] = all[i];
    return n;
}
