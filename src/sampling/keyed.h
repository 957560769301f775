/*
 * keyed.h — keyed draws: sampling whose randomness belongs to the position,
 * so that every decoding mode emits the same sampled text for a seed.
 *
 * The token for sequence position pos is drawn from a distribution d as
 *
 *     argmin over d's candidates t with d(t) > 0 of  E(seed, pos, t) / d(t),
 *
 * where E(seed, pos, t) = -log U(seed, pos, t) is a standard exponential
 * variable computed by hashing (seed, pos, t) (splitmix64 outputs, 53 bits).
 * For independent exponentials E(t), E(t)/d(t) is exponential with rate d(t),
 * and the smallest of them falls on t with probability d(t) / sum d = d(t):
 * the draw is distributed exactly as d (the exponential race, equivalently
 * Gumbel-max on log d). Noise at different positions is independent, so a
 * sequence drawn position by position is distributed as autoregressive
 * sampling.
 *
 * Speculative verification with keyed draws (the coupling of every level of
 * the hierarchy): a level at position pos emits its own keyed draw from its
 * distribution there; a candidate from the level below is accepted exactly
 * when it equals that draw, and on a rejection the draw is the replacement.
 * The target's emitted token at every position is therefore its keyed draw
 * given the prefix, whatever the levels below proposed: each mode's text
 * equals autoregressive decoding's for the same seed, token for token, and is
 * distributed exactly as the target's. A candidate the level below drew with
 * the same noise from q is accepted with probability P(argmin E/p = argmin
 * E/q) >= (1 - TV(p, q)) / (1 + TV(p, q)) (equal to 1 - TV for two
 * candidates); a one-hot proposal x (text lookup) with probability p(x), as
 * under the residual rule (verify.h).
 *
 * Greedy (one-candidate) distributions return their token without hashing.
 * Cost: O(d->n) hashes; the logarithm is skipped for the candidates whose
 * uniform cannot win (-log u >= 1 - u), most of a long tail.
 */
#ifndef TF_SAMPLING_KEYED_H
#define TF_SAMPLING_KEYED_H

#include "sampling/sampling.h"
#include "sampling/verify.h"

#include <stdbool.h>
#include <stdint.h>

/* The key of sequence position pos under seed. */
uint64_t tf_keyed_key(uint64_t seed, int64_t pos);

/* U(key, t): uniform in (0, 1), 53 bits, never 0 or 1. */
double tf_keyed_uniform(uint64_t key, int32_t id);

/* The keyed draw from d (d->n >= 1; the first candidate if none has mass). */
int32_t tf_keyed_draw(const tf_dist *d, uint64_t key);

/* The same by the definition, every candidate's logarithm taken (the
 * reference the tests hold tf_keyed_draw to). */
int32_t tf_keyed_draw_ref(const tf_dist *d, uint64_t key);

/* Verify candidate x against the level's distribution p at the position of
 * key: *out = tf_keyed_draw(p, key), accepted iff it is x. The draft's
 * distribution is not needed. v->mode TF_VERIFY_BROKEN_ACCEPT_ALL (tests
 * only) accepts x whatever it is; the other broken mode is the residual
 * rule's and does not apply. */
bool tf_keyed_verify(const tf_verifier *v, const tf_dist *p, int32_t x, uint64_t key, int32_t *out);

#endif
