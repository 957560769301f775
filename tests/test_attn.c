/* test_attn.c — CPU attention (every ISA) against the double-precision reference. */
#include "testutil.h"

#include "backend/cpu/attn.h"
#include "kv/kv.h"
#include "backend/cpu/quant.h"
#include "core/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CANARY 12345.678f

typedef struct shape { int n_head, n_head_kv, hd, n_slots, n_q; int causal; } shape;

/* Tolerance on the normalized squared error against the double-precision
 * reference. f16 caches with head_dim a multiple of 16 run in bf16 arithmetic: q, K, V and the
 * softmax weights each carry a relative rounding error of at most 2^-9 (RMS
 * about 2^-9/sqrt(3) = 1.1e-3); an output mixes a few such errors (V, the
 * weights, and the scores through q and K), so its relative RMS error is a few
 * times 1e-3 and the NMSE of order 1e-5. 1e-4 leaves room for the worst shapes
 * and still fails on any real mistake (a wrong key, a lost tile: NMSE >= 1e-2).
 * q8_0 and q4_0 caches take integer products: the query quantized to int8
 * per 32 dimensions (a relative step of 1/127 of the segment's largest value:
 * RMS error about 1/(127 sqrt(12)) = 2.3e-3 of it, on the scores only) and the
 * softmax weights times the V scales to int16 per tile (2^-16 of the tile's
 * largest); K and V are read exactly (d * q, which is what the reference
 * reads back). Its error is of the bf16 path's order, under the same 1e-4.
 * f32 caches and other head sizes run in f32: accumulation error only; so do
 * f16 caches under the f32 variants (K and V converted exactly, no bf16
 * step): a bf16 rounding there would give NMSE of order 1e-6, far above 1e-9. */
enum { PATH_F32 = 0, PATH_BF16 = 1, PATH_INT8 = 2 };
static int attn_path(int hd, tf_dtype type, tf_attn_kernel kern) {
    return type == TF_DTYPE_Q8_0 || type == TF_DTYPE_Q4_0                       ? PATH_INT8
           : hd % 16 == 0 && type != TF_DTYPE_F32 && tf_attn_kernel_bits(kern, type, hd) != TF_ATTN_AVX512_F32
        ? PATH_BF16
        : PATH_F32;
}
static double nmse_tolerance(int hd, tf_dtype type, tf_attn_kernel kern) {
    return attn_path(hd, type, kern) == PATH_F32 ? 1e-9 : 1e-4;
}

static double worst_nmse[3]; /* [attn_path] */

static void run_case(const shape *sh, tf_dtype type, tf_attn_kernel kern, tf_pool *pool, tf_rng *rng) {
    tf_kv_cache kv;
    tf_err err = {0};
    assert_int_equal(tf_kv_init(&kv, 2, sh->n_head_kv, sh->hd, sh->n_slots, type, &err), TF_OK);
    int kv_dim = sh->n_head_kv * sh->hd, q_dim = sh->n_head * sh->hd;
    float *k = malloc(sizeof(float) * (size_t)sh->n_slots * kv_dim);
    float *v = malloc(sizeof(float) * (size_t)sh->n_slots * kv_dim);
    tu_fill_uniform(rng, k, (size_t)sh->n_slots * kv_dim, -2.0f, 2.0f);
    tu_fill_uniform(rng, v, (size_t)sh->n_slots * kv_dim, -1.0f, 1.0f);
    /* layer 1 gets the data; layer 0 garbage-free zeros: checks layer addressing */
    tf_kv_store(&kv, 1, 0, sh->n_slots, k, v, kv_dim);
    kv.n_used = sh->n_slots;
    int ldo = q_dim + 5;
    float *q = malloc(sizeof(float) * (size_t)sh->n_q * q_dim);
    float *out = malloc(sizeof(float) * ((size_t)sh->n_q * ldo + 16));
    float *ref = malloc(sizeof(float) * (size_t)sh->n_q * ldo);
    int32_t *len = malloc(sizeof(int32_t) * sh->n_q);
    tu_fill_uniform(rng, q, (size_t)sh->n_q * q_dim, -1.5f, 1.5f);
    for (int i = 0; i < sh->n_q; i++)
        len[i] = sh->causal ? sh->n_slots - sh->n_q + i + 1 : 1 + (int32_t)(tf_rng_next(rng) % sh->n_slots);
    for (size_t i = 0; i < (size_t)sh->n_q * ldo + 16; i++) out[i] = CANARY;
    tf_attn_args a = {.q = q, .ldq = q_dim, .kv = tf_kv_layer_view(&kv, 1), .n_q = sh->n_q, .kv_len = len,
                      .n_head = sh->n_head, .scale = 1.0f / sqrtf((float)sh->hd), .out = out, .ldo = ldo};
    void *scratch = tf_alloc(tf_attn_scratch_size(tf_pool_size(pool), sh->n_q, sh->n_head, sh->hd, sh->n_slots));
    tf_cpu_attn_kernel(pool, kern, &a, scratch);
    a.out = ref;
    tf_ref_attn(&a);
    double num = 0, den = 0;
    for (int i = 0; i < sh->n_q; i++) {
        for (int j = 0; j < q_dim; j++) {
            float x = out[(size_t)i * ldo + j], y = ref[(size_t)i * ldo + j];
            assert_true(isfinite(x));
            assert_true(isfinite(y));
            num += ((double)x - y) * ((double)x - y);
            den += (double)y * y;
        }
        for (int j = q_dim; j < ldo; j++) assert_true(out[(size_t)i * ldo + j] == CANARY);
    }
    for (int j = 0; j < 16; j++) assert_true(out[(size_t)sh->n_q * ldo + j] == CANARY);
    double nmse = num / den;
    const int b = attn_path(sh->hd, type, kern);
    if (nmse > worst_nmse[b]) worst_nmse[b] = nmse;
    if (nmse > nmse_tolerance(sh->hd, type, kern)) {
        print_error("nmse %g: heads %d/%d hd %d slots %d n_q %d type %s kernel %s threads %d\n", nmse, sh->n_head,
                    sh->n_head_kv, sh->hd, sh->n_slots, sh->n_q, tf_dtype_name(type), tf_attn_kernel_name(kern),
                    tf_pool_size(pool));
        fail();
    }
    tf_free(scratch);
    free(k); free(v); free(q); free(out); free(ref); free(len);
    tf_kv_free(&kv);
}

static void test_attn_vs_reference(void **state) {
    (void)state;
    static const shape shapes[] = {
        {8, 4, 8, 300, 1, 1},    {8, 4, 8, 1000, 7, 1},  {8, 4, 8, 257, 40, 0},  {4, 4, 64, 700, 1, 1},
        {4, 1, 64, 2100, 3, 1},  {8, 2, 128, 130, 17, 1}, {6, 3, 24, 90, 5, 0},  {2, 2, 128, 5000, 1, 1},
        {8, 8, 8, 1, 1, 1},      {4, 2, 8, 64, 64, 1},    {9, 3, 64, 1500, 8, 1}, {4, 2, 16, 333, 5, 0},
        {4, 2, 48, 200, 20, 1},  {4, 1, 64, 1, 1, 1},    {4, 2, 32, 600, 3, 1}, {6, 2, 96, 900, 9, 1},
        {2, 1, 32, 77, 2, 0},
    };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    tf_pool *pools[2];
    tf_err err = {0};
    assert_int_equal(tf_pool_create(&pools[0], 1, &err), TF_OK);
    assert_int_equal(tf_pool_create(&pools[1], 2, &err), TF_OK);
    for (tf_attn_kernel kern = 0; kern < TF_ATTN_KERNEL_COUNT; kern++) {
        if (!tf_attn_kernel_supported(kern)) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int t = 0; t < 2; t++) {
                run_case(&shapes[s], TF_DTYPE_F32, kern, pools[t], &rng);
                run_case(&shapes[s], TF_DTYPE_F16, kern, pools[t], &rng);
                if (shapes[s].hd % 32 == 0) {
                    run_case(&shapes[s], TF_DTYPE_Q8_0, kern, pools[t], &rng);
                    run_case(&shapes[s], TF_DTYPE_Q4_0, kern, pools[t], &rng);
                }
            }
    }
    print_message("worst nmse: bf16 path %.3g, integer path (q8_0, q4_0) %.3g (tolerance %g), f32 path %.3g (tolerance %g)\n",
                  worst_nmse[PATH_BF16], worst_nmse[PATH_INT8], nmse_tolerance(16, TF_DTYPE_F16, TF_ATTN_GENERIC),
                  worst_nmse[PATH_F32], nmse_tolerance(16, TF_DTYPE_F32, TF_ATTN_GENERIC));
    assert_true(worst_nmse[PATH_INT8] > 0.0); /* the q8_0 and q4_0 cases ran */
    tf_pool_free(pools[0]);
    tf_pool_free(pools[1]);
}

/* A KV cache round-trips what is stored, in both element types. */
static void test_kv_store_read(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 1);
    for (int t = 0; t < 2; t++) {
        tf_dtype type = t ? TF_DTYPE_F16 : TF_DTYPE_F32;
        tf_kv_cache kv;
        tf_err err = {0};
        assert_int_equal(tf_kv_init(&kv, 3, 2, 8, 40, type, &err), TF_OK);
        assert_int_equal(kv.n_slots, 48);
        float k[5 * 16], v[5 * 16], ko[8], vo[8];
        tu_fill_uniform(&rng, k, 80, -3, 3);
        tu_fill_uniform(&rng, v, 80, -3, 3);
        tf_kv_store(&kv, 2, 13, 5, k, v, 16);
        for (int i = 0; i < 5; i++)
            for (int h = 0; h < 2; h++) {
                tf_kv_read(&kv, 2, h, 13 + i, ko, vo);
                for (int d = 0; d < 8; d++) {
                    float tol = t ? 2e-3f : 0.0f;
                    assert_true(fabsf(ko[d] - k[i * 16 + h * 8 + d]) <= tol);
                    assert_true(fabsf(vo[d] - v[i * 16 + h * 8 + d]) <= tol);
                }
            }
        tf_kv_free(&kv);
    }
}

/* A q8_0 / q4_0 cache holds exactly what ggml's row quantizer (tested in
 * test_quant against its own reference) makes of each 32-value block, within
 * the quantizer's error bound of the original; tf_kv_k_block_f32 gives the
 * same values, and tf_kv_copy moves K and V bit for bit. */
static void test_kv_quantized(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 3);
    static const tf_dtype types[] = {TF_DTYPE_Q8_0, TF_DTYPE_Q4_0};
    for (int t = 0; t < 2; t++)
        for (int hd = 32; hd <= 128; hd += 32) {
            const tf_dtype type = types[t];
            const int nh = 2, n = 37, ld = nh * hd + 3;
            tf_kv_cache kv, kv2;
            tf_err err = {0};
            assert_int_equal(tf_kv_init(&kv, 2, nh, hd, 64, type, &err), TF_OK);
            assert_int_equal(tf_kv_init(&kv2, 2, nh, hd, 80, type, &err), TF_OK);
            assert_int_equal(kv.v_row_bytes, tf_dtype_row_size(type, hd));
            float *k = malloc(sizeof(float) * (size_t)n * ld), *v = malloc(sizeof(float) * (size_t)n * ld);
            tu_fill_uniform(&rng, k, (size_t)n * ld, -3, 3);
            tu_fill_uniform(&rng, v, (size_t)n * ld, -1, 1);
            for (int i = 0; i < n; i++) k[(size_t)i * ld + (i % hd)] = (i & 1) ? 40.0f : -40.0f; /* outliers */
            tf_kv_store(&kv, 1, 5, n, k, v, ld);
            uint8_t qb[4 * 34]; /* the q8_0 row of 128 values, the largest here */
            float expect_k[128], expect_v[128], ko[128], vo[128], blk[128 * TF_KV_BLK];
            for (int i = 0; i < n; i++)
                for (int h = 0; h < nh; h++) {
                    const float *ks = k + (size_t)i * ld + (size_t)h * hd, *vs = v + (size_t)i * ld + (size_t)h * hd;
                    tf_ref_quantize_row(type, ks, qb, hd);
                    tf_ref_dequantize_row(type, qb, expect_k, hd);
                    tf_ref_quantize_row(type, vs, qb, hd);
                    tf_ref_dequantize_row(type, qb, expect_v, hd);
                    tf_kv_read(&kv, 1, h, 5 + i, ko, vo);
                    for (int d = 0; d < hd; d++)
                        if (ko[d] != expect_k[d] || vo[d] != expect_v[d])
                            fail_msg("%s hd %d slot %d head %d dim %d: K %g V %g, the quantizer gives %g %g",
                                     tf_dtype_name(type), hd, i, h, d, ko[d], vo[d], expect_k[d], expect_v[d]);
                    for (int b = 0; b < hd; b += 32) {
                        float amk = 0, amv = 0;
                        for (int d = b; d < b + 32; d++) {
                            amk = fmaxf(amk, fabsf(ks[d]));
                            amv = fmaxf(amv, fabsf(vs[d]));
                        }
                        /* q8_0: half a step of amax/127; q4_0: a whole step of amax/8 (the
                         * clamp at +7); plus the f16 rounding of the scale (2^-11 relative) */
                        const float rk = (t ? amk / 8 : amk / 254) + amk / 1024,
                                    rv = (t ? amv / 8 : amv / 254) + amv / 1024;
                        for (int d = b; d < b + 32; d++) {
                            assert_true(isfinite(ko[d]) && isfinite(vo[d]));
                            if (fabsf(ko[d] - ks[d]) > rk || fabsf(vo[d] - vs[d]) > rv)
                                fail_msg("%s hd %d slot %d dim %d: %g/%g stored as %g/%g", tf_dtype_name(type), hd, i,
                                         d, ks[d], vs[d], ko[d], vo[d]);
                        }
                    }
                }
            /* K blocks as floats: the values tf_kv_read gives, lane by lane */
            for (int32_t b = 0; b < 3; b++)
                for (int h = 0; h < nh; h++) {
                    tf_kv_k_block_f32(&kv, 1, h, b, blk);
                    for (int j = 0; j < TF_KV_BLK; j++) {
                        tf_kv_read(&kv, 1, h, b * TF_KV_BLK + j, ko, NULL);
                        for (int d = 0; d < hd; d++) assert_true(blk[(size_t)d * TF_KV_BLK + j] == ko[d]);
                    }
                }
            /* copy slots [7, 7+29) of head 1 to slot 50 of another cache (unaligned on both sides) */
            tf_kv_copy(&kv2, 50, &kv, 7, 29, 1, 1);
            for (int i = 0; i < 29; i++) {
                float k2[128], v2[128];
                tf_kv_read(&kv, 1, 1, 7 + i, ko, vo);
                tf_kv_read(&kv2, 1, 1, 50 + i, k2, v2);
                assert_memory_equal(ko, k2, sizeof(float) * hd);
                assert_memory_equal(vo, v2, sizeof(float) * hd);
                tf_kv_read(&kv2, 1, 0, 50 + i, k2, v2); /* the other head untouched */
                for (int d = 0; d < hd; d++) assert_true(k2[d] == 0.0f && v2[d] == 0.0f);
            }
            free(k);
            free(v);
            tf_kv_free(&kv);
            tf_kv_free(&kv2);
        }
    /* head sizes that are not a multiple of 32 are refused by name */
    static const int bad_hd[] = {8, 48, 80};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 3; i++) {
            tf_kv_cache kv;
            tf_err err = {0};
            assert_int_equal(tf_kv_init(&kv, 1, 1, bad_hd[i], 16, types[t], &err), TF_ERR_UNSUPPORTED);
            char want[32];
            snprintf(want, sizeof want, "head_dim is %d", bad_hd[i]);
            assert_non_null(strstr(err.msg, want));
            assert_non_null(strstr(err.msg, tf_dtype_name(types[t])));
        }
    tf_kv_cache kv;
    tf_err err = {0};
    assert_int_equal(tf_kv_init(&kv, 1, 1, 32, 16, TF_DTYPE_Q4_K, &err), TF_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "expected f32, f16, q8_0 or q4_0"));
}

/* Rows of a batch of up to 16 give bitwise the results they give alone and in
 * smaller batches, on any thread count, and every kernel variant (bf16 instructions or their emulation,
 * AVX2, generic) gives the same bits as the generic one; a variant with bits of
 * its own (AMX on its tile path, the f32 variants over f16) the same bits on
 * every thread count, and as the other variants with those bits (the f32 one
 * built with VNNI as the one without). */
static void test_batch_invariance(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 2);
    tf_err err = {0};
    tf_pool *pools[2];
    assert_int_equal(tf_pool_create(&pools[0], 1, &err), TF_OK);
    assert_int_equal(tf_pool_create(&pools[1], 2, &err), TF_OK);
    static const struct { int hd, n_head, n_head_kv; } shapes[] = {
        {8, 8, 4}, {64, 4, 4}, {128, 2, 2}, {128, 4, 2}, {128, 8, 2}, {32, 2, 1}, {64, 9, 3}, {16, 4, 2}, {24, 2, 1},
    };
    const int n_slots = 3000, n_q = 11;
    static const tf_dtype types[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_Q8_0, TF_DTYPE_Q4_0};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (int t = 0; t < 4; t++) {
            const int hd = shapes[sh].hd, n_head = shapes[sh].n_head, n_head_kv = shapes[sh].n_head_kv;
            if (t >= 2 && hd % 32 != 0) continue;
            const char *tname = tf_dtype_name(types[t]);
            const int qd = n_head * hd;
            tf_kv_cache kv;
            assert_int_equal(tf_kv_init(&kv, 1, n_head_kv, hd, n_slots, types[t], &err), TF_OK);
            size_t nkv = (size_t)n_slots * n_head_kv * hd;
            float *k = malloc(sizeof(float) * nkv), *v = malloc(sizeof(float) * nkv);
            float *q = malloc(sizeof(float) * n_q * qd), *out_b = malloc(sizeof(float) * n_q * qd),
                  *out_1 = malloc(sizeof(float) * qd), *golden = malloc(sizeof(float) * n_q * qd * TF_ATTN_KERNEL_COUNT);
            assert_non_null(k);
            assert_non_null(v);
            assert_non_null(q);
            assert_non_null(out_b);
            assert_non_null(out_1);
            assert_non_null(golden);
            tu_fill_uniform(&rng, k, nkv, -3, 3);
            tu_fill_uniform(&rng, v, nkv, -1, 1);
            tf_kv_store(&kv, 0, 0, n_slots, k, v, n_head_kv * hd);
            kv.n_used = n_slots;
            tu_fill_uniform(&rng, q, (size_t)n_q * qd, -2, 2);
            int32_t len[11];
            for (int i = 0; i < n_q; i++) len[i] = 2043 + i; /* rows straddle the split at 2048 */
            void *scratch = tf_alloc(tf_attn_scratch_size(2, n_q, n_head, hd, n_slots));
            /* golden + b * n_q * qd: the first output of the variants giving variant b's bits
             * (tf_attn_kernel_bits: the generic ones, AMX's or the f32 variants'), which every
             * later one of them must equal */
            int have_golden[TF_ATTN_KERNEL_COUNT] = {0};
            for (tf_attn_kernel kern = 0; kern < TF_ATTN_KERNEL_COUNT; kern++) {
                if (!tf_attn_kernel_supported(kern)) continue;
                const tf_attn_kernel bits = tf_attn_kernel_bits(kern, types[t], hd);
                float *gold = golden + (size_t)bits * n_q * qd;
                for (int pi = 0; pi < 2; pi++) {
                    tf_attn_args a = {.q = q, .ldq = qd, .kv = tf_kv_layer_view(&kv, 0), .n_q = n_q, .kv_len = len,
                                      .n_head = n_head, .scale = 0.35f, .out = out_b, .ldo = qd};
                    tf_cpu_attn_kernel(pools[pi], kern, &a, scratch);
                    for (size_t i = 0; i < (size_t)n_q * qd; i++) assert_true(isfinite(out_b[i]));
                    if (!have_golden[bits]) {
                        memcpy(gold, out_b, sizeof(float) * n_q * qd);
                        have_golden[bits] = 1;
                    } else if (memcmp(gold, out_b, sizeof(float) * n_q * qd) != 0)
                        fail_msg("kernel %s differs from %s: hd %d heads %d/%d %s", tf_attn_kernel_name(kern),
                                 tf_attn_kernel_name(bits), hd, n_head, n_head_kv, tname);
                    for (int i = 0; i < n_q; i++) {
                        tf_attn_args a1 = a;
                        a1.q = q + (size_t)i * qd;
                        a1.n_q = 1;
                        a1.kv_len = &len[i];
                        a1.out = out_1;
                        tf_cpu_attn_kernel(pools[1 - pi], kern, &a1, scratch);
                        if (memcmp(out_1, out_b + (size_t)i * qd, sizeof(float) * qd) != 0)
                            fail_msg("row %d differs alone and in the batch: hd %d heads %d/%d %s kernel %s", i, hd,
                                     n_head, n_head_kv, tname, tf_attn_kernel_name(kern));
                    }
                    /* smaller batches: their rows x heads of a group make the other group
                     * sizes of the kernel (a group of 5 to 8 reading the cache directly) */
                    static const int sub[] = {2, 3, 5};
                    for (size_t si = 0; si < sizeof sub / sizeof sub[0]; si++) {
                        tf_attn_args as = a;
                        as.n_q = sub[si];
                        float *o = malloc(sizeof(float) * (size_t)sub[si] * qd);
                        assert_non_null(o);
                        as.out = o;
                        tf_cpu_attn_kernel(pools[1 - pi], kern, &as, scratch);
                        if (memcmp(o, out_b, sizeof(float) * (size_t)sub[si] * qd) != 0)
                            fail_msg("a batch of %d rows differs from the batch of %d: hd %d heads %d/%d %s kernel %s",
                                     sub[si], n_q, hd, n_head, n_head_kv, tname, tf_attn_kernel_name(kern));
                        free(o);
                    }
                }
            }
            tf_free(scratch);
            free(k);
            free(v);
            free(q);
            free(out_b);
            free(out_1);
            free(golden);
            tf_kv_free(&kv);
        }
    tf_pool_free(pools[0]);
    tf_pool_free(pools[1]);
}

/* Prefill batches (more than 16 rows) go in items of 16 to 64 positions,
 * chosen by the batch size and the thread count; a row's result must not
 * depend on them: causal rows computed as one batch of 150, as batches of
 * 75, 40 and 35 rows, on 1 and 2 threads, give the same bits. */
static void test_prefill_item_invariance(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 3);
    tf_err err = {0};
    tf_pool *pools[2];
    assert_int_equal(tf_pool_create(&pools[0], 1, &err), TF_OK);
    assert_int_equal(tf_pool_create(&pools[1], 2, &err), TF_OK);
    static const struct { int hd, n_head, n_head_kv; } shapes[] = {{64, 8, 8}, {64, 9, 3}, {128, 4, 1}, {8, 8, 4}};
    static const tf_dtype types[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_Q8_0, TF_DTYPE_Q4_0};
    static const int cuts[][3] = {{150, 0, 0}, {75, 75, 0}, {40, 75, 35}};
    const int n_q = 150, n_slots = 700;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (int t = 0; t < 4; t++) {
            const int hd = shapes[sh].hd, n_head = shapes[sh].n_head, n_head_kv = shapes[sh].n_head_kv;
            if (t >= 2 && hd % 32 != 0) continue;
            const int qd = n_head * hd;
            tf_kv_cache kv;
            assert_int_equal(tf_kv_init(&kv, 1, n_head_kv, hd, n_slots, types[t], &err), TF_OK);
            size_t nkv = (size_t)n_slots * n_head_kv * hd;
            float *k = malloc(sizeof(float) * nkv), *v = malloc(sizeof(float) * nkv);
            float *q = malloc(sizeof(float) * n_q * qd), *out = malloc(sizeof(float) * n_q * qd),
                  *golden = malloc(sizeof(float) * n_q * qd);
            int32_t *len = malloc(sizeof(int32_t) * n_q);
            assert_true(k && v && q && out && golden && len);
            tu_fill_uniform(&rng, k, nkv, -3, 3);
            tu_fill_uniform(&rng, v, nkv, -1, 1);
            tf_kv_store(&kv, 0, 0, n_slots, k, v, n_head_kv * hd);
            kv.n_used = n_slots;
            tu_fill_uniform(&rng, q, (size_t)n_q * qd, -2, 2);
            for (int i = 0; i < n_q; i++) len[i] = n_slots - n_q + i + 1;
            void *scratch = tf_alloc(tf_attn_scratch_size(2, n_q, n_head, hd, n_slots));
            for (tf_attn_kernel kern = 0; kern < TF_ATTN_KERNEL_COUNT; kern++) {
                if (!tf_attn_kernel_supported(kern)) continue;
                for (int c = 0; c < 3; c++)
                    for (int pi = 0; pi < 2; pi++) {
                        for (int b = 0, r0 = 0; b < 3 && cuts[c][b] > 0; r0 += cuts[c][b], b++) {
                            tf_attn_args a = {.q = q + (size_t)r0 * qd, .ldq = qd, .kv = tf_kv_layer_view(&kv, 0),
                                              .n_q = cuts[c][b], .kv_len = len + r0, .n_head = n_head,
                                              .scale = 0.35f, .out = out + (size_t)r0 * qd, .ldo = qd};
                            tf_cpu_attn_kernel(pools[pi], kern, &a, scratch);
                        }
                        for (size_t i = 0; i < (size_t)n_q * qd; i++) assert_true(isfinite(out[i]));
                        if (c == 0 && pi == 0) memcpy(golden, out, sizeof(float) * n_q * qd);
                        else if (memcmp(golden, out, sizeof(float) * n_q * qd) != 0)
                            fail_msg("prefill rows differ with batches %d/%d/%d on %d threads: hd %d heads %d/%d %s "
                                     "kernel %s", cuts[c][0], cuts[c][1], cuts[c][2], pi + 1, hd, n_head, n_head_kv,
                                     tf_dtype_name(types[t]), tf_attn_kernel_name(kern));
                    }
            }
            tf_free(scratch);
            free(k);
            free(v);
            free(q);
            free(out);
            free(golden);
            free(len);
            tf_kv_free(&kv);
        }
    tf_pool_free(pools[0]);
    tf_pool_free(pools[1]);
}

/* A random bf16 value with exponent in [emin, emax] (unbiased) and random sign. */
static uint32_t rand_bf16(tf_rng *rng, int emin, int emax) {
    uint32_t r = (uint32_t)tf_rng_next(rng);
    uint32_t e = (uint32_t)(emin + (int)(r % (uint32_t)(emax - emin + 1)) + 127);
    return ((r >> 8) & 0x8000u) | (e << 7) | ((r >> 16) & 0x7fu);
}

static float f32_of_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The bf16 primitives of every variant give the same bits as the generic
 * emulation; on a CPU with AVX512_BF16 that includes VDPBF16PS and
 * VCVTNE2PS2BF16 themselves. Fresh random data in the operand range the kernel
 * guarantees (every bf16 operand zero or of magnitude in [2^-60, 2^64)): plain
 * mixes, wide exponent ranges, heavy cancellation (acc close to -(a.b)), and
 * round-to-nearest-even ties, infinities and NaNs for the rounding. */
static void test_bf16_primitives_exact(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 3);
    long n_dot = 0, n_pack = 0;
    for (int it = 0; it < 20000; it++) {
        uint32_t a[16], b[16];
        float acc[16];
        const int mode = it % 5;
        for (int i = 0; i < 16; i++) {
            int lo = mode == 0 ? -4 : mode == 1 ? -60 : mode == 2 ? -20 : -8, hi = mode == 1 ? 60 : -lo;
            uint32_t a0 = rand_bf16(&rng, lo, hi), a1 = rand_bf16(&rng, lo, hi);
            uint32_t b0 = rand_bf16(&rng, lo, hi), b1 = rand_bf16(&rng, lo, hi);
            if (mode == 4 && i % 4 == 0) a0 = 0; /* zeros among the operands */
            a[i] = a0 | a1 << 16;
            b[i] = b0 | b1 << 16;
            float p0 = f32_of_bits(a0 << 16) * f32_of_bits(b0 << 16), p1 = f32_of_bits(a1 << 16) * f32_of_bits(b1 << 16);
            float u = (float)(tf_rng_next(&rng) % 2001) / 1000.0f - 1.0f;
            if (mode == 3) acc[i] = -(p0 + p1) * (1.0f + u * 1e-6f); /* cancellation */
            else if (mode == 2) acc[i] = -p1 + u * p0;
            else acc[i] = u * (float)(1 << (tf_rng_next(&rng) % 16)) * (mode == 1 ? 1e10f : 1.0f);
        }
        float want[16];
        memcpy(want, acc, sizeof want);
        tf_attn_bf16_dot(TF_ATTN_GENERIC, want, a, b);
        for (tf_attn_kernel kern = 1; kern < TF_ATTN_KERNEL_COUNT; kern++) {
            if (!tf_attn_kernel_supported(kern)) continue;
            float got[16];
            memcpy(got, acc, sizeof got);
            tf_attn_bf16_dot(kern, got, a, b);
            if (memcmp(got, want, sizeof got) != 0)
                for (int i = 0; i < 16; i++)
                    if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
                        fail_msg("bf16 dot, kernel %s: acc %a a %08x b %08x: %a, emulation %a", tf_attn_kernel_name(kern),
                                 (double)acc[i], a[i], b[i], (double)got[i], (double)want[i]);
            n_dot += 16;
        }
        /* rounding: random f32 in the kernel's range, exact ties, specials */
        float lo[16], hi[16];
        for (int i = 0; i < 16; i++) {
            uint32_t r = (uint32_t)tf_rng_next(&rng), e = 67 + r % 120; /* 2^-60 .. 2^59 */
            uint32_t bits_lo = (r & 0x80000000u) | e << 23 | ((uint32_t)tf_rng_next(&rng) & 0x7fffffu);
            uint32_t bits_hi = ((r << 1) & 0x80000000u) | e << 23 | ((uint32_t)tf_rng_next(&rng) & 0x7fffffu);
            if (i % 4 == 1) bits_lo = (bits_lo & 0xffff0000u) | 0x8000u; /* a tie */
            if (i == 6) bits_hi = 0x7f800000u;                           /* inf */
            if (i == 7) bits_hi = 0x7fa12345u;                           /* signalling NaN */
            if (i == 8) bits_lo = 0x7f7fffffu;                           /* rounds to inf */
            lo[i] = f32_of_bits(bits_lo);
            hi[i] = f32_of_bits(bits_hi);
        }
        uint32_t want_p[16];
        tf_attn_bf16_pack2(TF_ATTN_GENERIC, want_p, lo, hi);
        for (tf_attn_kernel kern = 1; kern < TF_ATTN_KERNEL_COUNT; kern++) {
            if (!tf_attn_kernel_supported(kern)) continue;
            uint32_t got_p[16];
            tf_attn_bf16_pack2(kern, got_p, lo, hi);
            for (int i = 0; i < 16; i++)
                if (got_p[i] != want_p[i])
                    fail_msg("bf16 pack, kernel %s: (%a, %a) -> %08x, emulation %08x", tf_attn_kernel_name(kern),
                             (double)lo[i], (double)hi[i], got_p[i], want_p[i]);
            n_pack += 16;
        }
    }
    print_message("bf16 primitives: %ld dot and %ld rounding lanes equal the emulation (hardware BF16: %s)\n", n_dot,
                  n_pack, tf_attn_kernel_supported(TF_ATTN_AVX512_BF16) ? "yes" : "no");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_store_read),
        cmocka_unit_test(test_kv_quantized),
        cmocka_unit_test(test_attn_vs_reference),
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_prefill_item_invariance),
        cmocka_unit_test(test_bf16_primitives_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
