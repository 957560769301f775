/* dist_testutil.h — what the sampling-distribution tests share (test_verify.c,
 * test_keyed.c): distributions with their own storage made by the sampling
 * transform, their dense form, and the verdicts of a goodness-of-fit test
 * (a correct rule stays under the critical value with nothing off the
 * support; a negative control exceeds it BROKEN_MARGIN times), and a Markov
 * chain for whole speculative rounds. Include after testutil.h. */
#ifndef TF_TESTS_DIST_TESTUTIL_H
#define TF_TESTS_DIST_TESTUTIL_H

#include "sampling/sampling.h"
#include "stats.h"

#include <string.h>

#define ALPHA 1e-6        /* false-alarm rate per goodness-of-fit test */
#define BROKEN_MARGIN 5.0 /* a broken rule must exceed the critical value 5x */
#define MAXV 64

static inline void expect_pass(const tu_gof *g, const char *what) {
    print_message("%-48s chi2 %10.2f  crit %7.2f  df %4d  off-support %lld\n", what, g->chi2, g->crit, g->df,
                  g->off_support);
    assert_true(g->df >= 1);
    assert_true(g->off_support == 0);
    assert_true(g->chi2 < g->crit);
}

static inline void expect_fail(const tu_gof *g, const char *what) {
    print_message("%-48s chi2 %10.2f  crit %7.2f  df %4d  off-support %lld  (negative control)\n", what, g->chi2,
                  g->crit, g->df, g->off_support);
    assert_true(g->df >= 1);
    assert_true(g->chi2 > BROKEN_MARGIN * g->crit);
}

/* A tf_dist with its own storage. Never copied by value (d points into it). */
typedef struct tdist {
    tf_dist d;
    int32_t id[MAXV];
    float p[MAXV];
} tdist;

/* The sampling transform's distribution of logits[0, n_vocab) under cfg. */
static inline void make_dist(tdist *out, const float *logits, int32_t n_vocab, const tf_sampling_cfg *cfg) {
    assert_true(n_vocab <= MAXV);
    tf_sampling s;
    tf_err err = {0};
    assert_int_equal(tf_sampling_init(&s, cfg, n_vocab, &err), TF_OK);
    tf_sampling_dist(&s, logits);
    out->d.n = s.dist.n;
    out->d.id = out->id;
    out->d.p = out->p;
    memcpy(out->id, s.dist.id, sizeof(int32_t) * (size_t)s.dist.n);
    memcpy(out->p, s.dist.p, sizeof(float) * (size_t)s.dist.n);
    tf_sampling_free(&s);
}

/* Dense probabilities of d over n_vocab tokens, in double, normalized. */
static inline void dense(const tf_dist *d, int32_t n_vocab, double *out) {
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) out[i] = 0;
    for (int32_t i = 0; i < d->n; i++) sum += d->p[i];
    for (int32_t i = 0; i < d->n; i++) out[d->id[i]] += d->p[i] / sum;
}

static inline tf_sampling_cfg cfg_of(float temp, int32_t top_k, float top_p, float min_p) {
    return (tf_sampling_cfg){.temp = temp, .top_k = top_k, .top_p = top_p, .min_p = min_p, .seed = 1};
}

/* A Markov chain over MV tokens for whole speculative rounds of MK drafts:
 * the target's and a correlated draft's next-token distributions given the
 * previous token, from random logits under cfg. */
enum { MV = 8, MK = 3 };

typedef struct chain {
    tdist P[MV], Q[MV]; /* target / draft next-token distributions given the previous token */
} chain;

static inline void build_chain(chain *ch, const tf_sampling_cfg *cfg, tf_rng *rng) {
    for (int a = 0; a < MV; a++) {
        float lp[MV], lq[MV], noise[MV];
        tu_fill_uniform(rng, lp, MV, -2.0f, 2.0f);
        tu_fill_uniform(rng, noise, MV, -1.5f, 1.5f);
        for (int i = 0; i < MV; i++) lq[i] = 0.5f * lp[i] + noise[i];
        make_dist(&ch->P[a], lp, MV, cfg);
        make_dist(&ch->Q[a], lq, MV, cfg);
    }
}

#endif
