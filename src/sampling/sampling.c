/* sampling.c — the logits transform and draws described in sampling.h. */
#include "sampling/sampling.h"

#include "core/mem.h"
#include "core/topk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

tf_status tf_sampling_init(tf_sampling *s, const tf_sampling_cfg *cfg, int32_t n_vocab, tf_err *err) {
    memset(s, 0, sizeof *s);
    if (n_vocab < 1) return tf_errf(err, TF_ERR_INVALID_ARG, "sampler: vocabulary size %d", n_vocab);
    if (!isfinite(cfg->temp) || cfg->temp > 1e4f)
        return tf_errf(err, TF_ERR_INVALID_ARG, "temperature %g: expected a finite value in [0, 10000]", cfg->temp);
    if (!(cfg->top_p > 0.0f) || cfg->top_p > 1.0f)
        return tf_errf(err, TF_ERR_INVALID_ARG, "top-p %g: expected a value in (0, 1]", cfg->top_p);
    if (!(cfg->min_p >= 0.0f) || cfg->min_p > 1.0f)
        return tf_errf(err, TF_ERR_INVALID_ARG, "min-p %g: expected a value in [0, 1]", cfg->min_p);
    if (cfg->top_k < 0) return tf_errf(err, TF_ERR_INVALID_ARG, "top-k %d: expected >= 0 (0 = off)", cfg->top_k);
    s->cfg = *cfg;
    s->n_vocab = n_vocab;
    tf_rng_seed(&s->rng, cfg->seed);
    s->dist.id = tf_alloc(sizeof(int32_t) * (size_t)n_vocab);
    s->dist.p = tf_alloc(sizeof(float) * (size_t)n_vocab);
    s->work = tf_alloc(sizeof(float) * (size_t)n_vocab);
    s->sort = tf_alloc(sizeof(uint32_t) * 4 * (size_t)n_vocab);
    if (!s->dist.id || !s->dist.p || !s->work || !s->sort) {
        tf_sampling_free(s);
        return tf_errf(err, TF_ERR_NOMEM, "sampler: out of memory");
    }
    return TF_OK;
}

void tf_sampling_free(tf_sampling *s) {
    tf_free(s->dist.id);
    tf_free(s->dist.p);
    tf_free(s->work);
    tf_free(s->sort);
    memset(s, 0, sizeof *s);
}

int32_t tf_argmax(const float *logits, int32_t n) {
    int32_t best = -1;
    float bv = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        if (isnan(logits[i])) continue;
        if (best < 0 || logits[i] > bv) { /* strict: the first of equal maxima wins */
            best = i;
            bv = logits[i];
        }
    }
    return best < 0 ? 0 : best;
}

/* top-p, min-p and renormalization of the first m entries of the dist
 * (probabilities in decreasing order). */
static void finish(tf_dist *d, const tf_sampling_cfg *c, int32_t m) {
    if (c->top_p < 1.0f) {
        double cum = 0;
        int32_t keep = m;
        for (int32_t i = 0; i < m; i++) {
            cum += d->p[i];
            if (cum >= c->top_p) { keep = i + 1; break; }
        }
        m = keep;
    }
    if (c->min_p > 0.0f) {
        float thr = c->min_p * d->p[0];
        int32_t keep = 1;
        while (keep < m && d->p[keep] >= thr) keep++;
        m = keep;
    }
    double sum = 0;
    for (int32_t i = 0; i < m; i++) sum += d->p[i];
    for (int32_t i = 0; i < m; i++) d->p[i] = (float)(d->p[i] / sum);
    d->n = m;
}

/* A key whose increasing order is z's decreasing order (z finite or +inf,
 * never NaN; -0 as +0, which compare equal). */
static inline uint32_t desc_key(float z) {
    if (z == 0.0f) z = 0.0f;
    uint32_t u;
    memcpy(&u, &z, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* increasing with z */
    return ~u;
}

/* The ids of every finite z = logit / temp (z[i] already in s->work) into
 * d->id, larger z first and lower id first among equals: tf_topk_scaled's
 * order with k = n, by a stable LSD radix sort (three passes of 11 bits) of
 * ids taken in increasing order. Returns how many. */
static int32_t sort_all(tf_sampling *s, const float *z) {
    const int32_t n = s->n_vocab;
    uint32_t *ka = s->sort, *ia = ka + n, *kb = ia + n, *ib = kb + n;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (z[i] != -INFINITY) ka[m] = desc_key(z[i]), ia[m] = (uint32_t)i, m++;
    for (int shift = 0; shift < 33; shift += 11) {
        uint32_t count[2048] = {0};
        for (int32_t i = 0; i < m; i++) count[(ka[i] >> shift) & 2047]++;
        uint32_t sum = 0;
        for (int b = 0; b < 2048; b++) {
            const uint32_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (int32_t i = 0; i < m; i++) {
            const uint32_t at = count[(ka[i] >> shift) & 2047]++;
            kb[at] = ka[i], ib[at] = ia[i];
        }
        uint32_t *t = ka; ka = kb; kb = t;
        t = ia; ia = ib; ib = t;
    }
    for (int32_t i = 0; i < m; i++) s->dist.id[i] = (int32_t)ia[i];
    return m;
}

int32_t tf_sampling_top_k(const tf_sampling *s) {
    return s->cfg.temp > 0.0f && s->cfg.top_k > 0 && s->cfg.top_k < s->n_vocab ? s->cfg.top_k : 0;
}

void tf_sampling_dist_top(tf_sampling *s, const int32_t *ids, const float *z, int32_t m) {
    tf_dist *d = &s->dist;
    if (m < 1) { /* nothing valid: fall back to token 0 deterministically */
        d->n = 1; d->id[0] = 0; d->p[0] = 1.0f;
        return;
    }
    /* the softmax over the kept set only; z[0] is the row's largest */
    double total = 0;
    for (int32_t i = 0; i < m; i++) total += exp((double)z[i] - z[0]);
    for (int32_t i = 0; i < m; i++) {
        d->id[i] = ids[i];
        d->p[i] = (float)(exp((double)z[i] - z[0]) / total);
    }
    finish(d, &s->cfg, m);
}

void tf_sampling_dist(tf_sampling *s, const float *logits) {
    const tf_sampling_cfg *c = &s->cfg;
    tf_dist *d = &s->dist;
    int32_t n = s->n_vocab;
    if (c->temp <= 0.0f) {
        d->n = 1;
        d->id[0] = tf_argmax(logits, n);
        d->p[0] = 1.0f;
        return;
    }
    const int32_t top = tf_sampling_top_k(s);
    if (top > 0) { /* the top-k candidates alone decide (what a backend's topk op hands over) */
        int32_t m = tf_topk_scaled(logits, n, c->temp, top, d->id, s->work);
        tf_sampling_dist_top(s, d->id, s->work, m);
        return;
    }
    /* temperature-scaled logits, max for a stable softmax */
    float *z = s->work;
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        z[i] = isnan(logits[i]) ? -INFINITY : logits[i] / c->temp;
        if (z[i] > mx) mx = z[i];
    }
    if (mx == -INFINITY) { /* nothing valid: fall back to token 0 deterministically */
        d->n = 1; d->id[0] = 0; d->p[0] = 1.0f;
        return;
    }
    /* the softmax is over the whole vocabulary; for top-p, a growing top-K
     * until its mass covers p, and past SORT_ALL_FROM candidates every
     * token sorted at once */
    enum { SORT_ALL_FROM = 1024 };
    double total = 0;
    for (int32_t i = 0; i < n; i++) total += exp((double)z[i] - mx);
    int32_t m = -1;
    if (c->top_p < 1.0f) {
        for (int32_t kk = 64; kk < SORT_ALL_FROM && kk < n; kk *= 4) {
            m = tf_topk_scaled(logits, n, c->temp, kk, d->id, NULL);
            double mass = 0;
            for (int32_t i = 0; i < m; i++) mass += exp((double)z[d->id[i]] - mx);
            if (mass / total >= c->top_p || m < kk) break;
            m = -1;
        }
    }
    if (m < 0) m = sort_all(s, z);
    for (int32_t i = 0; i < m; i++) d->p[i] = (float)(exp((double)z[d->id[i]] - mx) / total);
    finish(d, c, m);
}

int32_t tf_sampling_draw(tf_sampling *s) {
    const tf_dist *d = &s->dist;
    double u = tf_rng_uniform(&s->rng), cum = 0;
    for (int32_t i = 0; i < d->n; i++) {
        cum += d->p[i];
        if (u < cum) return d->id[i];
    }
    return d->id[d->n - 1];
}

int32_t tf_sampling_sample(tf_sampling *s, const float *logits) {
    if (s->cfg.temp <= 0.0f) return tf_argmax(logits, s->n_vocab);
    tf_sampling_dist(s, logits);
    return tf_sampling_draw(s);
}
