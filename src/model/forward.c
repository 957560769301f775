/*
 * forward.c — the llama forward pass over a batch of tokens:
 *
 *   x = embed(tokens)
 *   per layer:  q, k, v = Wq . norm(x) (+ bq), Wk . norm(x) (+ bk), Wv . norm(x) (+ bv)
 *               x += Wo . attn(rope(q), rope(k), v)
 *               x += Wdown . (silu(Wgate . norm(x)) * (Wup . norm(x)))
 *   logits = Wout . norm(x)
 */
#include "model/forward.h"

#include "backend/cpu/attn.h"
#include "backend/cpu/ops.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

/* Below this many multiply-adds a matrix product runs on the calling thread:
 * waking the pool costs more than it saves. */
#define PARALLEL_MIN_WORK (1 << 15)

static void matmul(tf_fwd *f, const tf_tensor *w, const float *x, int64_t n, float *y, int64_t ldy) {
    int64_t work = w->ne[0] * w->ne[1] * n;
    tf_cpu_matmul(work >= PARALLEL_MIN_WORK ? f->pool : NULL, f->kern, (tf_dtype)w->type, w->data, w->ne[1],
                  w->ne[0], x, n, y, ldy, f->act_buf);
}

static size_t act_bytes(const tf_tensor *t, int32_t n) {
    return (size_t)n * tf_act_scratch_row_size((tf_dtype)t->type, t->ne[0]);
}

tf_status tf_fwd_init(tf_fwd *f, const tf_model *m, int32_t n_batch, int32_t n_logits, int32_t n_kv_max,
                      tf_pool *pool, tf_isa isa, tf_err *err) {
    memset(f, 0, sizeof *f);
    const tf_hparams *hp = &m->hp;
    if (n_batch < 1 || n_logits < 0 || n_logits > n_batch)
        return tf_errf(err, TF_ERR_INVALID_ARG, "batch size %d / logits rows %d: expected 1 <= logits <= batch",
                       n_batch, n_logits);
    f->m = m;
    f->pool = pool;
    f->isa = isa;
    f->kern = tf_cpu_kernels_get(isa);
    f->n_batch = n_batch;
    f->n_logits = n_logits;
    size_t nb = (size_t)n_batch;
    size_t q_dim = (size_t)hp->n_head * hp->head_dim, kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    size_t act = 0;
    const tf_tensor *mats[] = {&m->output};
    act = act_bytes(mats[0], n_logits > 0 ? n_logits : 1);
    for (int il = 0; il < hp->n_layer; il++) {
        const tf_layer_weights *L = &m->layers[il];
        const tf_tensor *ts[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
            if (act_bytes(ts[i], n_batch) > act) act = act_bytes(ts[i], n_batch);
    }
    struct { void **p; size_t bytes; } bufs[] = {
        {(void **)&f->x, nb * hp->n_embd * 4},      {(void **)&f->xn, nb * hp->n_embd * 4},
        {(void **)&f->q, nb * q_dim * 4},           {(void **)&f->att, nb * q_dim * 4},
        {(void **)&f->k, nb * kv_dim * 4},          {(void **)&f->v, nb * kv_dim * 4},
        {(void **)&f->tmp, nb * hp->n_embd * 4},    {(void **)&f->gate, nb * hp->n_ff * 4},
        {(void **)&f->up, nb * hp->n_ff * 4},       {(void **)&f->rope_cos, nb * (hp->n_rot / 2) * 4},
        {(void **)&f->rope_sin, nb * (hp->n_rot / 2) * 4}, {(void **)&f->kv_len, nb * 4},
        {&f->act_buf, act},
        {&f->attn_scratch, tf_attn_scratch_size(tf_pool_size(pool), n_batch, hp->n_head, hp->head_dim, n_kv_max)},
        {(void **)&f->logits, (size_t)(n_logits > 0 ? n_logits : 1) * hp->n_vocab * 4},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        *bufs[i].p = tf_calloc(bufs[i].bytes);
        f->bytes += bufs[i].bytes;
        if (!*bufs[i].p) {
            tf_fwd_free(f);
            return tf_errf(err, TF_ERR_NOMEM, "cannot reserve %zu bytes of forward-pass scratch for batch %d",
                           bufs[i].bytes, n_batch);
        }
    }
    return TF_OK;
}

void tf_fwd_free(tf_fwd *f) {
    void *ps[] = {f->x, f->xn, f->q, f->att, f->k, f->v, f->tmp, f->gate, f->up,
                  f->rope_cos, f->rope_sin, f->kv_len, f->act_buf, f->attn_scratch, f->logits};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) tf_free(ps[i]);
    memset(f, 0, sizeof *f);
}

static void embed(tf_fwd *f, const int32_t *tokens, int32_t n) {
    const tf_tensor *e = &f->m->tok_embd;
    size_t row = tf_dtype_row_size(e->type, e->ne[0]);
    for (int32_t i = 0; i < n; i++)
        f->kern->dequantize[e->type]((const uint8_t *)e->data + (size_t)tokens[i] * row, f->x + (size_t)i * e->ne[0],
                                     e->ne[0]);
}

tf_status tf_forward_check(const tf_hparams *hp, int32_t n_batch, int32_t n_logits, int32_t n_slots,
                           const int32_t *tokens, int32_t n, int32_t slot0, const int32_t *kv_len,
                           int32_t logits_from, tf_err *err) {
    if (n < 1 || n > n_batch)
        return tf_errf(err, TF_ERR_INVALID_ARG, "forward: %d tokens (expected 1..%d)", n, n_batch);
    if (slot0 < 0 || slot0 > n_slots - n)
        return tf_errf(err, TF_ERR_RANGE, "forward: slots [%d, %d) exceed the KV cache of %d", slot0, slot0 + n,
                       n_slots);
    if (logits_from < 0 || logits_from > n || n - logits_from > n_logits)
        return tf_errf(err, TF_ERR_INVALID_ARG, "forward: logits for rows [%d, %d) exceed %d rows", logits_from, n,
                       n_logits);
    for (int32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return tf_errf(err, TF_ERR_INVALID_ARG, "forward: token id %d at row %d (expected 0..%d)", tokens[i], i,
                           hp->n_vocab - 1);
        if (kv_len && (kv_len[i] < 1 || kv_len[i] > slot0 + n))
            return tf_errf(err, TF_ERR_INVALID_ARG, "forward: row %d sees %d slots (expected 1..%d)", i, kv_len[i],
                           slot0 + n);
    }
    return TF_OK;
}

tf_status tf_forward(tf_fwd *f, tf_kv_cache *kv, const int32_t *tokens, const int32_t *pos, int32_t n,
                     int32_t slot0, const int32_t *kv_len, int32_t logits_from, tf_err *err) {
    const tf_model *m = f->m;
    const tf_hparams *hp = &m->hp;
    TF_TRY(tf_forward_check(hp, f->n_batch, f->n_logits, kv->n_slots, tokens, n, slot0, kv_len, logits_from, err));
    int32_t *len = f->kv_len;
    const int64_t E = hp->n_embd, hd = hp->head_dim;
    const int64_t q_dim = (int64_t)hp->n_head * hd, kv_dim = (int64_t)hp->n_head_kv * hd;
    for (int32_t i = 0; i < n; i++) len[i] = kv_len ? kv_len[i] : slot0 + i + 1;
    embed(f, tokens, n);
    tf_op_rope_table(f->rope_cos, f->rope_sin, pos, n, hp->n_rot, m->rope_freq, m->rope_mscale);
    for (int32_t i = 0; i < n; i++) kv->pos[slot0 + i] = pos[i];
    if (kv->n_used < slot0 + n) kv->n_used = slot0 + n;
    for (int il = 0; il < hp->n_layer; il++) {
        const tf_layer_weights *L = &m->layers[il];
        tf_op_rmsnorm(f->xn, f->x, L->attn_norm.data, n, E, E, hp->rms_eps);
        matmul(f, &L->wq, f->xn, n, f->q, q_dim);
        matmul(f, &L->wk, f->xn, n, f->k, kv_dim);
        matmul(f, &L->wv, f->xn, n, f->v, kv_dim);
        if (hp->qkv_bias) { /* qwen2; per row, so batch invariance holds */
            tf_op_add_bias(f->q, L->bq.data, n, q_dim, q_dim);
            tf_op_add_bias(f->k, L->bk.data, n, kv_dim, kv_dim);
            tf_op_add_bias(f->v, L->bv.data, n, kv_dim, kv_dim);
        }
        if (f->cap_k) {
            memcpy(f->cap_k + (size_t)il * f->n_batch * kv_dim, f->k, sizeof(float) * (size_t)n * kv_dim);
            memcpy(f->cap_v + (size_t)il * f->n_batch * kv_dim, f->v, sizeof(float) * (size_t)n * kv_dim);
        }
        tf_op_rope(f->q, n, q_dim, hp->n_head, (int)hd, hp->n_rot, hp->rope_neox, f->rope_cos, f->rope_sin);
        if (f->cap_q)
            for (int32_t r = f->cap_q_row; r < n && r - f->cap_q_row < f->cap_q_max; r++)
                memcpy(f->cap_q + ((size_t)il * f->cap_q_max + (size_t)(r - f->cap_q_row)) * q_dim,
                       f->q + (size_t)r * q_dim, sizeof(float) * q_dim);
        tf_op_rope(f->k, n, kv_dim, hp->n_head_kv, (int)hd, hp->n_rot, hp->rope_neox, f->rope_cos, f->rope_sin);
        tf_kv_store(kv, il, slot0, n, f->k, f->v, kv_dim);
        tf_attn_args aa = {.q = f->q, .ldq = q_dim, .kv = tf_kv_layer_view(kv, il), .n_q = n, .kv_len = len,
                           .n_head = hp->n_head, .scale = 1.0f / sqrtf((float)hd), .out = f->att, .ldo = q_dim};
        tf_cpu_attn(f->pool, f->isa, &aa, f->attn_scratch);
        matmul(f, &L->wo, f->att, n, f->tmp, E);
        tf_op_add(f->x, f->tmp, n * E);
        tf_op_rmsnorm(f->xn, f->x, L->ffn_norm.data, n, E, E, hp->rms_eps);
        matmul(f, &L->w_gate, f->xn, n, f->gate, hp->n_ff);
        matmul(f, &L->w_up, f->xn, n, f->up, hp->n_ff);
        tf_op_silu_mul(f->gate, f->up, n * hp->n_ff);
        matmul(f, &L->w_down, f->gate, n, f->tmp, E);
        tf_op_add(f->x, f->tmp, n * E);
    }
    int32_t n_out = n - logits_from;
    if (n_out > 0) {
        const float *xl = f->x + (size_t)logits_from * E;
        tf_op_rmsnorm(f->xn, xl, m->output_norm.data, n_out, E, E, hp->rms_eps);
        matmul(f, &m->output, f->xn, n_out, f->logits, hp->n_vocab);
    }
    return TF_OK;
}
