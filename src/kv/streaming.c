/* streaming.c — StreamingLLM cache: sinks + ring, unrotated keys, rotated view (see streaming.h);
 * the copies and the rotation are the backend's ring ops. */
#include "kv/streaming.h"

#include "backend/cpu/backend_cpu.h"
#include "core/mem.h"

#include <string.h>

tf_status tf_scache_init_on(tf_scache *c, tf_backend *be, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                            int32_t n_rot, bool rope_neox, const float *freq, float mscale, int32_t sinks,
                            int32_t window, int32_t slack, int32_t n_batch, tf_dtype view_type, tf_err *err) {
    memset(c, 0, sizeof *c);
    if (sinks < 0 || window < 1 || slack < 0 || n_batch < 1 || sinks > (1 << 20) || window > (1 << 24))
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "streaming cache: sinks %d, window %d, slack %d, batch %d (expected sinks >= 0, window >= 1)",
                       sinks, window, slack, n_batch);
    c->n_layer = n_layer;
    c->n_head_kv = n_head_kv;
    c->head_dim = head_dim;
    c->kv_dim = n_head_kv * head_dim;
    c->sinks = sinks;
    c->window = window;
    c->ring = window + slack;
    c->n_batch = n_batch;
    c->be = be;
    tf_status st = tf_backend_require(be, TF_OP_RING, view_type, "the streaming cache", err);
    if (st == TF_OK && rope_neox) st = tf_backend_require(be, TF_OP_ROPE_NEOX, 0, "the streaming cache", err);
    if (st != TF_OK) return st;
    size_t slots = (size_t)sinks + (size_t)c->ring, vis = (size_t)sinks + (size_t)window;
    size_t npos = vis + (size_t)n_batch, ring_b = sizeof(float) * (size_t)n_layer * slots * c->kv_dim;
    int32_t *pos_h = NULL;
    st = tf_kv_init_on(&c->view, be, n_layer, n_head_kv, head_dim, (int32_t)npos, view_type, "the streaming cache C_q",
                       err);
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&c->k, ring_b, "the streaming ring", err);
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&c->v, ring_b, "the streaming ring", err);
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&c->stage_d, sizeof(int32_t) * (npos + 1), "the ring's map", err);
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&c->pos_d, sizeof(int32_t) * npos, "the ring's positions", err);
    if (st == TF_OK)
        st = be->ops->alloc(be, &c->table, be->ops->rope_table_bytes(be, (int32_t)npos, n_rot), "the ring's RoPE", err);
    if (st == TF_OK &&
        (!(c->stage_h = tf_alloc(sizeof(int32_t) * (npos + 1))) || !(pos_h = tf_alloc(sizeof(int32_t) * npos))))
        st = tf_errf(err, TF_ERR_NOMEM, "streaming cache: out of memory");
    if (st == TF_OK) {
        for (size_t i = 0; i < npos; i++) pos_h[i] = (int32_t)i;
        st = be->ops->upload(be, c->pos_d, pos_h, sizeof(int32_t) * npos, err);
    }
    tf_free(pos_h);
    c->call = (tf_ring_call){
        .ring_k = c->k,
        .ring_v = c->v,
        .n_layer = n_layer,
        .ring_slots = (int32_t)slots,
        .view = tf_kv_layer_view(&c->view, 0),
        .view_layer_stride = c->view.layer_stride,
        .nv = c->stage_d,
        .map = c->stage_d + 1,
        .nv_max = (int32_t)vis,
        .rope = {.pos = c->pos_d, .freq = freq, .mscale = mscale, .n = (int32_t)npos, .n_rot = n_rot,
                 .neox = rope_neox, .table = c->table},
        .ld_rows = 0,
        .dst = c->stage_d + 1 + vis,
    };
    if (st == TF_OK) {
        be->ops->rope_prepare(be, &c->call.rope); /* positions 0 .. npos - 1, once */
        st = be->ops->alloc(be, &c->scratch, be->ops->ring_scratch(be, &c->call), "the ring's scratch", err);
        c->call.scratch = c->scratch;
    }
    if (st != TF_OK) tf_scache_free(c);
    return st;
}

tf_status tf_scache_init(tf_scache *c, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t n_rot,
                         bool rope_neox, const float *freq, float mscale, int32_t sinks, int32_t window, int32_t slack,
                         int32_t n_batch, tf_dtype view_type, tf_err *err) {
    tf_backend be;
    TF_TRY(tf_backend_cpu_init(&be, NULL, TF_ISA_BEST, err));
    tf_status st = tf_scache_init_on(c, &be, n_layer, n_head_kv, head_dim, n_rot, rope_neox, freq, mscale, sinks,
                                     window, slack, n_batch, view_type, err);
    if (st != TF_OK) {
        tf_backend_free(&be);
        return st;
    }
    c->own_be = be; /* the view and ring keep pointing at c->be: make it the kept copy */
    c->be = &c->own_be;
    c->view.be = NULL; /* host memory: the CPU's caches carry no backend */
    return TF_OK;
}

void tf_scache_free(tf_scache *c) {
    tf_backend *be = c->be;
    tf_kv_free(&c->view);
    if (be) {
        void *ps[] = {c->k, c->v, c->stage_d, c->pos_d, c->table, c->scratch};
        for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
            if (ps[i]) be->ops->free(be, ps[i]);
    }
    tf_free(c->stage_h);
    if (c->own_be.ops) tf_backend_free(&c->own_be);
    memset(c, 0, sizeof *c);
}

static size_t slot_of(const tf_scache *c, int64_t t) {
    return t < c->sinks ? (size_t)t : (size_t)c->sinks + (size_t)((t - c->sinks) % c->ring);
}

/* Visible tokens for a query at sequence index P: sinks [0, s_end), window [w_lo, P). */
static void visible(const tf_scache *c, int64_t P, int64_t *s_end, int64_t *w_lo) {
    *s_end = P < c->sinks ? P : c->sinks;
    int64_t lo = P - c->window;
    *w_lo = lo > c->sinks ? lo : c->sinks;
    if (*w_lo < c->floor) *w_lo = c->floor;
    if (*w_lo > P) *w_lo = P;
}

int64_t tf_scache_view_token(const tf_scache *c, int32_t i) {
    int64_t s_end, w_lo;
    visible(c, c->n_seen, &s_end, &w_lo);
    return i < s_end ? i : w_lo + (i - s_end);
}

size_t tf_scache_slot(const tf_scache *c, int64_t t) { return slot_of(c, t); }

int32_t tf_scache_view_map(const tf_scache *c, int32_t *map) {
    int64_t s_end, w_lo, P = c->n_seen;
    visible(c, P, &s_end, &w_lo);
    int32_t nv = (int32_t)(s_end + (P - w_lo));
    for (int32_t i = 0; i < nv; i++) map[i] = (int32_t)slot_of(c, i < s_end ? i : w_lo + (i - s_end));
    return nv;
}

tf_status tf_scache_view(tf_scache *c, int32_t *slot0, int32_t *pos0, tf_err *err) {
    int32_t nv = tf_scache_view_map(c, c->stage_h + 1);
    c->stage_h[0] = nv;
    TF_TRY(c->be->ops->upload(c->be, c->stage_d, c->stage_h, sizeof(int32_t) * (size_t)(1 + nv), err));
    c->be->ops->ring_view(c->be, &c->call);
    for (int32_t i = 0; i < nv; i++) c->view.pos[i] = i;
    c->view.n_used = nv;
    *slot0 = *pos0 = nv;
    return TF_OK;
}

tf_status tf_scache_append(tf_scache *c, const float *k, const float *v, int32_t n, int32_t ld_rows, tf_err *err) {
    if (n < 1) return TF_OK;
    if (n > c->n_batch)
        return tf_errf(err, TF_ERR_INTERNAL, "streaming cache: %d tokens appended at once, at most %d", n, c->n_batch);
    int32_t *dst = c->stage_h + 1 + c->sinks + c->window;
    for (int32_t i = 0; i < n; i++) dst[i] = (int32_t)slot_of(c, c->n_seen + i);
    TF_TRY(c->be->ops->upload(c->be, (void *)c->call.dst, dst, sizeof(int32_t) * (size_t)n, err));
    tf_ring_call a = c->call;
    a.cap_k = k, a.cap_v = v, a.ld_rows = ld_rows, a.n = n;
    c->be->ops->ring_append(c->be, &a);
    c->n_seen += n;
    if (c->n_seen > c->n_high) c->n_high = c->n_seen;
    return TF_OK;
}

void tf_scache_skip(tf_scache *c, int64_t n) {
    if (n <= c->n_seen) return;
    c->n_seen = n;
    if (n > c->n_high) c->n_high = n;
    c->floor = n;
}

tf_status tf_scache_truncate(tf_scache *c, int64_t n, tf_err *err) {
    if (n < 0 || n > c->n_seen)
        return tf_errf(err, TF_ERR_INVALID_ARG, "streaming cache: truncate to %lld of %lld tokens", (long long)n,
                       (long long)c->n_seen);
    /* window tokens of the new end were overwritten if the sequence ever ran
     * more than the slack beyond it */
    int64_t slack = c->ring - c->window;
    if (c->n_high - n > slack && n > c->sinks)
        return tf_errf(err, TF_ERR_RANGE,
                       "streaming cache: rollback of %lld tokens exceeds the ring's slack of %lld",
                       (long long)(c->n_high - n), (long long)slack);
    c->n_seen = n; /* n_high stays: tokens written beyond n may have overwritten ring slots */
    return TF_OK;
}
