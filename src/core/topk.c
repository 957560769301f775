/*
 * topk.c — see topk.h. A min-heap of the k best seen so far (its root the
 * worst kept), then a heap sort into order; every comparison recomputes
 * z = logit / temp, which is the same float each time. Once the heap is full
 * most entries are turned away by one comparison of raw logits.
 */
#include "core/topk.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline float zval(const float *l, int32_t i, float temp) { return isnan(l[i]) ? -INFINITY : l[i] / temp; }

/* Order: larger z first, then lower id (deterministic ties). */
static inline bool before(float va, int32_t ia, float vb, int32_t ib) { return va > vb || (va == vb && ia < ib); }

/* Sift the entry at c down a heap of m entries whose root is the worst. */
static void sift_down(const float *l, float temp, int32_t *ids, int32_t m, int32_t c) {
    for (;;) {
        int32_t a = 2 * c + 1, b = a + 1, w = c;
        if (a < m && before(zval(l, ids[w], temp), ids[w], zval(l, ids[a], temp), ids[a])) w = a;
        if (b < m && before(zval(l, ids[w], temp), ids[w], zval(l, ids[b], temp), ids[b])) w = b;
        if (w == c) return;
        int32_t t = ids[w];
        ids[w] = ids[c];
        ids[c] = t;
        c = w;
    }
}

int32_t tf_topk_scaled(const float *logits, int32_t n, float temp, int32_t k, int32_t *ids, float *z) {
    int32_t m = 0, i = 0;
    for (; i < n && m < k; i++) { /* the first k finite entries: a heap of them */
        if (zval(logits, i, temp) == -INFINITY) continue;
        int32_t c = m++;
        ids[c] = i;
        while (c > 0) { /* sift up */
            int32_t par = (c - 1) / 2;
            if (!before(zval(logits, ids[par], temp), ids[par], zval(logits, ids[c], temp), ids[c])) break;
            int32_t t = ids[par];
            ids[par] = ids[c];
            ids[c] = t;
            c = par;
        }
    }
    /* The heap is full. Entry i replaces the root only if it comes before it:
     * its z above the root's (every id in the heap is below i, so an equal z
     * does not), which needs its logit above the root's, as the division by
     * temp > 0 never reverses an order. So the scan compares raw logits (NaN
     * fails the comparison) and divides only for the few that pass. */
    if (m == k && i < n) {
        float root_l = logits[ids[0]];
        while (i < n) {
            const int32_t end = n - i < 16 ? n : i + 16; /* 16 at a time, skipped as a whole when none passes */
            int any = 0;
            if (end - i == 16) {
                v4f a[4];
                memcpy(a, logits + i, sizeof a);
                const v4f r = {root_l, root_l, root_l, root_l};
                const v4i gt = (a[0] > r) | (a[1] > r) | (a[2] > r) | (a[3] > r);
                any = (gt[0] | gt[1] | gt[2] | gt[3]) != 0;
            } else {
                for (int32_t j = i; j < end; j++) any |= logits[j] > root_l;
            }
            for (; any && i < end; i++) {
                if (!(logits[i] > root_l)) continue;
                if (!before(zval(logits, i, temp), i, zval(logits, ids[0], temp), ids[0])) continue;
                ids[0] = i;
                sift_down(logits, temp, ids, m, 0);
                root_l = logits[ids[0]];
            }
            i = end;
        }
    }
    for (int32_t end = m - 1; end > 0; end--) { /* heap sort: the worst to the end */
        int32_t t = ids[0];
        ids[0] = ids[end];
        ids[end] = t;
        sift_down(logits, temp, ids, end, 0);
    }
    if (z)
        for (int32_t j = 0; j < m; j++) z[j] = zval(logits, ids[j], temp);
    return m;
}
