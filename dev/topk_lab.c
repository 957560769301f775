/*
 * topk_lab.c — lab for sampling's candidate selection (core/topk.c,
 * tf_topk_scaled): on random logits of a vocabulary's size, check it against
 * a full sort (larger z = logit / temp first, lower id first among equals),
 * then time it next to the plain heap it replaced (every entry divided by
 * temp and compared with the root's z, recomputed each time), one JSON line
 * per vocabulary. Times are the median over repetitions.
 *
 * Build (after `make lib`, from the repository root):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc dev/topk_lab.c build/libtriforce.a \
 *      -lpcre2-8 -lm -lpthread -o build/topk_lab
 * Run:
 *   build/topk_lab [k=40] [temp=0.6] [reps=200]
 *
 * The logits are uniform in [-10, 10) in id order, with a tenth of them set
 * to a few shared values (ties) in the check; a row of a real model's logits
 * has its few large values scattered the same way, so the heap's root rises
 * quickly and the scan turns most entries away.
 */
#include "core/rng.h"
#include "core/topk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float zof(const float *l, int32_t i, float temp) { return isnan(l[i]) ? -INFINITY : l[i] / temp; }
static int before(float va, int32_t ia, float vb, int32_t ib) { return va > vb || (va == vb && ia < ib); }

/* The heap before the scan's filter: every entry's z against the root's. */
static void sift(const float *l, float temp, int32_t *ids, int32_t m, int32_t c) {
    for (;;) {
        int32_t a = 2 * c + 1, b = a + 1, w = c;
        if (a < m && before(zof(l, ids[w], temp), ids[w], zof(l, ids[a], temp), ids[a])) w = a;
        if (b < m && before(zof(l, ids[w], temp), ids[w], zof(l, ids[b], temp), ids[b])) w = b;
        if (w == c) return;
        int32_t t = ids[w];
        ids[w] = ids[c], ids[c] = t, c = w;
    }
}
static int32_t topk_every_entry(const float *l, int32_t n, float temp, int32_t k, int32_t *ids) {
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        const float v = zof(l, i, temp);
        if (v == -INFINITY) continue;
        if (m < k) {
            int32_t c = m++;
            ids[c] = i;
            while (c > 0 && before(zof(l, ids[c], temp), ids[c], zof(l, ids[(c - 1) / 2], temp), ids[(c - 1) / 2])) {
                int32_t p = (c - 1) / 2, t = ids[p];
                ids[p] = ids[c], ids[c] = t, c = p;
            }
        } else if (before(v, i, zof(l, ids[0], temp), ids[0])) {
            ids[0] = i;
            sift(l, temp, ids, m, 0);
        }
    }
    for (int32_t end = m - 1; end > 0; end--) {
        int32_t t = ids[0];
        ids[0] = ids[end], ids[end] = t;
        sift(l, temp, ids, end, 0);
    }
    return m;
}

typedef struct { float z; int32_t id; } zid;
static int zid_cmp(const void *a, const void *b) {
    const zid *x = a, *y = b;
    if (x->z != y->z) return x->z > y->z ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const int32_t k = argc > 1 ? atoi(argv[1]) : 40;
    const float temp = argc > 2 ? (float)atof(argv[2]) : 0.6f;
    const int reps = argc > 3 ? atoi(argv[3]) : 200;
    if (k < 1 || k > TF_TOPK_MAX || !(temp > 0) || reps < 1) {
        fprintf(stderr, "usage: topk_lab [k=40 (1..%d)] [temp=0.6 (> 0)] [reps=200]\n", TF_TOPK_MAX);
        return 2;
    }
    static const int32_t vocabs[] = {32000, 49152, 128256};
    const int32_t nmax = 128256;
    float *l = malloc(sizeof(float) * (size_t)nmax);
    zid *all = malloc(sizeof(zid) * (size_t)nmax);
    double *t = malloc(sizeof(double) * (size_t)reps);
    int32_t ids[TF_TOPK_MAX], ref[TF_TOPK_MAX];
    if (!l || !all || !t) return 1;
    tf_rng rng;
    tf_rng_seed(&rng, 20261129);
    for (size_t vi = 0; vi < sizeof vocabs / sizeof vocabs[0]; vi++) {
        const int32_t n = vocabs[vi];
        /* the check, with ties */
        for (int32_t i = 0; i < n; i++) {
            const double u = tf_rng_uniform(&rng);
            l[i] = (float)(20.0 * tf_rng_uniform(&rng) - 10.0);
            if (u < 0.1) l[i] = (float)(9.0 + (int)(u * 40.0) * 0.25);
        }
        int32_t m = tf_topk_scaled(l, n, temp, k, ids, NULL), nf = 0;
        for (int32_t i = 0; i < n; i++) all[nf] = (zid){zof(l, i, temp), i}, nf++;
        qsort(all, (size_t)nf, sizeof *all, zid_cmp);
        for (int32_t i = 0; i < k; i++) ref[i] = all[i].id;
        const int ok = m == k && memcmp(ids, ref, sizeof(int32_t) * (size_t)k) == 0;
        /* the timing, on logits without ties */
        for (int32_t i = 0; i < n; i++) l[i] = (float)(20.0 * tf_rng_uniform(&rng) - 10.0);
        double med[2];
        for (int alg = 0; alg < 2; alg++) {
            for (int r = 0; r < reps; r++) {
                const double t0 = now();
                if (alg == 0) tf_topk_scaled(l, n, temp, k, ids, NULL);
                else topk_every_entry(l, n, temp, k, ids);
                t[r] = now() - t0;
            }
            qsort(t, (size_t)reps, sizeof *t, cmp_double);
            med[alg] = t[reps / 2];
        }
        printf("{\"n_vocab\": %d, \"k\": %d, \"temp\": %g, \"reps\": %d, \"equal_to_sort\": %s, "
               "\"us_topk_scaled\": %.2f, \"us_every_entry\": %.2f, \"speedup\": %.2f}\n",
               n, k, temp, reps, ok ? "true" : "false", 1e6 * med[0], 1e6 * med[1], med[1] / med[0]);
        if (!ok) return 1;
    }
    free(l);
    free(all);
    free(t);
    return 0;
}
