/* test_attn.c — CPU attention (every ISA) against the double-precision reference. */
#include "testutil.h"

#include "backend/cpu/attn.h"
#include "core/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CANARY 12345.678f

typedef struct shape { int n_head, n_head_kv, hd, n_slots, n_q; int causal; } shape;

static void run_case(const shape *sh, tf_dtype type, tf_isa isa, tf_pool *pool, tf_rng *rng) {
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
    tf_attn_args a = {.q = q, .ldq = q_dim, .kv = &kv, .layer = 1, .n_q = sh->n_q, .kv_len = len,
                      .n_head = sh->n_head, .scale = 1.0f / sqrtf((float)sh->hd), .out = out, .ldo = ldo};
    void *scratch = tf_alloc(tf_attn_scratch_size(tf_pool_size(pool), sh->n_q, sh->n_head, sh->hd, sh->n_slots));
    tf_cpu_attn(pool, isa, &a, scratch);
    a.out = ref;
    tf_ref_attn(&a);
    double num = 0, den = 0;
    for (int i = 0; i < sh->n_q; i++) {
        for (int j = 0; j < q_dim; j++) {
            float x = out[(size_t)i * ldo + j], y = ref[(size_t)i * ldo + j];
            assert_true(isfinite(x));
            num += ((double)x - y) * ((double)x - y);
            den += (double)y * y;
        }
        for (int j = q_dim; j < ldo; j++) assert_true(out[(size_t)i * ldo + j] == CANARY);
    }
    for (int j = 0; j < 16; j++) assert_true(out[(size_t)sh->n_q * ldo + j] == CANARY);
    double nmse = num / den;
    if (nmse > 1e-9) {
        print_error("nmse %g: heads %d/%d hd %d slots %d n_q %d type %s isa %d threads %d\n", nmse, sh->n_head,
                    sh->n_head_kv, sh->hd, sh->n_slots, sh->n_q, tf_dtype_name(type), isa, tf_pool_size(pool));
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
        {8, 8, 8, 1, 1, 1},      {4, 2, 8, 64, 64, 1},
    };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    tf_pool *pools[2];
    tf_err err = {0};
    assert_int_equal(tf_pool_create(&pools[0], 1, &err), TF_OK);
    assert_int_equal(tf_pool_create(&pools[1], 2, &err), TF_OK);
    for (tf_isa isa = TF_ISA_SCALAR; isa <= tf_cpu_best_isa(); isa++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int t = 0; t < 2; t++) {
                run_case(&shapes[s], TF_DTYPE_F32, isa, pools[t], &rng);
                run_case(&shapes[s], TF_DTYPE_F16, isa, pools[t], &rng);
            }
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

/* Rows of a batch of up to 16 equal, bit for bit, the same rows computed one
 * at a time, on 1 or 2 threads (what greedy speculative decoding needs). */
/* Rows of a batch of up to 16 give bitwise the results they give alone, on any
 * thread count, for every ISA: for MHA with head_dim 64 and 128 a lone f16 row
 * takes the convert-on-load path and a batch the scratch path, and the two must
 * agree to the bit. */
static void test_batch_invariance(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 2);
    tf_err err = {0};
    tf_pool *pools[2];
    assert_int_equal(tf_pool_create(&pools[0], 1, &err), TF_OK);
    assert_int_equal(tf_pool_create(&pools[1], 2, &err), TF_OK);
    static const struct { int hd, n_head, n_head_kv; } shapes[] = {{8, 8, 4}, {64, 4, 4}, {128, 2, 2}, {128, 4, 2}, {128, 8, 2}, {32, 2, 1}};
    const int n_slots = 3000, n_q = 11;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (tf_isa isa = TF_ISA_SCALAR; isa <= tf_cpu_best_isa(); isa++)
            for (int t = 0; t < 2; t++) {
                const int hd = shapes[sh].hd, n_head = shapes[sh].n_head, n_head_kv = shapes[sh].n_head_kv;
                const int qd = n_head * hd;
                tf_kv_cache kv;
                assert_int_equal(tf_kv_init(&kv, 1, n_head_kv, hd, n_slots, t ? TF_DTYPE_F16 : TF_DTYPE_F32, &err),
                                 TF_OK);
                size_t nkv = (size_t)n_slots * n_head_kv * hd;
                float *k = malloc(sizeof(float) * nkv), *v = malloc(sizeof(float) * nkv);
                float *q = malloc(sizeof(float) * n_q * qd), *out_b = malloc(sizeof(float) * n_q * qd),
                      *out_1 = malloc(sizeof(float) * qd);
                assert_non_null(k);
                assert_non_null(v);
                assert_non_null(q);
                assert_non_null(out_b);
                assert_non_null(out_1);
                tu_fill_uniform(&rng, k, nkv, -3, 3);
                tu_fill_uniform(&rng, v, nkv, -1, 1);
                tf_kv_store(&kv, 0, 0, n_slots, k, v, n_head_kv * hd);
                kv.n_used = n_slots;
                tu_fill_uniform(&rng, q, (size_t)n_q * qd, -2, 2);
                int32_t len[11];
                for (int i = 0; i < n_q; i++) len[i] = 2043 + i; /* rows straddle the split at 2048 */
                void *scratch = tf_alloc(tf_attn_scratch_size(2, n_q, n_head, hd, n_slots));
                for (int pi = 0; pi < 2; pi++) {
                    tf_attn_args a = {.q = q, .ldq = qd, .kv = &kv, .layer = 0, .n_q = n_q, .kv_len = len,
                                      .n_head = n_head, .scale = 0.35f, .out = out_b, .ldo = qd};
                    tf_cpu_attn(pools[pi], isa, &a, scratch);
                    for (size_t i = 0; i < (size_t)n_q * qd; i++) assert_true(isfinite(out_b[i]));
                    for (int i = 0; i < n_q; i++) {
                        tf_attn_args a1 = a;
                        a1.q = q + (size_t)i * qd;
                        a1.n_q = 1;
                        a1.kv_len = &len[i];
                        a1.out = out_1;
                        tf_cpu_attn(pools[1 - pi], isa, &a1, scratch);
                        if (memcmp(out_1, out_b + (size_t)i * qd, sizeof(float) * qd) != 0)
                            fail_msg("row %d differs alone and in the batch: hd %d heads %d/%d %s isa %d", i, hd,
                                     n_head, n_head_kv, t ? "f16" : "f32", isa);
                    }
                }
                tf_free(scratch);
                free(k);
                free(v);
                free(q);
                free(out_b);
                free(out_1);
                tf_kv_free(&kv);
            }
    tf_pool_free(pools[0]);
    tf_pool_free(pools[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_store_read),
        cmocka_unit_test(test_attn_vs_reference),
        cmocka_unit_test(test_batch_invariance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
