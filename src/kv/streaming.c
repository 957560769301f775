/* streaming.c — StreamingLLM cache: sinks + ring, unrotated keys, rotated view (see streaming.h). */
#include "kv/streaming.h"

#include "backend/cpu/ops.h"
#include "core/mem.h"

#include <string.h>

tf_status tf_scache_init(tf_scache *c, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t n_rot,
                         bool rope_neox, const float *freq, float mscale, int32_t sinks, int32_t window, int32_t slack,
                         int32_t n_batch, tf_dtype view_type, tf_err *err) {
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
    c->n_rot = n_rot;
    c->rope_neox = rope_neox;
    size_t slots = (size_t)sinks + (size_t)c->ring, vis = (size_t)sinks + (size_t)window;
    size_t npos = vis + (size_t)n_batch;
    c->k = tf_alloc(sizeof(float) * (size_t)n_layer * slots * c->kv_dim);
    c->v = tf_alloc(sizeof(float) * (size_t)n_layer * slots * c->kv_dim);
    c->tmp_k = tf_alloc(sizeof(float) * vis * c->kv_dim);
    c->tmp_v = tf_alloc(sizeof(float) * vis * c->kv_dim);
    c->cos_t = tf_alloc(sizeof(float) * npos * (size_t)(n_rot / 2 > 0 ? n_rot / 2 : 1));
    c->sin_t = tf_alloc(sizeof(float) * npos * (size_t)(n_rot / 2 > 0 ? n_rot / 2 : 1));
    int32_t *pos = tf_alloc(sizeof(int32_t) * npos);
    if (!c->k || !c->v || !c->tmp_k || !c->tmp_v || !c->cos_t || !c->sin_t || !pos) {
        tf_free(pos);
        tf_scache_free(c);
        return tf_errf(err, TF_ERR_NOMEM, "streaming cache: out of memory");
    }
    for (size_t i = 0; i < npos; i++) pos[i] = (int32_t)i;
    tf_op_rope_table(c->cos_t, c->sin_t, pos, (int64_t)npos, n_rot, freq, mscale);
    tf_free(pos);
    tf_status st = tf_kv_init(&c->view, n_layer, n_head_kv, head_dim, (int32_t)npos, view_type, err);
    if (st != TF_OK) tf_scache_free(c);
    return st;
}

void tf_scache_free(tf_scache *c) {
    tf_free(c->k);
    tf_free(c->v);
    tf_free(c->tmp_k);
    tf_free(c->tmp_v);
    tf_free(c->cos_t);
    tf_free(c->sin_t);
    tf_kv_free(&c->view);
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

int32_t tf_scache_view(tf_scache *c, int32_t *pos0) {
    int64_t s_end, w_lo, P = c->n_seen;
    visible(c, P, &s_end, &w_lo);
    int32_t nv = (int32_t)(s_end + (P - w_lo));
    size_t kvd = (size_t)c->kv_dim, slots = (size_t)c->sinks + (size_t)c->ring;
    for (int il = 0; il < c->n_layer; il++) {
        const float *lk = c->k + (size_t)il * slots * kvd, *lv = c->v + (size_t)il * slots * kvd;
        for (int32_t i = 0; i < nv; i++) {
            int64_t t = i < s_end ? i : w_lo + (i - s_end);
            size_t s = slot_of(c, t);
            memcpy(c->tmp_k + (size_t)i * kvd, lk + s * kvd, sizeof(float) * kvd);
            memcpy(c->tmp_v + (size_t)i * kvd, lv + s * kvd, sizeof(float) * kvd);
        }
        /* logical position of view slot i is i */
        tf_op_rope(c->tmp_k, nv, (int64_t)kvd, c->n_head_kv, c->head_dim, c->n_rot, c->rope_neox, c->cos_t, c->sin_t);
        tf_kv_store(&c->view, il, 0, nv, c->tmp_k, c->tmp_v, (int64_t)kvd);
    }
    for (int32_t i = 0; i < nv; i++) c->view.pos[i] = i;
    c->view.n_used = nv;
    *pos0 = nv;
    return nv;
}

void tf_scache_append(tf_scache *c, const float *k, const float *v, int32_t n, int32_t ld_rows) {
    size_t kvd = (size_t)c->kv_dim, slots = (size_t)c->sinks + (size_t)c->ring;
    for (int il = 0; il < c->n_layer; il++) {
        float *lk = c->k + (size_t)il * slots * kvd, *lv = c->v + (size_t)il * slots * kvd;
        const float *sk = k + (size_t)il * ld_rows * kvd, *sv = v + (size_t)il * ld_rows * kvd;
        for (int32_t i = 0; i < n; i++) {
            size_t s = slot_of(c, c->n_seen + i);
            memcpy(lk + s * kvd, sk + (size_t)i * kvd, sizeof(float) * kvd);
            memcpy(lv + s * kvd, sv + (size_t)i * kvd, sizeof(float) * kvd);
        }
    }
    c->n_seen += n;
    if (c->n_seen > c->n_high) c->n_high = c->n_seen;
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
