/*
 * retrieval.h — the retrieval cache C_r: a small view of the full cache C_p
 * made of the chunks of keys that matter most to the latest query.
 *
 * TriForce's middle level runs the target model's weights over a KV cache of
 * at most B tokens chosen from C_p. This module keeps what choosing needs and
 * builds that view:
 *
 *   chunks   C_p's slots grouped by c consecutive slots (chunk j = slots
 *            [j*c, j*c + c)); the last chunk is partial when C_p's length is
 *            not a multiple of c.
 *   sums     per layer, KV head and chunk, the f32 sum of the chunk's keys,
 *            kept current as C_p grows (tf_rcache_note_append) and shrinks
 *            (tf_rcache_truncate); a chunk's mean key is sum / c.
 *   score    of chunk j for KV head h: sum over the query heads sharing h
 *            (GQA group hq = h*g .. h*g + g-1, g = n_head / n_head_kv) of
 *            q[hq] . mean_key(j, h).
 *   select   per layer and KV head: the first chunk (attention sinks), the
 *            recent window (the last ceil(recent / c) complete chunks plus
 *            the partial chunk), then the best-scoring other chunks (ties:
 *            lower chunk index) while whole chunks fit in the budget B. If
 *            C_p holds at most B tokens, everything is selected. Every head
 *            selects the same number of slots, n_sel, with B - c < n_sel <= B
 *            once C_p is longer than B.
 *   gather   the selected slots' K and V copied, in increasing position
 *            order, to slots [0, n_sel) of a view (a tf_kv_cache shaped like
 *            C_p); view->n_used = n_sel. Slots from n_sel on are the middle
 *            level's: its forward pass appends its tokens there.
 *
 * view->pos is per slot while the selection is per layer and head: the view
 * gets the positions of layer 0, KV head 0's selection. Attention does not
 * read positions (keys are stored already rotated), so they are informational.
 *
 * This module keeps the bookkeeping (what the sums cover, the plan of a
 * selection, the view's positions); the sums, selection and gather are ops
 * of the backend C_p lives on (tf_rc_call in backend/backend.h), so the
 * same code serves a cache on the CPU or on a device.
 *
 * Everything is reserved by tf_rcache_init for C_p's capacity; nothing
 * allocates afterwards. A tf_rcache is used by one thread at a time; on the
 * CPU its work is spread over the pool given at init.
 */
#ifndef TF_KV_RETRIEVAL_H
#define TF_KV_RETRIEVAL_H

#include "backend/backend.h"
#include "core/error.h"
#include "core/threads.h"
#include "kv/kv.h"

#include <stddef.h>
#include <stdint.h>

#define TF_RCACHE_MAX_CHUNK 64

typedef struct tf_rcache_params {
    int32_t chunk;  /* c: slots per chunk, 1 .. TF_RCACHE_MAX_CHUNK (default 8) */
    int32_t budget; /* B: most slots a view receives (default 4096); at least
                       c + ceil(recent / c) * c + (c - 1): first chunk, recent
                       window and the largest partial chunk */
    int32_t recent; /* slots always kept at the end, rounded up to whole
                       chunks; >= 0 (default 16) */
} tf_rcache_params;

/* chunk 8, budget 4096, recent 16. */
tf_rcache_params tf_rcache_default_params(void);

/* Check params; on failure fills err naming the field and the bound. */
tf_status tf_rcache_check_params(const tf_rcache_params *p, tf_err *err);

typedef struct tf_rcache {
    tf_rcache_params p;
    int32_t n_layer, n_head_kv, head_dim; /* C_p's shape */
    int32_t n_chunk_cap;  /* chunks C_p's capacity spans: ceil(n_slots / c) */
    int32_t r_chunks;     /* complete chunks of the recent window: ceil(recent / c) */
    int32_t max_sel;      /* most chunks one selection holds */
    int32_t n_tok;        /* slots [0, n_tok) of C_p the sums cover */
    float *sum;           /* [n_layer][n_head_kv][n_chunk_cap][head_dim] chunk key sums (backend memory) */
    int32_t *sel;         /* [n_layer][n_head_kv][max_sel] selected chunks, ascending (backend memory) */
    int32_t n_sel_chunks; /* chunks in every head's selection (last select) */
    int32_t n_sel;        /* slots in every head's selection (last select) */
    int32_t sel_n_tok;    /* n_tok the last selection was made for; -1: none yet */
    tf_backend *be;       /* where the sums, selection and scratch live: full's backend */
    tf_backend own_be;    /* for a host cache (full->be NULL): a CPU backend on the pool */
    void *scratch;        /* the backend's rc_scratch */
    int32_t *sel0_h;      /* [max_sel] host copy of the first pair's selection (a device's) */
    size_t bytes;         /* total reserved */
} tf_rcache;

/* Reserve a retrieval cache for the full cache `full` (its shape, capacity
 * and backend; its contents are not read: call tf_rcache_note_append for
 * tokens already stored). For a host cache (full->be NULL) the work runs on
 * pool (may be NULL: one thread), which must outlive rc; for a cache on a
 * device, on that device. Fails with TF_ERR_INVALID_ARG for bad params,
 * TF_ERR_UNSUPPORTED if the backend lacks an op for the cache's type,
 * TF_ERR_NOMEM if memory cannot be reserved; rc is then zeroed and
 * tf_rcache_free on it is a no-op. */
tf_status tf_rcache_init(tf_rcache *rc, const tf_kv_cache *full, const tf_rcache_params *p, tf_pool *pool,
                         tf_err *err);
void tf_rcache_free(tf_rcache *rc);

/* Call after slots [slot0, slot0+n) of full were stored (e.g. by tf_forward):
 * brings the chunk sums up to date with slots [0, slot0+n). slot0 below the
 * covered length means the slots from slot0 on were overwritten (a rollback
 * the caller did not report): they are recomputed. slot0 above it means the
 * slots in between were stored unreported: they are summed too. The sums are
 * bit-identical however the appends are split. Requires 0 <= slot0, n >= 0,
 * slot0 + n <= full->n_slots (asserted: a caller bug). */
void tf_rcache_note_append(tf_rcache *rc, const tf_kv_cache *full, int32_t slot0, int32_t n);

/* Rollback: forget slots [n, n_tok). The sums become exactly those of a cache
 * that never held the removed slots (the partial last chunk is recomputed
 * from full's slots [floor(n/c)*c, n), which must still hold what they held;
 * complete chunks before n are untouched). n >= n_tok does nothing. */
void tf_rcache_truncate(tf_rcache *rc, const tf_kv_cache *full, int32_t n);

/* Reserve a view for rc: full's shape and element type, capacity
 * min(budget, full->n_slots) + n_extra slots (n_extra: room for the tokens
 * the middle level appends). Free it with tf_kv_free. */
tf_status tf_rcache_view_init(tf_kv_cache *view, const tf_rcache *rc, const tf_kv_cache *full, int32_t n_extra,
                              tf_err *err);

/* Select chunks for the queries q: [n_layer][n_head * head_dim] f32, the
 * latest token's queries after RoPE, one row per layer. The result stays in rc
 * (tf_rcache_selection, n_sel). Fails with TF_ERR_INVALID_ARG if n_head is not
 * a positive multiple of n_head_kv, if full is not the cache rc was made for,
 * or if the sums do not cover exactly full->n_used slots (a missed
 * note_append / truncate). */
tf_status tf_rcache_select(tf_rcache *rc, const tf_kv_cache *full, const float *q, int32_t n_head, tf_err *err);

/* Copy the last selection's slots of full into view slots [0, n_sel), set
 * view->pos for them and view->n_used = n_sel. Slots from n_sel on are not
 * touched. Fails with TF_ERR_INVALID_ARG if view's shape or element type
 * differs from full's, its capacity is below min(budget, full->n_slots), it is
 * full itself, no selection was made, or full changed since (sums cover a
 * different length than the selection was made for). */
tf_status tf_rcache_gather(const tf_rcache *rc, const tf_kv_cache *full, tf_kv_cache *view, tf_err *err);

/* tf_rcache_select then tf_rcache_gather. */
tf_status tf_rcache_build(tf_rcache *rc, const tf_kv_cache *full, const float *q, int32_t n_head,
                          tf_kv_cache *view, tf_err *err);

/* The sum of chunk j's keys (head_dim floats) for layer il, KV head h;
 * meaningful for chunks overlapping [0, n_tok). Host caches only (as the
 * selection below). */
static inline const float *tf_rcache_chunk_sum(const tf_rcache *rc, int il, int h, int32_t j) {
    return rc->sum + (((size_t)il * rc->n_head_kv + h) * rc->n_chunk_cap + j) * rc->head_dim;
}

/* The chunks layer il, KV head h selected last (ascending; n_sel_chunks). */
static inline const int32_t *tf_rcache_selection(const tf_rcache *rc, int il, int h) {
    return rc->sel + ((size_t)il * rc->n_head_kv + h) * rc->max_sel;
}

/* Brute-force reference selection for tests: layer il, KV head h of the first
 * n_tok slots of full, with params p and queries q (as in tf_rcache_select).
 * Each chunk's key sum is computed from the raw cache in double, scored as
 * (sum over the GQA group of q . key_sum) / c — the mean key's score — and all
 * candidates are sorted. Writes the selected chunks, ascending, to
 * chunks_out (room for n_tok / c + 1) and their count to *n_chunks; if
 * scores_out is not NULL it receives every complete chunk's score (n_tok / c
 * entries; chunks that are not candidates get NAN). Allocates; fails with
 * TF_ERR_NOMEM or TF_ERR_INVALID_ARG (bad params or n_head). */
tf_status tf_rcache_select_ref(const tf_kv_cache *full, int32_t n_tok, const tf_rcache_params *p, const float *q,
                               int32_t n_head, int il, int h, int32_t *chunks_out, int32_t *n_chunks,
                               double *scores_out, tf_err *err);

#endif
