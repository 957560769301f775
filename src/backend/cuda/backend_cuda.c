/*
 * backend_cuda.c — the CUDA backend's table (backend_cuda.h): adapters from
 * the backend interface to the kernels of cuda_backend.h.
 */
#include "backend/cuda/backend_cuda.h"

#ifdef TF_HAVE_CUDA

#include "core/dtype.h"
#include "core/mem.h"

#include <string.h>

typedef struct cuda_ctx {
    tf_cuda *cu;
    bool owned;
} cuda_ctx;

static tf_cuda *cu_of(const tf_backend *be) { return ((const cuda_ctx *)be->ctx)->cu; }

static bool cuda_supports(const tf_backend *be, tf_op op, uint32_t type) {
    (void)be;
    switch (op) {
    case TF_OP_EMBED:
    case TF_OP_MATMUL: return tf_cuda_mat_type_ok(type) != 0;
    case TF_OP_KV_STORE:
    case TF_OP_RC_SUMS:
    case TF_OP_RC_GATHER:
    case TF_OP_ATTN: return type == TF_DTYPE_F16;
    case TF_OP_COUNT: return false;
    default: return true;
    }
}

static tf_status cuda_check_heads(const tf_backend *be, int32_t n_head, int32_t n_head_kv, int32_t head_dim,
                                  tf_err *err) {
    (void)be;
    if (head_dim > 256 || head_dim % 2 || n_head_kv < 1 || n_head % n_head_kv || n_head / n_head_kv > 8)
        return tf_errf(err, TF_ERR_UNSUPPORTED,
                       "the CUDA attention kernels need an even head_dim <= 256 and at most 8 query heads per KV "
                       "head (model: head_dim %d, %d / %d heads)",
                       head_dim, n_head, n_head_kv);
    return TF_OK;
}

static const char *cuda_describe(const tf_backend *be) { return tf_cuda_describe(cu_of(be)); }

static void cuda_destroy(tf_backend *be) {
    cuda_ctx *c = be->ctx;
    if (c && c->owned) tf_cuda_close(c->cu);
    tf_free(c);
}

static tf_status cuda_alloc(tf_backend *be, void **p, size_t bytes, const char *what, tf_err *err) {
    TF_TRY(tf_cuda_malloc(cu_of(be), p, bytes, what, err));
    tf_status st = tf_cuda_memset0(cu_of(be), *p, bytes, err);
    if (st != TF_OK) {
        tf_cuda_mfree(cu_of(be), *p);
        *p = NULL;
    }
    return st;
}

static void cuda_free(tf_backend *be, void *p) { tf_cuda_mfree(cu_of(be), p); }

static tf_status cuda_host_alloc(tf_backend *be, void **p, size_t bytes, const char *what, tf_err *err) {
    TF_TRY(tf_cuda_host_malloc(cu_of(be), p, bytes, what, err));
    memset(*p, 0, bytes);
    return TF_OK;
}

static void cuda_host_free(tf_backend *be, void *p) { tf_cuda_host_free(cu_of(be), p); }

static tf_status cuda_upload(tf_backend *be, void *dst, const void *src, size_t bytes, tf_err *err) {
    return tf_cuda_h2d(cu_of(be), dst, src, bytes, err);
}

static tf_status cuda_download(tf_backend *be, void *dst, const void *src, size_t bytes, tf_err *err) {
    return tf_cuda_d2h(cu_of(be), dst, src, bytes, err);
}

static tf_status cuda_copy(tf_backend *be, void *dst, const void *src, size_t bytes, tf_err *err) {
    return tf_cuda_d2d(cu_of(be), dst, src, bytes, err);
}

static tf_status cuda_check(tf_backend *be, const char *what, tf_err *err) { return tf_cuda_check(cu_of(be), what, err); }

static tf_status cuda_sync(tf_backend *be, const char *what, tf_err *err) { return tf_cuda_sync(cu_of(be), what, err); }

static tf_cuda_mat mat_of(const tf_bmat *w) {
    return (tf_cuda_mat){.data = w->data, .type = w->type, .n_rows = w->n_rows, .n_cols = w->n_cols};
}

static void cuda_embed(tf_backend *be, float *x, const tf_bmat *t, const int32_t *tok, int32_t n) {
    tf_cuda_embed(cu_of(be), x, t->data, t->type, t->n_cols, tok, n);
}

static void cuda_rmsnorm(tf_backend *be, float *y, const float *x, const float *w, int32_t n, int32_t dim, float eps) {
    tf_cuda_rmsnorm(cu_of(be), y, x, w, n, dim, eps);
}

/* The device computes the angles from positions in the kernel: no table. */
static size_t cuda_rope_table_bytes(const tf_backend *be, int32_t n_max, int32_t n_rot) {
    (void)be, (void)n_max, (void)n_rot;
    return 0;
}

static void cuda_rope_prepare(tf_backend *be, const tf_rope_pass *rp) { (void)be, (void)rp; }

static void cuda_rope(tf_backend *be, float *x, int64_t ld, int32_t n_head, int32_t head_dim, const tf_rope_pass *rp) {
    tf_cuda_rope(cu_of(be), x, rp->n, ld, n_head, head_dim, rp->n_rot, rp->neox, rp->pos, rp->freq, rp->mscale);
}

static size_t cuda_matmul_scratch(const tf_backend *be, const tf_bmat *w, int32_t n_max) {
    (void)be;
    tf_cuda_mat m = mat_of(w);
    return tf_cuda_matmul_scratch(&m, n_max);
}

static tf_status cuda_matmul(tf_backend *be, const tf_bmat *w, const float *x, int32_t n, float *y, int64_t ldy,
                             void *scratch, tf_err *err) {
    tf_cuda_mat m = mat_of(w);
    return tf_cuda_matmul(cu_of(be), &m, x, n, y, ldy, scratch, err);
}

static tf_status cuda_matmul_n(tf_backend *be, int n_w, const tf_bmat *const *w, const float *x, int32_t n,
                               float *const *y, const int64_t *ldy, void *scratch, tf_err *err) {
    tf_cuda_mat m[4]; /* backend.h: 1 <= n_w <= 4 */
    if (n_w < 1 || n_w > 4)
        return tf_errf(err, TF_ERR_INTERNAL, "matmul_n: %d matrices (expected 1..4)", n_w);
    for (int i = 0; i < n_w; i++) m[i] = mat_of(w[i]);
    return tf_cuda_matmul_n(cu_of(be), n_w, m, x, n, y, ldy, scratch, err);
}

static void cuda_add(tf_backend *be, float *y, const float *x, int64_t n) { tf_cuda_add(cu_of(be), y, x, n); }

static void cuda_add_rmsnorm(tf_backend *be, float *x, const float *d, float *y, const float *w, int32_t n,
                             int32_t dim, float eps) {
    tf_cuda_add_rmsnorm(cu_of(be), x, d, y, w, n, dim, eps);
}

static void cuda_add_bias(tf_backend *be, float *y, const float *b, int32_t n, int64_t dim) {
    tf_cuda_add_bias(cu_of(be), y, b, n, dim);
}

static void cuda_silu_mul(tf_backend *be, float *g, const float *u, int64_t n) { tf_cuda_silu_mul(cu_of(be), g, u, n); }

static void cuda_kv_store(tf_backend *be, const tf_kv_view *kv, const int32_t *slot0, int32_t n, const float *k,
                          const float *v, int64_t ld) {
    tf_cuda_kv_store(cu_of(be), (uint16_t *)kv->k, (uint16_t *)kv->v, kv->n_head_kv, kv->lay.head_dim,
                     tf_kv_view_slots(kv), k, v, ld, n, slot0);
}

static size_t cuda_attn_scratch(const tf_backend *be, int32_t n_q_max, int32_t n_head, int32_t head_dim,
                                int32_t n_kv_max) {
    (void)be;
    int32_t rows = n_q_max < TF_CUDA_GEMV_MAX_ROWS ? n_q_max : TF_CUDA_GEMV_MAX_ROWS;
    return tf_cuda_attn_scratch(rows, n_head, head_dim, n_kv_max);
}

/* Split-K decode for batches that must be batch invariant, flash prefill beyond. */
static void cuda_attn(tf_backend *be, const tf_attn_call *a) {
    tf_cuda_attn aa = {.q = a->q, .ldq = a->ldq, .k = (const uint16_t *)a->kv.k, .v = (const uint16_t *)a->kv.v,
                       .n_slots = tf_kv_view_slots(&a->kv), .n_q = a->n_q, .n_head = a->n_head,
                       .n_head_kv = a->kv.n_head_kv, .head_dim = a->kv.lay.head_dim, .kv_len_d = a->kv_len,
                       .gap_d = a->gap, .max_kv = a->max_kv, .scale = a->scale, .out = a->out, .ldo = a->ldo, .scratch = a->scratch};
    if (a->n_q <= TF_CUDA_GEMV_MAX_ROWS) tf_cuda_attn_decode(cu_of(be), &aa);
    else tf_cuda_attn_prefill(cu_of(be), &aa);
}

static void cuda_argmax(tf_backend *be, int32_t *out, const float *logits, int32_t n_rows, int32_t n_vocab) {
    tf_cuda_argmax(cu_of(be), out, logits, n_rows, n_vocab);
}

static void cuda_topk(tf_backend *be, int32_t *out, const float *logits, int32_t n_rows, int32_t n_vocab, int32_t k,
                      float temp) {
    tf_cuda_topk(cu_of(be), out, logits, n_rows, n_vocab, k, temp);
}

static tf_status cuda_graph_begin(tf_backend *be, tf_err *err) { return tf_cuda_graph_begin(cu_of(be), err); }

static tf_status cuda_graph_end(tf_backend *be, void **graph, tf_err *err) {
    tf_cuda_graph *g = NULL;
    tf_status st = tf_cuda_graph_end(cu_of(be), &g, err);
    *graph = g;
    return st;
}

static tf_status cuda_graph_launch(tf_backend *be, void *graph, tf_err *err) {
    return tf_cuda_graph_launch(cu_of(be), graph, err);
}

static void cuda_graph_free(tf_backend *be, void *graph) {
    (void)be;
    tf_cuda_graph_free(graph);
}

/* The retrieval cache: pairs (layer, KV head) lie back to back in the device's
 * row-major f16 layout, n_slots rows of head_dim per pair. */
static size_t cuda_rc_scratch(const tf_backend *be, const tf_rc_call *c) {
    (void)be;
    return tf_cuda_select_scratch(c->n_layer * c->full.n_head_kv, c->n_chunk_cap);
}
static void cuda_rc_sums(tf_backend *be, const tf_rc_call *c) {
    tf_cuda_chunk_sums(cu_of(be), c->sums, (const uint16_t *)c->full.k, c->n_layer * c->full.n_head_kv,
                       tf_kv_view_slots(&c->full), c->full.lay.head_dim, c->chunk, c->n_chunk_cap, c->s0, c->s1);
}
static void cuda_rc_select(tf_backend *be, const tf_rc_call *c) {
    int32_t n_sel_chunks = 0, n_sel = 0; /* the plan's, known to the caller */
    tf_cuda_chunk_select(cu_of(be), c->sel, c->scratch, c->sums, c->q, c->n_layer, c->n_head, c->full.n_head_kv,
                         c->full.lay.head_dim, c->n_chunk_cap, c->chunk, c->n_tok, c->budget, c->r_chunks, c->max_sel,
                         &n_sel_chunks, &n_sel);
}
static void cuda_rc_gather(tf_backend *be, const tf_rc_call *c) {
    tf_cuda_gather(cu_of(be), (uint16_t *)c->view.k, (uint16_t *)c->view.v, tf_kv_view_slots(&c->view),
                   (const uint16_t *)c->full.k, (const uint16_t *)c->full.v, tf_kv_view_slots(&c->full),
                   c->n_layer * c->full.n_head_kv, c->full.lay.head_dim, c->sel, c->max_sel, c->n_sel_chunks, c->chunk,
                   c->n_tok);
}

static const tf_backend_ops k_cuda_ops = {
    .name = "cuda",
    .host_memory = false,
    .graph_rows = TF_CUDA_GEMV_MAX_ROWS,
    .supports = cuda_supports,
    .describe = cuda_describe,
    .destroy = cuda_destroy,
    .check_heads = cuda_check_heads,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .check = cuda_check,
    .sync = cuda_sync,
    .embed = cuda_embed,
    .rmsnorm = cuda_rmsnorm,
    .rope_table_bytes = cuda_rope_table_bytes,
    .rope_prepare = cuda_rope_prepare,
    .rope = cuda_rope,
    .matmul_scratch = cuda_matmul_scratch,
    .matmul = cuda_matmul,
    .matmul_n = cuda_matmul_n,
    .add_bias = cuda_add_bias,
    .add = cuda_add,
    .add_rmsnorm = cuda_add_rmsnorm,
    .silu_mul = cuda_silu_mul,
    .kv_store = cuda_kv_store,
    .attn_scratch = cuda_attn_scratch,
    .attn = cuda_attn,
    .argmax = cuda_argmax,
    .topk = cuda_topk,
    .rc_scratch = cuda_rc_scratch,
    .rc_sums = cuda_rc_sums,
    .rc_select = cuda_rc_select,
    .rc_gather = cuda_rc_gather,
    .graph_begin = cuda_graph_begin,
    .graph_end = cuda_graph_end,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
};

const tf_backend_ops *tf_backend_cuda_ops(void) { return &k_cuda_ops; }

static tf_status make(tf_backend *be, tf_cuda *cu, bool owned, tf_err *err) {
    be->ops = NULL;
    be->ctx = NULL;
    cuda_ctx *c = tf_calloc(sizeof *c);
    if (!c) {
        if (owned) tf_cuda_close(cu);
        return tf_errf(err, TF_ERR_NOMEM, "CUDA backend: out of host memory");
    }
    c->cu = cu;
    c->owned = owned;
    be->ops = &k_cuda_ops;
    be->ctx = c;
    return TF_OK;
}

tf_status tf_backend_cuda_open(tf_backend *be, int device, tf_err *err) {
    tf_cuda *cu = NULL;
    be->ops = NULL;
    TF_TRY(tf_cuda_open(&cu, device, err));
    return make(be, cu, true, err);
}

tf_status tf_backend_cuda_wrap(tf_backend *be, tf_cuda *cu, tf_err *err) { return make(be, cu, false, err); }

tf_cuda *tf_backend_cuda_device(const tf_backend *be) { return cu_of(be); }

#endif /* TF_HAVE_CUDA */
