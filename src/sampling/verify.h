/*
 * verify.h — the exact speculative-sampling verifier (Leviathan et al. 2023,
 * Chen et al. 2023), used at every level of TriForce's hierarchy.
 *
 * A drafter proposed token x drawn from its distribution q; the target's
 * distribution at the same position is p. The verifier accepts x with
 * probability min(1, p(x) / q(x)); on rejection it draws the replacement from
 * the residual normalize(max(p - q, 0)) and the round stops there. When every
 * drafted token of a round is accepted, a bonus token is drawn from the
 * target's distribution at the position after the last draft. Whatever q is,
 * each emitted token is then distributed exactly as p (given the prefix): the
 * method is lossless.
 *
 * p and q are tf_dist values produced by tf_sampling_dist (the same transform
 * for target and draft), so either may put mass where the other has none
 * (outside a top-k / top-p cut). Greedy is the one-hot special case: accept
 * iff x == argmax p (ties to the lowest id, as tf_argmax), otherwise emit
 * argmax p; no division happens and no random number is used, so greedy
 * speculation reproduces autoregressive greedy decoding token for token.
 *
 * Cost: O(n_p + n_q) per verified token (candidate counts, never n_vocab);
 * the scratch is allocated once by tf_verifier_init. A verifier is not
 * thread-safe: use one per thread. Random numbers come from the caller's
 * tf_rng: one uniform per accept test (skipped when p is one-hot) and one per
 * draw from the residual or from a distribution with more than one candidate.
 */
#ifndef TF_SAMPLING_VERIFY_H
#define TF_SAMPLING_VERIFY_H

#include "core/error.h"
#include "core/rng.h"
#include "sampling/sampling.h"

#include <stdbool.h>
#include <stdint.h>

/* Verification rule. Only TF_VERIFY_EXACT is correct; the broken variants
 * exist so the statistical tests can prove they detect a wrong verifier
 * (negative controls). Nothing outside tests/ may select them. */
typedef enum tf_verify_mode {
    TF_VERIFY_EXACT = 0,              /* min(1, p/q) acceptance, residual max(p - q, 0) */
    TF_VERIFY_BROKEN_ACCEPT_ALL,      /* test only: accept every drafted token (emits q) */
    TF_VERIFY_BROKEN_RESIDUAL_FROM_P, /* test only: on rejection draw from p, not the residual */
} tf_verify_mode;

typedef struct tf_verifier {
    int32_t n_vocab;
    tf_verify_mode mode; /* TF_VERIFY_EXACT after init */
    float *q_dense;      /* [n_vocab] q scattered by id; all zero between calls */
} tf_verifier;

/* Allocate the scratch for a vocabulary of n_vocab tokens; mode = EXACT.
 * Fails with TF_ERR_INVALID_ARG (n_vocab < 1) or TF_ERR_NOMEM, leaving *v
 * zeroed (safe to free). */
tf_status tf_verifier_init(tf_verifier *v, int32_t n_vocab, tf_err *err);

/* Release the scratch; *v is zeroed. Safe on a zeroed or failed verifier. */
void tf_verifier_free(tf_verifier *v);

/* Verify one drafted token x against target p and draft q (both sums to 1
 * over their candidates, ids in [0, n_vocab)). Returns true if x is
 * accepted (*out = x). Otherwise *out gets the replacement drawn from
 * normalize(max(p - q, 0)), and the caller must discard the remaining drafts
 * of the round. If q(x) == 0 (x was not drawn from q: a caller bug, or an
 * id outside the vocabulary) x is rejected. If rounding leaves the residual
 * with no mass (p == q up to float error) the replacement is drawn from p,
 * the limit of the residual as q -> p. */
bool tf_verify_token(tf_verifier *v, const tf_dist *p, const tf_dist *q, int32_t x, tf_rng *rng, int32_t *out);

/* Verify a round of k >= 0 drafted tokens draft[0..k-1], drafted from
 * q[0..k-1]; p[0..k] are the target's distributions at the same positions
 * plus one (p[i] is the distribution for the position of draft[i], p[k] the
 * one after the last draft). Returns the number of accepted drafts n in
 * [0, k]; *next gets the token that follows them: the replacement for
 * draft[n] when n < k, else a bonus token drawn from p[k]. The round emits
 * draft[0..n-1] then *next (n + 1 tokens). */
int32_t tf_verify_seq(tf_verifier *v, const tf_dist *p, const tf_dist *q, const int32_t *draft, int32_t k,
                      tf_rng *rng, int32_t *next);

/* Draw a token from d (d->n >= 1) by inverting its cumulative sum with one
 * uniform from rng; a one-candidate distribution returns it without drawing. */
int32_t tf_dist_sample(const tf_dist *d, tf_rng *rng);

/* Probability of token id under d (0 if absent); O(d->n). */
float tf_dist_prob(const tf_dist *d, int32_t id);

#endif
