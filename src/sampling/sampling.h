/*
 * sampling.h — logits -> next-token distribution -> token.
 *
 * One deterministic transform defines the distribution, in this order:
 * temperature (logits / T; T <= 0 means greedy), top-k (keep the k largest),
 * softmax, top-p (smallest prefix of the sorted tokens whose mass >= p),
 * min-p (drop tokens below min_p * max prob), renormalize. Greedy is argmax
 * with ties broken toward the lowest token id. Every sampler owns its RNG
 * state (explicit seed); nothing is global. The speculative verifier uses the
 * same transform for target and draft distributions.
 */
#ifndef TF_SAMPLING_SAMPLING_H
#define TF_SAMPLING_SAMPLING_H

#include "core/error.h"
#include "core/rng.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct tf_sampling_cfg {
    float temp;    /* <= 0: greedy */
    int32_t top_k; /* <= 0: disabled */
    float top_p;   /* >= 1: disabled */
    float min_p;   /* <= 0: disabled */
    uint64_t seed;
} tf_sampling_cfg;

/* A sparse distribution: n candidates sorted by decreasing probability. */
typedef struct tf_dist {
    int32_t n;
    int32_t *id;  /* [n_vocab] capacity */
    float *p;     /* [n_vocab] capacity, sums to 1 over [0, n) */
} tf_dist;

typedef struct tf_sampling {
    tf_sampling_cfg cfg;
    int32_t n_vocab;
    tf_rng rng;
    tf_dist dist;
    float *work;    /* [n_vocab] */
    uint32_t *sort; /* [4 n_vocab]: the radix sort of a whole row (keys and ids, twice) */
} tf_sampling;

tf_status tf_sampling_init(tf_sampling *s, const tf_sampling_cfg *cfg, int32_t n_vocab, tf_err *err);
void tf_sampling_free(tf_sampling *s);

/* Greedy choice: index of the largest logit, lowest index on ties; NaN logits never win. */
int32_t tf_argmax(const float *logits, int32_t n);

/* Compute the distribution for logits into s->dist (greedy: one token with p = 1). */
void tf_sampling_dist(tf_sampling *s, const float *logits);
/* k when the distribution depends on the k best scaled logits alone (temp > 0
 * and 0 < top_k < n_vocab): then tf_sampling_dist_top on a row's
 * tf_topk_scaled(logits, n_vocab, temp, k) (core/topk.h, or a backend's topk
 * op) gives exactly tf_sampling_dist's result. 0 otherwise. */
int32_t tf_sampling_top_k(const tf_sampling *s);
/* The distribution from a row's m best candidates: ids and z = logit / temp
 * in tf_topk_scaled's order (m = 0: none finite, token 0). */
void tf_sampling_dist_top(tf_sampling *s, const int32_t *ids, const float *z, int32_t m);

/* Draw from s->dist with the sampler's RNG. */
int32_t tf_sampling_draw(tf_sampling *s);

/* dist + draw (greedy skips the distribution). */
int32_t tf_sampling_sample(tf_sampling *s, const float *logits);

#endif
