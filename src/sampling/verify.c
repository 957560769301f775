/*
 * verify.c — speculative-sampling verification (contract in verify.h).
 *
 * Probabilities are read from the sparse tf_dist lists; only the residual
 * needs q as a function over p's candidates, so q is scattered into a dense
 * zeroed array for that step and the touched entries are cleared afterwards
 * (O(n_q), never O(n_vocab)). All arithmetic on probabilities is in double:
 * p(t) - q(t) of two floats is exact there.
 */
#include "sampling/verify.h"

#include "core/mem.h"

#include <string.h>

tf_status tf_verifier_init(tf_verifier *v, int32_t n_vocab, tf_err *err) {
    memset(v, 0, sizeof *v);
    if (n_vocab < 1) return tf_errf(err, TF_ERR_INVALID_ARG, "verifier: vocabulary size %d, expected >= 1", n_vocab);
    v->q_dense = tf_calloc(sizeof(float) * (size_t)n_vocab);
    if (!v->q_dense) return tf_errf(err, TF_ERR_NOMEM, "verifier: out of memory for %d-token scratch", n_vocab);
    v->n_vocab = n_vocab;
    v->mode = TF_VERIFY_EXACT;
    return TF_OK;
}

void tf_verifier_free(tf_verifier *v) {
    tf_free(v->q_dense);
    memset(v, 0, sizeof *v);
}

float tf_dist_prob(const tf_dist *d, int32_t id) {
    for (int32_t i = 0; i < d->n; i++)
        if (d->id[i] == id) return d->p[i];
    return 0.0f;
}

int32_t tf_dist_sample(const tf_dist *d, tf_rng *rng) {
    if (d->n == 1) return d->id[0];
    /* normalize by the actual sum so float rounding of the stored p biases nothing */
    double total = 0;
    for (int32_t i = 0; i < d->n; i++) total += d->p[i];
    double u = tf_rng_uniform(rng) * total, cum = 0;
    int32_t last = d->id[0];
    for (int32_t i = 0; i < d->n; i++) {
        if (d->p[i] <= 0.0f) continue;
        cum += d->p[i];
        last = d->id[i];
        if (u < cum) return last;
    }
    return last; /* u rounded up to the total: the last candidate with mass */
}

/* Draw from normalize(max(p - q, 0)); falls back to p when the residual has
 * no mass (p == q up to rounding). q_dense is all zero on entry and exit. */
static int32_t draw_residual(tf_verifier *v, const tf_dist *p, const tf_dist *q, tf_rng *rng) {
    float *qd = v->q_dense;
    for (int32_t i = 0; i < q->n; i++) qd[q->id[i]] = q->p[i];
    double mass = 0;
    for (int32_t i = 0; i < p->n; i++) {
        double r = (double)p->p[i] - (double)qd[p->id[i]];
        if (r > 0) mass += r;
    }
    int32_t out = -1;
    if (mass > 0) {
        double u = tf_rng_uniform(rng) * mass, cum = 0;
        for (int32_t i = 0; i < p->n; i++) {
            double r = (double)p->p[i] - (double)qd[p->id[i]];
            if (!(r > 0)) continue;
            cum += r;
            out = p->id[i];
            if (u < cum) break;
        }
    }
    for (int32_t i = 0; i < q->n; i++) qd[q->id[i]] = 0.0f;
    return out >= 0 ? out : tf_dist_sample(p, rng);
}

bool tf_verify_token(tf_verifier *v, const tf_dist *p, const tf_dist *q, int32_t x, tf_rng *rng, int32_t *out) {
    if (v->mode == TF_VERIFY_BROKEN_ACCEPT_ALL) {
        *out = x;
        return true;
    }
    float qx = (x >= 0 && x < v->n_vocab) ? tf_dist_prob(q, x) : 0.0f;
    if (p->n == 1) {
        /* one-hot target (greedy): min(1, p/q) is 1 at argmax p and 0 elsewhere, and
         * the residual max(p - q, 0) lies on argmax p: deterministic, no division */
        *out = p->id[0];
        return x == p->id[0] && qx > 0.0f;
    }
    if (qx > 0.0f) {
        float px = tf_dist_prob(p, x);
        /* u < p/q without dividing: P(accept) = min(1, p/q) exactly for u ~ U[0, 1) */
        if (tf_rng_uniform(rng) * (double)qx < (double)px) {
            *out = x;
            return true;
        }
    }
    *out = v->mode == TF_VERIFY_BROKEN_RESIDUAL_FROM_P ? tf_dist_sample(p, rng) : draw_residual(v, p, q, rng);
    return false;
}

int32_t tf_verify_seq(tf_verifier *v, const tf_dist *p, const tf_dist *q, const int32_t *draft, int32_t k,
                      tf_rng *rng, int32_t *next) {
    for (int32_t i = 0; i < k; i++)
        if (!tf_verify_token(v, &p[i], &q[i], draft[i], rng, next)) return i;
    *next = tf_dist_sample(&p[k], rng);
    return k;
}
