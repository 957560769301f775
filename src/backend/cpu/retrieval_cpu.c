/*
 * retrieval_cpu.c — the retrieval cache's ops on the CPU (tf_rc_call in
 * backend/backend.h; kv/retrieval.h says what they mean): chunk key sums,
 * top-chunk selection and the gather into a view, each per (layer, KV head)
 * pair and split over the pool (pairs write disjoint memory).
 *
 * Exactness: a chunk's sum is accumulated in f32 in slot order, one addition
 * per slot, from zero, so it is the same bits however the slots arrived.
 * Scores are q_group . sum in f32; dividing by the chunk size would not
 * change the order of complete chunks (the only ones scored), so it is skipped.
 */
#include "backend/cpu/retrieval_cpu.h"

#include "backend/cpu/kv_layout.h"
#include "core/fp16.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

/* Pair-loops with less work than this (element operations) run on the
 * caller's thread: waking the pool costs more. */
#define RC_SERIAL_WORK (1 << 15)

/* A candidate chunk as one integer that orders like (score, then lower chunk
 * index first): high half the score's bits mapped to an unsigned order, low
 * half ~chunk. Larger key = ranks first, so selection compares integers. */
typedef uint64_t rc_key;

static inline rc_key rc_make_key(float s, int32_t j) {
    if (isnan(s)) s = -INFINITY; /* a total order; NaN ranks last */
    if (s == 0.0f) s = 0.0f;     /* -0 ties with +0, as in float comparison */
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    u ^= (uint32_t)-(int32_t)(u >> 31) | 0x80000000u; /* negative: flip all bits; else the sign bit */
    return ((rc_key)u << 32) | (uint32_t)~(uint32_t)j;
}

static inline int32_t rc_key_chunk(rc_key k) { return (int32_t)~(uint32_t)k; }

/* Per thread: candidate keys (twice), selection flags and the group query;
 * or, for the sums, one K block as floats. */
static size_t rc_stride(const tf_rc_call *c) {
    size_t stride = 2 * sizeof(rc_key) * (size_t)c->n_chunk_cap + (size_t)c->n_chunk_cap +
                    sizeof(float) * (size_t)c->full.lay.head_dim;
    size_t sums_tmp = sizeof(float) * (size_t)c->full.lay.head_dim * TF_KV_BLK;
    if (stride < sums_tmp) stride = sums_tmp;
    return (stride + TF_ALIGN - 1) / TF_ALIGN * TF_ALIGN;
}

size_t tf_cpu_rc_scratch(const tf_rc_call *c, int n_thread) {
    return rc_stride(c) * (size_t)(n_thread > 0 ? n_thread : 1);
}

static void rc_run(tf_pool *pool, tf_task_fn fn, const tf_rc_call *c, double work) {
    if (!pool || tf_pool_size(pool) < 2 || work < RC_SERIAL_WORK) fn((void *)c, 0, 1);
    else tf_pool_run(pool, fn, (void *)c);
}

static void rc_pair_range(const tf_rc_call *c, int ith, int nth, long *lo, long *hi) {
    tf_split_range((long)c->n_layer * c->full.n_head_kv, ith, nth, lo, hi);
}

static const uint8_t *rc_full_k(const tf_rc_call *c, int il, int h) {
    return tf_kv_view_k(&c->full, h) + (size_t)il * c->full_layer_stride;
}

/* ---- chunk sums ------------------------------------------------------------------ */

/* One K block row (TF_KV_BLK halves) to floats, exactly (as tf_f16_to_f32):
 * normal numbers and zeros by branch-free integer arithmetic over a fixed
 * count (the compiler vectorizes it), and the row again one element at a time
 * if it holds a subnormal, an infinity or a NaN. */
static void rc_f16_row(const tf_f16 *x, float *y) {
    uint32_t bits[TF_KV_BLK], special = 0;
    for (int i = 0; i < TF_KV_BLK; i++) {
        uint32_t h = x[i], em = h & 0x7fffu;
        uint32_t mag = em ? (em << 13) + ((uint32_t)(127 - 15) << 23) : 0;
        special |= (uint32_t)(em - 1u < 0x3ffu) | (uint32_t)(em >= 0x7c00u);
        bits[i] = ((h & 0x8000u) << 16) | mag;
    }
    memcpy(y, bits, sizeof bits);
    if (special)
        for (int i = 0; i < TF_KV_BLK; i++) y[i] = tf_f16_to_f32(x[i]);
}

/* Add slots [s, e) of one KV head's K storage kb to its chunk sums
 * (sum: [n_chunk_cap][head_dim]), zeroing a chunk when its first slot comes.
 * Each sum element gets one addition per slot, in slot order, of the key as
 * stored. f16 and quantized keys are converted a block at a time into tmp
 * (head_dim * TF_KV_BLK floats); f16 ones only when at least half a block is
 * added, else element by element. */
static void rc_sum_slots(float *sum, const tf_kv_layout *L, const uint8_t *kb, int32_t c, int32_t s, int32_t e,
                         float *tmp) {
    const int hd = L->head_dim;
    const size_t blk_elems = (size_t)hd * TF_KV_BLK;
    while (s < e) {
        int32_t blk = s / TF_KV_BLK, bend = (blk + 1) * TF_KV_BLK;
        if (bend > e) bend = e;
        const float *kf = NULL; /* the block as floats, when at hand */
        const tf_f16 *kh = (const tf_f16 *)kb + (size_t)blk * blk_elems;
        if (L->type == TF_DTYPE_F32) kf = (const float *)kb + (size_t)blk * blk_elems;
        else if (L->type != TF_DTYPE_F16) {
            tf_kv_head_k_block_f32(L, kb, blk, tmp);
            kf = tmp;
        } else if (bend - s >= TF_KV_BLK / 2) {
            for (int d = 0; d < hd; d++) rc_f16_row(kh + (size_t)d * TF_KV_BLK, tmp + (size_t)d * TF_KV_BLK);
            kf = tmp;
        }
        while (s < bend) { /* the runs of this block inside one chunk */
            int32_t j = s / c, end = (j + 1) * c < bend ? (j + 1) * c : bend;
            int i0 = s % TF_KV_BLK, i1 = i0 + (end - s);
            float *sj = sum + (size_t)j * hd;
            if (s == j * c) memset(sj, 0, sizeof(float) * (size_t)hd);
            for (int d = 0; d < hd; d++) {
                float acc = sj[d];
                if (kf)
                    for (int i = i0; i < i1; i++) acc += kf[(size_t)d * TF_KV_BLK + i];
                else
                    for (int i = i0; i < i1; i++) acc += tf_f16_to_f32(kh[(size_t)d * TF_KV_BLK + i]);
                sj[d] = acc;
            }
            s = end;
        }
    }
}

static void rc_sums_task(void *arg, int ith, int nth) {
    const tf_rc_call *c = arg;
    const int hd = c->full.lay.head_dim, nkv = c->full.n_head_kv;
    float *tmp = (float *)((uint8_t *)c->scratch + (size_t)ith * rc_stride(c));
    long lo, hi;
    rc_pair_range(c, ith, nth, &lo, &hi);
    for (long pr = lo; pr < hi; pr++) {
        int il = (int)(pr / nkv), h = (int)(pr % nkv);
        rc_sum_slots(c->sums + (size_t)pr * c->n_chunk_cap * hd, &c->full.lay, rc_full_k(c, il, h), c->chunk,
                     c->s0 / c->chunk * c->chunk, c->s1, tmp);
    }
}

void tf_cpu_rc_sums(const tf_rc_call *c, tf_pool *pool) {
    if (c->s1 <= c->s0) return;
    rc_run(pool, rc_sums_task, c, (double)(c->s1 - c->s0 / c->chunk * c->chunk) * c->n_layer * c->full.n_head_kv *
                                      c->full.lay.head_dim);
}

/* ---- selection ------------------------------------------------------------------ */

static inline void rc_swap(rc_key *a, int32_t i, int32_t j) {
    rc_key t = a[i];
    a[i] = a[j];
    a[j] = t;
}

/* Sift down in a min-heap (the root is the worst of the k kept). */
static void rc_sift_min(rc_key *a, int32_t n, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, w = l;
        if (l >= n) return;
        if (l + 1 < n && a[l + 1] < a[l]) w = l + 1;
        if (a[i] <= a[w]) return;
        rc_swap(a, i, w);
        i = w;
    }
}

/* Move the k largest of a[0, n) to a[0, k) (any order) with a k-heap: O(n log k). */
static void rc_heap_select(rc_key *a, int32_t n, int32_t k) {
    if (k <= 0 || k >= n) return;
    for (int32_t i = k / 2 - 1; i >= 0; i--) rc_sift_min(a, k, i);
    for (int32_t t = k; t < n; t++)
        if (a[t] > a[0]) {
            rc_swap(a, 0, t);
            rc_sift_min(a, k, 0);
        }
}

/* Move the k largest of a[0, n) (distinct keys) to a[0, k), in any order:
 * quickselect with a median-of-three pivot, falling back to the heap past a
 * depth limit, so the worst case stays O(n log n) and the usual one is O(n). */
static void rc_select_top(rc_key *a, int32_t n, int32_t k) {
    if (k <= 0 || k >= n) return;
    int32_t lo = 0, hi = n;
    int depth = 8;
    for (int32_t m = n; m > 1; m >>= 1) depth += 2;
    while (hi - lo > 16) {
        if (depth-- <= 0) {
            rc_heap_select(a + lo, hi - lo, k - lo);
            return;
        }
        int32_t mid = lo + (hi - lo) / 2;
        if (a[mid] > a[lo]) rc_swap(a, mid, lo);
        if (a[hi - 1] > a[lo]) rc_swap(a, hi - 1, lo);
        if (a[hi - 1] > a[mid]) rc_swap(a, hi - 1, mid);
        rc_swap(a, lo, mid); /* median at lo; a[hi-1] is smaller */
        rc_key p = a[lo];
        int32_t i = lo - 1, j = hi;
        for (;;) {
            do i++; while (a[i] > p);
            do j--; while (a[j] < p);
            if (i >= j) break;
            rc_swap(a, i, j);
        }
        /* a[lo, j] >= p >= a[j+1, hi); lo <= j < hi-1 */
        if (k == j + 1) return;
        if (k < j + 1) hi = j + 1;
        else lo = j + 1;
    }
    for (int32_t i = lo + 1; i < hi; i++) { /* insertion sort, largest first */
        rc_key x = a[i];
        int32_t t = i;
        for (; t > lo && x > a[t - 1]; t--) a[t] = a[t - 1];
        a[t] = x;
    }
}

/* Sample size of rc_top_k's threshold. */
#define RC_SAMPLE 256

/* The k largest of a[0, n) (distinct keys): returns a or buf (room for n),
 * whichever then holds them in its first k elements (any order). For large n,
 * a threshold taken from an evenly spaced sample (a rank that leaves about
 * k + 3 sigma keys above it) first keeps, without branches, only the keys
 * at or above it, so the quickselect (whose compares mispredict) runs on few;
 * if fewer than k were kept, the whole array is selected instead. */
static const rc_key *rc_top_k(rc_key *a, rc_key *buf, int32_t n, int32_t k) {
    if (k <= 0 || k >= n) return a;
    double f = (double)k / n * RC_SAMPLE;
    int32_t r = (int32_t)ceil(f + 3.0 * sqrt(f)) + 1;
    if (n >= 8 * RC_SAMPLE && r < RC_SAMPLE / 2) {
        rc_key smp[RC_SAMPLE];
        for (int i = 0; i < RC_SAMPLE; i++) smp[i] = a[(int64_t)(2 * i + 1) * n / (2 * RC_SAMPLE)];
        rc_select_top(smp, RC_SAMPLE, r);
        rc_key t = smp[0];
        for (int i = 1; i < r; i++) t = smp[i] < t ? smp[i] : t;
        int32_t cnt = 0;
        for (int32_t i = 0; i < n; i++) {
            buf[cnt] = a[i];
            cnt += a[i] >= t;
        }
        if (cnt >= k) {
            rc_select_top(buf, cnt, k);
            return buf;
        }
    }
    rc_select_top(a, n, k);
    return a;
}

/* Dot product in f32 with 8 independent lanes (vectorizes). */
static float rc_dot(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int d = 0;
    for (; d + 8 <= n; d += 8)
        for (int l = 0; l < 8; l++) acc[l] += a[d + l] * b[d + l];
    float tail = 0.0f;
    for (; d < n; d++) tail += a[d] * b[d];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

static void rc_select_task(void *arg, int ith, int nth) {
    const tf_rc_call *c = arg;
    const int hd = c->full.lay.head_dim, nkv = c->full.n_head_kv, g = c->n_head / nkv;
    const size_t stride = rc_stride(c);
    uint8_t *scr = (uint8_t *)c->scratch + (size_t)ith * stride;
    rc_key *cand = (rc_key *)scr, *cand_buf = cand + c->n_chunk_cap;
    uint8_t *flag = (uint8_t *)(cand_buf + c->n_chunk_cap);
    float *qg = (float *)(scr + stride - sizeof(float) * (size_t)hd);
    long lo, hi;
    rc_pair_range(c, ith, nth, &lo, &hi);
    for (long pr = lo; pr < hi; pr++) {
        int il = (int)(pr / nkv), h = (int)(pr % nkv);
        int32_t *sel = c->sel + (size_t)pr * c->max_sel, ns = 0;
        if (c->k < 0) { /* everything fits */
            int32_t nch = c->n_full + (c->part > 0);
            for (int32_t j = 0; j < nch; j++) sel[ns++] = j;
            continue;
        }
        /* the group's query: scores add over the heads sharing h */
        const float *qh = c->q + (size_t)il * c->n_head * hd + (size_t)h * g * hd;
        for (int d = 0; d < hd; d++) qg[d] = qh[d];
        for (int i = 1; i < g; i++)
            for (int d = 0; d < hd; d++) qg[d] += qh[(size_t)i * hd + d];
        const float *sum = c->sums + (size_t)pr * c->n_chunk_cap * hd;
        const int32_t j0 = 1, j1 = c->n_full - c->r_chunks, m = j1 - j0; /* middle candidates */
        for (int32_t j = j0; j < j1; j++) cand[j - j0] = rc_make_key(rc_dot(qg, sum + (size_t)j * hd, hd), j);
        const rc_key *top = rc_top_k(cand, cand_buf, m, c->k);
        memset(flag, 0, (size_t)m);
        for (int32_t t = 0; t < c->k; t++) flag[rc_key_chunk(top[t]) - j0] = 1;
        sel[ns++] = 0;
        for (int32_t t = 0; t < m; t++)
            if (flag[t]) sel[ns++] = j0 + t;
        for (int32_t j = j1; j < c->n_full; j++) sel[ns++] = j;
        if (c->part) sel[ns++] = c->n_full;
    }
}

void tf_cpu_rc_select(const tf_rc_call *c, tf_pool *pool) {
    double work = c->k < 0 ? 0.0 : (double)c->n_full * c->n_layer * c->full.n_head_kv * c->full.lay.head_dim;
    rc_run(pool, rc_select_task, c, work);
}

/* ---- gather --------------------------------------------------------------------- */

static void rc_gather_task(void *arg, int ith, int nth) {
    const tf_rc_call *c = arg;
    const int nkv = c->full.n_head_kv;
    long lo, hi;
    rc_pair_range(c, ith, nth, &lo, &hi);
    for (long pr = lo; pr < hi; pr++) {
        int il = (int)(pr / nkv), h = (int)(pr % nkv);
        const int32_t *sel = c->sel + (size_t)pr * c->max_sel;
        uint8_t *dk = tf_kv_view_k(&c->view, h) + (size_t)il * c->view_layer_stride;
        uint8_t *dv = tf_kv_view_v(&c->view, h) + (size_t)il * c->view_layer_stride;
        const uint8_t *sk = rc_full_k(c, il, h);
        const uint8_t *sv = tf_kv_view_v(&c->full, h) + (size_t)il * c->full_layer_stride;
        int32_t t = 0, s, n, o = 0;
        while (tf_rc_next_run(sel, c->n_sel_chunks, c->chunk, c->n_tok, &t, &s, &n)) {
            tf_kv_head_copy(&c->full.lay, dk, dv, o, sk, sv, s, n);
            o += n;
        }
    }
}

void tf_cpu_rc_gather(const tf_rc_call *c, tf_pool *pool) {
    rc_run(pool, rc_gather_task, c, (double)c->n_sel_chunks * c->chunk * c->n_layer * c->full.n_head_kv *
                                        c->full.lay.head_dim);
}
