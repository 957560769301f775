/* test_quant.c — weight formats: reference quantizers against hand-computed
 * values and error bounds, every kernel table against the references on
 * random data (with guard bytes and NaN checks), the packed and R16 layouts.
 * The threaded matrix product: test_matmul.c. */
#include "testutil.h"

#include "backend/cpu/quant.h"
#include "core/fp16.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant_testutil.h"

/* One dot product through a table: a tile of one row by one token. */
static float dot1(const tf_cpu_kernels *k, tf_dtype t, int64_t n, const void *w, const void *a) {
    float out = NAN;
    k->vec_dot_tile[t](n, w, 0, 1, a, 0, 1, &out, 1);
    return out;
}

/* ---- interface facts ------------------------------------------------------------ */

static void test_tables(void **state) {
    (void)state;
    setup_tables();
    assert_true(g_n_tables >= 1 && g_n_tables <= 5);
    assert_string_equal(g_tables[0]->isa, "scalar");
    assert_ptr_equal(tf_cpu_kernels_get(TF_ISA_SCALAR), g_tables[0]);
    const tf_cpu_kernels *best = tf_cpu_kernels_get(TF_ISA_BEST);
    assert_ptr_equal(best, g_tables[g_n_tables - 1]);
    assert_ptr_equal(tf_cpu_kernels_get(tf_cpu_best_isa()), best);
    for (int i = 0; i < g_n_tables; i++)
        for (int ti = 0; ti < N_TYPES; ti++) {
            tf_dtype t = k_types[ti];
            assert_non_null(g_tables[i]->act_quantize[t]);
            assert_non_null(g_tables[i]->dequantize[t]);
            assert_non_null(g_tables[i]->vec_dot_tile[t]);
            assert_true(g_tables[i]->tile_rows[t] >= 1 && g_tables[i]->tile_rows[t] <= TF_TILE_ROWS_MAX);
            assert_true(g_tables[i]->tile_toks[t] >= 1 && g_tables[i]->tile_toks[t] <= TF_TILE_TOKS_MAX);
        }
    print_message("kernel tables on this CPU: %d, best %s\n", g_n_tables, best->isa);
    /* The registry: the types GGUF files in the wild use, by ggml id, each
     * name parsing back to its id; the packed path exactly for the types with
     * 32-value (sub-)blocks and Q8_0/Q8_1 activations, and every K-quant. */
    static const int ggml_ids[] = {0, 1, 30, 8, 2, 3, 6, 7, 10, 11, 12, 13, 14, 20, 23};
    assert_int_equal(N_TYPES, (int)(sizeof ggml_ids / sizeof ggml_ids[0]));
    for (int ti = 0; ti < N_TYPES; ti++) {
        assert_int_equal(k_types[ti], ggml_ids[ti]);
        tf_dtype back = TF_DTYPE_COUNT;
        assert_true(tf_dtype_from_name(tf_dtype_name(k_types[ti]), &back));
        assert_int_equal(back, k_types[ti]);
        assert_non_null(strstr(TF_DTYPE_NAMES, tf_dtype_name(k_types[ti])));
        tf_dtype t = k_types[ti];
        bool packed = t == TF_DTYPE_Q8_0 || t == TF_DTYPE_Q4_0 || t == TF_DTYPE_Q4_1 || t == TF_DTYPE_Q5_0 ||
                      t == TF_DTYPE_Q5_1 || t == TF_DTYPE_IQ4_NL || t == TF_DTYPE_IQ4_XS || t == TF_DTYPE_Q4_K ||
                      t == TF_DTYPE_Q5_K || t == TF_DTYPE_Q6_K || t == TF_DTYPE_Q3_K || t == TF_DTYPE_Q2_K;
        assert_int_equal(tf_act_pack_type(t), t == TF_DTYPE_Q4_1 || t == TF_DTYPE_Q5_1 || t == TF_DTYPE_Q4_K ||
                                                      t == TF_DTYPE_Q5_K
                                                  ? TF_DTYPE_Q8_1
                                                  : TF_DTYPE_Q8_0);
        assert_int_equal(tf_act_packed_row_size(t, 512) > 0, packed);
        for (int i = 0; i < g_n_tables; i++) {
            bool amx = strcmp(g_tables[i]->isa, "amx") == 0;
            bool vnni = amx || strcmp(g_tables[i]->isa, "avx512_vnni") == 0;
            assert_int_equal(g_tables[i]->act_pack[t] != NULL, vnni && packed);
            assert_int_equal(g_tables[i]->packed_tile[t] != NULL, vnni && packed);
            assert_int_equal(g_tables[i]->wpacked_tile[t] != NULL, vnni && packed);
            /* the R16 products: the AMX table's Q8_0, Q4_0, Q4_1 and IQ4_NL */
            bool r16 = t == TF_DTYPE_Q8_0 || t == TF_DTYPE_Q4_0 || t == TF_DTYPE_Q4_1 || t == TF_DTYPE_IQ4_NL;
            assert_int_equal(tf_weight_r16_type(t), r16);
            assert_int_equal(g_tables[i]->r16_rows[t] != NULL, amx && r16);
            assert_int_equal(g_tables[i]->r16_act[t] != NULL, amx && r16);
        }
    }
    tf_dtype none;
    assert_false(tf_dtype_from_name("q8_1", &none));
    assert_false(tf_dtype_from_name("iq2_xs", &none));
    assert_string_equal(tf_dtype_name(15), "q8_k");
    assert_string_equal(tf_dtype_name(39), "unknown");

    assert_int_equal(tf_act_type(TF_DTYPE_F16), TF_DTYPE_F32);
    assert_int_equal(tf_act_type(TF_DTYPE_Q4_0), TF_DTYPE_Q8_0);
    assert_int_equal(tf_act_type(TF_DTYPE_Q6_K), TF_DTYPE_Q8_K);
    assert_int_equal(tf_act_type(TF_DTYPE_Q4_1), TF_DTYPE_Q8_1);
    assert_int_equal(tf_act_row_size(TF_DTYPE_Q4_1, 64), 2 * 36);
    assert_int_equal(sizeof(tf_block_q8_1), 36);
    assert_int_equal(tf_dtype_row_size(TF_DTYPE_Q4_1, 64), 2 * 20);
    assert_int_equal(tf_act_type(TF_DTYPE_Q5_0), TF_DTYPE_Q8_0);
    assert_int_equal(tf_act_type(TF_DTYPE_Q5_1), TF_DTYPE_Q8_1);
    assert_int_equal(tf_act_type(TF_DTYPE_Q2_K), TF_DTYPE_Q8_K);
    assert_int_equal(tf_act_type(TF_DTYPE_Q3_K), TF_DTYPE_Q8_K);
    assert_int_equal(tf_act_type(TF_DTYPE_Q5_K), TF_DTYPE_Q8_K);
    /* block sizes of the GGUF format: 22, 24, 84, 110, 176 bytes */
    assert_int_equal(tf_dtype_row_size(TF_DTYPE_Q5_0, 64), 2 * 22);
    assert_int_equal(tf_dtype_row_size(TF_DTYPE_Q5_1, 64), 2 * 24);
    assert_int_equal(tf_dtype_row_size(TF_DTYPE_Q2_K, 512), 2 * 84);
    assert_int_equal(tf_dtype_row_size(TF_DTYPE_Q3_K, 512), 2 * 110);
    assert_int_equal(tf_dtype_row_size(TF_DTYPE_Q5_K, 512), 2 * 176);
    assert_int_equal(tf_dtype_row_size(TF_DTYPE_Q5_K, 500), 0);
    assert_int_equal(tf_act_row_size(TF_DTYPE_BF16, 64), 256);
    assert_int_equal(tf_act_row_size(TF_DTYPE_Q8_0, 64), 68);
    assert_int_equal(tf_act_row_size(TF_DTYPE_Q4_K, 512), 2 * sizeof(tf_block_q8_k));
    assert_int_equal(sizeof(tf_block_q8_k), 292);
    /* IQ4: blocks of 18 and 136 bytes (ggml ids 20 and 23), Q8_0 activations per 32 */
    assert_int_equal(TF_DTYPE_IQ4_NL, 20);
    assert_int_equal(TF_DTYPE_IQ4_XS, 23);
    assert_int_equal(tf_dtype_row_size(TF_DTYPE_IQ4_NL, 64), 2 * 18);
    assert_int_equal(tf_dtype_row_size(TF_DTYPE_IQ4_XS, 512), 2 * 136);
    assert_int_equal(tf_dtype_row_size(TF_DTYPE_IQ4_XS, 480), 0);
    assert_int_equal(tf_act_type(TF_DTYPE_IQ4_NL), TF_DTYPE_Q8_0);
    assert_int_equal(tf_act_type(TF_DTYPE_IQ4_XS), TF_DTYPE_Q8_0);
    assert_int_equal(tf_act_row_size(TF_DTYPE_IQ4_XS, 512), 16 * 34);
    assert_string_equal(tf_dtype_name(TF_DTYPE_IQ4_NL), "iq4_nl");
    assert_string_equal(tf_dtype_name(TF_DTYPE_IQ4_XS), "iq4_xs");
}

/* ---- hand-computed values ---------------------------------------------------------- */

static void test_known_q8_0(void **state) {
    (void)state;
    tf_block_q8_0 w = {.d = tf_f32_to_f16(0.5f)}, a = {.d = tf_f32_to_f16(2.0f)};
    for (int i = 0; i < 32; i++) {
        w.qs[i] = (int8_t)(i + 1);
        a.qs[i] = (int8_t)(i % 2 ? -1 : 3);
    }
    float y[32];
    tf_ref_dequantize_row(TF_DTYPE_Q8_0, &w, y, 32);
    for (int i = 0; i < 32; i++) assert_true(y[i] == 0.5f * (float)(i + 1));
    /* sum_i 0.5 (i+1) * 2 a_i: odd i (even values) weigh -1, even i weigh 3 */
    double expect = 0;
    for (int i = 0; i < 32; i++) expect += (i + 1) * (i % 2 ? -1.0 : 3.0);
    assert_true(expect == 3 * 256 - 272);
    for (int k = 0; k < g_n_tables; k++) {
        assert_true(dot1(g_tables[k], TF_DTYPE_Q8_0, 32, &w, &a) == (float)expect);
        float z[32];
        g_tables[k]->dequantize[TF_DTYPE_Q8_0](&w, z, 32);
        assert_memory_equal(z, y, sizeof z);
    }
    /* quantizer: the largest magnitude maps to +-127 */
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i + 1) - 16.5f; /* -15.5 .. 15.5 */
    tf_block_q8_0 q;
    tf_ref_quantize_row(TF_DTYPE_Q8_0, x, &q, 32);
    assert_true(tf_f16_to_f32(q.d) == tf_f16_to_f32(tf_f32_to_f16(15.5f / 127.0f)));
    assert_int_equal(q.qs[0], -127);
    assert_int_equal(q.qs[31], 127);
    assert_int_equal(q.qs[15], (int)nearbyintf(-0.5f * 127.0f / 15.5f)); /* -4 */
}

static void test_known_q4_0(void **state) {
    (void)state;
    tf_block_q4_0 w = {.d = tf_f32_to_f16(2.0f)};
    for (int j = 0; j < 16; j++) w.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    tf_ref_dequantize_row(TF_DTYPE_Q4_0, &w, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == 2.0f * (float)(j - 8));
        assert_true(y[j + 16] == 2.0f * (float)(7 - j));
    }
    /* quantizer: signed max -8 -> d = 1, q = x + 8 */
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i % 16) - 7.0f; /* -7 .. 8, largest |x| = 8 */
    tf_block_q4_0 q;
    tf_ref_quantize_row(TF_DTYPE_Q4_0, x, &q, 32);
    assert_true(tf_f16_to_f32(q.d) == -1.0f); /* d = max / -8 with max = +8 */
    tf_ref_dequantize_row(TF_DTYPE_Q4_0, &q, y, 32);
    for (int i = 0; i < 32; i++) assert_true(y[i] == x[i]);
    /* the low nibble of byte 0 holds element 0: q = -7 / -1 + 8 = 15 */
    assert_int_equal(q.qs[0] & 0xF, 15);
    assert_int_equal(q.qs[0] >> 4, 15); /* element 16 is also -7 */
    assert_int_equal(q.qs[15] & 0xF, 0); /* element 15: 8 -> -8 + 8 */
}

/* Q4_1 as the file format defines it, written out here independently of
 * quant_ref.c: element j (0..15) of a block is d * (qs[j] & 15) + m, element
 * j + 16 is d * (qs[j] >> 4) + m, with d and m f16. */
static void q4_1_block_to_float(const tf_block_q4_1 *b, float *out) {
    float d = tf_f16_to_f32(b->d), m = tf_f16_to_f32(b->m);
    for (int j = 0; j < 16; j++) {
        out[j] = d * (float)(b->qs[j] & 15) + m;
        out[j + 16] = d * (float)(b->qs[j] >> 4) + m;
    }
}

static void test_known_q4_1(void **state) {
    (void)state;
    tf_block_q4_1 w = {.d = tf_f32_to_f16(0.5f), .m = tf_f32_to_f16(-3.25f)};
    for (int j = 0; j < 16; j++) w.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    tf_ref_dequantize_row(TF_DTYPE_Q4_1, &w, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == 0.5f * (float)j - 3.25f);
        assert_true(y[j + 16] == 0.5f * (float)(15 - j) - 3.25f);
    }
    /* activation block: d = 2, quants 3 / -1 alternating (sum 32) */
    tf_block_q8_1 a = {.d = tf_f32_to_f16(2.0f)};
    int asum = 0;
    for (int i = 0; i < 32; i++) {
        a.qs[i] = (int8_t)(i % 2 ? -1 : 3);
        asum += a.qs[i];
    }
    a.sum = (int16_t)asum;
    double expect = 0;
    for (int i = 0; i < 32; i++) expect += (double)y[i] * 2.0 * a.qs[i];
    assert_true(expect == (float)expect); /* small multiples of 1/4: exact in every kernel */
    assert_true(tf_ref_vec_dot(TF_DTYPE_Q4_1, 32, &w, &a) == (float)expect);
    for (int k = 0; k < g_n_tables; k++) {
        assert_true(dot1(g_tables[k], TF_DTYPE_Q4_1, 32, &w, &a) == (float)expect);
        float z[32];
        g_tables[k]->dequantize[TF_DTYPE_Q4_1](&w, z, 32);
        assert_memory_equal(z, y, sizeof z);
    }
    /* quantizer: range [-3, 4.5] -> d = 7.5 / 15 = 0.5, m = -3, q = element % 16 */
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = 0.5f * (float)(i % 16) - 3.0f;
    tf_block_q4_1 q;
    tf_ref_quantize_row(TF_DTYPE_Q4_1, x, &q, 32);
    assert_true(tf_f16_to_f32(q.d) == 0.5f);
    assert_true(tf_f16_to_f32(q.m) == -3.0f);
    assert_int_equal(q.qs[0] & 0xF, 0);  /* element 0 */
    assert_int_equal(q.qs[0] >> 4, 0);   /* element 16 */
    assert_int_equal(q.qs[15] & 0xF, 15); /* element 15 */
    tf_ref_dequantize_row(TF_DTYPE_Q4_1, &q, y, 32);
    for (int i = 0; i < 32; i++) assert_true(y[i] == x[i]);
    /* Q8_1 activations: Q8_0's scale and quants, plus their exact sum */
    for (int i = 0; i < 32; i++) x[i] = (float)(i * 7 % 23) - 9.5f;
    tf_block_q8_0 a0;
    tf_block_q8_1 a1;
    tf_ref_quantize_row(TF_DTYPE_Q8_0, x, &a0, 32);
    tf_ref_act_quantize(TF_DTYPE_Q4_1, x, &a1, 32);
    assert_int_equal(a1.d, a0.d);
    assert_memory_equal(a1.qs, a0.qs, 32);
    int s = 0;
    for (int i = 0; i < 32; i++) s += a0.qs[i];
    assert_int_equal(a1.sum, s);
}

/* Every table's Q4_1 dequantization against q4_1_block_to_float on random
 * blocks: random nibbles and random finite f16 scales and offsets of mixed
 * signs and magnitudes. */
static void test_q4_1_dequant_random(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x41);
    enum { NB = 97 };
    tf_block_q4_1 *b = malloc(sizeof *b * NB);
    float *ref = malloc(sizeof(float) * 32 * NB), *y = alloc_guarded(sizeof(float) * 32 * NB);
    for (int i = 0; i < NB; i++) {
        double mag = pow(10.0, -3.0 + 5.0 * tf_rng_uniform(&rng));
        b[i].d = tf_f32_to_f16((float)(mag * tf_rng_uniform(&rng)));
        b[i].m = tf_f32_to_f16((float)(mag * gauss(&rng)));
        for (int j = 0; j < 16; j++) b[i].qs[j] = (uint8_t)(tf_rng_next(&rng) & 0xFF);
        q4_1_block_to_float(&b[i], ref + 32 * i);
    }
    float *yr = malloc(sizeof(float) * 32 * NB);
    tf_ref_dequantize_row(TF_DTYPE_Q4_1, b, yr, 32 * NB);
    assert_memory_equal(yr, ref, sizeof(float) * 32 * NB);
    for (int k = 0; k < g_n_tables; k++) {
        g_tables[k]->dequantize[TF_DTYPE_Q4_1](b, y, 32 * NB);
        check_guard(y, sizeof(float) * 32 * NB);
        assert_false(tu_has_nonfinite(y, 32 * NB));
        for (int i = 0; i < 32 * NB; i++) {
            /* a fused multiply-add may round once where the reference rounds twice */
            const tf_block_q4_1 *bi = &b[i / 32];
            double tol = 1.2e-7 * (15.0 * fabs(tf_f16_to_f32(bi->d)) + fabs(tf_f16_to_f32(bi->m)));
            if (fabs((double)y[i] - ref[i]) > tol) {
                print_error("%s q4_1 element %d: %.9g, expected %.9g\n", g_tables[k]->isa, i, y[i], ref[i]);
                fail();
            }
        }
    }
    free(b);
    free(ref);
    free(y);
    free(yr);
}

/* ---- Q5_0, Q5_1, Q2_K, Q3_K, Q5_K from the format definition ------------------------ */

/* Each function below writes the values of one block as the GGUF format
 * defines them, independently of quant_ref.c, and in mag[] a bound on the
 * magnitude of each value's terms (for the rounding tolerance). */

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q5_0 / Q5_1: element j < 16 has low bits qs[j] & 15, element j + 16 has
 * qs[j] >> 4; bit 4 of element i is bit i of qh (32 bits, little endian). */
static int q5_quant(const uint8_t *qh, const uint8_t *qs, int i) {
    int low = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
    return low + 16 * (int)((le32(qh) >> i) & 1);
}

static void q5_0_block_to_float(const void *vb, float *out, double *mag) {
    const tf_block_q5_0 *b = vb;
    float d = tf_f16_to_f32(b->d);
    for (int i = 0; i < 32; i++) {
        out[i] = d * (float)(q5_quant(b->qh, b->qs, i) - 16);
        mag[i] = fabs(d) * 16;
    }
}

static void q5_1_block_to_float(const void *vb, float *out, double *mag) {
    const tf_block_q5_1 *b = vb;
    float d = tf_f16_to_f32(b->d), m = tf_f16_to_f32(b->m);
    for (int i = 0; i < 32; i++) {
        out[i] = d * (float)q5_quant(b->qh, b->qs, i) + m;
        mag[i] = fabs(d) * 31 + fabs(m);
    }
}

/* Q2_K: 16 groups of 16, group g scaled by d * (scales[g] & 15) with min
 * dmin * (scales[g] >> 4); the 2-bit quant of element 128 h + 32 k + l is
 * bits 2k, 2k+1 of qs[32 h + l]. */
static void q2_k_block_to_float(const void *vb, float *out, double *mag) {
    const tf_block_q2_k *b = vb;
    float d = tf_f16_to_f32(b->d), dmin = tf_f16_to_f32(b->dmin);
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int e = 128 * h + 32 * k + l, q = (b->qs[32 * h + l] >> (2 * k)) & 3;
                float sc = d * (float)(b->scales[e / 16] & 15), mn = dmin * (float)(b->scales[e / 16] >> 4);
                out[e] = sc * (float)q - mn;
                mag[e] = fabs(sc) * 3 + fabs(mn);
            }
}

/* Q3_K: 16 groups of 16 with 6-bit scales s (value s - 32): bytes 0..7 hold
 * the low 4 bits of scales 0..7 (low nibbles) and 8..15 (high nibbles);
 * byte 8 + i holds the top 2 bits of scales i, i + 4, i + 8, i + 12 at bits
 * 0, 2, 4, 6. Element 128 h + 32 k + l: 2 bits as Q2_K, minus 4 unless bit
 * 4h + k of hmask[l] is set. */
static void q3_k_block_to_float(const void *vb, float *out, double *mag) {
    const tf_block_q3_k *b = vb;
    float d = tf_f16_to_f32(b->d);
    int sc[16];
    for (int i = 0; i < 8; i++) {
        sc[i] = b->scales[i] & 15;
        sc[i + 8] = b->scales[i] >> 4;
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) sc[4 * j + i] |= ((b->scales[8 + i] >> (2 * j)) & 3) << 4;
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int e = 128 * h + 32 * k + l;
                int q = ((b->qs[32 * h + l] >> (2 * k)) & 3) - ((b->hmask[l] >> (4 * h + k)) & 1 ? 0 : 4);
                float s = d * (float)(sc[e / 16] - 32);
                out[e] = s * (float)q;
                mag[e] = fabs(s) * 4;
            }
}

/* Q5_K: Q4_K's scales and mins (6 bits each, 8 sub-blocks of 32) and
 * nibbles; element 64 g + l takes the low nibble of qs[32 g + l] and bit 2g
 * of qh[l] as bit 4, element 64 g + 32 + l the high nibble and bit 2g + 1. */
static void q5_k_block_to_float(const void *vb, float *out, double *mag) {
    const tf_block_q5_k *b = vb;
    float d = tf_f16_to_f32(b->d), dmin = tf_f16_to_f32(b->dmin);
    const uint8_t *s = b->scales;
    for (int j = 0; j < 8; j++) {
        int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        int mn = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        int g = j / 2, hi = j % 2;
        for (int l = 0; l < 32; l++) {
            int v = b->qs[32 * g + l];
            int q = (hi ? v >> 4 : v & 15) | ((b->qh[l] >> j) & 1) << 4;
            float fs = d * (float)sc, fm = dmin * (float)mn;
            out[32 * j + l] = fs * (float)q - fm;
            mag[32 * j + l] = fabs(fs) * 31 + fabs(fm);
        }
    }
}

/* IQ4_NL / IQ4_XS index values (ggml's kvalues_iq4nl), written out here
 * independently of dtype.c. */
static const int k_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* IQ4_NL, from its bytes: f16 d at bytes 0..1, then 16 bytes of indices:
 * element j (< 16) is the low nibble of byte 2 + j, element j + 16 its high
 * nibble; x = d * V[index]. */
static void iq4_nl_block_to_float(const void *vb, float *out, double *mag) {
    const uint8_t *p = vb;
    float d = tf_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
    for (int j = 0; j < 16; j++) {
        out[j] = d * (float)k_iq4_values[p[2 + j] & 15];
        out[j + 16] = d * (float)k_iq4_values[p[2 + j] >> 4];
        mag[j] = mag[j + 16] = fabs(d) * 127;
    }
}

/* IQ4_XS, from its bytes: f16 d at 0..1, 16-bit scales_h at 2..3 (little
 * endian), scales_l at 4..7, indices at 8..135. Sub-block ib (of 32) has the
 * 6-bit scale ls = (nibble ib % 2 of scales_l[ib / 2]) | (bits 2 ib, 2 ib + 1
 * of scales_h) << 4 and, as an IQ4_NL block, the 16 index bytes from
 * 8 + 16 ib with scale d * (ls - 32). */
static void iq4_xs_block_to_float(const void *vb, float *out, double *mag) {
    const uint8_t *p = vb;
    float d = tf_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
    unsigned sh = (unsigned)(p[2] | p[3] << 8);
    for (int ib = 0; ib < 8; ib++) {
        int ls = ((p[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (int)((sh >> (2 * ib)) & 3) << 4;
        float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            uint8_t q = p[8 + 16 * ib + j];
            out[32 * ib + j] = dl * (float)k_iq4_values[q & 15];
            out[32 * ib + j + 16] = dl * (float)k_iq4_values[q >> 4];
            mag[32 * ib + j] = mag[32 * ib + j + 16] = fabs(dl) * 127;
        }
    }
}

typedef struct {
    tf_dtype t;
    void (*to_float)(const void *b, float *out, double *mag);
    int f16_off[2]; /* byte offsets of the block's f16 fields (-1: none) */
} fmt_def;

static const fmt_def k_fmt_defs[] = {
    {TF_DTYPE_Q5_0, q5_0_block_to_float, {0, -1}},  {TF_DTYPE_Q5_1, q5_1_block_to_float, {0, 2}},
    {TF_DTYPE_Q2_K, q2_k_block_to_float, {80, 82}}, {TF_DTYPE_Q3_K, q3_k_block_to_float, {108, -1}},
    {TF_DTYPE_Q5_K, q5_k_block_to_float, {0, 2}},  {TF_DTYPE_IQ4_NL, iq4_nl_block_to_float, {0, -1}},
    {TF_DTYPE_IQ4_XS, iq4_xs_block_to_float, {0, -1}},
};

/* Every table's dequantization of Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS against the
 * definitions above, on fresh random blocks: random bytes everywhere, then
 * random finite f16 scales (both signs, magnitudes 1e-3 .. 1e2) over the f16
 * fields. The reference must agree bitwise; the SIMD tables within a fused
 * multiply-add's single rounding. */
static void test_dequant_random_blocks(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x51);
    for (size_t fi = 0; fi < sizeof k_fmt_defs / sizeof k_fmt_defs[0]; fi++) {
        const fmt_def *f = &k_fmt_defs[fi];
        const int64_t bs = tf_dtype_block_size(f->t), ts = tf_dtype_type_size(f->t), nb = 2 * TF_QK_K / bs + 5;
        const int64_t n = nb * bs;
        uint8_t *blocks = malloc((size_t)(nb * ts));
        float *ref = malloc(sizeof(float) * n), *yr = malloc(sizeof(float) * n), *y = alloc_guarded(sizeof(float) * n);
        double *mag = malloc(sizeof(double) * n);
        for (int64_t i = 0; i < nb * ts; i++) blocks[i] = (uint8_t)(tf_rng_next(&rng) & 0xFF);
        for (int64_t i = 0; i < nb; i++) {
            for (int k = 0; k < 2; k++) {
                if (f->f16_off[k] < 0) continue;
                double v = pow(10.0, -3.0 + 5.0 * tf_rng_uniform(&rng)) * (tf_rng_next(&rng) & 1 ? -1.0 : 1.0);
                uint16_t h = tf_f32_to_f16((float)v);
                memcpy(blocks + i * ts + f->f16_off[k], &h, 2);
            }
            f->to_float(blocks + i * ts, ref + i * bs, mag + i * bs);
        }
        assert_false(tu_has_nonfinite(ref, n));
        tf_ref_dequantize_row(f->t, blocks, yr, n);
        for (int64_t i = 0; i < n; i++)
            if (memcmp(&yr[i], &ref[i], sizeof(float)) != 0) {
                print_error("reference %s element %lld: %.9g, expected %.9g\n", tf_dtype_name(f->t), (long long)i,
                            yr[i], ref[i]);
                fail();
            }
        for (int k = 0; k < g_n_tables; k++) {
            g_tables[k]->dequantize[f->t](blocks, y, n);
            check_guard(y, sizeof(float) * n);
            assert_false(tu_has_nonfinite(y, n));
            for (int64_t i = 0; i < n; i++)
                if (fabs((double)y[i] - ref[i]) > 1.2e-7 * mag[i]) {
                    print_error("%s %s element %lld: %.9g, expected %.9g\n", g_tables[k]->isa, tf_dtype_name(f->t),
                                (long long)i, y[i], ref[i]);
                    fail();
                }
        }
        free(blocks);
        free(ref);
        free(yr);
        free(y);
        free(mag);
    }
}

/* The quantizers of Q5_0 / Q5_1 / Q2_K / Q3_K / Q5_K / IQ4_NL / IQ4_XS put values where the
 * definitions above read them: a block quantized from x dequantizes (by the
 * definition) to within the type's step of x. */
static void test_quantize_layout(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x52);
    float x[TF_QK_K], out[TF_QK_K];
    double mag[TF_QK_K];
    uint8_t blk[256];
    for (size_t fi = 0; fi < sizeof k_fmt_defs / sizeof k_fmt_defs[0]; fi++) {
        const fmt_def *f = &k_fmt_defs[fi];
        const int bs = (int)tf_dtype_block_size(f->t);
        /* largest error / block magnitude seen over 20 blocks: q5_0 0.052, q5_1
         * 0.032, q2_k 0.35 (4 levels, and the lowest level is <= 0 even for
         * positive data), q3_k 0.21, q5_k 0.042, iq4_nl 0.084, iq4_xs 0.083
         * (five seeds; IQ4's largest gap between table values is 24 steps of
         * d, and values beyond 113 d clip); a misplaced bit gives O(1) */
        bool iq4 = f->t == TF_DTYPE_IQ4_NL || f->t == TF_DTYPE_IQ4_XS;
        const double rel = f->t == TF_DTYPE_Q2_K ? 0.5 : f->t == TF_DTYPE_Q3_K ? 0.3 : iq4 ? 0.12 : 0.08;
        for (int rep = 0; rep < 20; rep++) {
            double scale = pow(10.0, -2.0 + 4.0 * tf_rng_uniform(&rng)), off = rep % 2 ? 0.0 : scale * gauss(&rng);
            for (int i = 0; i < bs; i++) x[i] = (float)(off + scale * gauss(&rng));
            tf_ref_quantize_row(f->t, x, blk, bs);
            f->to_float(blk, out, mag);
            double amax = 0, err = 0;
            for (int i = 0; i < bs; i++) amax = fmax(amax, fabs(x[i]));
            for (int i = 0; i < bs; i++) err = fmax(err, fabs((double)out[i] - x[i]));
            if (!(err <= rel * amax)) {
                print_error("%s: max error %g for block magnitude %g\n", tf_dtype_name(f->t), err, amax);
                fail();
            }
        }
    }
}

/* Q4_K: sub-block j has scale 10 + 7j and min 63 - 5j (values above 15 and
 * 31 exercise the high bits of the 6-bit packing); quant of element e is
 * e % 16, stored per the 64-element low/high-nibble layout. */
static void test_known_q4_k(void **state) {
    (void)state;
    tf_block_q4_k b;
    memset(&b, 0, sizeof b);
    b.d = tf_f32_to_f16(0.25f);
    b.dmin = tf_f32_to_f16(0.5f);
    int sc[8], mn[8];
    for (int j = 0; j < 8; j++) { sc[j] = 10 + 7 * j; mn[j] = 63 - 5 * j; }
    /* bytes 0..3: sc0..3 (6 bits) | top 2 bits of sc4..7; 4..7: m0..3 | top of m4..7;
     * 8..11: low 4 bits of sc4..7 | low 4 bits of m4..7 << 4 */
    for (int j = 0; j < 4; j++) {
        b.scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        b.scales[j + 4] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        b.scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            int e_lo = 64 * g + l, e_hi = 64 * g + 32 + l;
            b.qs[32 * g + l] = (uint8_t)((e_lo % 16) | ((e_hi % 16) << 4));
        }
    float y[256];
    tf_ref_dequantize_row(TF_DTYPE_Q4_K, &b, y, 256);
    for (int e = 0; e < 256; e++) {
        int j = e / 32;
        float expect = 0.25f * (float)sc[j] * (float)(e % 16) - 0.5f * (float)mn[j];
        if (y[e] != expect) {
            print_error("q4_k element %d: %g, expected %g\n", e, y[e], expect);
            fail();
        }
    }
    for (int k = 0; k < g_n_tables; k++) {
        float z[256];
        g_tables[k]->dequantize[TF_DTYPE_Q4_K](&b, z, 256);
        assert_memory_equal(z, y, sizeof z);
    }
}

/* Q6_K: quant of element e is (e * 7) % 64, group scales 3 g - 20 (some
 * negative), d = 0.125. */
static void test_known_q6_k(void **state) {
    (void)state;
    tf_block_q6_k b;
    memset(&b, 0, sizeof b);
    b.d = tf_f32_to_f16(0.125f);
    for (int g = 0; g < 16; g++) b.scales[g] = (int8_t)(3 * g - 20);
    /* element 128 h + 32 k + l: low 4 bits in ql[64 h + l + 32 (k & 1)] (low
     * nibble for k < 2), high 2 bits at bit 2k of qh[32 h + l] */
    for (int e = 0; e < 256; e++) {
        int q = (e * 7) % 64, h = e / 128, k = (e % 128) / 32, l = e % 32;
        b.ql[64 * h + l + 32 * (k & 1)] |= (uint8_t)((q & 15) << (k < 2 ? 0 : 4));
        b.qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * k));
    }
    float y[256];
    tf_ref_dequantize_row(TF_DTYPE_Q6_K, &b, y, 256);
    for (int e = 0; e < 256; e++) {
        float expect = 0.125f * (float)(3 * (e / 16) - 20) * (float)((e * 7) % 64 - 32);
        if (y[e] != expect) {
            print_error("q6_k element %d: %g, expected %g\n", e, y[e], expect);
            fail();
        }
    }
    for (int k = 0; k < g_n_tables; k++) {
        float z[256];
        g_tables[k]->dequantize[TF_DTYPE_Q6_K](&b, z, 256);
        assert_memory_equal(z, y, sizeof z);
    }
    /* Q8_K activation of 1..256 / 2: bsums are sums of 16 quants */
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = (float)(i - 128);
    tf_block_q8_k a;
    tf_ref_act_quantize(TF_DTYPE_Q6_K, x, &a, 256);
    assert_true(a.d == 128.0f / 127.0f);
    assert_int_equal(a.qs[0], -127);
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int i = 0; i < 16; i++) s += a.qs[16 * g + i];
        assert_int_equal(a.bsums[g], s);
    }
}

/* IQ4_NL: index of element j is j % 16 in the low nibbles and 15 - j in the
 * high ones, d = 0.5; IQ4_XS: sub-block ib has ls = {5, 13, 21, 0, 37, 45,
 * 53, 61}[ib] (every pair of high bits; ls - 32 = -32 in sub-block 3) and
 * element e of it index (7 e + ib) % 16, d = 0.25. Values, dot products with
 * small activations (exact in every kernel: multiples of 1/4 below 2^20) and
 * the quantizers, which give these blocks back from their values (each
 * sub-block holds -127 times its scale, the scale search's first candidate). */
static void test_known_iq4(void **state) {
    (void)state;
    tf_block_iq4_nl w = {.d = tf_f32_to_f16(0.5f)};
    for (int j = 0; j < 16; j++) w.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[256], z[256], x[256];
    tf_ref_dequantize_row(TF_DTYPE_IQ4_NL, &w, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == 0.5f * (float)k_iq4_values[j]);
        assert_true(y[j + 16] == 0.5f * (float)k_iq4_values[15 - j]);
    }
    tf_block_q8_0 a[8];
    for (int b = 0; b < 8; b++) {
        a[b].d = tf_f32_to_f16(b % 2 ? 2.0f : 1.0f);
        for (int i = 0; i < 32; i++) a[b].qs[i] = (int8_t)((i + b) % 5 - 2);
    }
    double expect = 0;
    for (int i = 0; i < 32; i++) expect += (double)y[i] * a[0].qs[i];
    assert_true(tf_ref_vec_dot(TF_DTYPE_IQ4_NL, 32, &w, a) == (float)expect);
    for (int k = 0; k < g_n_tables; k++) {
        assert_true(dot1(g_tables[k], TF_DTYPE_IQ4_NL, 32, &w, a) == (float)expect);
        g_tables[k]->dequantize[TF_DTYPE_IQ4_NL](&w, z, 32);
        assert_memory_equal(z, y, sizeof(float) * 32);
    }
    tf_block_iq4_nl wq;
    tf_ref_quantize_row(TF_DTYPE_IQ4_NL, y, &wq, 32);
    assert_memory_equal(&wq, &w, sizeof w);

    static const int ls[8] = {5, 13, 21, 0, 37, 45, 53, 61};
    tf_block_iq4_xs v;
    memset(&v, 0, sizeof v);
    v.d = tf_f32_to_f16(0.25f);
    for (int ib = 0; ib < 8; ib++) {
        v.scales_l[ib / 2] |= (uint8_t)((ls[ib] & 15) << (4 * (ib % 2)));
        v.scales_h |= (uint16_t)((ls[ib] >> 4) << (2 * ib));
        for (int e = 0; e < 32; e++) {
            int q = (7 * e + ib) % 16;
            v.qs[16 * ib + e % 16] |= (uint8_t)(q << (e < 16 ? 0 : 4));
            x[32 * ib + e] = 0.25f * (float)(ls[ib] - 32) * (float)k_iq4_values[q];
        }
    }
    tf_ref_dequantize_row(TF_DTYPE_IQ4_XS, &v, y, 256);
    for (int e = 0; e < 256; e++)
        if (y[e] != x[e]) {
            print_error("iq4_xs element %d: %g, expected %g\n", e, y[e], x[e]);
            fail();
        }
    expect = 0;
    for (int e = 0; e < 256; e++) expect += (double)x[e] * tf_f16_to_f32(a[e / 32].d) * a[e / 32].qs[e % 32];
    assert_true(tf_ref_vec_dot(TF_DTYPE_IQ4_XS, 256, &v, a) == (float)expect);
    for (int k = 0; k < g_n_tables; k++) {
        assert_true(dot1(g_tables[k], TF_DTYPE_IQ4_XS, 256, &v, a) == (float)expect);
        g_tables[k]->dequantize[TF_DTYPE_IQ4_XS](&v, z, 256);
        assert_memory_equal(z, y, sizeof z);
    }
    tf_block_iq4_xs vq;
    tf_ref_quantize_row(TF_DTYPE_IQ4_XS, x, &vq, 256);
    assert_memory_equal(&vq, &v, sizeof v);
}

/* ---- quantize round trip ------------------------------------------------------------- */

/* Relative RMS error of dequantize(quantize(x)) at several magnitudes, for
 * plain Gaussian data and for Gaussian data with outliers (fill_gauss).
 * Measured (plain / outliers): f16 2.0e-4 / 2.0e-4, bf16 1.6e-3 / 1.6e-3,
 * q8_0 5.3e-3 / 9.3e-3, q4_0 8.5e-2 / 0.146, q4_1 7.8e-2 / 0.101, q4_k 7.2e-2 / 0.095,
 * q6_k 1.9e-2 / 2.8e-2, q5_0 4.3e-2 / 7.3e-2, q5_1 3.8e-2 / 4.9e-2,
 * q2_k 0.267 / 0.292, q3_k 0.155 / 0.199, q5_k 3.7e-2 / 4.8e-2, iq4_nl
 * 7.4e-2 / 0.109, iq4_xs 7.5e-2 / 0.110; the bounds add about 20 %. */
static void test_roundtrip(void **state) {
    (void)state;
    static const struct { tf_dtype t; double plain, outliers; } bounds[] = {
        {TF_DTYPE_F32, 0.0, 0.0},       {TF_DTYPE_F16, 2.5e-4, 2.5e-4},  {TF_DTYPE_BF16, 2e-3, 2e-3},
        {TF_DTYPE_Q8_0, 6.5e-3, 0.011}, {TF_DTYPE_Q4_0, 0.10, 0.17},     {TF_DTYPE_Q4_1, 0.094, 0.12},
        {TF_DTYPE_Q4_K, 0.085, 0.115},  {TF_DTYPE_Q6_K, 0.023, 0.033},
        {TF_DTYPE_Q5_0, 0.051, 0.087},  {TF_DTYPE_Q5_1, 0.045, 0.058},   {TF_DTYPE_Q2_K, 0.32, 0.35},
        {TF_DTYPE_Q3_K, 0.19, 0.24},    {TF_DTYPE_Q5_K, 0.044, 0.058},
        {TF_DTYPE_IQ4_NL, 0.089, 0.13}, {TF_DTYPE_IQ4_XS, 0.09, 0.132},
    };
    static const double scales[] = {1e-2, 1.0, 300.0};
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x11);
    const int64_t n = 65536;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    void *q = malloc(tf_dtype_row_size(TF_DTYPE_F32, n));
    for (size_t bi = 0; bi < sizeof bounds / sizeof bounds[0]; bi++) {
        for (int si = 0; si < 6; si++) {
            int outliers = si >= 3;
            double scale = scales[si % 3], bound = outliers ? bounds[bi].outliers : bounds[bi].plain;
            if (outliers) fill_gauss(&rng, x, n, scale);
            else
                for (int64_t i = 0; i < n; i++) x[i] = (float)(gauss(&rng) * scale);
            tf_ref_quantize_row(bounds[bi].t, x, q, n);
            tf_ref_dequantize_row(bounds[bi].t, q, y, n);
            assert_false(tu_has_nonfinite(y, n));
            double rel = sqrt(tu_nmse(y, x, n));
            if (si % 3 == 1)
                print_message("round trip %-5s %-8s rel rms %.5f (bound %.5f)\n", tf_dtype_name(bounds[bi].t),
                              outliers ? "outliers" : "gauss", rel, bound);
            if (rel > bound) {
                print_error("%s scale %g%s: relative RMS error %g > %g\n", tf_dtype_name(bounds[bi].t), scale,
                            outliers ? " with outliers" : "", rel, bound);
                fail();
            }
        }
        /* all zeros, and a single nonzero value: exact zeros elsewhere, no NaN */
        memset(x, 0, sizeof(float) * n);
        tf_ref_quantize_row(bounds[bi].t, x, q, n);
        tf_ref_dequantize_row(bounds[bi].t, q, y, n);
        for (int64_t i = 0; i < n; i++) assert_true(y[i] == 0.0f);
        x[300] = -3.0f;
        tf_ref_quantize_row(bounds[bi].t, x, q, n);
        tf_ref_dequantize_row(bounds[bi].t, q, y, n);
        assert_false(tu_has_nonfinite(y, n));
        assert_true(fabsf(y[300] + 3.0f) < 0.02f);
        /* IQ4's table has no 0: the nearest value is d * 1, with |d| about 3 / 127 */
        bool iq4 = bounds[bi].t == TF_DTYPE_IQ4_NL || bounds[bi].t == TF_DTYPE_IQ4_XS;
        float near0 = iq4 ? 3.0f / 100.0f : 0.02f;
        for (int64_t i = 0; i < n; i++) { /* other blocks exactly zero; its own block near zero */
            if (i / 256 != 300 / 256) assert_true(y[i] == 0.0f);
            else if (i != 300) assert_true(fabsf(y[i]) < near0);
        }
    }
    free(x);
    free(y);
    free(q);
}

/* ---- every table against the references ------------------------------------------- */

/* Row lengths per type: one block, 7 blocks, 33 blocks, 4096 (floats: odd
 * lengths for the vector tails). */
static int row_lengths(tf_dtype t, int64_t *out) {
    if (block_of(t) == 1) {
        static const int64_t f[] = {1, 7, 17, 33, 100, 4096};
        memcpy(out, f, sizeof f);
        return 6;
    }
    int64_t b = block_of(t);
    out[0] = b;
    out[1] = 7 * b;
    out[2] = 33 * b;
    out[3] = 4096;
    return 4;
}

static void test_kernels_vs_ref(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x22);
    enum { NR = TF_TILE_ROWS_MAX, NT = TF_TILE_TOKS_MAX };
    static const double mags[NR] = {1.0, 1e-3, 250.0, 0.05, 3.0, 0.5, 1e-2, 20.0};
    for (int ti = 0; ti < N_TYPES; ti++) {
        tf_dtype t = k_types[ti];
        int64_t lens[8];
        int n_lens = row_lengths(t, lens);
        for (int li = 0; li < n_lens; li++) {
            int64_t n = lens[li];
            size_t ws = tf_dtype_row_size(t, n), as = tf_act_row_size(t, n);
            float *x = malloc(sizeof(float) * n * NR), *xa = malloc(sizeof(float) * n * NT);
            char *w = malloc(ws * NR), *a = malloc(as * NT);
            for (int r = 0; r < NR; r++) {
                fill_gauss(&rng, x + r * n, n, mags[r]);
                tf_ref_quantize_row(t, x + r * n, w + r * ws, n);
            }
            for (int j = 0; j < NT; j++) {
                fill_gauss(&rng, xa + j * n, n, mags[(j + 1) % NR]);
                tf_ref_act_quantize(t, xa + j * n, a + j * as, n);
            }
            float ref[NR][NT];
            double mag[NR][NT];
            for (int r = 0; r < NR; r++)
                for (int j = 0; j < NT; j++) {
                    ref[r][j] = tf_ref_vec_dot(t, n, w + r * ws, a + j * as);
                    mag[r][j] = dot_magnitude(t, n, w + r * ws, a + j * as);
                }
            float *yref = malloc(sizeof(float) * n);
            tf_ref_dequantize_row(t, w, yref, n);
            for (int ki = 0; ki < g_n_tables; ki++) {
                const tf_cpu_kernels *k = g_tables[ki];
                /* activation quantization: bitwise equal to the reference */
                void *aq = alloc_guarded(as);
                k->act_quantize[t](xa, aq, n);
                check_guard(aq, as);
                if (memcmp(aq, a, as) != 0) {
                    print_error("act_quantize %s %s n=%lld differs from the reference\n", k->isa, tf_dtype_name(t),
                                (long long)n);
                    fail();
                }
                free(aq);
                /* dequantization: equal to the reference */
                float *y = alloc_guarded(sizeof(float) * n);
                k->dequantize[t](w, y, n);
                check_guard(y, sizeof(float) * n);
                assert_false(tu_has_nonfinite(y, n));
                double e = tu_nmse(y, yref, n);
                if (e > 1e-14) {
                    print_error("dequantize %s %s n=%lld: nmse %g\n", k->isa, tf_dtype_name(t), (long long)n, e);
                    fail();
                }
                free(y);
                /* every tile shape; out has ldo = NR + 1 with canaries in the spare column */
                for (int nr = 1; nr <= k->tile_rows[t]; nr++)
                    for (int nt = 1; nt <= k->tile_toks[t]; nt++) {
                        const int ldo = NR + 1;
                        float out[NT * (NR + 1) + 4];
                        for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) out[i] = CANARY;
                        k->vec_dot_tile[t](n, w, ws, nr, a, as, nt, out, ldo);
                        for (int j = 0; j < NT; j++)
                            for (int r = 0; r < ldo; r++) {
                                float v = out[j * ldo + r];
                                if (r < nr && j < nt) check_dot("tile", k, t, n, v, ref[r][j], mag[r][j]);
                                else assert_true(v == CANARY);
                            }
                        for (int i = NT * ldo; i < NT * ldo + 4; i++) assert_true(out[i] == CANARY);
                    }
            }
            free(yref);
            free(x);
            free(xa);
            free(w);
            free(a);
        }
    }
}

/* The packed path (quant.h): tf_ref_packed_dot agrees to rounding with the
 * float64 dot product of the dequantized weights and the dequantized
 * activation blocks it packs; every table's act_pack is bitwise tf_ref_act_pack; the packed
 * weight layout round-trips and holds the bytes quant.h names; every packed
 * tile shape, over the file's rows and over packed weight rows, is bitwise
 * tf_ref_packed_dot (the property batch
 * invariance rests on), finite, and writes nothing outside its tile. Row
 * lengths cover tails only (1, 2, 7, 8 blocks), one group plus a pair (576
 * columns, SmolLM2's), one group plus 8 blocks (768: the one tail shape of
 * IQ4_XS and Q4_K, as is 256), groups plus an odd tail and whole groups. */
/* Every tile shape of one packed tile kernel (fn) over weight rows w against
 * ref: bitwise, finite, nothing written outside the tile. */
static void check_ptile(const char *what, const tf_cpu_kernels *k, tf_dtype t, tf_vec_dot_tile_fn fn, int64_t n,
                        const char *w, size_t ws, const char *p, size_t ps,
                        float ref[TF_PACK_ROWS_MAX][TF_WPACK_TOKS_MAX], int nt_max) {
    enum { NR = TF_PACK_ROWS_MAX, NT = TF_WPACK_TOKS_MAX };
    /* every tile prefill and verification hand out: up to tile_rows rows (decode, verification) and
     * up to TF_PACK_ROWS_MAX (prefill), up to nt_max tokens (TF_PACK_TOKS_MAX, or
     * TF_WPACK_TOKS_MAX over the packed weight layout) */
    for (int nr = 1; nr <= NR; nr++)
        for (int nt = 1; nt <= nt_max; nt++) {
            const int ldo = NR + 1;
            float out[NT * (NR + 1) + 4];
            for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) out[i] = CANARY;
            fn(n, w, ws, nr, p, ps, nt, out, ldo);
            for (int j = 0; j < NT; j++)
                for (int r = 0; r < ldo; r++) {
                    float v = out[j * ldo + r];
                    if (r >= nr || j >= nt) {
                        assert_true(v == CANARY);
                    } else if (!isfinite(v) || memcmp(&v, &ref[r][j], sizeof v) != 0) {
                        print_error("%s %s %s n=%lld %dx%d [%d][%d]: %.9g vs reference %.9g\n", what, k->isa,
                                    tf_dtype_name(t), (long long)n, nr, nt, r, j, v, ref[r][j]);
                        fail();
                    }
                }
            for (int i = NT * ldo; i < NT * ldo + 4; i++) assert_true(out[i] == CANARY);
        }
}

static void test_packed_vs_ref(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x66);
    enum { NR = TF_PACK_ROWS_MAX, NT = TF_WPACK_TOKS_MAX };
    static const tf_dtype types[] = {TF_DTYPE_Q8_0,   TF_DTYPE_Q4_0,   TF_DTYPE_Q4_1, TF_DTYPE_Q5_0,
                                     TF_DTYPE_Q5_1,   TF_DTYPE_IQ4_NL, TF_DTYPE_IQ4_XS, TF_DTYPE_Q4_K,
                                     TF_DTYPE_Q5_K,   TF_DTYPE_Q6_K,   TF_DTYPE_Q3_K, TF_DTYPE_Q2_K};
    /* 4864 = 9 groups of 512 and 8 blocks: with 10 or more tokens the tile's activations pass the
     * kernels' L1 bound, so the register-tiled path runs, over two chunks of groups and tail pairs
     * (and, past 16 tokens over the packed weight layout, several token tiles per chunk); below the
     * bound, more than 16 tokens go through the one-row kernel 16 at a time */
    static const int64_t lens[] = {32, 64, 224, 256, 576, 768, 1056, 4096, 4864};
    static const double mags[NR] = {1.0, 1e-3, 250.0, 0.05, 3.0, 0.5, 1e-2, 20.0,
                                    7.0, 0.2, 1e-4, 60.0, 0.8, 2e-2, 4.0, 0.3};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            tf_dtype t = types[ti];
            int64_t n = lens[li];
            if (n % block_of(t)) continue; /* IQ4_XS and the K-quants: multiples of 256 only */
            const tf_dtype at = tf_act_pack_type(t);
            size_t ws = tf_dtype_row_size(t, n), as = tf_act_format_row_size(at, n);
            size_t ps = tf_act_packed_row_size(t, n);
            assert_true(ps > 0 && ps <= tf_act_scratch_row_size(t, n));
            float *x = malloc(sizeof(float) * n * (NR > NT ? NR : NT));
            char *w = malloc(ws * NR), *a = malloc(as * NT), *p = malloc(ps * NT);
            for (int r = 0; r < NR; r++) {
                fill_gauss(&rng, x, n, mags[r]);
                tf_ref_quantize_row(t, x, w + r * ws, n);
            }
            fill_gauss(&rng, x, n * NT, 1.0);
            for (int j = 0; j < NT; j++) {
                for (int64_t i = 0; i < n; i++) x[j * n + i] *= (float)mags[(j + 1) % NR];
                tf_ref_quantize_row(at, x + j * n, a + j * as, n); /* the blocks act_pack packs */
                tf_ref_act_pack(t, x + j * n, p + j * ps, n);
            }
            /* the weight rows in the packed weight layout: same size, the
             * groups rearranged (so not the same bytes once there is one),
             * back to the file's bytes by tf_weight_unpack_row */
            char *wp = malloc(ws * NR);
            assert_true(tf_weight_packs(t));
            tf_weight_pack_rows(t, w, wp, NR, n);
            for (int r = 0; r < NR; r++) {
                char back[4864 / 32 * 34];
                assert_true(ws <= sizeof back);
                tf_weight_pack_row(t, w + r * ws, back, n);
                assert_memory_equal(back, wp + r * ws, ws); /* one row = that row of many */
                tf_weight_unpack_row(t, wp + r * ws, back, n);
                assert_memory_equal(back, w + r * ws, ws);
                if (n >= 512) assert_true(memcmp(wp + r * ws, w + r * ws, ws) != 0);
            }
            if (n >= 512) { /* two bytes of the first record, as quant.h describes it */
                const char *rec = wp, *b6; /* lane 6 holds block (sub-block) tf_pack_lane_block(6) = 9 */
                if (t == TF_DTYPE_Q4_K) {
                    /* sub-block 9 = the second super-block's sub-block 1: its quants are the high
                     * nibbles of that super-block's qs 0..31; y[1] lane 6 byte 2 holds its quant 6
                     * (low nibble) and quant 22 (high) */
                    const uint8_t *qs = (const uint8_t *)w + 144 + offsetof(tf_block_q4_k, qs);
                    const uint8_t *sc = (const uint8_t *)w + 144 + offsetof(tf_block_q4_k, scales);
                    assert_memory_equal(rec + 284, w + 144, 4); /* second super-block's d, dmin */
                    assert_int_equal((uint8_t)rec[64 + 4 * 6 + 2], (qs[6] >> 4) | (qs[22] & 0xF0));
                    /* its scale and min: 6-bit fields 6 and 22 of the 24 bytes at 256 (fields
                     * 4 k .. 4 k + 3 in bytes 3 k .. 3 k + 2 from the high bits down: the third
                     * of a group is the low 4 bits of its second byte, then the top 2 of its
                     * third) */
                    const uint8_t *f = (const uint8_t *)rec + 256;
                    assert_int_equal((f[4] & 0xF) << 2 | f[5] >> 6, sc[1] & 63);
                    assert_int_equal((f[16] & 0xF) << 2 | f[17] >> 6, sc[5] & 63);
                } else if (t == TF_DTYPE_Q5_K) {
                    /* sub-block 9 again (lane 6): its quant 6 and 22 in y[1], their fifth bits (bit 1 of
                     * qh bytes 6 and 22) at bits 6 and 22 of the lane's qh word, its scale at 320.. */
                    const uint8_t *sb1 = (const uint8_t *)w + 176;
                    const uint8_t *qs = sb1 + offsetof(tf_block_q5_k, qs), *qh = sb1 + offsetof(tf_block_q5_k, qh);
                    const uint8_t *sc = sb1 + offsetof(tf_block_q5_k, scales);
                    uint32_t hw;
                    memcpy(&hw, rec + 256 + 4 * 6, 4);
                    assert_memory_equal(rec + 348, sb1, 4);
                    assert_int_equal((uint8_t)rec[64 + 4 * 6 + 2], (qs[6] >> 4) | (qs[22] & 0xF0));
                    assert_int_equal(hw >> 6 & 1, qh[6] >> 1 & 1);
                    assert_int_equal(hw >> 22 & 1, qh[22] >> 1 & 1);
                    const uint8_t *f = (const uint8_t *)rec + 320; /* the scale fields, as Q4_K's */
                    assert_int_equal((f[4] & 0xF) << 2 | f[5] >> 6, sc[1] & 63);
                    assert_int_equal((f[16] & 0xF) << 2 | f[17] >> 6, sc[5] & 63);
                } else if (t == TF_DTYPE_Q6_K) {
                    /* lane 6 again: block 9 = sub-blocks 2 and 3 of the second super-block; its
                     * quant 22 (element 32 + 22 = 54 of that super-block, scale 3): low nibble in
                     * y[1] byte 4 * 6 + 2 (high nibble), high bits in H[1] byte 4 * 6 + 2, bits 2, 3 */
                    tf_block_q6_k sb1;
                    memcpy(&sb1, w + sizeof(tf_block_q6_k), sizeof sb1);
                    /* element 54 = 32 k + l with k 1, l 22: ql[22 + 32] low nibble, qh[22] bits 2, 3 */
                    const int q = (sb1.ql[54] & 0xF) | (sb1.qh[22] >> 2 & 3) << 4;
                    assert_int_equal((uint8_t)rec[64 + 4 * 6 + 2] >> 4, q & 0xF);
                    assert_int_equal((uint8_t)rec[256 + 64 + 4 * 6 + 2] >> 2 & 3, q >> 4);
                    assert_int_equal((int8_t)rec[384 + 2 * 6 + 1], sb1.scales[3]);
                    assert_memory_equal(rec + 418, &sb1.d, 2);
                } else if (t == TF_DTYPE_Q3_K) {
                    /* lane 6, block 9 = sub-blocks 2 and 3 of the second super-block; its quant 22
                     * (element 54: 2 low bits at bits 2, 3 of qs[22], third bit at bit 1 of
                     * hmask[22]) in L[1] byte 4 * 6 + 2 bits 2, 3 and H byte 4 * 6 + 2 bit 5; the
                     * scale of sub-block 3 (low nibble of scales[3], high 2 bits at bits 0, 1 of
                     * scales[11]) in the high nibble of byte 192 + 6 and bits 2, 3 of byte 208 + 3 */
                    tf_block_q3_k sb1;
                    memcpy(&sb1, w + sizeof(tf_block_q3_k), sizeof sb1);
                    assert_int_equal((uint8_t)rec[64 + 4 * 6 + 2] >> 2 & 3, sb1.qs[22] >> 2 & 3);
                    assert_int_equal((uint8_t)rec[128 + 4 * 6 + 2] >> 5 & 1, sb1.hmask[22] >> 1 & 1);
                    assert_int_equal((uint8_t)rec[192 + 6] >> 4, sb1.scales[3] & 0xF);
                    assert_int_equal((uint8_t)rec[208 + 3] >> 2 & 3, sb1.scales[11] & 3);
                    assert_memory_equal(rec + 218, &sb1.d, 2);
                } else if (t == TF_DTYPE_Q2_K) {
                    /* lane 6, block 9 again: quant 22 (element 54: bits 2, 3 of qs[22]) in L[1] byte
                     * 4 * 6 + 2 bits 2, 3; the scale bytes of sub-blocks 2, 3 at 128 + 2 * 6, + 1;
                     * d, dmin of the second super-block at 164 */
                    tf_block_q2_k sb1;
                    memcpy(&sb1, w + sizeof(tf_block_q2_k), sizeof sb1);
                    assert_int_equal((uint8_t)rec[64 + 4 * 6 + 2] >> 2 & 3, sb1.qs[22] >> 2 & 3);
                    assert_int_equal((uint8_t)rec[128 + 2 * 6], sb1.scales[2]);
                    assert_int_equal((uint8_t)rec[128 + 2 * 6 + 1], sb1.scales[3]);
                    assert_memory_equal(rec + 164, &sb1.d, 4);
                } else if (t == TF_DTYPE_IQ4_XS) {
                    b6 = w + 136 + offsetof(tf_block_iq4_xs, qs) + 16 * (9 - 8); /* its qs */
                    assert_memory_equal(rec + 256 + 8, w + 136, 8);               /* second header */
                    assert_int_equal((uint8_t)rec[64 + 4 * 6 + 2], (uint8_t)b6[4 + 2]);
                } else {
                    const size_t bs = tf_dtype_row_size(t, 32);
                    const int qs = t == TF_DTYPE_Q4_1 ? 4 : t == TF_DTYPE_Q5_0 ? 6 : t == TF_DTYPE_Q5_1 ? 8 : 2;
                    b6 = w + 9 * bs;
                    assert_memory_equal(rec + (t == TF_DTYPE_Q8_0 ? 512 : 256) + 2 * 6, b6, 2); /* d */
                    if (t == TF_DTYPE_Q8_0) /* q[5]: quants 20..23, + 128 */
                        assert_int_equal((uint8_t)rec[64 * 5 + 4 * 6 + 1], (uint8_t)(b6[qs + 21] ^ 0x80));
                    else /* y[1]: qs bytes 4..7 */
                        assert_int_equal((uint8_t)rec[64 + 4 * 6 + 2], (uint8_t)b6[qs + 4 + 2]);
                }
            }
            float ref[NR][NT];
            for (int r = 0; r < NR; r++)
                for (int j = 0; j < NT; j++) {
                    ref[r][j] = tf_ref_packed_dot(t, n, w + r * ws, p + j * ps);
                    double mag, d64 = dot_f64(t, at, n, w + r * ws, a + j * as, &mag);
                    check_dot("packed ref", g_tables[0], t, n, ref[r][j], (float)d64, mag);
                }
            for (int ki = 0; ki < g_n_tables; ki++) {
                const tf_cpu_kernels *k = g_tables[ki];
                if (!k->packed_tile[t]) continue;
                assert_non_null(k->act_pack[t]);
                void *pq = alloc_guarded(ps);
                k->act_pack[t](x, pq, n);
                check_guard(pq, ps);
                if (memcmp(pq, p, ps) != 0) {
                    print_error("act_pack %s %s n=%lld differs from the reference\n", k->isa, tf_dtype_name(t),
                                (long long)n);
                    fail();
                }
                free(pq);
                check_ptile("packed tile", k, t, k->packed_tile[t], n, w, ws, p, ps, ref, TF_PACK_TOKS_MAX);
                /* the same tiles over weight rows in the packed weight layout, up to prefill's tokens */
                assert_non_null(k->wpacked_tile[t]);
                check_ptile("packed tile, packed weights", k, t, k->wpacked_tile[t], n, wp, ws, p, ps, ref,
                            TF_WPACK_TOKS_MAX);
            }
            free(x);
            free(wp);
            free(w);
            free(a);
            free(p);
        }
}

/* Non-finite inputs propagate instead of vanishing: an Inf weight yields a
 * non-finite dot product in every table (float types). */
static void test_nonfinite_propagates(void **state) {
    (void)state;
    float w[64], a[64];
    for (int i = 0; i < 64; i++) { w[i] = 0.5f; a[i] = 1.0f; }
    w[37] = INFINITY;
    for (int ki = 0; ki < g_n_tables; ki++) {
        const tf_cpu_kernels *k = g_tables[ki];
        assert_false(isfinite(dot1(k, TF_DTYPE_F32, 64, w, a)));
        uint16_t h[64];
        tf_ref_quantize_row(TF_DTYPE_F16, w, h, 64);
        assert_false(isfinite(dot1(k, TF_DTYPE_F16, 64, h, a)));
        tf_ref_quantize_row(TF_DTYPE_BF16, w, h, 64);
        assert_false(isfinite(dot1(k, TF_DTYPE_BF16, 64, h, a)));
    }
}

/* R16 (quant.h "Row-interleaved weight groups"): the layout round-trips and
 * holds the bytes quant.h names; the activations' side values are each
 * block's d and -128 x its quant sum; tf_ref_r16_dot agrees with the plain
 * reference dot product to rounding; and where a table has the R16 products
 * (the AMX table), every output of tf_cpu_matmul over R16 weights (Q8_0,
 * Q4_0, Q4_1, IQ4_NL), for 1..20 tokens (VNNI up to 4, tiles from 5, a tile of 16 plus
 * VNNI rows), one and two threads, a
 * partial last group of rows, is bitwise tf_ref_r16_dot of the file's row,
 * finite, and nothing past the rows is written. */
static void test_r16_vs_ref(void **state) {
    (void)state;
    enum { MAX_TOK = 20 };
    static const int64_t rows_list[] = {16, 37, 48};
    static const int64_t lens[] = {32, 64, 576, 608, 1024, 2048};
    static const int toks[] = {1, 2, 3, 4, 5, 8, 15, 16, 17, 20};
    static const tf_dtype types[] = {TF_DTYPE_Q8_0, TF_DTYPE_Q4_0, TF_DTYPE_Q4_1, TF_DTYPE_IQ4_NL};
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() ^ 0x616d78);
    tf_pool *pool;
    tf_err err = {0};
    assert_int_equal(tf_pool_create(&pool, 2, &err), TF_OK);
    int ran = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const tf_dtype t = types[ti];
            const int64_t rows = rows_list[ri], n = lens[li], nb = n / 32, ldy = rows + 3;
            const size_t ws = tf_dtype_row_size(t, n), rs = tf_act_r16_row_size(t, n), bs = ws / (size_t)nb;
            const size_t as = tf_act_scratch_row_size(t, n), so = tf_act_r16_side_offset(t, n);
            const size_t ab = tf_act_row_size(t, n); /* the activation blocks */
            assert_true(rs <= as && rs % 64 == 0 && so >= ab);
            float *x = malloc(sizeof(float) * n * (MAX_TOK > rows ? MAX_TOK : rows));
            char *w = malloc(ws * rows), *wr = malloc(ws * rows), *ra = malloc(rs * MAX_TOK), *act = malloc(as * MAX_TOK);
            float *ref = malloc(sizeof(float) * MAX_TOK * rows), *y = malloc(sizeof(float) * MAX_TOK * ldy);
            for (int64_t r = 0; r < rows; r++) {
                fill_gauss(&rng, x, n, r % 3 == 0 ? 0.01 : r % 3 == 1 ? 1.0 : 40.0);
                tf_ref_quantize_row(t, x, w + r * ws, n);
            }
            fill_gauss(&rng, x, n * MAX_TOK, 1.0);
            for (int j = 0; j < MAX_TOK; j++) tf_ref_act_r16(t, x + j * n, ra + j * rs, n);
            /* the layout: every row back, a range of blocks back, two bytes as documented */
            memset(wr, 0xA5, ws * rows);
            tf_weight_r16_pack(t, w, wr, rows, n, 0, (rows + 15) / 16);
            for (int64_t r = 0; r < rows; r++) {
                char back[2048 / 32 * 34];
                tf_weight_r16_unpack_blocks(t, wr, rows, n, r, 0, nb, back);
                assert_memory_equal(back, w + r * ws, ws);
                if (nb > 2) {
                    tf_weight_r16_unpack_blocks(t, wr, rows, n, r, 1, nb - 1, back);
                    assert_memory_equal(back, w + r * ws + bs, ws - 2 * bs);
                }
            }
            if (nb >= 2) { /* group 0, block 1 (a record of 16 blocks), row 3: a quant byte and d[3] */
                const uint8_t *rec = (const uint8_t *)wr + 16 * bs;
                if (t == TF_DTYPE_Q8_0) { /* q[5][3][1] = quant 21 + 128 */
                    const tf_block_q8_0 *b = (const tf_block_q8_0 *)(w + 3 * ws) + 1;
                    assert_int_equal(rec[4 * (16 * 5 + 3) + 1], (uint8_t)(b->qs[21] + 128));
                    assert_memory_equal(rec + 32 * 16 + 2 * 3, &b->d, 2);
                } else if (t == TF_DTYPE_Q4_1) { /* y[2][3][1] = qs byte 9; then d[3], m[3] */
                    const tf_block_q4_1 *b = (const tf_block_q4_1 *)(w + 3 * ws) + 1;
                    assert_int_equal(rec[4 * (16 * 2 + 3) + 1], b->qs[9]);
                    assert_memory_equal(rec + 16 * 16 + 2 * 3, &b->d, 2);
                    assert_memory_equal(rec + 18 * 16 + 2 * 3, &b->m, 2);
                } else { /* Q4_0, IQ4_NL (d, then qs[16]): y[2][3][1] = qs byte 9; then d[3] */
                    const uint8_t *b = (const uint8_t *)(w + 3 * ws) + bs;
                    assert_int_equal(rec[4 * (16 * 2 + 3) + 1], b[2 + 9]);
                    assert_memory_equal(rec + 16 * 16 + 2 * 3, b, 2);
                }
            }
            /* the side values, computed here from the blocks */
            for (int j = 0; j < MAX_TOK; j++) {
                const float *ad = (const float *)(ra + j * rs + so);
                const char *ex = (const char *)(ad + nb);
                for (int64_t b = 0; b < nb; b++) {
                    const int8_t *q;
                    float d;
                    if (t != TF_DTYPE_Q4_1) { /* Q8_0 activation blocks */
                        const tf_block_q8_0 *xb = (const tf_block_q8_0 *)(ra + j * rs) + b;
                        q = xb->qs, d = tf_f16_to_f32(xb->d);
                    } else {
                        const tf_block_q8_1 *xb = (const tf_block_q8_1 *)(ra + j * rs) + b;
                        q = xb->qs, d = tf_f16_to_f32(xb->d);
                    }
                    int sum = 0;
                    for (int i = 0; i < 32; i++) sum += q[i];
                    assert_true(ad[b] == d);
                    if (t != TF_DTYPE_Q4_1) { /* the u8 weights' offset: 8 for Q4_0, 128 for the others */
                        int32_t e;
                        memcpy(&e, ex + 4 * b, 4);
                        assert_int_equal(e, (t == TF_DTYPE_Q4_0 ? -8 : -128) * sum);
                    } else {
                        float e;
                        memcpy(&e, ex + 4 * b, 4);
                        assert_true(e == d * (float)sum);
                    }
                }
            }
            for (int j = 0; j < MAX_TOK; j++)
                for (int64_t r = 0; r < rows; r++) {
                    ref[j * rows + r] = tf_ref_r16_dot(t, n, w + r * ws, ra + j * rs);
                    check_dot("r16 ref", g_tables[0], t, n, ref[j * rows + r], tf_ref_vec_dot(t, n, w + r * ws, ra + j * rs),
                              dot_magnitude(t, n, w + r * ws, ra + j * rs));
                }
            for (int ki = 0; ki < g_n_tables; ki++) {
                const tf_cpu_kernels *k = g_tables[ki];
                if (!k->r16_rows[t]) continue;
                ran++;
                void *rq = alloc_guarded(rs);
                k->r16_act[t](x, rq, n);
                check_guard(rq, rs);
                if (memcmp(rq, ra, ab) != 0 || memcmp((char *)rq + so, ra + so, 8 * (size_t)nb) != 0) {
                    print_error("r16_act %s %s n=%lld differs from the reference\n", k->isa, tf_dtype_name(t),
                                (long long)n);
                    fail();
                }
                free(rq);
                for (size_t ni = 0; ni < sizeof toks / sizeof toks[0]; ni++)
                    for (int pi = 0; pi < 2; pi++) {
                        const int nt = toks[ni];
                        for (int64_t i = 0; i < MAX_TOK * ldy; i++) y[i] = CANARY;
                        tf_cpu_matmul(pi ? pool : NULL, k, t, wr, TF_WLAYOUT_R16, rows, n, x, nt, y, ldy, act);
                        for (int j = 0; j < MAX_TOK; j++)
                            for (int64_t r = 0; r < ldy; r++) {
                                const float v = y[j * ldy + r];
                                if (j >= nt || r >= rows) {
                                    assert_true(v == CANARY);
                                } else if (!isfinite(v) || memcmp(&v, &ref[j * rows + r], sizeof v) != 0) {
                                    print_error("R16 matmul %s %s rows=%lld n=%lld tokens=%d threads=%d: [%d][%lld] "
                                                "%.9g vs reference %.9g\n",
                                                k->isa, tf_dtype_name(t), (long long)rows, (long long)n, nt, pi ? 2 : 1, j,
                                                (long long)r, v, ref[j * rows + r]);
                                    fail();
                                }
                            }
                    }
                /* a range of rows that starts past the first group, straight through r16_rows */
                if (rows > 16) {
                    for (int64_t i = 0; i < MAX_TOK * ldy; i++) y[i] = CANARY;
                    k->r16_rows[t](n, wr, rows, 16, rows, ra, rs, 5, y, ldy);
                    for (int j = 0; j < 5; j++)
                        for (int64_t r = 16; r < rows; r++)
                            assert_memory_equal(&y[j * ldy + r - 16], &ref[j * rows + r], sizeof(float));
                    assert_true(y[rows - 16] == CANARY);
                }
            }
            free(x);
            free(w);
            free(wr);
            free(ra);
            free(act);
            free(ref);
            free(y);
        }
    if (!ran) print_message("R16 products: no table on this CPU has them (AMX-INT8); layout and activations checked\n");
    tf_pool_free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_known_q8_0),
        cmocka_unit_test(test_known_q4_0),
        cmocka_unit_test(test_known_q4_1),
        cmocka_unit_test(test_q4_1_dequant_random),
        cmocka_unit_test(test_dequant_random_blocks),
        cmocka_unit_test(test_quantize_layout),
        cmocka_unit_test(test_known_q4_k),
        cmocka_unit_test(test_known_q6_k),
        cmocka_unit_test(test_known_iq4),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_kernels_vs_ref),
        cmocka_unit_test(test_nonfinite_propagates),
        cmocka_unit_test(test_packed_vs_ref),
        cmocka_unit_test(test_r16_vs_ref),
    };
    return cmocka_run_group_tests(tests, quant_group_setup, NULL);
}
