/*
 * rng.h — explicit-state PRNG (xoshiro256**, seeded through splitmix64).
 * Every sampler owns its state; nothing is global.
 */
#ifndef TF_CORE_RNG_H
#define TF_CORE_RNG_H

#include <stdint.h>

typedef struct tf_rng { uint64_t s[4]; } tf_rng;

static inline uint64_t tf_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void tf_rng_seed(tf_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = tf_splitmix64(&seed);
}

static inline uint64_t tf_rng_next(tf_rng *r) {
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5, res = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return res;
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double tf_rng_uniform(tf_rng *r) { return (double)(tf_rng_next(r) >> 11) * 0x1.0p-53; }

#endif
