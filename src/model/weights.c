/* weights.c — binding or uploading a model's weights for a backend (weights.h). */
#include "model/weights.h"

#include "core/mem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tf_layer_mats(const tf_layer_weights *L, const tf_tensor *out[TF_LAYER_MATS]) {
    const tf_tensor *ts[TF_LAYER_MATS] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    memcpy(out, ts, sizeof ts);
}

static tf_status require_mat(const tf_backend *be, const tf_model *m, const tf_tensor *t, tf_op op, tf_err *err) {
    if (tf_backend_supports(be, op, t->type)) return TF_OK;
    return tf_errf(err, TF_ERR_UNSUPPORTED,
                   "%s: tensor %s is %s, and the %s backend has no %s op for it (hint: `triforce quantize IN OUT "
                   "f16` makes a file it runs, or use --device cpu)",
                   m->path, t->name ? t->name : "?", tf_dtype_name(t->type), be->ops->name, tf_op_name(op));
}

static tf_status require_op(const tf_backend *be, const tf_model *m, tf_op op, tf_err *err) {
    if (tf_backend_supports(be, op, 0)) return TF_OK;
    return tf_errf(err, TF_ERR_UNSUPPORTED,
                   "%s: the %s architecture needs the %s op, which the %s backend does not have yet; use --device cpu",
                   m->path, tf_arch_name(m->hp.arch), tf_op_name(op), be->ops->name);
}

tf_status tf_bweights_check(const tf_backend *be, const tf_model *m, tf_err *err) {
    const tf_hparams *hp = &m->hp;
    const tf_op ops[] = {TF_OP_RMSNORM, hp->rope_neox ? TF_OP_ROPE_NEOX : TF_OP_ROPE, TF_OP_ADD, TF_OP_SILU_MUL,
                         TF_OP_ARGMAX};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) TF_TRY(require_op(be, m, ops[i], err));
    if (hp->qkv_bias) TF_TRY(require_op(be, m, TF_OP_ADD_BIAS, err));
    if (be->ops->check_heads) {
        tf_status st = be->ops->check_heads(be, hp->n_head, hp->n_head_kv, hp->head_dim, err);
        if (st != TF_OK) return err ? tf_err_prefix(err, "%s: ", m->path) : st;
    }
    TF_TRY(require_mat(be, m, &m->tok_embd, TF_OP_EMBED, err));
    TF_TRY(require_mat(be, m, &m->output, TF_OP_MATMUL, err));
    for (int il = 0; il < hp->n_layer; il++) {
        const tf_tensor *ts[TF_LAYER_MATS];
        tf_layer_mats(&m->layers[il], ts);
        for (int j = 0; j < TF_LAYER_MATS; j++) TF_TRY(require_mat(be, m, ts[j], TF_OP_MATMUL, err));
    }
    return TF_OK;
}

static tf_bmat bmat_of(const tf_tensor *t) {
    return (tf_bmat){.data = t->data, .type = t->type, .n_rows = t->ne[1], .n_cols = t->ne[0]};
}

static size_t align_up(size_t x) { return (x + 255) / 256 * 256; }

/* Uploads into one buffer: sized with base NULL (returns NULL, counts the
 * bytes), then again with the buffer (copies, returns where each went). */
typedef struct cursor {
    tf_backend *be;
    uint8_t *base;
    size_t used;
    tf_status st;
    tf_err *err;
} cursor;

static const void *put(cursor *c, const tf_tensor *t) {
    if (!t->data) return NULL; /* absent: the biases of a llama model */
    size_t nb = tf_dtype_row_size(t->type, t->ne[0]) * (size_t)(t->ne[1] > 0 ? t->ne[1] : 1);
    uint8_t *at = c->base ? c->base + c->used : NULL;
    if (at && c->st == TF_OK) c->st = c->be->ops->upload(c->be, at, t->data, nb, c->err);
    c->used += align_up(nb);
    return at;
}

static void put_all(tf_bweights *w, cursor *c) {
    const tf_model *m = w->m;
    const tf_hparams *hp = &m->hp;
    const tf_tensor freq = {.data = m->rope_freq, .type = TF_DTYPE_F32,
                            .ne = {hp->n_rot / 2 > 0 ? hp->n_rot / 2 : 1, 1}};
    w->tok_embd.data = put(c, &m->tok_embd);
    w->output.data = hp->tied_output ? w->tok_embd.data : put(c, &m->output);
    w->output_norm = put(c, &m->output_norm);
    w->rope_freq = put(c, &freq);
    for (int il = 0; il < hp->n_layer; il++) {
        const tf_layer_weights *L = &m->layers[il];
        tf_blayer *B = &w->layers[il];
        B->wq.data = put(c, &L->wq);
        B->wk.data = put(c, &L->wk);
        B->wv.data = put(c, &L->wv);
        B->wo.data = put(c, &L->wo);
        B->w_gate.data = put(c, &L->w_gate);
        B->w_up.data = put(c, &L->w_up);
        B->w_down.data = put(c, &L->w_down);
        B->bq = put(c, &L->bq);
        B->bk = put(c, &L->bk);
        B->bv = put(c, &L->bv);
        B->attn_norm = put(c, &L->attn_norm);
        B->ffn_norm = put(c, &L->ffn_norm);
    }
}

/* Every matrix of w, in a fixed order (the tied output is the embedding table). */
static int all_mats(tf_bweights *w, tf_bmat **out) {
    int n = 0;
    out[n++] = &w->tok_embd;
    if (!w->m->hp.tied_output) out[n++] = &w->output;
    for (int il = 0; il < w->m->hp.n_layer; il++) {
        tf_blayer *B = &w->layers[il];
        tf_bmat *ls[TF_LAYER_MATS] = {&B->wq, &B->wk, &B->wv, &B->wo, &B->w_gate, &B->w_up, &B->w_down};
        for (int j = 0; j < TF_LAYER_MATS; j++) out[n++] = ls[j];
    }
    return n;
}

/* The packed copies of every model (tf_model.wpack). */
static pthread_mutex_t g_wpack_lock = PTHREAD_MUTEX_INITIALIZER;

/* The copy of matrix w (the model's tensor) in `layout`, made on first use:
 * NULL when out of memory. Called with g_wpack_lock held. */
static void *wpack_get(tf_backend *be, tf_model *root, const tf_bmat *w, uint32_t layout) {
    for (int32_t i = 0; i < root->n_wpack; i++)
        if (root->wpack[i].src == w->data && root->wpack[i].layout == layout) return root->wpack[i].dst;
    if (root->n_wpack == root->cap_wpack) {
        int32_t cap = root->cap_wpack ? 2 * root->cap_wpack : 64;
        tf_wpack_entry *e = realloc(root->wpack, sizeof *e * (size_t)cap);
        if (!e) return NULL;
        root->wpack = e;
        root->cap_wpack = cap;
    }
    void *dst = tf_alloc(tf_dtype_row_size(w->type, w->n_cols) * (size_t)w->n_rows);
    if (!dst) return NULL;
    be->ops->weight_pack(be, dst, w, layout);
    root->wpack[root->n_wpack++] = (tf_wpack_entry){.src = w->data, .layout = layout, .dst = dst};
    return dst;
}

/* Host memory: the matrices whose type the backend reads faster in a layout
 * of its own are rearranged once per model (tf_model.wpack: every decoder,
 * context and layer view of the model shares the copies); the others stay
 * the model's mapped tensors. */
static tf_status pack_host(tf_bweights *w, tf_err *err) {
    tf_backend *be = w->be;
    if (!be->ops->weight_layout) return TF_OK;
    int n_mats = 2 + TF_LAYER_MATS * w->m->hp.n_layer;
    tf_bmat **mats = tf_calloc(sizeof *mats * (size_t)n_mats);
    if (!mats) return tf_errf(err, TF_ERR_NOMEM, "weights of %s: out of host memory", w->m->path);
    n_mats = all_mats(w, mats);
    /* the cache is logically part of the const model: the lock makes it safe to fill */
    const tf_model *viewed = w->m;
    while (viewed->view_of) viewed = viewed->view_of;
    tf_model *root = (tf_model *)(uintptr_t)viewed;
    tf_status st = TF_OK;
    pthread_mutex_lock(&g_wpack_lock);
    for (int i = 0; i < n_mats && st == TF_OK; i++) {
        uint32_t layout = be->ops->weight_layout(be, mats[i]->type);
        if (!layout) continue;
        void *dst = wpack_get(be, root, mats[i], layout);
        if (!dst) {
            st = tf_errf(err, TF_ERR_NOMEM,
                         "%s: out of host memory for the CPU's repacked copy of a %lld x %lld %s matrix (%zu bytes)",
                         w->m->path, (long long)mats[i]->n_rows, (long long)mats[i]->n_cols,
                         tf_dtype_name(mats[i]->type),
                         tf_dtype_row_size(mats[i]->type, mats[i]->n_cols) * (size_t)mats[i]->n_rows);
            break;
        }
        mats[i]->data = dst;
        mats[i]->layout = layout;
    }
    pthread_mutex_unlock(&g_wpack_lock);
    if (st == TF_OK && w->m->hp.tied_output) w->output = w->tok_embd;
    tf_free(mats);
    if (st != TF_OK) tf_bweights_free(w);
    return st;
}

tf_status tf_bweights_init(tf_bweights *w, tf_backend *be, const tf_model *m, tf_err *err) {
    memset(w, 0, sizeof *w);
    TF_TRY(tf_bweights_check(be, m, err));
    const tf_hparams *hp = &m->hp;
    w->be = be;
    w->m = m;
    w->layers = tf_calloc(sizeof(tf_blayer) * (size_t)hp->n_layer);
    if (!w->layers) return tf_errf(err, TF_ERR_NOMEM, "weights of %s: out of host memory", m->path);
    /* the host tensors; on a host-memory backend that is all, but for the repacked matrices */
    w->tok_embd = bmat_of(&m->tok_embd);
    w->output = bmat_of(&m->output);
    w->output_norm = m->output_norm.data;
    w->rope_freq = m->rope_freq;
    for (int il = 0; il < hp->n_layer; il++) {
        const tf_layer_weights *L = &m->layers[il];
        tf_blayer *B = &w->layers[il];
        B->wq = bmat_of(&L->wq), B->wk = bmat_of(&L->wk), B->wv = bmat_of(&L->wv), B->wo = bmat_of(&L->wo);
        B->w_gate = bmat_of(&L->w_gate), B->w_up = bmat_of(&L->w_up), B->w_down = bmat_of(&L->w_down);
        B->bq = L->bq.data, B->bk = L->bk.data, B->bv = L->bv.data;
        B->attn_norm = L->attn_norm.data, B->ffn_norm = L->ffn_norm.data;
    }
    if (be->ops->host_memory) return pack_host(w, err);
    cursor c = {.be = be, .err = err, .st = TF_OK};
    put_all(w, &c); /* sizes */
    char what[600];
    snprintf(what, sizeof what, "the weights of %s", m->path);
    tf_status st = be->ops->alloc(be, &w->block, c.used, what, err);
    if (st == TF_OK) {
        w->bytes = c.used;
        c = (cursor){.be = be, .base = w->block, .err = err, .st = TF_OK};
        put_all(w, &c);
        st = c.st;
    }
    if (st == TF_OK) st = be->ops->sync(be, "uploading the weights", err);
    if (st != TF_OK) tf_bweights_free(w);
    return st;
}

void tf_bweights_free(tf_bweights *w) {
    if (w->block) w->be->ops->free(w->be, w->block);
    tf_free(w->layers);
    memset(w, 0, sizeof *w);
}
