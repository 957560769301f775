/* test_keyed.c — keyed draws (src/sampling/keyed.h): the draw against its
 * definition on fresh random distributions (long tails, ties, zeros, NaN),
 * the uniforms' range and spread, each draw distributed as its distribution,
 * draws at different positions and seeds independent, keyed verification of
 * whole speculative rounds over a Markov chain emitting exactly the
 * autoregressive keyed text and distributed as the target chain, and the
 * acceptance rate of a keyed draft against its closed form.
 *
 * Statistics as in test_verify.c: Pearson chi-square with cells of expected
 * count < 5 pooled, critical values at alpha = 1e-6 (tests/common/stats.c),
 * fixed seeds (tu_seed); negative controls, a draw without the logarithm
 * (the wrong marginal) and a key without the position (correlated
 * positions), must exceed the critical value BROKEN_MARGIN times. */
#include "testutil.h"

#include "dist_testutil.h"
#include "stats.h"

#include "sampling/keyed.h"
#include "sampling/sampling.h"
#include "sampling/verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Negative control: argmin (1 - u) / p, the race without its logarithm
 * (uniform, not exponential, times): not distributed as p. */
static int32_t draw_no_log(const tf_dist *d, uint64_t key) {
    double best = INFINITY;
    int32_t out = d->id[0];
    for (int32_t i = 0; i < d->n; i++) {
        if (!(d->p[i] > 0)) continue;
        const double r = (1.0 - tf_keyed_uniform(key, d->id[i])) / (double)d->p[i];
        if (r < best) best = r, out = d->id[i];
    }
    return out;
}

/* ---- the draw against its definition ----------------------------------------------- */

static void test_draw_reference(void **state) {
    (void)state;
    enum { NMAX = 50000 };
    int32_t *ids = malloc(sizeof(int32_t) * NMAX);
    float *p = malloc(sizeof(float) * NMAX);
    assert_non_null(ids);
    assert_non_null(p);
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 7);
    long long draws = 0, from_tail = 0;
    for (int c = 0; c < 400; c++) {
        const int n = c % 4 == 0 ? 1 + (int)(tf_rng_next(&rng) % 8) : c % 4 == 1 ? 40 : c % 4 == 2 ? 2000 : NMAX;
        /* ids and probabilities in no order, from a steep softmax (a long
         * tail), some exactly tied, some zero */
        double sum = 0;
        for (int i = 0; i < n; i++) {
            ids[i] = (int32_t)(tf_rng_next(&rng) % 1000000);
            double z = 12.0 * tf_rng_uniform(&rng);
            p[i] = (float)exp(-z);
            if (i > 0 && tf_rng_uniform(&rng) < 0.05) p[i] = p[i - 1];
            if (tf_rng_uniform(&rng) < 0.02) p[i] = 0.0f;
            sum += p[i];
        }
        for (int i = 0; i < n; i++) p[i] = (float)(p[i] / (sum > 0 ? sum : 1));
        tf_dist d = {.n = n, .id = ids, .p = p};
        for (int k = 0; k < 25; k++) {
            const uint64_t key = tf_keyed_key(tu_seed() + (uint64_t)c, k);
            const int32_t a = tf_keyed_draw(&d, key), b = tf_keyed_draw_ref(&d, key);
            if (a != b) fail_msg("case %d (n %d) key %d: draw %d, reference %d", c, n, k, a, b);
            draws++;
            int pos = 0;
            while (ids[pos] != a) pos++;
            from_tail += pos >= 8;
        }
    }
    print_message("%lld draws equal to the reference, %lld of them past the 8 most likely\n", draws, from_tail);
    assert_true(from_tail > 0);
    /* no candidate with mass (zeros, NaN): the first candidate */
    ids[0] = 5, ids[1] = 9, ids[2] = 11;
    p[0] = 0.0f, p[1] = NAN, p[2] = -1.0f;
    tf_dist z = {.n = 3, .id = ids, .p = p};
    assert_int_equal(tf_keyed_draw(&z, 42), 5);
    assert_int_equal(tf_keyed_draw_ref(&z, 42), 5);
    /* NaN among candidates with mass never wins */
    p[0] = 0.5f, p[1] = NAN, p[2] = 0.5f;
    for (int k = 0; k < 200; k++) assert_int_not_equal(tf_keyed_draw(&z, tf_keyed_key(3, k)), 9);
    /* one candidate: returned as is */
    tf_dist one = {.n = 1, .id = ids, .p = p};
    assert_int_equal(tf_keyed_draw(&one, 1), 5);
    free(ids);
    free(p);
}

/* ---- the uniforms ----------------------------------------------------------------- */

static void test_uniform(void **state) {
    (void)state;
    enum { N = 1000000, BINS = 100 };
    static long long obs[BINS];
    static double prob[BINS];
    double lo = 1, hi = 0;
    for (int b = 0; b < BINS; b++) prob[b] = 1.0 / BINS;
    for (int i = 0; i < N; i++) {
        /* keys of consecutive positions and seeds, consecutive ids: the least random inputs */
        const double u = tf_keyed_uniform(tf_keyed_key((uint64_t)(i % 7), i / 1000), i % 1000);
        assert_true(u > 0.0 && u < 1.0);
        lo = fmin(lo, u), hi = fmax(hi, u);
        obs[(int)(u * BINS)]++;
    }
    tu_gof g = tu_chi2_gof(obs, prob, BINS, ALPHA);
    expect_pass(&g, "uniforms, 100 bins");
    assert_true(lo < 1e-5 && hi > 1 - 1e-5);
    /* keys differ by seed and by position */
    assert_true(tf_keyed_key(1, 0) != tf_keyed_key(2, 0));
    assert_true(tf_keyed_key(1, 0) != tf_keyed_key(1, 1));
    assert_true(tf_keyed_key(0, 0) != 0);
}

/* ---- each draw distributed as its distribution ------------------------------------ */

static void test_marginal(void **state) {
    (void)state;
    enum { V = 12, N = 200000 };
    const struct { const char *name; tf_sampling_cfg cfg; } cases[] = {
        {"T=1", cfg_of(1.0f, 0, 1.0f, 0.0f)},
        {"T=0.6 top-p 0.9", cfg_of(0.6f, 0, 0.9f, 0.0f)},
        {"T=1 top-k 5", cfg_of(1.0f, 5, 1.0f, 0.0f)},
        {"T=0.8 top-k 8 min-p 0.1", cfg_of(0.8f, 8, 1.0f, 0.1f)},
    };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 11);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float lg[V];
        tu_fill_uniform(&rng, lg, V, -2.0f, 2.0f);
        tdist p;
        make_dist(&p, lg, V, &cases[c].cfg);
        double prob[V];
        dense(&p.d, V, prob);
        for (int broken = 0; broken < 2; broken++) {
            long long obs[V] = {0};
            /* one seed, positions 0..N-1 (how a text is drawn), and one position under N seeds */
            for (int i = 0; i < N; i++) {
                const uint64_t key = i % 2 ? tf_keyed_key(tu_seed() + c, i) : tf_keyed_key(tu_seed() + (uint64_t)i, 7);
                obs[broken ? draw_no_log(&p.d, key) : tf_keyed_draw(&p.d, key)]++;
            }
            char what[128];
            snprintf(what, sizeof what, "draw %s (%d cands)%s", cases[c].name, p.d.n, broken ? ", no log" : "");
            tu_gof g = tu_chi2_gof(obs, prob, V, ALPHA);
            if (broken) expect_fail(&g, what);
            else expect_pass(&g, what);
        }
    }
}

/* ---- positions and seeds independent ---------------------------------------------- */

static void test_independence(void **state) {
    (void)state;
    enum { V = 6, N = 200000 };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 13);
    float la[V], lb[V];
    tu_fill_uniform(&rng, la, V, -1.0f, 1.0f);
    tu_fill_uniform(&rng, lb, V, -1.0f, 1.0f);
    tdist a, b;
    const tf_sampling_cfg cfg = cfg_of(1.0f, 0, 1.0f, 0.0f);
    make_dist(&a, la, V, &cfg);
    make_dist(&b, lb, V, &cfg);
    double pa[V], pb[V], prob[V * V];
    dense(&a.d, V, pa);
    dense(&b.d, V, pb);
    for (int i = 0; i < V; i++)
        for (int j = 0; j < V; j++) prob[i * V + j] = pa[i] * pb[j];
    /* (draw from a at position i, draw from b at i + 1); (at one position, seeds s and s + 1);
     * broken: both at the key of position 0 */
    for (int kind = 0; kind < 3; kind++) {
        static long long obs[V * V];
        memset(obs, 0, sizeof obs);
        for (int i = 0; i < N; i++) {
            const uint64_t s = tu_seed() + (uint64_t)(i / 1000);
            uint64_t k1, k2;
            if (kind == 0) k1 = tf_keyed_key(s, 2 * (i % 1000)), k2 = tf_keyed_key(s, 2 * (i % 1000) + 1);
            else if (kind == 1) k1 = tf_keyed_key((uint64_t)i, 5), k2 = tf_keyed_key((uint64_t)i + 1, 5);
            else k1 = k2 = tf_keyed_key(s + (uint64_t)i, 0);
            obs[tf_keyed_draw(&a.d, k1) * V + tf_keyed_draw(&b.d, k2)]++;
        }
        static const char *what[] = {"joint of neighbouring positions", "joint of neighbouring seeds",
                                     "joint, one key for both positions"};
        tu_gof g = tu_chi2_gof(obs, prob, V * V, ALPHA);
        if (kind == 2) expect_fail(&g, what[kind]);
        else expect_pass(&g, what[kind]);
    }
}

/* ---- whole speculative rounds over a Markov chain ----------------------------------- */

enum { MLEN = 6 };

/* MLEN tokens after token 0 by rounds of MK keyed drafts from Q verified
 * against P (accept_all: the broken verifier), positions 1, 2, ...; *drafted
 * / *accepted count the candidates. */
static void spec_text(const chain *ch, uint64_t seed, bool accept_all, int32_t *out, long long *drafted,
                      long long *accepted) {
    tf_verifier v = {.mode = accept_all ? TF_VERIFY_BROKEN_ACCEPT_ALL : TF_VERIFY_EXACT};
    int32_t seq[1 + MLEN + MK + 1] = {0};
    int n = 1;
    while (n < 1 + MLEN) {
        int32_t draft[MK], prev = seq[n - 1];
        for (int i = 0; i < MK; i++) {
            draft[i] = tf_keyed_draw(&ch->Q[prev].d, tf_keyed_key(seed, n + i));
            prev = draft[i];
        }
        int acc = 0;
        int32_t next = -1;
        for (; acc < MK; acc++) {
            const int32_t ctx = acc ? draft[acc - 1] : seq[n - 1];
            if (!tf_keyed_verify(&v, &ch->P[ctx].d, draft[acc], tf_keyed_key(seed, n + acc), &next)) break;
        }
        if (acc == MK) next = tf_keyed_draw(&ch->P[draft[MK - 1]].d, tf_keyed_key(seed, n + MK));
        for (int i = 0; i < acc; i++) seq[n++] = draft[i];
        seq[n++] = next;
        *drafted += MK;
        *accepted += acc;
    }
    memcpy(out, seq + 1, sizeof(int32_t) * MLEN);
}

static void test_chain(void **state) {
    (void)state;
    enum { N = 100000 };
    const struct { const char *name; tf_sampling_cfg cfg; } cases[] = {
        {"T=1", cfg_of(1.0f, 0, 1.0f, 0.0f)},
        {"T=0.6 top-p 0.9", cfg_of(0.6f, 0, 0.9f, 0.0f)},
        {"T=1 top-k 4", cfg_of(1.0f, 4, 1.0f, 0.0f)},
    };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 17);
    static chain ch;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        build_chain(&ch, &cases[c].cfg, &rng);
        double pr[MV][MV];
        for (int a = 0; a < MV; a++) dense(&ch.P[a].d, MV, pr[a]);
        static double prob2[MV * MV];
        for (int a = 0; a < MV; a++)
            for (int b = 0; b < MV; b++) prob2[a * MV + b] = pr[0][a] * pr[a][b];
        for (int broken = 0; broken < 2; broken++) {
            static long long obs2[MV * MV];
            memset(obs2, 0, sizeof obs2);
            long long drafted = 0, accepted = 0, differ = 0;
            for (int t = 0; t < N; t++) {
                const uint64_t seed = tu_seed() + 1000003ull * (uint64_t)t + c;
                int32_t spec[MLEN], ar[MLEN];
                spec_text(&ch, seed, broken, spec, &drafted, &accepted);
                /* the autoregressive keyed text of the target chain */
                int32_t prev = 0;
                for (int i = 0; i < MLEN; i++) prev = ar[i] = tf_keyed_draw(&ch.P[prev].d, tf_keyed_key(seed, 1 + i));
                differ += memcmp(spec, ar, sizeof spec) != 0;
                obs2[spec[0] * MV + spec[1]]++;
            }
            char what[128];
            snprintf(what, sizeof what, "chain %s, tokens 1-2 joint%s (acc %.2f)", cases[c].name,
                     broken ? ", accept-all" : "", (double)accepted / (double)drafted);
            tu_gof g = tu_chi2_gof(obs2, prob2, MV * MV, ALPHA);
            if (broken) {
                expect_fail(&g, what);
                assert_true(differ > N / 10);
            } else {
                expect_pass(&g, what);
                if (differ) fail_msg("%lld of %d speculative texts differ from the autoregressive one", differ, N);
            }
        }
    }
}

/* ---- the acceptance of a keyed draft --------------------------------------------- */

/* P(argmin E/p = argmin E/q) = sum over t in both supports of
 * 1 / sum_s max(p_s / p_t, q_s / q_t): t wins both races iff every other
 * E_s exceeds E_t max(p_s / p_t, q_s / q_t), and E_t is exponential. */
static double agree_prob(const double *p, const double *q, int n) {
    double a = 0;
    for (int t = 0; t < n; t++) {
        if (!(p[t] > 0 && q[t] > 0)) continue;
        double s = 0;
        for (int u = 0; u < n; u++) s += fmax(p[u] / p[t], q[u] / q[t]);
        a += 1.0 / s;
    }
    return a;
}

static void test_acceptance(void **state) {
    (void)state;
    enum { V = 10, N = 400000 };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 19);
    for (int c = 0; c < 4; c++) {
        float lp[V], lq[V], noise[V];
        tu_fill_uniform(&rng, lp, V, -2.0f, 2.0f);
        tu_fill_uniform(&rng, noise, V, -1.0f, 1.0f);
        for (int i = 0; i < V; i++) lq[i] = (c == 3 ? 0.95f : 0.6f) * lp[i] + (c == 3 ? 0.1f : 1.0f) * noise[i];
        const tf_sampling_cfg cfg = cfg_of(c == 2 ? 0.6f : 1.0f, c == 1 ? 5 : 0, 1.0f, 0.0f);
        tdist p, q;
        make_dist(&p, lp, V, &cfg);
        make_dist(&q, lq, V, &cfg);
        double dp[V], dq[V], tv = 0;
        dense(&p.d, V, dp);
        dense(&q.d, V, dq);
        for (int i = 0; i < V; i++) tv += 0.5 * fabs(dp[i] - dq[i]);
        const double want = agree_prob(dp, dq, V);
        tf_verifier v = {.mode = TF_VERIFY_EXACT};
        long long acc = 0;
        for (int i = 0; i < N; i++) {
            const uint64_t key = tf_keyed_key(tu_seed() + 23, (int64_t)c * N + i);
            int32_t out;
            acc += tf_keyed_verify(&v, &p.d, tf_keyed_draw(&q.d, key), key, &out);
        }
        const double rate = (double)acc / N, sd = sqrt(want * (1 - want) / N);
        print_message("acceptance case %d: %.4f, closed form %.4f (1 - TV %.4f, bound (1 - TV)/(1 + TV) %.4f)\n", c,
                      rate, want, 1 - tv, (1 - tv) / (1 + tv));
        assert_true(fabs(rate - want) <= 6 * sd + 1e-9);
        assert_true(want <= 1 - tv + 1e-9);
        assert_true(want >= (1 - tv) / (1 + tv) - 1e-9);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_draw_reference),
        cmocka_unit_test(test_uniform),
        cmocka_unit_test(test_marginal),
        cmocka_unit_test(test_independence),
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_acceptance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
