/*
 * topk.c — see topk.h. A min-heap of the k best seen so far (its root the
 * worst kept), then a heap sort into order; every comparison recomputes
 * z = logit / temp, which is the same float each time.
 */
#include "core/topk.h"

#include <math.h>
#include <stdbool.h>

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
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        const float v = zval(logits, i, temp);
        if (v == -INFINITY) continue;
        if (m < k) {
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
        } else if (before(v, i, zval(logits, ids[0], temp), ids[0])) {
            ids[0] = i;
            sift_down(logits, temp, ids, m, 0);
        }
    }
    for (int32_t end = m - 1; end > 0; end--) { /* heap sort: the worst to the end */
        int32_t t = ids[0];
        ids[0] = ids[end];
        ids[end] = t;
        sift_down(logits, temp, ids, end, 0);
    }
    if (z)
        for (int32_t i = 0; i < m; i++) z[i] = zval(logits, ids[i], temp);
    return m;
}
