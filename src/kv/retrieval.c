/*
 * retrieval.c — retrieval cache C_r: chunk key sums, top-chunk selection and
 * the gather into a view (see retrieval.h for the model).
 *
 * Work is done per (layer, KV head) pair and split over the pool: pairs are
 * independent everywhere (sums, selection and gather write disjoint memory).
 *
 * Exactness: a chunk's sum is accumulated in f32 in slot order, one addition
 * per slot, so it is the same bits whether the slots arrive in one append or
 * many, and after a rollback (the partial chunk is re-summed from its first
 * slot). Scores are q_group . sum in f32; dividing by c would not change the
 * order of complete chunks (the only ones scored), so it is skipped.
 */
#include "kv/retrieval.h"

#include "core/fp16.h"
#include "core/mem.h"

#include <math.h>
#include <stdlib.h>
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

/* ---- parameters ----------------------------------------------------------------- */

tf_rcache_params tf_rcache_default_params(void) {
    tf_rcache_params p = {.chunk = 8, .budget = 4096, .recent = 16};
    return p;
}

static int64_t rc_min_budget(const tf_rcache_params *p) {
    int64_t c = p->chunk, r = ((int64_t)p->recent + c - 1) / c;
    return c + r * c + (c - 1);
}

tf_status tf_rcache_check_params(const tf_rcache_params *p, tf_err *err) {
    if (!p) return tf_errf(err, TF_ERR_INVALID_ARG, "retrieval cache: params are NULL");
    if (p->chunk < 1 || p->chunk > TF_RCACHE_MAX_CHUNK)
        return tf_errf(err, TF_ERR_INVALID_ARG, "retrieval cache chunk %d: expected 1..%d", p->chunk,
                       TF_RCACHE_MAX_CHUNK);
    if (p->recent < 0 || p->recent > INT32_MAX / 4)
        return tf_errf(err, TF_ERR_INVALID_ARG, "retrieval cache recent window %d: expected 0..%d", p->recent,
                       INT32_MAX / 4);
    int64_t min_b = rc_min_budget(p);
    if (p->budget < min_b || p->budget > INT32_MAX / 2)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "retrieval cache budget %d: expected %lld..%d (first chunk %d + recent window %lld "
                       "rounded to chunks + up to %d slots of a partial chunk)",
                       p->budget, (long long)min_b, INT32_MAX / 2, p->chunk, (long long)(min_b - 2 * p->chunk + 1),
                       p->chunk - 1);
    return TF_OK;
}

/* ---- init / free ---------------------------------------------------------------- */

static size_t rc_sum_bytes(const tf_rcache *rc) {
    return (size_t)rc->n_layer * rc->n_head_kv * rc->n_chunk_cap * rc->head_dim * sizeof(float);
}

void tf_rcache_free(tf_rcache *rc) {
    if (rc->sum) tf_free_pages(rc->sum, rc_sum_bytes(rc));
    tf_free(rc->sel);
    tf_free(rc->scratch);
    memset(rc, 0, sizeof *rc);
}

static tf_status rc_check_full(const tf_kv_cache *full, tf_err *err) {
    if (!full || !full->k || full->n_layer < 1 || full->n_head_kv < 1 || full->head_dim < 1 || full->n_slots < 1 ||
        tf_kv_check_type((tf_dtype)full->type, full->head_dim, NULL) != TF_OK)
        return tf_errf(err, TF_ERR_INVALID_ARG, "retrieval cache: the full KV cache is not initialized");
    return TF_OK;
}

tf_status tf_rcache_init(tf_rcache *rc, const tf_kv_cache *full, const tf_rcache_params *p, tf_pool *pool,
                         tf_err *err) {
    memset(rc, 0, sizeof *rc);
    TF_TRY(rc_check_full(full, err));
    TF_TRY(tf_rcache_check_params(p, err));
    const int32_t c = p->chunk;
    rc->p = *p;
    rc->n_layer = full->n_layer;
    rc->n_head_kv = full->n_head_kv;
    rc->head_dim = full->head_dim;
    rc->n_chunk_cap = (int32_t)(((int64_t)full->n_slots + c - 1) / c);
    rc->r_chunks = (int32_t)(((int64_t)p->recent + c - 1) / c);
    int64_t sel_chunks = ((int64_t)p->budget + c - 1) / c;
    rc->max_sel = (int32_t)(sel_chunks < rc->n_chunk_cap ? sel_chunks : rc->n_chunk_cap);
    rc->sel_n_tok = -1;
    rc->pool = pool;
    rc->n_thread = pool ? tf_pool_size(pool) : 1;

    uint64_t pairs = (uint64_t)rc->n_layer * (uint64_t)rc->n_head_kv, pair_chunks, sum_b, sel_b, scr_b;
    if (!tf_mul_ok(pairs, (uint64_t)rc->n_chunk_cap, &pair_chunks) ||
        !tf_mul_ok(pair_chunks, (uint64_t)rc->head_dim * sizeof(float), &sum_b) ||
        !tf_mul_ok(pair_chunks, 2 * sizeof(rc_key) + 1, &scr_b) || /* bounds each thread's stride too */
        !tf_mul_ok(pairs * (uint64_t)rc->max_sel, sizeof(int32_t), &sel_b) || sum_b > SIZE_MAX / 2) {
        memset(rc, 0, sizeof *rc);
        return tf_errf(err, TF_ERR_NOMEM, "retrieval cache for %d slots overflows the address space", full->n_slots);
    }
    /* per thread: candidate keys (twice), selection flags and the group query;
     * or, when the sums are updated, one K block as floats */
    size_t stride = 2 * sizeof(rc_key) * (size_t)rc->n_chunk_cap + (size_t)rc->n_chunk_cap +
                    sizeof(float) * (size_t)rc->head_dim;
    size_t sums_tmp = sizeof(float) * (size_t)rc->head_dim * TF_KV_BLK; /* rc_sum_slots' block */
    if (stride < sums_tmp) stride = sums_tmp;
    stride = (stride + TF_ALIGN - 1) / TF_ALIGN * TF_ALIGN;
    scr_b = (uint64_t)stride * (uint64_t)rc->n_thread;
    rc->scratch_stride = stride;
    rc->sum = tf_alloc_pages((size_t)sum_b);
    rc->sel = tf_calloc((size_t)sel_b);
    rc->scratch = tf_alloc((size_t)scr_b);
    if (!rc->sum || !rc->sel || !rc->scratch) {
        tf_rcache_free(rc);
        return tf_errf(err, TF_ERR_NOMEM, "cannot reserve a retrieval cache for %d slots (%.1f MiB)", full->n_slots,
                       (double)(sum_b + sel_b + scr_b) / (1 << 20));
    }
    rc->bytes = (size_t)(sum_b + sel_b + scr_b);
    return TF_OK;
}

/* ---- running the pair loops ----------------------------------------------------- */

typedef struct rc_job {
    tf_rcache *rc;
    const tf_rcache *rcc;
    const tf_kv_cache *full;
    tf_kv_cache *view;
    const float *q;
    int32_t n_head;
    int32_t s0, s1; /* slot range (sums) */
} rc_job;

static void rc_run(const tf_rcache *rc, tf_task_fn fn, rc_job *job, double work) {
    if (!rc->pool || rc->n_thread < 2 || work < RC_SERIAL_WORK) fn(job, 0, 1);
    else tf_pool_run(rc->pool, fn, job);
}

static void rc_pair_range(const tf_rcache *rc, int ith, int nth, long *lo, long *hi) {
    tf_split_range((long)rc->n_layer * rc->n_head_kv, ith, nth, lo, hi);
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

/* Add slots [s, e) of K store (il, h) of kv to the chunk sums of that pair
 * (sum: [n_chunk_cap][head_dim]), zeroing a chunk when its first slot comes.
 * Each sum element gets one addition per slot, in slot order, of the key as
 * stored. f16 and quantized keys are converted a block at a time into tmp
 * (head_dim * TF_KV_BLK floats); f16 ones only when at least half a block is
 * added, else element by element. */
static void rc_sum_slots(float *sum, const tf_kv_cache *kv, int il, int h, int32_t c, int32_t s, int32_t e,
                         float *tmp) {
    const int hd = kv->head_dim;
    const uint8_t *kb = tf_kv_k(kv, il, h);
    const size_t blk_elems = (size_t)hd * TF_KV_BLK;
    while (s < e) {
        int32_t blk = s / TF_KV_BLK, bend = (blk + 1) * TF_KV_BLK;
        if (bend > e) bend = e;
        const float *kf = NULL; /* the block as floats, when at hand */
        const tf_f16 *kh = (const tf_f16 *)kb + (size_t)blk * blk_elems;
        if (kv->type == TF_DTYPE_F32) kf = (const float *)kb + (size_t)blk * blk_elems;
        else if (kv->type != TF_DTYPE_F16) {
            tf_kv_k_block_f32(kv, il, h, blk, tmp);
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

static float *rc_pair_sums(tf_rcache *rc, int il, int h) {
    return rc->sum + ((size_t)il * rc->n_head_kv + h) * rc->n_chunk_cap * rc->head_dim;
}

static void rc_sums_task(void *arg, int ith, int nth) {
    rc_job *job = arg;
    tf_rcache *rc = job->rc;
    float *tmp = (float *)(rc->scratch + (size_t)ith * rc->scratch_stride); /* the selection's scratch, unused now */
    long lo, hi;
    rc_pair_range(rc, ith, nth, &lo, &hi);
    for (long pr = lo; pr < hi; pr++) {
        int il = (int)(pr / rc->n_head_kv), h = (int)(pr % rc->n_head_kv);
        rc_sum_slots(rc_pair_sums(rc, il, h), job->full, il, h, rc->p.chunk, job->s0, job->s1, tmp);
    }
}

/* Re-sum slots [s0, s1) for every pair; s0 must be a chunk start or the
 * current covered length. */
static void rc_sum_range(tf_rcache *rc, const tf_kv_cache *full, int32_t s0, int32_t s1) {
    if (s1 <= s0) return;
    rc_job job = {.rc = rc, .full = full, .s0 = s0, .s1 = s1};
    rc_run(rc, rc_sums_task, &job, (double)(s1 - s0) * rc->n_layer * rc->n_head_kv * rc->head_dim);
}

void tf_rcache_truncate(tf_rcache *rc, const tf_kv_cache *full, int32_t n) {
    if (n < 0) n = 0;
    if (n >= rc->n_tok) return;
    int32_t c = rc->p.chunk, start = n / c * c;
    rc->n_tok = start;
    rc_sum_range(rc, full, start, n); /* the partial chunk, from its first slot */
    rc->n_tok = n;
}

void tf_rcache_note_append(tf_rcache *rc, const tf_kv_cache *full, int32_t slot0, int32_t n) {
    TF_ASSERT(slot0 >= 0 && n >= 0 && (int64_t)slot0 + n <= full->n_slots);
    TF_ASSERT(full->n_layer == rc->n_layer && full->n_head_kv == rc->n_head_kv && full->head_dim == rc->head_dim);
    TF_ASSERT((int64_t)full->n_slots <= (int64_t)rc->n_chunk_cap * rc->p.chunk);
    int32_t end = slot0 + n;
    if (slot0 < rc->n_tok) tf_rcache_truncate(rc, full, slot0);
    if (end <= rc->n_tok) return;
    rc_sum_range(rc, full, rc->n_tok, end);
    rc->n_tok = end;
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

/* The shape of a selection of n_tok slots: complete chunks, slots of the
 * partial chunk and how many middle chunks are chosen (-1: everything). */
typedef struct rc_plan {
    int32_t n_full, part, k;
} rc_plan;

static rc_plan rc_make_plan(const tf_rcache *rc, int32_t n_tok) {
    rc_plan pl;
    int32_t c = rc->p.chunk;
    pl.n_full = n_tok / c;
    pl.part = n_tok % c;
    pl.k = -1;
    if (n_tok > rc->p.budget) {
        /* n_tok > B >= c (2 + r) - 1, so n_full >= r + 2: the first chunk and
         * the recent window do not overlap and m >= 1 middle chunks exist. */
        int32_t m = pl.n_full - rc->r_chunks - 1;
        int32_t k = (rc->p.budget - c - rc->r_chunks * c - pl.part) / c;
        pl.k = k < m ? k : m;
    }
    return pl;
}

static void rc_select_task(void *arg, int ith, int nth) {
    rc_job *job = arg;
    tf_rcache *rc = job->rc;
    const int hd = rc->head_dim, g = job->n_head / rc->n_head_kv;
    const int32_t n_tok = rc->n_tok;
    const rc_plan pl = rc_make_plan(rc, n_tok);
    uint8_t *scr = rc->scratch + (size_t)ith * rc->scratch_stride;
    rc_key *cand = (rc_key *)scr, *cand_buf = cand + rc->n_chunk_cap;
    uint8_t *flag = (uint8_t *)(cand_buf + rc->n_chunk_cap);
    float *qg = (float *)(scr + rc->scratch_stride - sizeof(float) * (size_t)hd);
    long lo, hi;
    rc_pair_range(rc, ith, nth, &lo, &hi);
    for (long pr = lo; pr < hi; pr++) {
        int il = (int)(pr / rc->n_head_kv), h = (int)(pr % rc->n_head_kv);
        int32_t *sel = rc->sel + (size_t)pr * rc->max_sel, ns = 0;
        if (pl.k < 0) { /* everything fits */
            int32_t nch = pl.n_full + (pl.part > 0);
            for (int32_t j = 0; j < nch; j++) sel[ns++] = j;
            continue;
        }
        /* the group's query: scores add over the heads sharing h */
        const float *qh = job->q + (size_t)il * job->n_head * hd + (size_t)h * g * hd;
        for (int d = 0; d < hd; d++) qg[d] = qh[d];
        for (int i = 1; i < g; i++)
            for (int d = 0; d < hd; d++) qg[d] += qh[(size_t)i * hd + d];
        const float *sum = rc_pair_sums(rc, il, h);
        const int32_t j0 = 1, j1 = pl.n_full - rc->r_chunks, m = j1 - j0; /* middle candidates */
        for (int32_t j = j0; j < j1; j++) cand[j - j0] = rc_make_key(rc_dot(qg, sum + (size_t)j * hd, hd), j);
        const rc_key *top = rc_top_k(cand, cand_buf, m, pl.k);
        memset(flag, 0, (size_t)m);
        for (int32_t t = 0; t < pl.k; t++) flag[rc_key_chunk(top[t]) - j0] = 1;
        sel[ns++] = 0;
        for (int32_t t = 0; t < m; t++)
            if (flag[t]) sel[ns++] = j0 + t;
        for (int32_t j = j1; j < pl.n_full; j++) sel[ns++] = j;
        if (pl.part) sel[ns++] = pl.n_full;
    }
}

static tf_status rc_check_same(const tf_rcache *rc, const tf_kv_cache *full, const char *what, tf_err *err) {
    if (full->n_layer != rc->n_layer || full->n_head_kv != rc->n_head_kv || full->head_dim != rc->head_dim ||
        (int64_t)full->n_slots > (int64_t)rc->n_chunk_cap * rc->p.chunk)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "retrieval cache %s: the full cache (%d layers x %d KV heads x %d, %d slots) is not the one "
                       "it was made for (%d x %d x %d)",
                       what, full->n_layer, full->n_head_kv, full->head_dim, full->n_slots, rc->n_layer,
                       rc->n_head_kv, rc->head_dim);
    if (full->n_used != rc->n_tok)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "retrieval cache %s: chunk sums cover %d slots but the full cache holds %d "
                       "(hint: call tf_rcache_note_append / tf_rcache_truncate after every change)",
                       what, rc->n_tok, full->n_used);
    return TF_OK;
}

tf_status tf_rcache_select(tf_rcache *rc, const tf_kv_cache *full, const float *q, int32_t n_head, tf_err *err) {
    TF_TRY(rc_check_same(rc, full, "select", err));
    if (!q || n_head < rc->n_head_kv || n_head % rc->n_head_kv != 0)
        return tf_errf(err, TF_ERR_INVALID_ARG, "retrieval cache select: n_head %d: expected a multiple of %d",
                       n_head, rc->n_head_kv);
    rc_plan pl = rc_make_plan(rc, rc->n_tok);
    rc_job job = {.rc = rc, .full = full, .q = q, .n_head = n_head};
    double work = pl.k < 0 ? 0.0 : (double)pl.n_full * rc->n_layer * rc->n_head_kv * rc->head_dim;
    rc_run(rc, rc_select_task, &job, work);
    if (pl.k < 0) {
        rc->n_sel_chunks = pl.n_full + (pl.part > 0);
        rc->n_sel = rc->n_tok;
    } else {
        rc->n_sel_chunks = 1 + pl.k + rc->r_chunks + (pl.part > 0);
        rc->n_sel = (1 + pl.k + rc->r_chunks) * rc->p.chunk + pl.part;
    }
    TF_ASSERT(rc->n_sel_chunks <= rc->max_sel && rc->n_sel <= rc->p.budget);
    rc->sel_n_tok = rc->n_tok;
    return TF_OK;
}

/* ---- gather --------------------------------------------------------------------- */

/* Iterator over the runs of consecutive selected chunks of one selection:
 * starting with *t = 0, each call returns the next run's first source slot
 * *s and length *n (runs are stored back to back in the view, so the caller
 * adds up the lengths for the view slot); 0 when no run is left. */
static int rc_next_run(const tf_rcache *rc, const int32_t *sel, int32_t *t, int32_t *s, int32_t *n) {
    if (*t >= rc->n_sel_chunks) return 0;
    int32_t u = *t + 1;
    while (u < rc->n_sel_chunks && sel[u] == sel[u - 1] + 1) u++;
    int32_t c = rc->p.chunk, e = (sel[u - 1] + 1) * c;
    *s = sel[*t] * c;
    *n = (e < rc->n_tok ? e : rc->n_tok) - *s;
    *t = u;
    return 1;
}

static void rc_gather_task(void *arg, int ith, int nth) {
    rc_job *job = arg;
    const tf_rcache *rc = job->rcc;
    long lo, hi;
    rc_pair_range(rc, ith, nth, &lo, &hi);
    for (long pr = lo; pr < hi; pr++) {
        int il = (int)(pr / rc->n_head_kv), h = (int)(pr % rc->n_head_kv);
        const int32_t *sel = rc->sel + (size_t)pr * rc->max_sel;
        int32_t t = 0, s, n, o = 0;
        while (rc_next_run(rc, sel, &t, &s, &n)) {
            tf_kv_copy(job->view, o, job->full, s, n, il, h);
            o += n;
        }
        TF_ASSERT(o == rc->n_sel);
    }
}

tf_status tf_rcache_gather(const tf_rcache *rc, const tf_kv_cache *full, tf_kv_cache *view, tf_err *err) {
    TF_TRY(rc_check_same(rc, full, "gather", err));
    if (rc->sel_n_tok < 0 || rc->sel_n_tok != rc->n_tok)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "retrieval cache gather: %s (hint: call tf_rcache_select first)",
                       rc->sel_n_tok < 0 ? "no selection was made" : "the full cache changed since the selection");
    int32_t need = rc->p.budget < full->n_slots ? rc->p.budget : full->n_slots;
    if (!view || view == full || !view->k || view->n_layer != full->n_layer || view->n_head_kv != full->n_head_kv ||
        view->head_dim != full->head_dim || view->type != full->type || view->n_slots < need)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "retrieval cache gather: the view must be a cache other than the full one with %d layers x "
                       "%d KV heads x %d, type %s and at least %d slots (hint: tf_rcache_view_init)",
                       full->n_layer, full->n_head_kv, full->head_dim, tf_dtype_name(full->type), need);
    rc_job job = {.rcc = rc, .full = full, .view = view};
    rc_run(rc, rc_gather_task, &job, (double)rc->n_sel * rc->n_layer * rc->n_head_kv * rc->head_dim);
    int32_t t = 0, s, n, o = 0; /* positions of layer 0, head 0's selection */
    while (rc_next_run(rc, rc->sel, &t, &s, &n)) {
        memcpy(view->pos + o, full->pos + s, sizeof(int32_t) * (size_t)n);
        o += n;
    }
    view->n_used = rc->n_sel;
    return TF_OK;
}

tf_status tf_rcache_build(tf_rcache *rc, const tf_kv_cache *full, const float *q, int32_t n_head,
                          tf_kv_cache *view, tf_err *err) {
    TF_TRY(tf_rcache_select(rc, full, q, n_head, err));
    return tf_rcache_gather(rc, full, view, err);
}

tf_status tf_rcache_view_init(tf_kv_cache *view, const tf_rcache *rc, const tf_kv_cache *full, int32_t n_extra,
                              tf_err *err) {
    memset(view, 0, sizeof *view);
    TF_TRY(rc_check_full(full, err));
    int64_t n = (int64_t)(rc->p.budget < full->n_slots ? rc->p.budget : full->n_slots) + n_extra;
    if (n_extra < 0 || n > INT32_MAX - TF_KV_BLK)
        return tf_errf(err, TF_ERR_INVALID_ARG, "retrieval cache view: %d extra slots: expected 0..%d", n_extra,
                       INT32_MAX - TF_KV_BLK - rc->p.budget);
    return tf_kv_init_on(view, full->be, full->n_layer, full->n_head_kv, full->head_dim, (int32_t)n,
                         (tf_dtype)full->type, "the retrieval cache C_r", err);
}

void tf_rcache_copy_slots(tf_kv_cache *dst, int32_t dst_slot, const tf_kv_cache *src, int32_t src_slot, int32_t n) {
    TF_ASSERT(dst->n_layer == src->n_layer && dst->n_head_kv == src->n_head_kv && dst->head_dim == src->head_dim &&
              dst->type == src->type);
    TF_ASSERT(n >= 0 && src_slot >= 0 && dst_slot >= 0 && (int64_t)src_slot + n <= src->n_slots &&
              (int64_t)dst_slot + n <= dst->n_slots);
    if (n == 0) return;
    for (int il = 0; il < src->n_layer; il++)
        for (int h = 0; h < src->n_head_kv; h++) tf_kv_copy(dst, dst_slot, src, src_slot, n, il, h);
    memcpy(dst->pos + dst_slot, src->pos + src_slot, sizeof(int32_t) * (size_t)n);
    if (dst->n_used < dst_slot + n) dst->n_used = dst_slot + n;
}

/* ---- reference ------------------------------------------------------------------ */

typedef struct rc_ref_item {
    double s;
    int32_t j;
} rc_ref_item;

static int rc_ref_cmp(const void *pa, const void *pb) {
    const rc_ref_item *a = pa, *b = pb;
    if (a->s != b->s) return a->s > b->s ? -1 : 1;
    return (a->j > b->j) - (a->j < b->j);
}

tf_status tf_rcache_select_ref(const tf_kv_cache *full, int32_t n_tok, const tf_rcache_params *p, const float *q,
                               int32_t n_head, int il, int h, int32_t *chunks_out, int32_t *n_chunks,
                               double *scores_out, tf_err *err) {
    TF_TRY(tf_rcache_check_params(p, err));
    if (n_head < full->n_head_kv || n_head % full->n_head_kv != 0 || n_tok < 0 || n_tok > full->n_slots)
        return tf_errf(err, TF_ERR_INVALID_ARG, "retrieval reference: n_head %d / n_tok %d out of range", n_head,
                       n_tok);
    const int32_t c = p->chunk, hd = full->head_dim, g = n_head / full->n_head_kv;
    const int32_t n_full = n_tok / c, n_ch = (n_tok + c - 1) / c;
    const int32_t r = (p->recent + c - 1) / c;
    rc_ref_item *items = malloc(sizeof(rc_ref_item) * (size_t)(n_full + 1));
    uint8_t *keep = calloc((size_t)n_ch + 1, 1);
    double *ksum = malloc(sizeof(double) * (size_t)hd);
    float *kr = malloc(sizeof(float) * (size_t)hd);
    if (!items || !keep || !ksum || !kr) {
        free(items); free(keep); free(ksum); free(kr);
        return tf_errf(err, TF_ERR_NOMEM, "retrieval reference: out of memory");
    }
    for (int32_t j = 0; j < n_full; j++) {
        for (int d = 0; d < hd; d++) ksum[d] = 0.0;
        for (int32_t s = j * c; s < (j + 1) * c; s++) {
            tf_kv_read(full, il, h, s, kr, NULL);
            for (int d = 0; d < hd; d++) ksum[d] += kr[d];
        }
        double dot = 0.0;
        for (int i = 0; i < g; i++) {
            const float *qh = q + (size_t)il * n_head * hd + (size_t)(h * g + i) * hd;
            for (int d = 0; d < hd; d++) dot += (double)qh[d] * ksum[d];
        }
        items[j].s = dot / c;
        items[j].j = j;
        if (scores_out) scores_out[j] = items[j].s;
    }
    int64_t used = 0;
    if (n_tok <= p->budget) {
        for (int32_t j = 0; j < n_ch; j++) keep[j] = 1;
    } else {
        /* always kept: the first chunk, the partial chunk, r complete chunks before it */
        keep[0] = 1;
        used = c;
        if (n_tok % c) {
            keep[n_full] = 1;
            used += n_tok % c;
        }
        for (int32_t j = n_full - r; j < n_full; j++) {
            TF_ASSERT(j > 0 && !keep[j]);
            keep[j] = 1;
            used += c;
        }
        int32_t m = 0;
        for (int32_t j = 0; j < n_full; j++) {
            if (keep[j]) {
                if (scores_out) scores_out[j] = NAN;
                continue;
            }
            items[m] = items[j];
            if (isnan(items[m].s)) items[m].s = -INFINITY;
            m++;
        }
        qsort(items, (size_t)m, sizeof *items, rc_ref_cmp);
        for (int32_t t = 0; t < m && used + c <= p->budget; t++) {
            keep[items[t].j] = 1;
            used += c;
        }
    }
    int32_t ns = 0;
    for (int32_t j = 0; j < n_ch; j++)
        if (keep[j]) chunks_out[ns++] = j;
    *n_chunks = ns;
    free(items); free(keep); free(ksum); free(kr);
    return TF_OK;
}
