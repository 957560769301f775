/*
 * forward_cuda.c — the llama forward pass on the device (see forward_cuda.h),
 * the same steps as forward.c:
 *
 *   x = embed(tokens)
 *   per layer:  x += Wo . attn(rope(Wq . norm(x)), rope(Wk . norm(x)), Wv . norm(x))
 *               x += Wdown . (silu(Wgate . norm(x)) * (Wup . norm(x)))
 *   logits = Wout . norm(x)
 *
 * Compiled only with TF_HAVE_CUDA (`make CUDA=1`).
 */
#include "model/forward_cuda.h"

#include "model/forward.h"

#ifdef TF_HAVE_CUDA

#include "core/mem.h"

#include <math.h>
#include <string.h>

/* ---- weights ------------------------------------------------------------------ */

static size_t tensor_bytes(const tf_tensor *t) { return tf_dtype_row_size(t->type, t->ne[0]) * (size_t)t->ne[1]; }

static size_t align_up(size_t x) { return (x + 255) / 256 * 256; }

static tf_status check_type(const tf_tensor *t, tf_err *err) {
    if (tf_cuda_mat_type_ok(t->type)) return TF_OK;
    return tf_errf(err, TF_ERR_UNSUPPORTED,
                   "tensor %s is %s: the CUDA backend computes with f32, f16, bf16 and q8_0 weights (hint: "
                   "`triforce quantize IN OUT f16`, or --device cpu)",
                   t->name ? t->name : "?", tf_dtype_name(t->type));
}

tf_status tf_cuda_weights_init(tf_cuda_weights *w, tf_cuda *cu, const tf_model *m, tf_err *err) {
    memset(w, 0, sizeof *w);
    const tf_hparams *hp = &m->hp;
    w->cu = cu;
    w->m = m;
    /* qwen2 needs a bias add after the q/k/v products and rotate-half RoPE
     * (also in the streaming view's kernel); the device kernels do neither
     * yet, and there is no GPU here to test them on: refuse by name. */
    if (hp->qkv_bias || hp->rope_neox)
        return tf_errf(err, TF_ERR_UNSUPPORTED,
                       "%s: the CUDA backend does not run the %s architecture yet (q/k/v biases, rotate-half RoPE); "
                       "use --device cpu (or auto, which picks the CPU for it)",
                       m->path, tf_arch_name(hp->arch));
    TF_TRY(check_type(&m->tok_embd, err));
    TF_TRY(check_type(&m->output, err));
    size_t total = align_up(tensor_bytes(&m->tok_embd)) + align_up(sizeof(float) * hp->n_embd) +
                   align_up(sizeof(float) * (size_t)(hp->n_rot / 2 > 0 ? hp->n_rot / 2 : 1));
    if (!hp->tied_output) total += align_up(tensor_bytes(&m->output));
    for (int il = 0; il < hp->n_layer; il++) {
        const tf_layer_weights *L = &m->layers[il];
        const tf_tensor *ts[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < 7; i++) {
            TF_TRY(check_type(ts[i], err));
            total += align_up(tensor_bytes(ts[i]));
        }
        total += 2 * align_up(sizeof(float) * hp->n_embd);
    }
    w->layers = tf_calloc(sizeof(tf_cuda_layer) * (size_t)hp->n_layer);
    if (!w->layers) return tf_errf(err, TF_ERR_NOMEM, "CUDA weights: out of host memory");
    char what[600];
    snprintf(what, sizeof what, "the weights of %s", m->path);
    tf_status st = tf_cuda_malloc(cu, &w->block, total, what, err);
    if (st != TF_OK) {
        tf_cuda_weights_free(w);
        return st;
    }
    w->bytes = total;
    uint8_t *p = w->block;
#define PUT(dst_ptr, src, nbytes)                                                                                     \
    do {                                                                                                              \
        if (st == TF_OK) st = tf_cuda_h2d(cu, p, (src), (nbytes), err);                                               \
        (dst_ptr) = (void *)p;                                                                                        \
        p += align_up(nbytes);                                                                                        \
    } while (0)
    const void *dp;
#define MAT(dst, t)                                                                                                   \
    do {                                                                                                              \
        PUT(dp, (t)->data, tensor_bytes(t));                                                                          \
        (dst) = (tf_cuda_mat){.data = dp, .type = (t)->type, .n_rows = (t)->ne[1], .n_cols = (t)->ne[0]};             \
    } while (0)
    MAT(w->tok_embd, &m->tok_embd);
    if (hp->tied_output) w->output = w->tok_embd;
    else MAT(w->output, &m->output);
    PUT(dp, m->output_norm.data, sizeof(float) * hp->n_embd);
    w->output_norm = dp;
    PUT(dp, m->rope_freq, sizeof(float) * (size_t)(hp->n_rot / 2 > 0 ? hp->n_rot / 2 : 1));
    w->rope_freq = dp;
    for (int il = 0; il < hp->n_layer && st == TF_OK; il++) {
        const tf_layer_weights *L = &m->layers[il];
        tf_cuda_layer *D = &w->layers[il];
        MAT(D->wq, &L->wq);
        MAT(D->wk, &L->wk);
        MAT(D->wv, &L->wv);
        MAT(D->wo, &L->wo);
        MAT(D->w_gate, &L->w_gate);
        MAT(D->w_up, &L->w_up);
        MAT(D->w_down, &L->w_down);
        PUT(dp, L->attn_norm.data, sizeof(float) * hp->n_embd);
        D->attn_norm = dp;
        PUT(dp, L->ffn_norm.data, sizeof(float) * hp->n_embd);
        D->ffn_norm = dp;
    }
#undef MAT
#undef PUT
    if (st == TF_OK) st = tf_cuda_sync(cu, "uploading the weights", err);
    if (st != TF_OK) tf_cuda_weights_free(w);
    return st;
}

void tf_cuda_weights_free(tf_cuda_weights *w) {
    if (w->block) tf_cuda_mfree(w->cu, w->block);
    tf_free(w->layers);
    memset(w, 0, sizeof *w);
}

/* ---- KV cache ------------------------------------------------------------------ */

tf_status tf_cuda_kv_init(tf_cuda_kv *kv, tf_cuda *cu, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                          int32_t n_slots, const char *what, tf_err *err) {
    memset(kv, 0, sizeof *kv);
    if (n_slots < 1 || n_layer < 1 || n_head_kv < 1 || head_dim < 1)
        return tf_errf(err, TF_ERR_INVALID_ARG, "%s: a device KV cache of %d slots", what, n_slots);
    uint64_t one;
    if (!tf_mul_ok((uint64_t)n_layer * (uint64_t)n_head_kv, (uint64_t)n_slots * (uint64_t)head_dim * 2u, &one))
        return tf_errf(err, TF_ERR_NOMEM, "%s: a KV cache of %d slots overflows", what, n_slots);
    kv->n_layer = n_layer;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->n_slots = n_slots;
    char w[256];
    snprintf(w, sizeof w, "%s (%d slots, f16)", what, n_slots);
    tf_status st = tf_cuda_malloc(cu, (void **)&kv->k, (size_t)one, w, err);
    if (st == TF_OK) st = tf_cuda_malloc(cu, (void **)&kv->v, (size_t)one, w, err);
    /* zeroed: slots never written stay finite, as on the CPU */
    if (st == TF_OK) st = tf_cuda_memset0(cu, kv->k, (size_t)one, err);
    if (st == TF_OK) st = tf_cuda_memset0(cu, kv->v, (size_t)one, err);
    kv->bytes = 2 * (size_t)one;
    if (st != TF_OK) tf_cuda_kv_free(kv, cu);
    return st;
}

void tf_cuda_kv_free(tf_cuda_kv *kv, tf_cuda *cu) {
    tf_cuda_mfree(cu, kv->k);
    tf_cuda_mfree(cu, kv->v);
    memset(kv, 0, sizeof *kv);
}

/* ---- scratch ------------------------------------------------------------------- */

tf_status tf_cuda_fwd_init(tf_cuda_fwd *f, const tf_cuda_weights *w, int32_t n_batch, int32_t n_logits,
                           int32_t n_kv_max, int32_t n_extra, tf_err *err) {
    memset(f, 0, sizeof *f);
    const tf_model *m = w->m;
    const tf_hparams *hp = &m->hp;
    if (n_batch < 1 || n_logits < 1 || n_logits > n_batch || n_kv_max < 1 || n_extra < 0)
        return tf_errf(err, TF_ERR_INVALID_ARG, "device forward: batch %d, logits rows %d, %d KV slots", n_batch,
                       n_logits, n_kv_max);
    if (hp->head_dim > 256 || hp->head_dim % 2 || hp->n_head / hp->n_head_kv > 8)
        return tf_errf(err, TF_ERR_UNSUPPORTED,
                       "the CUDA attention kernels need an even head_dim <= 256 and at most 8 query heads per KV "
                       "head (model: head_dim %d, %d / %d heads)",
                       hp->head_dim, hp->n_head, hp->n_head_kv);
    f->cu = w->cu;
    f->w = w;
    f->m = m;
    f->n_batch = n_batch;
    f->n_logits = n_logits;
    f->n_extra = n_extra;
    f->n_kv_max = n_kv_max;
    size_t nb = (size_t)n_batch, E = (size_t)hp->n_embd;
    size_t q_dim = (size_t)hp->n_head * hp->head_dim, kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    size_t mm = tf_cuda_matmul_scratch(&w->output, n_logits);
    for (int il = 0; il < hp->n_layer; il++) {
        const tf_cuda_layer *L = &w->layers[il];
        const tf_cuda_mat *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++) {
            size_t b = tf_cuda_matmul_scratch(ms[i], n_batch);
            if (b > mm) mm = b;
        }
    }
    struct { void **p; size_t bytes; } bufs[] = {
        {(void **)&f->x, nb * E * 4},       {(void **)&f->xn, nb * E * 4},
        {(void **)&f->q, nb * q_dim * 4},   {(void **)&f->att, nb * q_dim * 4},
        {(void **)&f->k, nb * kv_dim * 4},  {(void **)&f->v, nb * kv_dim * 4},
        {(void **)&f->tmp, nb * E * 4},     {(void **)&f->gate, nb * hp->n_ff * 4},
        {(void **)&f->up, nb * hp->n_ff * 4},
        {(void **)&f->logits, (size_t)n_logits * hp->n_vocab * 4},
        {(void **)&f->argmax_d, (size_t)n_logits * 4},
        {&f->mm_scratch, mm},
        {&f->attn_scratch, tf_cuda_attn_scratch(TF_CUDA_GEMV_MAX_ROWS < n_batch ? TF_CUDA_GEMV_MAX_ROWS : n_batch,
                                                hp->n_head, hp->head_dim, n_kv_max)},
    };
    tf_status st = TF_OK;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0] && st == TF_OK; i++) {
        st = tf_cuda_malloc(f->cu, bufs[i].p, bufs[i].bytes, "forward-pass scratch", err);
        f->bytes += bufs[i].bytes;
    }
    f->args_bytes = sizeof(int32_t) * (3 * nb + 1 + (size_t)n_extra);
    if (st == TF_OK) st = tf_cuda_malloc(f->cu, (void **)&f->args_d, f->args_bytes, "forward-pass inputs", err);
    if (st == TF_OK) st = tf_cuda_host_malloc(f->cu, (void **)&f->args_h, f->args_bytes, "forward-pass inputs", err);
    if (st != TF_OK) {
        tf_cuda_fwd_free(f);
        return st;
    }
    f->tok_d = f->args_d;
    f->pos_d = f->tok_d + nb;
    f->len_d = f->pos_d + nb;
    f->slot0_d = f->len_d + nb;
    f->extra_d = f->slot0_d + 1;
    f->extra_h = f->args_h + 3 * nb + 1;
    return TF_OK;
}

void tf_cuda_fwd_free(tf_cuda_fwd *f) {
    if (!f->cu) return;
    tf_cuda_sync(f->cu, "freeing the forward pass", NULL);
    for (int i = 0; i < f->n_graph; i++) tf_cuda_graph_free(f->graph[i].g);
    void *ps[] = {f->x, f->xn, f->q, f->att, f->k, f->v, f->tmp, f->gate, f->up, f->logits, f->argmax_d,
                  f->mm_scratch, f->attn_scratch, f->args_d};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) tf_cuda_mfree(f->cu, ps[i]);
    tf_cuda_host_free(f->cu, f->args_h);
    memset(f, 0, sizeof *f);
}

/* ---- the pass -------------------------------------------------------------------- */

/* Enqueue everything after the inputs are on the device. */
static tf_status enqueue(tf_cuda_fwd *f, tf_cuda_kv *kv, int32_t n, int32_t logits_from, int32_t max_kv,
                         tf_err *err) {
    tf_cuda *cu = f->cu;
    const tf_cuda_weights *w = f->w;
    const tf_hparams *hp = &f->m->hp;
    const int64_t E = hp->n_embd, hd = hp->head_dim;
    const int64_t q_dim = (int64_t)hp->n_head * hd, kv_dim = (int64_t)hp->n_head_kv * hd;
    const bool decode = n <= TF_CUDA_GEMV_MAX_ROWS;
    if (f->prologue) f->prologue(f->prologue_ud, f->extra_d);
    tf_cuda_embed(cu, f->x, w->tok_embd.data, w->tok_embd.type, E, f->tok_d, n);
    for (int il = 0; il < hp->n_layer; il++) {
        const tf_cuda_layer *L = &w->layers[il];
        tf_cuda_rmsnorm(cu, f->xn, f->x, L->attn_norm, n, (int32_t)E, hp->rms_eps);
        TF_TRY(tf_cuda_matmul(cu, &L->wq, f->xn, n, f->q, q_dim, f->mm_scratch, err));
        TF_TRY(tf_cuda_matmul(cu, &L->wk, f->xn, n, f->k, kv_dim, f->mm_scratch, err));
        TF_TRY(tf_cuda_matmul(cu, &L->wv, f->xn, n, f->v, kv_dim, f->mm_scratch, err));
        if (f->cap_k) {
            size_t off = (size_t)il * f->n_batch * kv_dim;
            TF_TRY(tf_cuda_d2d(cu, f->cap_k + off, f->k, sizeof(float) * (size_t)n * kv_dim, err));
            TF_TRY(tf_cuda_d2d(cu, f->cap_v + off, f->v, sizeof(float) * (size_t)n * kv_dim, err));
        }
        tf_cuda_rope(cu, f->q, n, q_dim, hp->n_head, (int32_t)hd, hp->n_rot, f->pos_d, w->rope_freq,
                     f->m->rope_mscale);
        if (f->cap_q) {
            int32_t r0 = f->cap_q_row, r1 = n < r0 + f->cap_q_max ? n : r0 + f->cap_q_max;
            if (r1 > r0)
                TF_TRY(tf_cuda_d2d(cu, f->cap_q + (size_t)il * f->cap_q_max * q_dim, f->q + (size_t)r0 * q_dim,
                                   sizeof(float) * (size_t)(r1 - r0) * q_dim, err));
        }
        tf_cuda_rope(cu, f->k, n, kv_dim, hp->n_head_kv, (int32_t)hd, hp->n_rot, f->pos_d, w->rope_freq,
                     f->m->rope_mscale);
        tf_cuda_kv_store(cu, tf_cuda_kv_k(kv, il), tf_cuda_kv_v(kv, il), hp->n_head_kv, (int32_t)hd, kv->n_slots,
                         f->k, f->v, kv_dim, n, f->slot0_d);
        tf_cuda_attn aa = {.q = f->q, .ldq = q_dim, .k = tf_cuda_kv_k(kv, il), .v = tf_cuda_kv_v(kv, il),
                           .n_slots = kv->n_slots, .n_q = n, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
                           .head_dim = (int32_t)hd, .kv_len_d = f->len_d, .max_kv = max_kv,
                           .scale = 1.0f / sqrtf((float)hd), .out = f->att, .ldo = q_dim,
                           .scratch = f->attn_scratch};
        if (decode) tf_cuda_attn_decode(cu, &aa);
        else tf_cuda_attn_prefill(cu, &aa);
        TF_TRY(tf_cuda_matmul(cu, &L->wo, f->att, n, f->tmp, E, f->mm_scratch, err));
        tf_cuda_add(cu, f->x, f->tmp, n * E);
        tf_cuda_rmsnorm(cu, f->xn, f->x, L->ffn_norm, n, (int32_t)E, hp->rms_eps);
        TF_TRY(tf_cuda_matmul(cu, &L->w_gate, f->xn, n, f->gate, hp->n_ff, f->mm_scratch, err));
        TF_TRY(tf_cuda_matmul(cu, &L->w_up, f->xn, n, f->up, hp->n_ff, f->mm_scratch, err));
        tf_cuda_silu_mul(cu, f->gate, f->up, (int64_t)n * hp->n_ff);
        TF_TRY(tf_cuda_matmul(cu, &L->w_down, f->gate, n, f->tmp, E, f->mm_scratch, err));
        tf_cuda_add(cu, f->x, f->tmp, n * E);
    }
    int32_t n_out = n - logits_from;
    if (n_out > 0) {
        tf_cuda_rmsnorm(cu, f->xn, f->x + (size_t)logits_from * E, w->output_norm, n_out, (int32_t)E, hp->rms_eps);
        TF_TRY(tf_cuda_matmul(cu, &w->output, f->xn, n_out, f->logits, hp->n_vocab, f->mm_scratch, err));
    }
    return tf_cuda_check(cu, "the forward pass", err);
}

tf_status tf_cuda_forward(tf_cuda_fwd *f, tf_cuda_kv *kv, const int32_t *tokens, const int32_t *pos, int32_t n,
                          int32_t slot0, const int32_t *kv_len, int32_t logits_from, tf_err *err) {
    const tf_hparams *hp = &f->m->hp;
    TF_TRY(tf_forward_check(hp, f->n_batch, f->n_logits, kv->n_slots, tokens, n, slot0, kv_len, logits_from, err));
    if (kv->n_layer != hp->n_layer || kv->n_head_kv != hp->n_head_kv || kv->head_dim != hp->head_dim)
        return tf_errf(err, TF_ERR_INVALID_ARG, "forward: the KV cache's shape is not the model's");
    if (f->pending) TF_TRY(tf_cuda_sync(f->cu, "the previous forward pass", err)); /* staging is reused */
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
    if (kv->n_used < slot0 + n) kv->n_used = slot0 + n;
    const bool decode = n <= TF_CUDA_GEMV_MAX_ROWS;
    const bool graph = f->use_graphs && decode;
    const int32_t max_kv = graph ? kv->n_slots : max_len;
    if (decode && max_kv > f->n_kv_max)
        return tf_errf(err, TF_ERR_INTERNAL, "forward: a cache of %d slots exceeds the scratch's %d", max_kv,
                       f->n_kv_max);
    f->pending = true;
    if (!graph) {
        TF_TRY(tf_cuda_h2d(f->cu, f->args_d, f->args_h, f->args_bytes, err));
        return enqueue(f, kv, n, logits_from, max_kv, err);
    }
    int gi = 0;
    for (; gi < f->n_graph; gi++) {
        const __typeof__(f->graph[0]) *G = &f->graph[gi];
        if (G->n == n && G->logits_from == logits_from && G->kv == (const void *)kv->k && G->cap_q == f->cap_q &&
            G->cap_q_row == f->cap_q_row && G->cap_q_max == f->cap_q_max && G->cap_k == f->cap_k &&
            G->prologue == (const void *)f->prologue)
            break;
    }
    if (gi == f->n_graph) {
        if (f->n_graph == TF_CUDA_FWD_GRAPHS) { /* full: drop the oldest */
            tf_cuda_graph_free(f->graph[0].g);
            memmove(&f->graph[0], &f->graph[1], sizeof f->graph[0] * (TF_CUDA_FWD_GRAPHS - 1));
            f->n_graph--;
        }
        gi = f->n_graph;
        TF_TRY(tf_cuda_graph_begin(f->cu, err));
        tf_status st = tf_cuda_h2d(f->cu, f->args_d, f->args_h, f->args_bytes, err);
        if (st == TF_OK) st = enqueue(f, kv, n, logits_from, max_kv, err);
        tf_cuda_graph *g = NULL;
        tf_err end_err = {0};
        tf_status st2 = tf_cuda_graph_end(f->cu, &g, &end_err);
        if (st != TF_OK) {
            tf_cuda_graph_free(g);
            return st;
        }
        if (st2 != TF_OK) return tf_errf(err, st2, "%s", end_err.msg);
        f->graph[gi].n = n;
        f->graph[gi].logits_from = logits_from;
        f->graph[gi].kv = kv->k;
        f->graph[gi].cap_q = f->cap_q;
        f->graph[gi].cap_q_row = f->cap_q_row;
        f->graph[gi].cap_q_max = f->cap_q_max;
        f->graph[gi].cap_k = f->cap_k;
        f->graph[gi].prologue = (const void *)f->prologue;
        f->graph[gi].g = g;
        f->n_graph++;
        f->graph_captures++;
    }
    f->graph_launches++;
    return tf_cuda_graph_launch(f->cu, f->graph[gi].g, err);
}

tf_status tf_cuda_fwd_argmax(tf_cuda_fwd *f, int32_t n_rows, int32_t *out, tf_err *err) {
    tf_cuda_argmax(f->cu, f->argmax_d, f->logits, n_rows, f->m->hp.n_vocab);
    TF_TRY(tf_cuda_check(f->cu, "argmax", err));
    TF_TRY(tf_cuda_d2h(f->cu, out, f->argmax_d, sizeof(int32_t) * (size_t)n_rows, err));
    f->pending = false;
    return TF_OK;
}

tf_status tf_cuda_fwd_logits(tf_cuda_fwd *f, int32_t n_rows, float *out, tf_err *err) {
    TF_TRY(tf_cuda_d2h(f->cu, out, f->logits, sizeof(float) * (size_t)n_rows * f->m->hp.n_vocab, err));
    f->pending = false;
    return TF_OK;
}

#endif /* TF_HAVE_CUDA */
