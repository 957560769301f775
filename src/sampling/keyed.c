/* keyed.c — keyed draws and keyed verification (contract in keyed.h). */
#include "sampling/keyed.h"

#include "core/rng.h"

#include <math.h>

/* splitmix64's output for state v (core/rng.h): a bijective 64-bit mix. */
static inline uint64_t hash64(uint64_t v) { return tf_splitmix64(&v); }

uint64_t tf_keyed_key(uint64_t seed, int64_t pos) {
    return hash64(hash64(seed) ^ hash64((uint64_t)pos + 0x8cb92ba72f3d8dd7ull));
}

double tf_keyed_uniform(uint64_t key, int32_t id) {
    const uint64_t h = hash64(key ^ hash64((uint64_t)(uint32_t)id + 0x632be59bd9b4e019ull));
    return ((double)(h >> 11) + 0.5) * 0x1.0p-53;
}

int32_t tf_keyed_draw(const tf_dist *d, uint64_t key) {
    if (d->n == 1) return d->id[0];
    double best = INFINITY;
    int32_t out = d->id[0];
    for (int32_t i = 0; i < d->n; i++) {
        const double p = d->p[i];
        if (!(p > 0)) continue;
        const double u = tf_keyed_uniform(key, d->id[i]);
        /* E / p < best needs E = -log u < best p, and -log u >= 1 - u */
        if (u <= 1.0 - best * p) continue;
        const double r = -log(u) / p;
        if (r < best) best = r, out = d->id[i];
    }
    return out;
}

int32_t tf_keyed_draw_ref(const tf_dist *d, uint64_t key) {
    double best = INFINITY;
    int32_t out = d->id[0];
    for (int32_t i = 0; i < d->n; i++) {
        if (!(d->p[i] > 0)) continue;
        const double r = -log(tf_keyed_uniform(key, d->id[i])) / (double)d->p[i];
        if (r < best) best = r, out = d->id[i];
    }
    return out;
}

bool tf_keyed_verify(const tf_verifier *v, const tf_dist *p, int32_t x, uint64_t key, int32_t *out) {
    if (v->mode == TF_VERIFY_BROKEN_ACCEPT_ALL) {
        *out = x;
        return true;
    }
    *out = tf_keyed_draw(p, key);
    return *out == x;
}
