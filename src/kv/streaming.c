/* streaming.c — StreamingLLM cache: sinks + a window read in place, keys at
 * sequence positions, the sinks re-rotated as the window slides (see
 * streaming.h); storage, copies and rotation through the backend's table. */
#include "kv/streaming.h"

#include "backend/cpu/backend_cpu.h"
#include "core/mem.h"

#include <string.h>

static int32_t round_blk(int64_t n) { return (int32_t)((n + TF_KV_BLK - 1) / TF_KV_BLK * TF_KV_BLK); }

tf_status tf_scache_init_on(tf_scache *c, tf_backend *be, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                            int32_t n_rot, bool rope_neox, const float *freq, float mscale, int32_t sinks,
                            int32_t window, int32_t slack, int32_t n_batch, int32_t max_seq, tf_dtype view_type,
                            tf_err *err) {
    memset(c, 0, sizeof *c);
    if (sinks < 0 || window < 1 || slack < 0 || n_batch < 1 || max_seq < 0 || sinks > (1 << 20) ||
        window > (1 << 24) || slack > (1 << 24) || n_batch > (1 << 24))
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "streaming cache: sinks %d, window %d, slack %d, batch %d (expected sinks >= 0, window >= 1)",
                       sinks, window, slack, n_batch);
    c->n_layer = n_layer;
    c->n_head_kv = n_head_kv;
    c->head_dim = head_dim;
    c->kv_dim = n_head_kv * head_dim;
    c->sinks = sinks;
    c->window = window;
    c->slack = slack;
    c->n_batch = n_batch;
    c->be = be;
    c->freq = freq;
    c->mscale = mscale;
    c->n_rot = n_rot;
    c->neox = rope_neox;
    tf_status st = rope_neox ? tf_backend_require(be, TF_OP_ROPE_NEOX, 0, "the streaming cache", err) : TF_OK;
    if (st != TF_OK) return st;
    /* room to copy the kept window (<= W + slack slots, whole blocks) back
     * to the front without overlapping itself, plus a call's tokens */
    int64_t slots = round_blk(sinks) + 2 * ((int64_t)window + slack + 2 * TF_KV_BLK) + n_batch + 4 * TF_KV_BLK;
    if (max_seq > 0 && slots > max_seq + TF_KV_BLK) slots = max_seq + TF_KV_BLK; /* token t never past slot t */
    if (slots > (1 << 28))
        return tf_errf(err, TF_ERR_INVALID_ARG, "streaming cache: window %d and batch %d need too many slots", window,
                       n_batch);
    const size_t S = (size_t)sinks, sink_b = sizeof(float) * (size_t)n_layer * (S ? S : 1) * c->kv_dim;
    st = tf_kv_init_on(&c->view, be, n_layer, n_head_kv, head_dim, (int32_t)slots, view_type, "the streaming cache C_q",
                       err);
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&c->sink_k, sink_b, "the streaming cache's sinks", err);
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&c->sink_v, sink_b, "the streaming cache's sinks", err);
    if (st == TF_OK)
        st = be->ops->alloc(be, (void **)&c->rot, sizeof(float) * (S ? S : 1) * c->kv_dim, "the sinks' rotation", err);
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&c->stage_d, sizeof(int32_t) * (1 + S), "the sinks' slots", err);
    size_t tb = be->ops->rope_table_bytes(be, sinks > 0 ? sinks : 1, n_rot);
    if (st == TF_OK && tb) st = be->ops->alloc(be, &c->table, tb, "the sinks' RoPE", err);
    if (st == TF_OK && !(c->pos_h = tf_alloc(sizeof(int32_t) * (1 + S))))
        st = tf_errf(err, TF_ERR_NOMEM, "streaming cache: out of memory");
    if (st == TF_OK) {
        c->pos_h[0] = 0; /* the sinks' first slot, once */
        st = be->ops->upload(be, c->stage_d, c->pos_h, sizeof(int32_t), err);
    }
    if (st != TF_OK) {
        tf_scache_free(c);
        return st;
    }
    tf_scache_reset(c);
    return TF_OK;
}

tf_status tf_scache_init(tf_scache *c, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t n_rot,
                         bool rope_neox, const float *freq, float mscale, int32_t sinks, int32_t window, int32_t slack,
                         int32_t n_batch, int32_t max_seq, tf_dtype view_type, tf_err *err) {
    tf_backend be;
    TF_TRY(tf_backend_cpu_init(&be, NULL, TF_ISA_BEST, err));
    tf_status st = tf_scache_init_on(c, &be, n_layer, n_head_kv, head_dim, n_rot, rope_neox, freq, mscale, sinks,
                                     window, slack, n_batch, max_seq, view_type, err);
    if (st != TF_OK) {
        tf_backend_free(&be);
        return st;
    }
    c->own_be = be; /* the view and the sinks keep pointing at c->be: make it the kept copy */
    c->be = &c->own_be;
    c->view.be = NULL; /* host memory: the CPU's caches carry no backend */
    return TF_OK;
}

void tf_scache_free(tf_scache *c) {
    tf_backend *be = c->be;
    tf_kv_free(&c->view);
    if (be) {
        void *ps[] = {c->sink_k, c->sink_v, c->rot, c->stage_d, c->table};
        for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
            if (ps[i]) be->ops->free(be, ps[i]);
    }
    tf_free(c->pos_h);
    if (c->own_be.ops) tf_backend_free(&c->own_be);
    memset(c, 0, sizeof *c);
}

/* Window tokens from t on go to slots from `sinks` on (nothing before t is kept). */
static void rebase(tf_scache *c, int64_t t) {
    c->base_tok = t;
    c->base_slot = c->sinks;
}

void tf_scache_reset(tf_scache *c) {
    c->n_seen = c->floor = c->shift = 0;
    c->n_sink_keys = 0;
    rebase(c, c->sinks);
    c->view.n_used = 0;
    c->view.gap_lo = c->view.gap_hi = 0;
}

int32_t tf_scache_slot(const tf_scache *c, int64_t t) {
    if (t < 0) return -1;
    if (t < c->sinks) return (int32_t)t;
    if (t < c->base_tok || c->base_slot + (t - c->base_tok) >= c->view.n_slots) return -1;
    return (int32_t)(c->base_slot + (t - c->base_tok));
}

/* The first window token a query at sequence index P sees (P: none). */
static int64_t window_lo(const tf_scache *c, int64_t P) {
    int64_t lo = P - c->window;
    if (lo < c->sinks) lo = c->sinks;
    if (lo < c->floor) lo = c->floor;
    return lo > P ? P : lo;
}

int64_t tf_scache_window_lo(const tf_scache *c) { return window_lo(c, c->n_seen); }

/* Copy the stored tokens [k, P) back to the front, whole K blocks at a time
 * (slot offsets within a block kept), so that slots run out only every
 * ~W + n_batch tokens. */
static tf_status compact(tf_scache *c, int64_t k, int64_t P, tf_err *err) {
    tf_backend *be = c->be;
    const tf_kv_cache *kv = &c->view;
    int32_t a = tf_scache_slot(c, k), e = a + (int32_t)(P - k);
    int32_t src = a / TF_KV_BLK * TF_KV_BLK, end = round_blk(e), dst = round_blk(c->sinks);
    if (src < dst + (end - src))
        return tf_errf(err, TF_ERR_INTERNAL, "streaming cache: the window's copy [%d, %d) overlaps its target %d", src,
                       end, dst);
    const size_t nb = (size_t)(end - src) / TF_KV_BLK;
    for (int il = 0; il < c->n_layer; il++)
        for (int h = 0; h < c->n_head_kv; h++) {
            uint8_t *kh = tf_kv_k(kv, il, h), *vh = tf_kv_v(kv, il, h);
            TF_TRY(be->ops->copy(be, kh + (size_t)dst / TF_KV_BLK * kv->k_blk_bytes,
                                 kh + (size_t)src / TF_KV_BLK * kv->k_blk_bytes, nb * kv->k_blk_bytes, err));
            TF_TRY(be->ops->copy(be, vh + (size_t)dst * kv->v_row_bytes, vh + (size_t)src * kv->v_row_bytes,
                                 (size_t)(end - src) * kv->v_row_bytes, err));
        }
    memcpy(kv->pos + dst, kv->pos + src, sizeof(int32_t) * (size_t)(end - src));
    c->base_tok = k;
    c->base_slot = dst + a % TF_KV_BLK;
    return TF_OK;
}

/* The view's sinks [0, n) rotated at index + shift, from their unrotated keys. */
static tf_status rotate_sinks(tf_scache *c, int32_t n, int64_t shift, tf_err *err) {
    tf_backend *be = c->be;
    if (n > 0) {
        if (shift + n > INT32_MAX) return tf_errf(err, TF_ERR_RANGE, "streaming cache: position %lld", (long long)shift);
        for (int32_t j = 0; j < n; j++) c->pos_h[1 + j] = (int32_t)(j + shift);
        TF_TRY(be->ops->upload(be, c->stage_d + 1, c->pos_h + 1, sizeof(int32_t) * (size_t)n, err));
        const tf_rope_pass rp = {.pos = c->stage_d + 1, .freq = c->freq, .mscale = c->mscale, .n = n,
                                 .n_rot = c->n_rot, .neox = c->neox, .table = c->table};
        be->ops->rope_prepare(be, &rp);
        const size_t kvd = (size_t)c->kv_dim, layer = (size_t)c->sinks * kvd;
        for (int il = 0; il < c->n_layer; il++) {
            TF_TRY(be->ops->copy(be, c->rot, c->sink_k + il * layer, sizeof(float) * (size_t)n * kvd, err));
            be->ops->rope(be, c->rot, (int64_t)kvd, c->n_head_kv, c->head_dim, &rp);
            const tf_kv_view vl = tf_kv_layer_view(&c->view, il);
            be->ops->kv_store(be, &vl, c->stage_d, n, c->rot, c->sink_v + il * layer, (int64_t)kvd);
        }
    }
    c->shift = shift;
    return TF_OK;
}

tf_status tf_scache_view(tf_scache *c, int32_t n, int32_t *slot0, int32_t *pos0, tf_err *err) {
    if (n < 1 || n > c->n_batch)
        return tf_errf(err, TF_ERR_INTERNAL, "streaming cache: a call of %d tokens (expected 1..%d)", n, c->n_batch);
    const int64_t P = c->n_seen, lo = window_lo(c, P), S = c->sinks;
    if (P > INT32_MAX - n) return tf_errf(err, TF_ERR_RANGE, "streaming cache: position %lld", (long long)P);
    if (lo == P) {
        rebase(c, P > S ? P : S); /* no window to keep: start the slots over */
    } else if (lo < c->base_tok) {
        return tf_errf(err, TF_ERR_INTERNAL, "streaming cache: the window from token %lld is not stored",
                       (long long)lo);
    }
    int64_t last = P + n - 1;
    if (last >= S && tf_scache_slot(c, last) < 0) { /* out of slots: keep the window and the slack */
        int64_t k = P - c->window - c->slack; /* >= base_tok (stored), <= lo (needed) */
        if (k < c->base_tok) k = c->base_tok;
        if (k > lo) k = lo;
        TF_TRY(compact(c, k, P, err));
        if (tf_scache_slot(c, last) < 0)
            return tf_errf(err, TF_ERR_INTERNAL, "streaming cache: no room for %d tokens after the copy", n);
    }
    const int32_t s_vis = (int32_t)(P < S ? P : S);
    if (lo - s_vis != c->shift) TF_TRY(rotate_sinks(c, s_vis < c->n_sink_keys ? s_vis : c->n_sink_keys, lo - s_vis, err));
    const int32_t w0 = tf_scache_slot(c, lo == P ? P : lo);
    c->view.gap_lo = w0 > s_vis ? s_vis : 0;
    c->view.gap_hi = w0 > s_vis ? w0 : 0;
    *slot0 = tf_scache_slot(c, P);
    *pos0 = (int32_t)P;
    return TF_OK;
}

tf_status tf_scache_append(tf_scache *c, const float *k, const float *v, int32_t n, int32_t ld_rows, tf_err *err) {
    if (n < 1) return TF_OK;
    if (n > c->n_batch)
        return tf_errf(err, TF_ERR_INTERNAL, "streaming cache: %d tokens appended at once, at most %d", n, c->n_batch);
    if (c->n_seen < c->sinks) { /* keep the sinks' unrotated keys */
        if (!k || !v) return tf_errf(err, TF_ERR_INTERNAL, "streaming cache: the sinks' keys were not captured");
        int32_t m = c->sinks - (int32_t)c->n_seen < n ? c->sinks - (int32_t)c->n_seen : n;
        const size_t kvd = (size_t)c->kv_dim, bytes = sizeof(float) * (size_t)m * kvd;
        for (int il = 0; il < c->n_layer; il++) {
            size_t to = ((size_t)il * c->sinks + (size_t)c->n_seen) * kvd, from = (size_t)il * ld_rows * kvd;
            TF_TRY(c->be->ops->copy(c->be, c->sink_k + to, k + from, bytes, err));
            TF_TRY(c->be->ops->copy(c->be, c->sink_v + to, v + from, bytes, err));
        }
        c->n_sink_keys = (int32_t)c->n_seen + m;
    }
    c->n_seen += n;
    return TF_OK;
}

void tf_scache_skip(tf_scache *c, int64_t n) {
    if (n <= c->n_seen) return;
    c->n_seen = n;
    c->floor = n;
}

tf_status tf_scache_truncate(tf_scache *c, int64_t n, tf_err *err) {
    if (n < 0 || n > c->n_seen)
        return tf_errf(err, TF_ERR_INVALID_ARG, "streaming cache: truncate to %lld of %lld tokens", (long long)n,
                       (long long)c->n_seen);
    int64_t lo = window_lo(c, n);
    if (lo < n && lo < c->base_tok)
        return tf_errf(err, TF_ERR_RANGE,
                       "streaming cache: rolling back to %lld tokens needs the window from token %lld; the slots "
                       "hold tokens from %lld on",
                       (long long)n, (long long)lo, (long long)c->base_tok);
    c->n_seen = n;
    if (c->n_sink_keys > n) c->n_sink_keys = (int32_t)n;
    return TF_OK;
}
