/*
 * forward.c — the llama forward pass over a batch of tokens, written once
 * against the backend table (backend/backend.h):
 *
 *   x = embed(tokens)
 *   per layer:  q, k, v = Wq . norm(x) (+ bq), Wk . norm(x) (+ bk), Wv . norm(x) (+ bv)
 *               x += Wo . attn(rope(q), rope(k), v)
 *               x += Wdown . (silu(Wgate . norm(x)) * (Wup . norm(x)))
 *   logits = Wout . norm(x)
 */
#include "model/forward.h"

#include "backend/cpu/backend_cpu.h"
#include "core/topk.h"

#include <math.h>
#include <string.h>

static tf_status reserve(tf_fwd *f, const tf_bweights *w, int32_t n_batch, int32_t n_logits, int32_t n_kv_max,
                         tf_err *err) {
    const tf_model *m = w->m;
    const tf_hparams *hp = &m->hp;
    tf_backend *be = w->be;
    if (n_batch < 1 || n_logits < 0 || n_logits > n_batch || n_kv_max < 1)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "forward pass of batch %d, %d logits rows, %d KV slots: expected 1 <= logits <= batch", n_batch,
                       n_logits, n_kv_max);
    f->be = be;
    f->w = w;
    f->m = m;
    f->n_batch = n_batch;
    f->n_logits = n_logits;
    f->n_kv_max = n_kv_max;
    const tf_backend_ops *o = be->ops;
    size_t nb = (size_t)n_batch, n_lg = (size_t)(n_logits > 0 ? n_logits : 1);
    size_t q_dim = (size_t)hp->n_head * hp->head_dim, kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    size_t mm = o->matmul_scratch(be, &w->output, (int32_t)n_lg);
    for (int il = 0; il < hp->n_layer; il++) {
        const tf_blayer *L = &w->layers[il];
        const tf_bmat *ms[TF_LAYER_MATS] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < TF_LAYER_MATS; i++) {
            size_t b = o->matmul_scratch(be, ms[i], n_batch);
            if (b > mm) mm = b;
        }
    }
    struct { void **p; size_t bytes; } bufs[] = {
        {(void **)&f->x, nb * hp->n_embd * 4},      {(void **)&f->xn, nb * hp->n_embd * 4},
        {(void **)&f->q, nb * q_dim * 4},           {(void **)&f->att, nb * q_dim * 4},
        {(void **)&f->k, nb * kv_dim * 4},          {(void **)&f->v, nb * kv_dim * 4},
        {(void **)&f->tmp, nb * hp->n_embd * 4},    {(void **)&f->gate, nb * hp->n_ff * 4},
        {(void **)&f->up, nb * hp->n_ff * 4},
        {&f->rope_table, o->rope_table_bytes(be, n_batch, hp->n_rot)},
        {&f->mm_scratch, mm},
        {&f->attn_scratch, o->attn_scratch(be, n_batch, hp->n_head, hp->head_dim, n_kv_max)},
        {(void **)&f->logits, n_lg * hp->n_vocab * 4},
        {(void **)&f->argmax_d, n_lg * 4},
        {(void **)&f->topk_d, n_lg * (2 * TF_TOPK_MAX + 1) * 4},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (!bufs[i].bytes) continue; /* e.g. no RoPE table on a device */
        TF_TRY(o->alloc(be, bufs[i].p, bufs[i].bytes, "forward-pass scratch", err));
        f->bytes += bufs[i].bytes;
    }
    f->args_bytes = sizeof(int32_t) * (3 * nb + 3);
    TF_TRY(o->alloc(be, (void **)&f->args_d, f->args_bytes, "forward-pass inputs", err));
    if (o->host_memory) f->args_h = f->args_d; /* nothing to upload */
    else TF_TRY(o->host_alloc(be, (void **)&f->args_h, f->args_bytes, "forward-pass inputs", err));
    f->tok_d = f->args_d;
    f->pos_d = f->tok_d + nb;
    f->len_d = f->pos_d + nb;
    f->slot0_d = f->len_d + nb;
    f->gap_d = f->slot0_d + 1;
    return TF_OK;
}

tf_status tf_fwd_init_on(tf_fwd *f, const tf_bweights *w, int32_t n_batch, int32_t n_logits, int32_t n_kv_max,
                         tf_err *err) {
    memset(f, 0, sizeof *f);
    tf_status st = reserve(f, w, n_batch, n_logits, n_kv_max, err);
    if (st != TF_OK) tf_fwd_free(f);
    return st;
}

tf_status tf_fwd_init(tf_fwd *f, const tf_model *m, int32_t n_batch, int32_t n_logits, int32_t n_kv_max,
                      tf_pool *pool, tf_isa isa, tf_err *err) {
    memset(f, 0, sizeof *f);
    tf_status st = tf_backend_cpu_init(&f->own_be, pool, isa, err);
    if (st == TF_OK) st = tf_bweights_init(&f->own_w, &f->own_be, m, err);
    if (st == TF_OK) st = reserve(f, &f->own_w, n_batch, n_logits, n_kv_max, err);
    if (st != TF_OK) tf_fwd_free(f);
    return st;
}

void tf_fwd_free(tf_fwd *f) {
    tf_backend *be = f->be;
    if (be && be->ops) {
        const tf_backend_ops *o = be->ops;
        o->sync(be, "freeing the forward pass", NULL);
        for (int i = 0; i < f->n_graph; i++) o->graph_free(be, f->graph[i].g);
        void *ps[] = {f->x, f->xn, f->q, f->att, f->k, f->v, f->tmp, f->gate, f->up, f->rope_table,
                      f->mm_scratch, f->attn_scratch, f->logits, f->argmax_d, f->topk_d, f->args_d};
        for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
            if (ps[i]) o->free(be, ps[i]);
        if (f->args_h && f->args_h != f->args_d) o->host_free(be, f->args_h);
    }
    tf_bweights_free(&f->own_w);
    tf_backend_free(&f->own_be);
    memset(f, 0, sizeof *f);
}

/* The argument checks of tf_forward: 1 <= n <= n_batch, slots [slot0, slot0+n)
 * inside n_slots, logits rows within n_logits, token ids in the vocabulary,
 * 1 <= kv_len[i] <= slot0+n. */
static tf_status forward_check(const tf_hparams *hp, int32_t n_batch, int32_t n_logits, int32_t n_slots,
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

/* y[i] = w[i] x for n_w matrices of the same input: one backend call where the
 * backend has matmul_n and the matrices share type, layout and width (the
 * same bits either way), else one matmul each. */
static tf_status matmul_same_input(tf_backend *be, int n_w, const tf_bmat *const *w, const float *x, int32_t n,
                                   float *const *y, const int64_t *ldy, void *scratch, tf_err *err) {
    const tf_backend_ops *o = be->ops;
    bool one_call = o->matmul_n != NULL;
    for (int i = 1; i < n_w && one_call; i++)
        one_call = w[i]->type == w[0]->type && w[i]->layout == w[0]->layout && w[i]->n_cols == w[0]->n_cols;
    if (one_call) return o->matmul_n(be, n_w, w, x, n, y, ldy, scratch, err);
    for (int i = 0; i < n_w; i++) TF_TRY(o->matmul(be, w[i], x, n, y[i], ldy[i], scratch, err));
    return TF_OK;
}

/* Enqueue the pass after its inputs are in f->args_d. */
static tf_status enqueue(tf_fwd *f, tf_kv_cache *kv, int32_t n, int32_t logits_from, int32_t max_kv,
                         const tf_fwd_out *out, tf_err *err) {
    tf_backend *be = f->be;
    const tf_backend_ops *o = be->ops;
    const tf_bweights *w = f->w;
    const tf_model *m = f->m;
    const tf_hparams *hp = &m->hp;
    const int32_t E = hp->n_embd, hd = hp->head_dim;
    const int64_t q_dim = (int64_t)hp->n_head * hd, kv_dim = (int64_t)hp->n_head_kv * hd;
    o->embed(be, f->x, &w->tok_embd, f->tok_d, n);
    const tf_rope_pass rp = {.pos = f->pos_d, .freq = w->rope_freq, .mscale = m->rope_mscale, .n = n,
                             .n_rot = hp->n_rot, .neox = hp->rope_neox, .table = f->rope_table};
    o->rope_prepare(be, &rp);
    for (int il = 0; il < hp->n_layer; il++) {
        const tf_blayer *L = &w->layers[il];
        if (il == 0) o->rmsnorm(be, f->xn, f->x, L->attn_norm, n, E, hp->rms_eps); /* else the last layer's end */
        {
            const tf_bmat *wqkv[3] = {&L->wq, &L->wk, &L->wv};
            float *const yqkv[3] = {f->q, f->k, f->v};
            const int64_t ld[3] = {q_dim, kv_dim, kv_dim};
            TF_TRY(matmul_same_input(be, 3, wqkv, f->xn, n, yqkv, ld, f->mm_scratch, err));
        }
        if (L->bq) { /* qwen2; per row, so batch invariance holds */
            o->add_bias(be, f->q, L->bq, n, q_dim);
            o->add_bias(be, f->k, L->bk, n, kv_dim);
            o->add_bias(be, f->v, L->bv, n, kv_dim);
        }
        if (out->k) {
            size_t off = (size_t)il * f->n_batch * kv_dim, bytes = sizeof(float) * (size_t)n * kv_dim;
            TF_TRY(o->copy(be, out->k + off, f->k, bytes, err));
            TF_TRY(o->copy(be, out->v + off, f->v, bytes, err));
        }
        o->rope(be, f->q, q_dim, hp->n_head, hd, &rp);
        if (out->q) {
            int32_t r0 = out->q_row, r1 = n < r0 + out->q_max ? n : r0 + out->q_max;
            if (r1 > r0)
                TF_TRY(o->copy(be, out->q + (size_t)il * out->q_max * q_dim, f->q + (size_t)r0 * q_dim,
                               sizeof(float) * (size_t)(r1 - r0) * q_dim, err));
        }
        o->rope(be, f->k, kv_dim, hp->n_head_kv, hd, &rp);
        const tf_kv_view view = tf_kv_layer_view(kv, il);
        o->kv_store(be, &view, f->slot0_d, n, f->k, f->v, kv_dim);
        const tf_attn_call ac = {.q = f->q, .ldq = q_dim, .kv = view, .n_q = n, .n_head = hp->n_head,
                                 .kv_len = f->len_d, .max_kv = max_kv, .gap = f->gap_d,
                                 .scale = 1.0f / sqrtf((float)hd),
                                 .out = f->att, .ldo = q_dim, .scratch = f->attn_scratch};
        o->attn(be, &ac);
        TF_TRY(o->matmul(be, &L->wo, f->att, n, f->tmp, E, f->mm_scratch, err));
        o->add_rmsnorm(be, f->x, f->tmp, f->xn, L->ffn_norm, n, E, hp->rms_eps);
        {
            const tf_bmat *wgu[2] = {&L->w_gate, &L->w_up};
            float *const ygu[2] = {f->gate, f->up};
            const int64_t ld[2] = {hp->n_ff, hp->n_ff};
            TF_TRY(matmul_same_input(be, 2, wgu, f->xn, n, ygu, ld, f->mm_scratch, err));
        }
        o->silu_mul(be, f->gate, f->up, (int64_t)n * hp->n_ff);
        TF_TRY(o->matmul(be, &L->w_down, f->gate, n, f->tmp, E, f->mm_scratch, err));
        if (il + 1 < hp->n_layer) /* the residual, and the next layer's first norm */
            o->add_rmsnorm(be, f->x, f->tmp, f->xn, w->layers[il + 1].attn_norm, n, E, hp->rms_eps);
        else
            o->add(be, f->x, f->tmp, (int64_t)n * E);
    }
    int32_t n_out = n - logits_from;
    if (n_out > 0) {
        o->rmsnorm(be, f->xn, f->x + (size_t)logits_from * E, w->output_norm, n_out, E, hp->rms_eps);
        TF_TRY(o->matmul(be, &w->output, f->xn, n_out, f->logits, hp->n_vocab, f->mm_scratch, err));
    }
    return o->check(be, "the forward pass", err);
}

/* The graph of this shape, captured on first use (the oldest is dropped when
 * the table is full). */
static tf_status run_graph(tf_fwd *f, tf_kv_cache *kv, int32_t n, int32_t logits_from, int32_t max_kv,
                           const tf_fwd_out *out, tf_err *err) {
    tf_backend *be = f->be;
    const tf_backend_ops *o = be->ops;
    int gi = 0;
    for (; gi < f->n_graph; gi++) {
        const __typeof__(f->graph[0]) *G = &f->graph[gi];
        if (G->n == n && G->logits_from == logits_from && G->max_kv == max_kv && G->kv == (const void *)kv->k &&
            G->out.q == out->q && G->out.q_row == out->q_row && G->out.q_max == out->q_max && G->out.k == out->k &&
            G->out.v == out->v)
            break;
    }
    if (gi == f->n_graph) {
        if (f->n_graph == TF_FWD_GRAPHS) {
            o->graph_free(be, f->graph[0].g);
            memmove(&f->graph[0], &f->graph[1], sizeof f->graph[0] * (TF_FWD_GRAPHS - 1));
            f->n_graph--;
        }
        gi = f->n_graph;
        TF_TRY(o->graph_begin(be, err));
        tf_status st = o->upload(be, f->args_d, f->args_h, f->args_bytes, err);
        if (st == TF_OK) st = enqueue(f, kv, n, logits_from, max_kv, out, err);
        void *g = NULL;
        tf_err end_err = {0};
        tf_status st2 = o->graph_end(be, &g, &end_err);
        if (st != TF_OK) {
            if (g) o->graph_free(be, g);
            return st;
        }
        if (st2 != TF_OK) return tf_errf(err, st2, "%s", end_err.msg);
        f->graph[gi].n = n;
        f->graph[gi].logits_from = logits_from;
        f->graph[gi].max_kv = max_kv;
        f->graph[gi].kv = kv->k;
        f->graph[gi].out = *out;
        f->graph[gi].g = g;
        f->n_graph++;
        f->graph_captures++;
    }
    f->graph_launches++;
    return o->graph_launch(be, f->graph[gi].g, err);
}

tf_status tf_forward(tf_fwd *f, tf_kv_cache *kv, const int32_t *tokens, const int32_t *pos, int32_t n,
                     int32_t slot0, const int32_t *kv_len, int32_t logits_from, const tf_fwd_out *out, tf_err *err) {
    static const tf_fwd_out none;
    if (!out) out = &none;
    if (!out->k != !out->v)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "forward: keys and values are output together (asked: keys %s, values %s)",
                       out->k ? "yes" : "no", out->v ? "yes" : "no");
    if (out->q && (out->q_row < 0 || out->q_max < 1))
        return tf_errf(err, TF_ERR_INVALID_ARG, "forward: queries from row %d, %d rows (expected >= 0 and >= 1)",
                       out->q_row, out->q_max);
    const tf_hparams *hp = &f->m->hp;
    const tf_backend_ops *o = f->be->ops;
    TF_TRY(forward_check(hp, f->n_batch, f->n_logits, kv->n_slots, tokens, n, slot0, kv_len, logits_from, err));
    if (kv->n_layer != hp->n_layer || kv->n_head_kv != hp->n_head_kv || kv->head_dim != hp->head_dim)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "forward: the KV cache's shape (%d layers, %d KV heads of %d) is not the model's (%d, %d, %d)",
                       kv->n_layer, kv->n_head_kv, kv->head_dim, hp->n_layer, hp->n_head_kv, hp->head_dim);
    if (kv->gap_lo < kv->gap_hi && slot0 < kv->gap_hi)
        return tf_errf(err, TF_ERR_INVALID_ARG, "forward: slots from %d lie before the cache's gap [%d, %d)", slot0,
                       kv->gap_lo, kv->gap_hi);
    const bool kv_host = !kv->be || kv->be->ops->host_memory;
    if (kv->be != f->be && !(kv_host && o->host_memory))
        return tf_errf(err, TF_ERR_INVALID_ARG, "forward: the KV cache is not on the %s backend", o->name);
    if (f->pending) TF_TRY(o->sync(f->be, "the previous forward pass", err)); /* the staging is reused */
    int32_t *tok_h = f->args_h, *pos_h = tok_h + f->n_batch, *len_h = pos_h + f->n_batch, *slot0_h = len_h + f->n_batch;
    int32_t max_len = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t len = kv_len ? kv_len[i] : slot0 + i + 1;
        tok_h[i] = tokens[i];
        pos_h[i] = pos[i];
        len_h[i] = len;
        if (len > max_len) max_len = len;
    }
    *slot0_h = slot0;
    slot0_h[1] = kv->gap_lo;
    slot0_h[2] = kv->gap_hi;
    for (int32_t i = 0; i < n; i++) kv->pos[slot0 + i] = pos[i];
    if (kv->n_used < slot0 + n) kv->n_used = slot0 + n;
    const bool graph = f->use_graphs && n <= o->graph_rows;
    /* a replayed graph serves every length up to its bound */
    int32_t max_kv = max_len;
    if (graph && f->graph_kv_step > 0) {
        int64_t b = ((int64_t)max_len + f->graph_kv_step - 1) / f->graph_kv_step * f->graph_kv_step;
        max_kv = b < kv->n_slots ? (int32_t)b : kv->n_slots;
    } else if (graph) {
        max_kv = kv->n_slots;
    }
    if (max_kv > f->n_kv_max)
        return tf_errf(err, TF_ERR_INTERNAL, "forward: a cache of %d slots exceeds the scratch's %d", max_kv,
                       f->n_kv_max);
    f->pending = !o->host_memory;
    if (graph) return run_graph(f, kv, n, logits_from, max_kv, out, err);
    TF_TRY(o->upload(f->be, f->args_d, f->args_h, f->args_bytes, err));
    return enqueue(f, kv, n, logits_from, max_kv, out, err);
}

tf_status tf_fwd_argmax(tf_fwd *f, int32_t n_rows, int32_t *out, tf_err *err) {
    tf_backend *be = f->be;
    be->ops->argmax(be, f->argmax_d, f->logits, n_rows, f->m->hp.n_vocab);
    TF_TRY(be->ops->check(be, "argmax", err));
    TF_TRY(be->ops->download(be, out, f->argmax_d, sizeof(int32_t) * (size_t)n_rows, err));
    f->pending = false;
    return TF_OK;
}

tf_status tf_fwd_topk(tf_fwd *f, int32_t n_rows, int32_t k, float temp, int32_t *out, tf_err *err) {
    if (k < 1 || k > TF_TOPK_MAX || !(temp > 0.0f))
        return tf_errf(err, TF_ERR_INVALID_ARG, "top-k candidates: k = %d, temperature %g (expected 1..%d and > 0)",
                       k, temp, TF_TOPK_MAX);
    tf_backend *be = f->be;
    be->ops->topk(be, f->topk_d, f->logits, n_rows, f->m->hp.n_vocab, k, temp);
    TF_TRY(be->ops->check(be, "topk", err));
    TF_TRY(be->ops->download(be, out, f->topk_d, sizeof(int32_t) * (size_t)n_rows * (2 * (size_t)k + 1), err));
    f->pending = false;
    return TF_OK;
}

tf_status tf_fwd_logits(tf_fwd *f, int32_t n_rows, float *out, tf_err *err) {
    TF_TRY(f->be->ops->download(f->be, out, f->logits, sizeof(float) * (size_t)n_rows * f->m->hp.n_vocab, err));
    f->pending = false;
    return TF_OK;
}
