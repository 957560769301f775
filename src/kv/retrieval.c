/*
 * retrieval.c — retrieval cache C_r: the bookkeeping of the chunk key sums,
 * the selection plan and the gather into a view (see retrieval.h for the
 * model). The arithmetic and the copies are the backend's (tf_rc_call in
 * backend/backend.h; on the CPU backend/cpu/retrieval_cpu.c), so the same
 * code runs with C_p on the CPU or a device.
 */
#include "kv/retrieval.h"

#include "backend/cpu/backend_cpu.h"
#include "core/mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

void tf_rcache_free(tf_rcache *rc) {
    if (rc->be) {
        void *ps[] = {rc->sum, rc->sel, rc->scratch};
        for (int i = 0; i < 3; i++)
            if (ps[i]) rc->be->ops->free(rc->be, ps[i]);
    }
    tf_free(rc->sel0_h);
    if (rc->own_be.ops) tf_backend_free(&rc->own_be);
    memset(rc, 0, sizeof *rc);
}

static tf_status rc_check_full(const tf_kv_cache *full, tf_err *err) {
    if (!full || !full->k || full->n_layer < 1 || full->n_head_kv < 1 || full->head_dim < 1 || full->n_slots < 1 ||
        tf_kv_check_type((tf_dtype)full->type, full->head_dim, NULL) != TF_OK)
        return tf_errf(err, TF_ERR_INVALID_ARG, "retrieval cache: the full KV cache is not initialized");
    return TF_OK;
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

/* The backend call over full (and view, for a gather) with rc's buffers and plan. */
static tf_rc_call rc_call(const tf_rcache *rc, const tf_kv_cache *full, const tf_kv_cache *view) {
    rc_plan pl = rc_make_plan(rc, rc->n_tok);
    tf_rc_call c = {
        .full = tf_kv_layer_view(full, 0),
        .full_layer_stride = full->layer_stride,
        .n_layer = rc->n_layer,
        .chunk = rc->p.chunk,
        .n_chunk_cap = rc->n_chunk_cap,
        .max_sel = rc->max_sel,
        .sums = rc->sum,
        .sel = rc->sel,
        .scratch = rc->scratch,
        .n_tok = rc->n_tok,
        .n_full = pl.n_full,
        .part = pl.part,
        .k = pl.k,
        .r_chunks = rc->r_chunks,
        .n_sel_chunks = rc->n_sel_chunks,
        .budget = rc->p.budget,
    };
    if (view) {
        c.view = tf_kv_layer_view(view, 0);
        c.view_layer_stride = view->layer_stride;
    }
    return c;
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
    uint64_t pairs = (uint64_t)rc->n_layer * (uint64_t)rc->n_head_kv, pair_chunks, sum_b, sel_b, scr_b;
    if (!tf_mul_ok(pairs, (uint64_t)rc->n_chunk_cap, &pair_chunks) ||
        !tf_mul_ok(pair_chunks, (uint64_t)rc->head_dim * sizeof(float), &sum_b) ||
        !tf_mul_ok(pair_chunks, 2 * sizeof(uint64_t) + 1, &scr_b) || /* bounds the selection's scratch too */
        !tf_mul_ok(pairs * (uint64_t)rc->max_sel, sizeof(int32_t), &sel_b) || sum_b > SIZE_MAX / 2) {
        memset(rc, 0, sizeof *rc);
        return tf_errf(err, TF_ERR_NOMEM, "retrieval cache for %d slots overflows the address space", full->n_slots);
    }
    /* the backend C_p lives on; a host cache (be NULL) gets a CPU backend on pool */
    tf_status st = TF_OK;
    if (full->be) {
        rc->be = full->be;
    } else {
        st = tf_backend_cpu_init(&rc->own_be, pool, TF_ISA_BEST, err);
        rc->be = &rc->own_be;
    }
    if (st == TF_OK) st = tf_backend_require(rc->be, TF_OP_RC_SUMS, full->type, "the retrieval cache", err);
    if (st == TF_OK) st = tf_backend_require(rc->be, TF_OP_RC_SELECT, 0, "the retrieval cache", err);
    if (st == TF_OK) st = tf_backend_require(rc->be, TF_OP_RC_GATHER, full->type, "the retrieval cache", err);
    tf_rc_call call = rc_call(rc, full, NULL);
    size_t scratch_b = st == TF_OK ? rc->be->ops->rc_scratch(rc->be, &call) : 0;
    if (st == TF_OK) st = rc->be->ops->alloc(rc->be, (void **)&rc->sum, (size_t)sum_b, "chunk key sums", err);
    if (st == TF_OK) st = rc->be->ops->alloc(rc->be, (void **)&rc->sel, (size_t)sel_b, "the chunk selection", err);
    if (st == TF_OK) st = rc->be->ops->alloc(rc->be, &rc->scratch, scratch_b, "chunk scores", err);
    if (st == TF_OK && !(rc->sel0_h = tf_alloc(sizeof(int32_t) * (size_t)rc->max_sel)))
        st = tf_errf(err, TF_ERR_NOMEM, "retrieval cache: out of memory");
    if (st != TF_OK) {
        tf_rcache_free(rc);
        return st;
    }
    rc->bytes = (size_t)(sum_b + sel_b) + scratch_b;
    return TF_OK;
}

/* ---- chunk sums ------------------------------------------------------------------ */

/* Recompute the sums of the chunks overlapping [s0, s1) over slots < s1. */
static void rc_sum_range(tf_rcache *rc, const tf_kv_cache *full, int32_t s0, int32_t s1) {
    if (s1 <= s0) return;
    tf_rc_call c = rc_call(rc, full, NULL);
    c.s0 = s0;
    c.s1 = s1;
    rc->be->ops->rc_sums(rc->be, &c);
}

void tf_rcache_truncate(tf_rcache *rc, const tf_kv_cache *full, int32_t n) {
    if (n < 0) n = 0;
    if (n >= rc->n_tok) return;
    rc_sum_range(rc, full, n / rc->p.chunk * rc->p.chunk, n); /* the partial chunk, from its first slot */
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

static tf_status rc_check_same(const tf_rcache *rc, const tf_kv_cache *full, const char *what, tf_err *err) {
    if (full->n_layer != rc->n_layer || full->n_head_kv != rc->n_head_kv || full->head_dim != rc->head_dim ||
        (int64_t)full->n_slots > (int64_t)rc->n_chunk_cap * rc->p.chunk ||
        (full->be ? full->be != rc->be : rc->be != &rc->own_be))
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
    tf_rc_call c = rc_call(rc, full, NULL);
    c.q = q;
    c.n_head = n_head;
    rc->be->ops->rc_select(rc->be, &c);
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

tf_status tf_rcache_gather(const tf_rcache *rc, const tf_kv_cache *full, tf_kv_cache *view, tf_err *err) {
    TF_TRY(rc_check_same(rc, full, "gather", err));
    if (rc->sel_n_tok < 0 || rc->sel_n_tok != rc->n_tok)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "retrieval cache gather: %s (hint: call tf_rcache_select first)",
                       rc->sel_n_tok < 0 ? "no selection was made" : "the full cache changed since the selection");
    int32_t need = rc->p.budget < full->n_slots ? rc->p.budget : full->n_slots;
    if (!view || view == full || !view->k || view->n_layer != full->n_layer || view->n_head_kv != full->n_head_kv ||
        view->head_dim != full->head_dim || view->type != full->type || view->n_slots < need || view->be != full->be)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "retrieval cache gather: the view must be a cache other than the full one with %d layers x "
                       "%d KV heads x %d, type %s and at least %d slots, on the same backend (hint: "
                       "tf_rcache_view_init)",
                       full->n_layer, full->n_head_kv, full->head_dim, tf_dtype_name(full->type), need);
    tf_rc_call c = rc_call(rc, full, view);
    rc->be->ops->rc_gather(rc->be, &c);
    /* positions (host bookkeeping): those of the first pair's selection (a
     * device's is read back: a few hundred bytes per rebuild) */
    const int32_t *sel0 = rc->sel;
    if (!rc->be->ops->host_memory) {
        TF_TRY(rc->be->ops->download(rc->be, rc->sel0_h, rc->sel, sizeof(int32_t) * (size_t)rc->n_sel_chunks, err));
        sel0 = rc->sel0_h;
    }
    int32_t t = 0, s, n, o = 0;
    while (tf_rc_next_run(sel0, rc->n_sel_chunks, rc->p.chunk, rc->n_tok, &t, &s, &n)) {
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
