/* test_verify.c — the speculative-sampling verifier: greedy equivalence with
 * autoregressive argmax decoding, chi-square goodness-of-fit tests that the
 * emitted tokens follow the target distribution (single tokens and whole
 * rounds over a Markov chain), negative controls proving those tests catch a
 * broken verifier, and edge cases.
 *
 * Statistics: every goodness-of-fit test uses Pearson's chi-square with cells
 * of expected count < 5 merged, df = cells - 1, and a critical value at
 * alpha = 1e-6 computed from the exact regularized incomplete gamma function
 * (checked against closed forms below). There are 12 such tests on the
 * exact verifier, so the chance that a correct verifier fails one for a
 * given seed is below 1.2e-5 (the other statistical checks, at 6 standard
 * deviations, add less than 1e-7); seeds are fixed (tu_seed, overridable
 * with TF_TEST_SEED) so the suite is deterministic. Tokens emitted where the
 * target has probability 0 are counted separately (any such token is a
 * failure). Negative controls must exceed the critical value BROKEN_MARGIN
 * times. */
#include "testutil.h"

#include "dist_testutil.h"
#include "stats.h"

#include "sampling/sampling.h"
#include "sampling/verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* chi-square machinery: tests/common/stats.c */
typedef tu_gof gof;
#define gamma_q tu_gamma_q
#define chi2_sf tu_chi2_sf
#define chi2_crit tu_chi2_crit
#define chi2_gof(obs, prob, n) tu_chi2_gof((obs), (prob), (n), ALPHA)

/* ---- distributions ------------------------------------------------------------- */

/* A distribution written by hand: ids with weights (normalized, sorted here). */
static void set_dist(tdist *out, int n, const int32_t *ids, const double *w) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += w[i];
    out->d.n = n;
    out->d.id = out->id;
    out->d.p = out->p;
    for (int i = 0; i < n; i++) { out->id[i] = ids[i]; out->p[i] = (float)(w[i] / sum); }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && out->p[j] > out->p[j - 1]; j--) {
            float tp = out->p[j]; out->p[j] = out->p[j - 1]; out->p[j - 1] = tp;
            int32_t ti = out->id[j]; out->id[j] = out->id[j - 1]; out->id[j - 1] = ti;
        }
}

static const char *mode_name(tf_verify_mode m) {
    switch (m) {
    case TF_VERIFY_EXACT: return "exact";
    case TF_VERIFY_BROKEN_ACCEPT_ALL: return "broken:accept-all";
    case TF_VERIFY_BROKEN_RESIDUAL_FROM_P: return "broken:residual-from-p";
    }
    return "?";
}

static void assert_scratch_clear(const tf_verifier *v) {
    for (int32_t i = 0; i < v->n_vocab; i++) assert_true(v->q_dense[i] == 0.0f);
}

/* ---- the test machinery checks itself ------------------------------------------ */

/* The incomplete gamma against closed forms: df = 1 (erfc), even df (Poisson
 * sums); critical values against table values. */
static void test_chi2_machinery(void **state) {
    (void)state;
    static const double xs[] = {0.01, 0.5, 1.0, 3.0, 7.5, 20.0, 45.0, 90.0};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        double q1 = erfc(sqrt(x / 2));
        assert_true(fabs(chi2_sf(x, 1) - q1) <= 1e-12 * q1 + 1e-300);
        for (int k = 1; k <= 20; k++) { /* df = 2k: Q = e^{-x/2} sum_{j<k} (x/2)^j / j! */
            double term = exp(-x / 2), sum = 0;
            for (int j = 0; j < k; j++) { sum += term; term *= (x / 2) / (j + 1); }
            double rel = fabs(chi2_sf(x, 2 * k) - sum) / sum;
            if (rel > 1e-11) {
                print_error("chi2_sf(%g, %d) = %.17g, closed form %.17g\n", x, 2 * k, chi2_sf(x, 2 * k), sum);
                fail();
            }
        }
    }
    assert_true(fabs(chi2_crit(1, 0.05) - 3.841459) < 1e-5);
    assert_true(fabs(chi2_crit(10, 0.05) - 18.307038) < 1e-5);
    assert_true(fabs(chi2_crit(10, 0.001) - 29.588298) < 1e-5);
    assert_true(fabs(chi2_crit(2, 1e-6) - 2 * log(1e6)) < 1e-8);
    for (int df = 1; df <= 300; df += 7) {
        double c = chi2_crit(df, ALPHA);
        assert_true(fabs(chi2_sf(c, df) - ALPHA) < 1e-9 * ALPHA);
    }
    print_message("chi2 critical values at alpha 1e-6: df 1 %.3f, df 10 %.3f, df 63 %.3f\n", chi2_crit(1, ALPHA),
                  chi2_crit(10, ALPHA), chi2_crit(63, ALPHA));
}

/* Under the null (draws straight from p) the statistic follows chi2(df): its
 * mean over many repetitions must be near df. Checks the cell merging and df. */
static void test_chi2_calibration(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 11);
    float logits[16];
    tu_fill_uniform(&rng, logits, 16, -3.0f, 3.0f);
    tdist p;
    tf_sampling_cfg c = cfg_of(1.0f, 0, 1.0f, 0.0f);
    make_dist(&p, logits, 16, &c);
    double prob[16];
    dense(&p.d, 16, prob);
    const int reps = 300, n = 4000; /* small n: some cells expect < 5 and get merged */
    double mean = 0;
    int df = 0, over = 0;
    for (int r = 0; r < reps; r++) {
        long long obs[16] = {0};
        for (int i = 0; i < n; i++) obs[tf_dist_sample(&p.d, &rng)]++;
        gof g = chi2_gof(obs, prob, 16);
        mean += g.chi2 / reps;
        df = g.df;
        if (chi2_sf(g.chi2, g.df) < 0.05) over++;
    }
    double sd = sqrt(2.0 * df / reps);
    print_message("null calibration: mean chi2 %.2f (df %d, sd of mean %.2f), %d/%d below p = 0.05\n", mean, df, sd,
                  over, reps);
    assert_true(fabs(mean - df) < 6 * sd);
    assert_true(over < 40); /* Binomial(300, 0.05): mean 15, P(>= 40) < 1e-7 */
}

/* ---- greedy -------------------------------------------------------------------- */

/* One-hot target: accept iff x == argmax p, correction argmax p, and no
 * random number is used, whatever q is (one-hot, sampled, or missing x). */
static void test_greedy_token(void **state) {
    (void)state;
    enum { V = 40 };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 21);
    tf_verifier v;
    tf_err err = {0};
    assert_int_equal(tf_verifier_init(&v, V, &err), TF_OK);
    tf_sampling_cfg greedy = cfg_of(0.0f, 0, 1.0f, 0.0f), t1 = cfg_of(1.0f, 0, 1.0f, 0.0f);
    int accepted = 0, rejected = 0;
    for (int it = 0; it < 3000; it++) {
        float lp[V], lq[V];
        for (int i = 0; i < V; i++) { /* few distinct values: many ties */
            lp[i] = (float)(tf_rng_next(&rng) % 4);
            lq[i] = (it % 3 == 0) ? lp[i] : (float)(tf_rng_next(&rng) % 4);
        }
        if (it % 7 == 0) lp[V - 1] = NAN; /* NaN logits never win */
        int32_t a = tf_argmax(lp, V);
        tdist p, q;
        make_dist(&p, lp, V, &greedy);
        assert_int_equal(p.d.n, 1);
        assert_int_equal(p.id[0], a);
        int32_t x;
        if (it % 2 == 0) { /* greedy draft */
            make_dist(&q, lq, V, &greedy);
            x = q.id[0];
        } else { /* sampled draft */
            make_dist(&q, lq, V, &t1);
            x = tf_dist_sample(&q.d, &rng);
        }
        tf_rng before = rng;
        int32_t out = -1;
        bool acc = tf_verify_token(&v, &p.d, &q.d, x, &rng, &out);
        assert_true(memcmp(&before, &rng, sizeof rng) == 0);
        assert_int_equal(acc, x == a);
        assert_int_equal(out, a);
        if (acc) accepted++;
        else rejected++;
    }
    print_message("greedy tokens: %d accepted, %d rejected\n", accepted, rejected);
    assert_true(accepted > 300 && rejected > 300);
    assert_scratch_clear(&v);
    tf_verifier_free(&v);
}

/* Greedy speculative decoding reproduces autoregressive argmax decoding
 * exactly, for rounds of 1..6 drafts; accept-all does not. The next-token
 * logits depend on the previous token and the position modulo NPOS (so the
 * argmax sequence does not fall into a short cycle), integer-valued with
 * ties; the draft's logits equal the target's on a random half of the rows. */
static void test_greedy_sequence(void **state) {
    (void)state;
    enum { V = 16, NPOS = 8, LEN = 120, KMAX = 6 };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 22);
    static float T[V * NPOS][V], D[V * NPOS][V];
    for (int r = 0; r < V * NPOS; r++) {
        bool differ = tf_rng_next(&rng) % 2;
        for (int b = 0; b < V; b++) {
            T[r][b] = (float)(tf_rng_next(&rng) % 5);
            D[r][b] = differ ? (float)(tf_rng_next(&rng) % 5) : T[r][b];
        }
    }
    tf_sampling_cfg greedy = cfg_of(0.0f, 0, 1.0f, 0.0f);
    static tdist P[V * NPOS], Q[V * NPOS];
    for (int r = 0; r < V * NPOS; r++) {
        make_dist(&P[r], T[r], V, &greedy);
        make_dist(&Q[r], D[r], V, &greedy);
    }
#define ROW(prev, pos) ((prev) * NPOS + (pos) % NPOS) /* row predicting position pos */
    tf_verifier v;
    tf_err err = {0};
    assert_int_equal(tf_verifier_init(&v, V, &err), TF_OK);
    for (int mode = 0; mode < 2; mode++) {
        v.mode = mode ? TF_VERIFY_BROKEN_ACCEPT_ALL : TF_VERIFY_EXACT;
        int rounds = 0, drafted = 0, acc_total = 0, n_same = 0;
        for (int32_t start = 0; start < V; start++) { /* one sequence from every context token */
            int32_t ref[LEN + 1], seq[LEN + KMAX + 2];
            ref[0] = start;
            for (int i = 1; i <= LEN; i++) ref[i] = tf_argmax(T[ROW(ref[i - 1], i)], V);
            int n = 1;
            seq[0] = start;
            while (n <= LEN) {
                int32_t k = 1 + rounds % KMAX, draft[KMAX];
                tf_dist pd[KMAX + 1], qd[KMAX];
                int32_t prev = seq[n - 1];
                for (int i = 0; i < k; i++) {
                    qd[i] = Q[ROW(prev, n + i)].d;
                    pd[i] = P[ROW(prev, n + i)].d;
                    draft[i] = tf_dist_sample(&qd[i], &rng);
                    prev = draft[i];
                }
                pd[k] = P[ROW(prev, n + k)].d;
                int32_t next = -1;
                int32_t acc = tf_verify_seq(&v, pd, qd, draft, k, &rng, &next);
                assert_true(acc >= 0 && acc <= k);
                for (int i = 0; i < acc; i++) seq[n++] = draft[i];
                seq[n++] = next;
                rounds++;
                drafted += k;
                acc_total += acc;
            }
            n_same += memcmp(seq, ref, sizeof ref) == 0;
        }
        print_message("greedy speculation (%s): %d rounds, %d/%d drafts accepted, %d/%d sequences equal "
                      "autoregressive\n", mode_name(v.mode), rounds, acc_total, drafted, n_same, V);
        if (mode == 0) {
            assert_int_equal(n_same, V);
            assert_true(acc_total > 50 && drafted - acc_total > 50); /* both paths exercised */
        } else {
            assert_true(n_same < V);
        }
    }
#undef ROW
    assert_scratch_clear(&v);
    tf_verifier_free(&v);
}

/* ---- one drafted token: the emitted token follows p ------------------------------ */

typedef struct dist_case {
    const char *name;
    tf_sampling_cfg p_cfg, q_cfg;
} dist_case;

/* N draws of x ~ q then verification; counts of the emitted token against p. */
static gof run_token_gof(const tdist *p, const tdist *q, int32_t n_vocab, tf_verify_mode mode, int n_draws,
                         uint64_t seed) {
    tf_verifier v;
    tf_err err = {0};
    assert_int_equal(tf_verifier_init(&v, n_vocab, &err), TF_OK);
    v.mode = mode;
    tf_rng rng;
    tf_rng_seed(&rng, seed);
    long long obs[MAXV] = {0};
    long long acc = 0;
    for (int i = 0; i < n_draws; i++) {
        int32_t x = tf_dist_sample(&q->d, &rng), out = -1;
        bool a = tf_verify_token(&v, &p->d, &q->d, x, &rng, &out);
        assert_true(out >= 0 && out < n_vocab);
        if (a) { assert_int_equal(out, x); acc++; }
        obs[out]++;
    }
    assert_scratch_clear(&v);
    tf_verifier_free(&v);
    double prob[MAXV];
    dense(&p->d, n_vocab, prob);
    if (mode == TF_VERIFY_EXACT) { /* the acceptance rate is sum_t min(p, q) */
        double pq[MAXV], beta = 0, rate = (double)acc / n_draws;
        dense(&q->d, n_vocab, pq);
        for (int t = 0; t < n_vocab; t++) beta += fmin(prob[t], pq[t]);
        double sd = sqrt(beta * (1 - beta) / n_draws);
        assert_true(fabs(rate - beta) <= 6 * sd + 1e-9);
    }
    return chi2_gof(obs, prob, n_vocab);
}

static void test_token_distribution(void **state) {
    (void)state;
    enum { V = 12, N = 200000 };
    const dist_case cases[] = {
        {"T=1", cfg_of(1.0f, 0, 1.0f, 0.0f), cfg_of(1.0f, 0, 1.0f, 0.0f)},
        {"T=0.6 top-p 0.9", cfg_of(0.6f, 0, 0.9f, 0.0f), cfg_of(0.6f, 0, 0.9f, 0.0f)},
        {"T=1 top-k 5", cfg_of(1.0f, 5, 1.0f, 0.0f), cfg_of(1.0f, 5, 1.0f, 0.0f)},
        {"T=0.8 top-k 8 min-p 0.1", cfg_of(0.8f, 8, 1.0f, 0.1f), cfg_of(0.8f, 8, 1.0f, 0.1f)},
        {"p T=1, q greedy", cfg_of(1.0f, 0, 1.0f, 0.0f), cfg_of(0.0f, 0, 1.0f, 0.0f)},
    };
    static const tf_verify_mode modes[] = {TF_VERIFY_EXACT, TF_VERIFY_BROKEN_ACCEPT_ALL,
                                           TF_VERIFY_BROKEN_RESIDUAL_FROM_P};
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 31);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        /* q's logits are correlated with p's but differ: a realistic draft */
        float lp[V], lq[V], noise[V];
        tu_fill_uniform(&rng, lp, V, -1.5f, 1.5f);
        tu_fill_uniform(&rng, noise, V, -1.5f, 1.5f);
        for (int i = 0; i < V; i++) lq[i] = 0.6f * lp[i] + noise[i];
        tdist p, q;
        make_dist(&p, lp, V, &cases[c].p_cfg);
        make_dist(&q, lq, V, &cases[c].q_cfg);
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            char what[128];
            snprintf(what, sizeof what, "token %s, p %d/q %d cands, %s", cases[c].name, p.d.n, q.d.n,
                     mode_name(modes[m]));
            gof g = run_token_gof(&p, &q, V, modes[m], N, tu_seed() + 100 * c + m);
            if (modes[m] == TF_VERIFY_EXACT) expect_pass(&g, what);
            else expect_fail(&g, what);
        }
    }
}

/* ---- whole rounds over a Markov chain -------------------------------------------- */

/* Speculative decoding with rounds of K drafts: the emitted sequence's first
 * two tokens (jointly) and its fourth token (reached through accepted drafts,
 * corrections and bonus tokens) must follow the target chain. */

static void run_chain_gof(const chain *ch, tf_verify_mode mode, int n_trials, uint64_t seed, gof *joint2,
                          gof *fourth, double *acc_rate) {
    tf_verifier v;
    tf_err err = {0};
    assert_int_equal(tf_verifier_init(&v, MV, &err), TF_OK);
    v.mode = mode;
    tf_rng rng;
    tf_rng_seed(&rng, seed);
    static long long obs2[MV * MV], obs4[MV];
    memset(obs2, 0, sizeof obs2);
    memset(obs4, 0, sizeof obs4);
    const int32_t c0 = 0;
    long long drafted = 0, accepted = 0;
    for (int t = 0; t < n_trials; t++) {
        int32_t seq[4 + MK + 1];
        int n = 0;
        int32_t last = c0;
        while (n < 4) {
            int32_t draft[MK], prev = last;
            tf_dist pd[MK + 1], qd[MK];
            for (int i = 0; i < MK; i++) {
                qd[i] = ch->Q[prev].d;
                pd[i] = ch->P[prev].d;
                draft[i] = tf_dist_sample(&qd[i], &rng);
                prev = draft[i];
            }
            pd[MK] = ch->P[prev].d;
            int32_t next = -1;
            int32_t acc = tf_verify_seq(&v, pd, qd, draft, MK, &rng, &next);
            assert_true(acc >= 0 && acc <= MK && next >= 0 && next < MV);
            for (int i = 0; i < acc; i++) seq[n++] = draft[i];
            seq[n++] = next;
            last = next;
            drafted += MK;
            accepted += acc;
        }
        obs2[seq[0] * MV + seq[1]]++;
        obs4[seq[3]]++;
    }
    assert_scratch_clear(&v);
    tf_verifier_free(&v);
    /* expected: Pr(a, b) = P(a | c0) P(b | a); fourth token by propagating the chain */
    static double prob2[MV * MV];
    double pr[MV][MV], pi[MV], nxt[MV];
    for (int a = 0; a < MV; a++) dense(&ch->P[a].d, MV, pr[a]);
    for (int a = 0; a < MV; a++)
        for (int b = 0; b < MV; b++) prob2[a * MV + b] = pr[c0][a] * pr[a][b];
    for (int b = 0; b < MV; b++) pi[b] = pr[c0][b];
    for (int step = 1; step < 4; step++) {
        for (int b = 0; b < MV; b++) nxt[b] = 0;
        for (int a = 0; a < MV; a++)
            for (int b = 0; b < MV; b++) nxt[b] += pi[a] * pr[a][b];
        memcpy(pi, nxt, sizeof pi);
    }
    *joint2 = chi2_gof(obs2, prob2, MV * MV);
    *fourth = chi2_gof(obs4, pi, MV);
    *acc_rate = (double)accepted / (double)drafted;
}

static void test_chain_distribution(void **state) {
    (void)state;
    enum { N = 200000 };
    const struct { const char *name; tf_sampling_cfg cfg; } cases[] = {
        {"T=1", cfg_of(1.0f, 0, 1.0f, 0.0f)},
        {"T=0.6 top-p 0.9", cfg_of(0.6f, 0, 0.9f, 0.0f)},
        {"T=1 top-k 4", cfg_of(1.0f, 4, 1.0f, 0.0f)},
    };
    static const tf_verify_mode modes[] = {TF_VERIFY_EXACT, TF_VERIFY_BROKEN_ACCEPT_ALL,
                                           TF_VERIFY_BROKEN_RESIDUAL_FROM_P};
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 41);
    static chain ch;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        build_chain(&ch, &cases[c].cfg, &rng);
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            gof j2, f4;
            double rate;
            run_chain_gof(&ch, modes[m], N, tu_seed() + 1000 + 10 * c + m, &j2, &f4, &rate);
            char what[128];
            snprintf(what, sizeof what, "chain %s, tokens 1-2 joint, %s", cases[c].name, mode_name(modes[m]));
            if (modes[m] == TF_VERIFY_EXACT) {
                expect_pass(&j2, what);
                snprintf(what, sizeof what, "chain %s, token 4, %s (acc %.2f)", cases[c].name,
                         mode_name(modes[m]), rate);
                expect_pass(&f4, what);
            } else {
                expect_fail(&j2, what);
            }
        }
    }
}

/* ---- edge cases ------------------------------------------------------------------- */

/* ---- the transform against a plain reference --------------------------------------- */

typedef struct { float z; int32_t id; } zid;
static int zid_cmp(const void *a, const void *b) { /* larger z first, then lower id */
    const zid *x = a, *y = b;
    if (x->z != y->z) return x->z > y->z ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* sampling.h's transform written plainly: sort everything, cut, softmax in double, top-p, min-p. */
static int32_t ref_transform(const float *logits, int32_t n, const tf_sampling_cfg *c, int32_t *ids, float *p) {
    zid *all = malloc(sizeof *all * (size_t)n);
    int32_t nf = 0;
    for (int32_t i = 0; i < n; i++) {
        float z = isnan(logits[i]) ? -INFINITY : logits[i] / c->temp;
        if (z != -INFINITY) all[nf++] = (zid){z, i};
    }
    if (nf == 0) {
        free(all);
        ids[0] = 0, p[0] = 1.0f;
        return 1;
    }
    qsort(all, (size_t)nf, sizeof *all, zid_cmp);
    const bool cut = c->top_k > 0 && c->top_k < n;
    int32_t m = cut && c->top_k < nf ? c->top_k : nf;
    double total = 0;
    if (cut) /* the softmax over the kept set */
        for (int32_t i = 0; i < m; i++) total += exp((double)all[i].z - all[0].z);
    else /* over the vocabulary, in id order */
        for (int32_t i = 0; i < n; i++)
            if (!isnan(logits[i]) && logits[i] / c->temp != -INFINITY)
                total += exp((double)(logits[i] / c->temp) - all[0].z);
    for (int32_t i = 0; i < m; i++) ids[i] = all[i].id, p[i] = (float)(exp((double)all[i].z - all[0].z) / total);
    if (c->top_p < 1.0f) {
        double cum = 0;
        for (int32_t i = 0; i < m; i++)
            if ((cum += p[i]) >= c->top_p) {
                m = i + 1;
                break;
            }
    }
    if (c->min_p > 0.0f) {
        int32_t keep = 1;
        while (keep < m && p[keep] >= c->min_p * p[0]) keep++;
        m = keep;
    }
    double sum = 0;
    for (int32_t i = 0; i < m; i++) sum += p[i];
    for (int32_t i = 0; i < m; i++) p[i] = (float)(p[i] / sum);
    free(all);
    return m;
}

/* tf_sampling_dist (top-k through core/topk.c and tf_sampling_dist_top) equals the plain reference exactly, on
 * random logits with ties, NaN and -inf, for top-k on and off, top-p, min-p and several temperatures. */
static void test_transform_reference(void **state) {
    (void)state;
    tf_rng rng;
    tf_rng_seed(&rng, 20261126);
    const int32_t n = MAXV;
    float logits[MAXV];
    int32_t rid[MAXV];
    float rp[MAXV];
    static const tf_sampling_cfg cfgs[] = {
        {.temp = 1.0f, .top_k = 8, .top_p = 1.0f}, {.temp = 0.6f, .top_k = 40, .top_p = 0.9f, .min_p = 0.05f},
        {.temp = 0.7f, .top_k = 0, .top_p = 0.95f}, {.temp = 1.3f, .top_k = 0, .top_p = 1.0f, .min_p = 0.1f},
        {.temp = 0.3f, .top_k = 1, .top_p = 1.0f}, {.temp = 3.0f, .top_k = 63, .top_p = 0.5f},
    };
    int checked = 0;
    for (int trial = 0; trial < 400; trial++) {
        for (int32_t i = 0; i < n; i++) {
            double u = tf_rng_uniform(&rng);
            logits[i] = (float)(4.0 * (tf_rng_uniform(&rng) - 0.5));
            if (u < 0.15) logits[i] = 1.25f;                  /* ties */
            else if (u < 0.18) logits[i] = NAN;
            else if (u < 0.21) logits[i] = -INFINITY;
        }
        if (trial % 50 == 0)
            for (int32_t i = 0; i < n; i++) logits[i] = trial % 100 ? NAN : -INFINITY; /* nothing valid */
        for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
            tf_sampling s;
            tf_err err = {0};
            assert_int_equal(tf_sampling_init(&s, &cfgs[c], n, &err), TF_OK);
            tf_sampling_dist(&s, logits);
            int32_t m = ref_transform(logits, n, &cfgs[c], rid, rp);
            assert_int_equal(s.dist.n, m);
            assert_memory_equal(s.dist.id, rid, sizeof(int32_t) * (size_t)m);
            assert_memory_equal(s.dist.p, rp, sizeof(float) * (size_t)m);
            tf_sampling_free(&s);
            checked++;
        }
    }
    print_message("transform == reference on %d rows x configurations\n", checked);
    /* vocabularies past the radix sort's threshold, where top-p needs more than
     * the growing top-K gives, with ties (+0 and -0 among them), NaN and -inf */
    static const tf_sampling_cfg big[] = {
        {.temp = 1.0f, .top_k = 0, .top_p = 1.0f}, {.temp = 0.8f, .top_k = 0, .top_p = 0.999f},
        {.temp = 2.5f, .top_k = 0, .top_p = 0.95f, .min_p = 0.001f}, {.temp = 0.5f, .top_k = 0, .top_p = 1.0f, .min_p = 0.2f},
        /* top-k over a large vocabulary: core/topk.c's scan of raw logits once its heap is full */
        {.temp = 0.6f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f}, {.temp = 0.3f, .top_k = 64, .top_p = 1.0f},
        {.temp = 3.0f, .top_k = 7, .top_p = 1.0f},
    };
    static const int32_t sizes[] = {1500, 49152};
    float *bl = malloc(sizeof(float) * 49152), *bp = malloc(sizeof(float) * 49152);
    int32_t *bid = malloc(sizeof(int32_t) * 49152);
    assert_true(bl && bp && bid);
    checked = 0;
    for (int trial = 0; trial < 6; trial++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            const int32_t nb = sizes[si];
            for (int32_t i = 0; i < nb; i++) {
                double u = tf_rng_uniform(&rng);
                bl[i] = (float)(8.0 * (tf_rng_uniform(&rng) - 0.5));
                if (u < 0.1) bl[i] = 1.25f;
                else if (u < 0.12) bl[i] = u < 0.11 ? 0.0f : -0.0f;
                /* on odd trials a cluster above every other logit, 9 adjacent floats from 7.9
                 * (1, 1 and 3 of their 8 neighbouring pairs divide by 0.6, 0.3 and 3 to equal z):
                 * the top-k is decided among equal logits and among unequal ones of equal z */
                else if (trial % 2 && u < 0.125) {
                    float x = 7.9f;
                    for (int j = (int)(u * 1e5) % 9; j > 0; j--) x = nextafterf(x, 8.0f);
                    bl[i] = x;
                }
                else if (u < 0.14) bl[i] = NAN;
                else if (u < 0.16) bl[i] = -INFINITY;
            }
            for (size_t c = 0; c < sizeof big / sizeof big[0]; c++) {
                tf_sampling s;
                tf_err err = {0};
                assert_int_equal(tf_sampling_init(&s, &big[c], nb, &err), TF_OK);
                tf_sampling_dist(&s, bl);
                int32_t m = ref_transform(bl, nb, &big[c], bid, bp);
                assert_int_equal(s.dist.n, m);
                assert_memory_equal(s.dist.id, bid, sizeof(int32_t) * (size_t)m);
                assert_memory_equal(s.dist.p, bp, sizeof(float) * (size_t)m);
                for (int32_t i = 0; i < m; i++) assert_false(isnan(s.dist.p[i]));
                tf_sampling_free(&s);
                checked++;
            }
        }
    free(bl);
    free(bp);
    free(bid);
    print_message("transform == reference on %d rows of 1,500 and 49,152 tokens\n", checked);
}

static void test_edge_cases(void **state) {
    (void)state;
    enum { V = 10 };
    tf_rng rng;
    tf_rng_seed(&rng, tu_seed() + 51);
    tf_verifier v;
    tf_err err = {0};
    assert_int_equal(tf_verifier_init(&v, 0, &err), TF_ERR_INVALID_ARG);
    tf_verifier_free(&v);
    assert_int_equal(tf_verifier_init(&v, V, &err), TF_OK);
    int32_t out;

    /* q(x) = 0 (x was not drawn from q), or x outside the vocabulary: rejected,
     * replacement from max(p - q, 0), which lies on {0, 1, 2} here */
    tdist p, q;
    set_dist(&p, 5, (const int32_t[]){0, 1, 2, 3, 4}, (const double[]){3, 2, 2, 1, 1});
    set_dist(&q, 4, (const int32_t[]){3, 4, 5, 6}, (const double[]){4, 3, 2, 1});
    for (int it = 0; it < 2000; it++) {
        int32_t x = (const int32_t[]){1, 7, -1, V, 1 << 30}[it % 5];
        assert_false(tf_verify_token(&v, &p.d, &q.d, x, &rng, &out));
        assert_true(out >= 0 && out <= 2);
    }

    /* p == q (separate objects, same values): always accepted */
    float logits[V];
    tu_fill_uniform(&rng, logits, V, -2, 2);
    tf_sampling_cfg t1 = cfg_of(1.0f, 0, 1.0f, 0.0f);
    tdist p2, q2;
    make_dist(&p2, logits, V, &t1);
    make_dist(&q2, logits, V, &t1);
    for (int it = 0; it < 20000; it++) {
        int32_t x = tf_dist_sample(&q2.d, &rng);
        assert_true(tf_verify_token(&v, &p2.d, &q2.d, x, &rng, &out));
        assert_int_equal(out, x);
    }

    /* disjoint supports: always rejected, and the residual is p itself */
    tdist pd, qd;
    set_dist(&pd, 3, (const int32_t[]){0, 1, 2}, (const double[]){5, 3, 2});
    set_dist(&qd, 3, (const int32_t[]){5, 6, 7}, (const double[]){1, 1, 1});
    long long obs[V] = {0};
    for (int it = 0; it < 100000; it++) {
        int32_t x = tf_dist_sample(&qd.d, &rng);
        assert_false(tf_verify_token(&v, &pd.d, &qd.d, x, &rng, &out));
        obs[out]++;
    }
    double prob[V];
    dense(&pd.d, V, prob);
    gof g = chi2_gof(obs, prob, V);
    expect_pass(&g, "disjoint supports: residual = p");

    /* one-hot p against a spread q: the output is always argmax p */
    tdist p1;
    set_dist(&p1, 1, (const int32_t[]){4}, (const double[]){1});
    for (int it = 0; it < 5000; it++) {
        int32_t x = tf_dist_sample(&p2.d, &rng);
        bool a = tf_verify_token(&v, &p1.d, &p2.d, x, &rng, &out);
        assert_int_equal(a, x == 4);
        assert_int_equal(out, 4);
    }

    /* a q that does not sum to 1 (q >= p everywhere): rejections happen
     * (P = 1/6 at x = 0) but the residual is empty: fall back to p */
    tdist pe, qe;
    set_dist(&pe, 2, (const int32_t[]){0, 1}, (const double[]){0.5, 0.5});
    qe.d.n = 2; qe.d.id = qe.id; qe.d.p = qe.p;
    qe.id[0] = 0; qe.p[0] = 0.6f; qe.id[1] = 1; qe.p[1] = 0.5f;
    int rejects = 0;
    for (int it = 0; it < 3000; it++) {
        if (!tf_verify_token(&v, &pe.d, &qe.d, 0, &rng, &out)) rejects++;
        assert_true(out == 0 || out == 1);
    }
    assert_true(rejects > 300 && rejects < 700);

    /* k = 0: no drafts, one token from p[0] */
    int32_t next = -1;
    assert_int_equal(tf_verify_seq(&v, &pd.d, NULL, NULL, 0, &rng, &next), 0);
    assert_true(next >= 0 && next <= 2);

    /* tf_dist_prob and one-candidate sampling */
    assert_true(tf_dist_prob(&pd.d, 0) == pd.p[0]);
    assert_true(tf_dist_prob(&pd.d, 9) == 0.0f);
    tf_rng before = rng;
    assert_int_equal(tf_dist_sample(&p1.d, &rng), 4);
    assert_true(memcmp(&before, &rng, sizeof rng) == 0);

    assert_scratch_clear(&v);
    tf_verifier_free(&v);
    tf_verifier_free(&v); /* double free of a freed (zeroed) verifier is safe */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chi2_machinery),
        cmocka_unit_test(test_chi2_calibration),
        cmocka_unit_test(test_greedy_token),
        cmocka_unit_test(test_greedy_sequence),
        cmocka_unit_test(test_token_distribution),
        cmocka_unit_test(test_chain_distribution),
        cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_transform_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
