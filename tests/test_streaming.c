/*
 * test_streaming.c — the StreamingLLM cache against a reference that keeps
 * every token: after any sequence of appends and rollbacks the attention view
 * holds exactly the sinks and the last W tokens, in order, each key rotated at
 * its logical position; rollbacks deeper than the slack are refused.
 */
#include "testutil.h"

#include "backend/cpu/ops.h"
#include "kv/streaming.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { L = 2, HKV = 2, HD = 8, KVD = HKV * HD, ROT = 8, MAXT = 400 };

static float ref_k[L][MAXT][KVD], ref_v[L][MAXT][KVD];

static void check_view(tf_scache *c, int S, int W) {
    int32_t pos0, nv;
    tf_err err = {0};
    assert_int_equal(tf_scache_view(c, &nv, &pos0, &err), TF_OK);
    int64_t P = c->n_seen;
    int64_t s_end = P < S ? P : S, w_lo = P - W > S ? P - W : S;
    if (w_lo > P) w_lo = P;
    assert_int_equal(nv, s_end + (P - w_lo));
    assert_int_equal(pos0, nv);
    float freq[ROT / 2], cs[ROT / 2], sn[ROT / 2];
    for (int i = 0; i < ROT / 2; i++) freq[i] = powf(10000.0f, -2.0f * i / ROT);
    /* the ring slots a device builds its view from hold the same tokens, unrotated */
    int32_t *map = malloc(sizeof(int32_t) * (size_t)(S + W + 1));
    assert_int_equal(tf_scache_view_map(c, map), nv);
    for (int32_t i = 0; i < nv; i++) {
        int64_t t = i < s_end ? i : w_lo + (i - s_end);
        for (int il = 0; il < L; il++) {
            const float *ring = c->k + ((size_t)il * (size_t)(c->sinks + c->ring) + (size_t)map[i]) * KVD;
            assert_memory_equal(ring, ref_k[il][t], sizeof(float) * KVD);
        }
    }
    free(map);
    for (int32_t i = 0; i < nv; i++) {
        int64_t t = i < s_end ? i : w_lo + (i - s_end);
        assert_int_equal(tf_scache_view_token(c, i), t);
        int32_t lp = i;
        tf_op_rope_table(cs, sn, &lp, 1, ROT, freq, 1.0f);
        for (int il = 0; il < L; il++) {
            float want[KVD];
            memcpy(want, ref_k[il][t], sizeof want);
            tf_op_rope(want, 1, KVD, HKV, HD, ROT, false, cs, sn);
            for (int h = 0; h < HKV; h++) {
                float k[HD], v[HD];
                tf_kv_read(&c->view, il, h, i, k, v);
                for (int d = 0; d < HD; d++) {
                    assert_true(fabsf(k[d] - want[h * HD + d]) <= 1e-5f);
                    assert_true(v[d] == ref_v[il][t][h * HD + d]);
                }
            }
        }
    }
}

static void append(tf_scache *c, tf_rng *rng, int n) {
    static float k[L][8][KVD], v[L][8][KVD];
    for (int il = 0; il < L; il++)
        for (int i = 0; i < n; i++) {
            tu_fill_uniform(rng, k[il][i], KVD, -1, 1);
            tu_fill_uniform(rng, v[il][i], KVD, -1, 1);
            memcpy(ref_k[il][c->n_seen + i], k[il][i], sizeof k[il][i]);
            memcpy(ref_v[il][c->n_seen + i], v[il][i], sizeof v[il][i]);
        }
    tf_err err = {0};
    assert_int_equal(tf_scache_append(c, &k[0][0][0], &v[0][0][0], n, 8, &err), TF_OK);
}

static void test_append_rollback_vs_reference(void **state) {
    (void)state;
    static const int cfg[][3] = {{4, 16, 6}, {0, 10, 3}, {16, 24, 8}, {2, 1, 4}};
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    float freq[ROT / 2];
    for (int i = 0; i < ROT / 2; i++) freq[i] = powf(10000.0f, -2.0f * i / ROT);
    for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
        int S = cfg[ci][0], W = cfg[ci][1], slack = cfg[ci][2];
        tf_scache c;
        tf_err err = {0};
        assert_int_equal(tf_scache_init(&c, L, HKV, HD, ROT, false, freq, 1.0f, S, W, slack, 8, TF_DTYPE_F32, &err),
                         TF_OK);
        while (c.n_seen < MAXT - 16) {
            int n = 1 + (int)(tf_rng_next(&rng) % 8);
            append(&c, &rng, n);
            check_view(&c, S, W);
            /* roll back up to the slack (sometimes), then re-append different tokens */
            int room = slack - (int)(c.n_high - c.n_seen); /* what the ring still holds */
            int back = room > 0 ? (int)(tf_rng_next(&rng) % (room + 1)) : 0;
            if (back > n) back = n;
            if (back > 0) {
                assert_int_equal(tf_scache_truncate(&c, c.n_seen - back, &err), TF_OK);
                check_view(&c, S, W);
            }
        }
        /* deeper than the slack: refused, and nothing changes */
        int64_t before = c.n_seen;
        if (c.n_seen > S + W + slack + 1) {
            assert_int_equal(tf_scache_truncate(&c, c.n_seen - slack - 1, &err), TF_ERR_RANGE);
            assert_int_equal(c.n_seen, before);
        }
        tf_scache_free(&c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_rollback_vs_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
