/*
 * test_streaming.c — the StreamingLLM cache against a reference that keeps
 * every token. Calls of random sizes store their keys as the forward pass
 * does (rotated at their sequence positions, into the slots the cache gives),
 * with random rollbacks and skips; after each call, attention of every row of
 * the call over the view (its gap, its re-rotated sinks, its copied-back
 * window) must equal StreamingLLM's, computed in double precision: the sinks
 * and the window's tokens at their logical positions, the query after them.
 * Rollbacks within the slack always succeed; refused ones change nothing.
 */
#include "testutil.h"

#include "backend/cpu/attn.h"
#include "backend/cpu/ops.h"
#include "kv/streaming.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { L = 2, HKV = 2, NH = 4, HD = 32, KVD = HKV * HD, QD = NH * HD, NB = 8, MAXT = 900 };

static float ref_k[L][MAXT][KVD], ref_v[L][MAXT][KVD], ref_q[MAXT][QD];

typedef struct rope_cfg {
    int n_rot;
    bool neox;
    float freq[HD / 2];
} rope_cfg;

/* x (one head) rotated at position pos, in double precision. */
static void rot_ref(const rope_cfg *r, const float *x, double pos, double *out) {
    const int half = r->n_rot / 2;
    for (int d = 0; d < HD; d++) out[d] = x[d];
    for (int p = 0; p < half; p++) {
        int a = r->neox ? p : 2 * p, b = r->neox ? p + half : 2 * p + 1;
        double th = pos * r->freq[p], cs = cos(th), sn = sin(th);
        out[a] = x[a] * cs - x[b] * sn;
        out[b] = x[a] * sn + x[b] * cs;
    }
}

/* rows of x [n][ld] rotated in place at positions pos[0..n) with the library's RoPE (as the forward does) */
static void rot_lib(const rope_cfg *r, float *x, int n, int ld, int n_head, const int32_t *pos) {
    float cs[NB * HD / 2], sn[NB * HD / 2];
    tf_op_rope_table(cs, sn, pos, n, r->n_rot, r->freq, 1.0f);
    tf_op_rope(x, n, ld, n_head, HD, r->n_rot, r->neox, cs, sn);
}

/* StreamingLLM attention of the query of token qt for layer il: the sinks
 * below min(S, P), the window [lo, qt], at logical positions 0, 1, ... */
static void expect_attn(const rope_cfg *r, int il, int S, int64_t P, int64_t lo, int64_t qt, double *out) {
    int64_t vis[MAXT];
    int nv = 0;
    for (int64_t t = 0; t < (P < S ? P : S); t++) vis[nv++] = t;
    for (int64_t t = lo; t <= qt; t++) vis[nv++] = t;
    const int g = NH / HKV;
    for (int hq = 0; hq < NH; hq++) {
        double q[HD], k[HD], s[MAXT], mx = -INFINITY, l = 0;
        rot_ref(r, ref_q[qt] + hq * HD, nv - 1, q);
        for (int j = 0; j < nv; j++) {
            rot_ref(r, ref_k[il][vis[j]] + (hq / g) * HD, j, k);
            double dot = 0;
            for (int d = 0; d < HD; d++) dot += q[d] * k[d];
            s[j] = dot / sqrt((double)HD);
            if (s[j] > mx) mx = s[j];
        }
        double acc[HD] = {0};
        for (int j = 0; j < nv; j++) {
            double w = exp(s[j] - mx);
            l += w;
            for (int d = 0; d < HD; d++) acc[d] += w * ref_v[il][vis[j]][(hq / g) * HD + d];
        }
        for (int d = 0; d < HD; d++) out[hq * HD + d] = acc[d] / l;
    }
}

typedef struct stats {
    double num, den;
    int calls, refused, copies;
} stats;

/* One call of n tokens: store them as the forward pass would, then check every row's attention. */
static void call(tf_scache *c, const rope_cfg *r, tf_rng *rng, int n, int64_t floor, stats *st) {
    tf_err err = {0};
    const int S = c->sinks;
    const int64_t P = c->n_seen;
    /* the first window token StreamingLLM shows this call */
    int64_t lo = P - c->window > S ? P - c->window : S;
    if (lo < floor) lo = floor;
    if (lo > P) lo = P;
    assert_int_equal(tf_scache_window_lo(c), lo);
    const int64_t base_before = c->base_tok;
    const bool keys = tf_scache_wants_keys(c);
    int32_t slot0, pos0;
    assert_int_equal(tf_scache_view(c, n, &slot0, &pos0, &err), TF_OK);
    assert_int_equal(pos0, P);
    if (c->base_tok != base_before && lo < P) st->copies++; /* not a restart: the window was copied back */
    static float k[L][NB][KVD], v[L][NB][KVD], kr[NB][KVD], q[NB][QD];
    int32_t pos[NB];
    for (int i = 0; i < n; i++) pos[i] = pos0 + i;
    for (int il = 0; il < L; il++) {
        tu_fill_uniform(rng, &k[il][0][0], (size_t)n * KVD, -1, 1);
        tu_fill_uniform(rng, &v[il][0][0], (size_t)n * KVD, -1, 1);
        for (int i = 0; i < n; i++) {
            memcpy(ref_k[il][P + i], k[il][i], sizeof k[il][i]);
            memcpy(ref_v[il][P + i], v[il][i], sizeof v[il][i]);
        }
        memcpy(kr, k[il], sizeof kr);
        rot_lib(r, &kr[0][0], n, KVD, HKV, pos);
        tf_kv_store(&c->view, il, slot0, n, &kr[0][0], &v[il][0][0], KVD);
    }
    tu_fill_uniform(rng, &q[0][0], (size_t)n * QD, -1, 1);
    for (int i = 0; i < n; i++) memcpy(ref_q[P + i], q[i], sizeof q[i]);
    rot_lib(r, &q[0][0], n, QD, NH, pos);
    for (int i = 0; i < n; i++) {
        assert_int_equal(tf_scache_slot(c, P + i), slot0 + i);
        int32_t len = slot0 + i + 1;
        float got[QD];
        tf_attn_args a = {.q = q[i], .ldq = QD, .n_q = 1, .kv_len = &len, .gap_lo = c->view.gap_lo,
                          .gap_hi = c->view.gap_hi, .n_head = NH, .scale = 1.0f / sqrtf((float)HD), .out = got,
                          .ldo = QD};
        for (int il = 0; il < L; il++) {
            a.kv = tf_kv_layer_view(&c->view, il);
            tf_ref_attn(&a);
            double want[QD];
            expect_attn(r, il, S, P, lo, P + i, want);
            for (int d = 0; d < QD; d++) {
                assert_true(isfinite(got[d]));
                st->num += (got[d] - want[d]) * (got[d] - want[d]);
                st->den += want[d] * want[d];
            }
        }
    }
    assert_int_equal(tf_scache_append(c, keys ? &k[0][0][0] : NULL, keys ? &v[0][0][0] : NULL, n, NB, &err), TF_OK);
    st->calls++;
}

static void run_case(int S, int W, int slack, int n_rot, bool neox, int skip_at) {
    rope_cfg r = {.n_rot = n_rot, .neox = neox};
    for (int i = 0; i < n_rot / 2; i++) r.freq[i] = powf(10000.0f, -2.0f * i / n_rot);
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + (uint64_t)(S * 1000 + W));
    tf_scache c;
    tf_err err = {0};
    assert_int_equal(tf_scache_init(&c, L, HKV, HD, n_rot, neox, r.freq, 1.0f, S, W, slack, NB, 0, TF_DTYPE_F32, &err),
                     TF_OK);
    stats st = {0};
    int64_t floor = 0;
    while (c.n_seen < MAXT - 3 * NB) {
        if (skip_at && c.n_seen >= skip_at && c.n_seen < skip_at + NB) { /* a prompt's middle, never stored */
            floor = c.n_seen + 3 * NB;
            tf_scache_skip(&c, floor);
        }
        int n = 1 + (int)(tf_rng_next(&rng) % NB);
        call(&c, &r, &rng, n, floor, &st);
        if (tf_rng_next(&rng) % 3 == 0) { /* roll back, sometimes deeper than the slack */
            int back = (int)(tf_rng_next(&rng) % (2 * slack + 2));
            if (back > c.n_seen) back = (int)c.n_seen;
            int64_t before = c.n_seen;
            tf_status s = tf_scache_truncate(&c, c.n_seen - back, &err);
            if (s != TF_OK) {
                assert_int_equal(s, TF_ERR_RANGE);
                assert_true(back > slack); /* within the slack always succeeds */
                assert_int_equal(c.n_seen, before);
                st.refused++;
            }
        }
    }
    double nmse = st.num / st.den;
    print_message("sinks %d, window %d, slack %d, n_rot %d%s%s: %d calls, %d window copies, %d rollbacks refused, "
                  "attention NMSE %g\n",
                  S, W, slack, n_rot, neox ? " (rotate-half)" : "", skip_at ? ", a skip" : "", st.calls, st.copies,
                  st.refused, nmse);
    assert_true(st.copies > 0); /* the copy back to the front was exercised */
    assert_true(nmse < 1e-10);
    tf_scache_free(&c);
}

static void test_attention_vs_streamingllm(void **state) {
    (void)state;
    run_case(4, 16, 6, HD, false, 0);
    run_case(0, 10, 3, HD, false, 0);
    run_case(16, 24, 8, HD, true, 0);
    run_case(2, 1, 4, 16, false, 0);  /* partial rotation, a one-token window */
    run_case(5, 40, 9, 16, true, 100); /* a skipped span */
    run_case(3, 200, 8, HD, false, 0); /* the window longer than a copy's distance */
}

/* A rollback refused leaves the cache usable, and a fresh sequence after
 * tf_scache_reset sees nothing of the old one. */
static void test_reset(void **state) {
    (void)state;
    rope_cfg r = {.n_rot = HD};
    for (int i = 0; i < HD / 2; i++) r.freq[i] = powf(10000.0f, -2.0f * i / HD);
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed());
    tf_scache c;
    tf_err err = {0};
    assert_int_equal(tf_scache_init(&c, L, HKV, HD, HD, false, r.freq, 1.0f, 4, 12, 2, NB, 0, TF_DTYPE_F32, &err), TF_OK);
    stats st = {0};
    while (c.n_seen < 300) call(&c, &r, &rng, NB, 0, &st);
    int64_t before = c.n_seen;
    assert_int_equal(tf_scache_truncate(&c, before - 200, &err), TF_ERR_RANGE);
    assert_non_null(strstr(err.msg, "window"));
    assert_int_equal(c.n_seen, before);
    call(&c, &r, &rng, 3, 0, &st); /* still usable */
    assert_int_equal(tf_scache_truncate(&c, 0, &err), TF_OK); /* no window needed */
    tf_scache_reset(&c);
    assert_int_equal(c.n_seen, 0);
    while (c.n_seen < 60) call(&c, &r, &rng, 1 + (int)(tf_rng_next(&rng) % NB), 0, &st);
    assert_true(st.num / st.den < 1e-10);
    tf_scache_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_vs_streamingllm),
        cmocka_unit_test(test_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
