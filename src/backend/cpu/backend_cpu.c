/*
 * backend_cpu.c — the CPU backend's table: thin adapters from the backend
 * interface to the kernels of backend/cpu (quant, matmul, attn, ops,
 * kv_layout), which keep their own tests against scalar references.
 */
#include "backend/cpu/backend_cpu.h"

#include "backend/cpu/attn.h"
#include "backend/cpu/kv_layout.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/retrieval_cpu.h"
#include "core/mem.h"
#include "core/topk.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct cpu_ctx {
    tf_pool *pool; /* not owned */
    tf_isa isa;
    const tf_cpu_kernels *kern;
    char desc[64];
} cpu_ctx;

static cpu_ctx *ctx_of(const tf_backend *be) { return be->ctx; }

/* Below this many multiply-adds a matrix product runs on the calling thread:
 * waking the pool costs more than it saves. */
#define PARALLEL_MIN_WORK (1 << 15)

static bool cpu_supports(const tf_backend *be, tf_op op, uint32_t type) {
    switch (op) {
    case TF_OP_EMBED:
    case TF_OP_MATMUL: {
        const tf_cpu_kernels *k = be->ctx ? ctx_of(be)->kern : tf_cpu_kernels_get(TF_ISA_SCALAR); /* a probe */
        return type < TF_DTYPE_COUNT && k->dequantize[type] != NULL && k->vec_dot_tile[type] != NULL;
    }
    case TF_OP_KV_STORE:
    case TF_OP_RC_SUMS:
    case TF_OP_RC_GATHER:
    case TF_OP_ATTN: return type == TF_DTYPE_F32 || type == TF_DTYPE_F16 || tf_kv_layout_quantized(type);
    case TF_OP_GRAPH: return false;
    case TF_OP_COUNT: return false;
    default: return true;
    }
}

static const char *cpu_describe(const tf_backend *be) { return ctx_of(be)->desc; }

static void cpu_destroy(tf_backend *be) { tf_free(be->ctx); }

static tf_status cpu_alloc(tf_backend *be, void **p, size_t bytes, const char *what, tf_err *err) {
    (void)be;
    *p = tf_calloc(bytes ? bytes : 1);
    if (!*p) return tf_errf(err, TF_ERR_NOMEM, "cannot reserve %zu bytes for %s", bytes, what);
    return TF_OK;
}

static void cpu_free(tf_backend *be, void *p) {
    (void)be;
    tf_free(p);
}

static tf_status cpu_memcpy(tf_backend *be, void *dst, const void *src, size_t bytes, tf_err *err) {
    (void)be, (void)err;
    if (dst != src && bytes) memcpy(dst, src, bytes);
    return TF_OK;
}

static tf_status cpu_ok(tf_backend *be, const char *what, tf_err *err) {
    (void)be, (void)what, (void)err;
    return TF_OK;
}

/* The layouts are quant.h's TF_WLAYOUT_*: R16 where the table has its
 * products (the AMX table's Q8_0, Q4_0, Q4_1, IQ4_NL), else the packed
 * weight rows where the kernels have them. */
static uint32_t cpu_weight_layout(const tf_backend *be, uint32_t type) {
    const tf_cpu_kernels *k = ctx_of(be)->kern;
    if (type >= TF_DTYPE_COUNT) return TF_WLAYOUT_FILE;
    if (k->r16_rows[type]) return TF_WLAYOUT_R16;
    return k->wpacked_tile[type] && tf_weight_packs((tf_dtype)type) ? TF_WLAYOUT_PACKED : TF_WLAYOUT_FILE;
}

typedef struct {
    const tf_bmat *w;
    void *dst;
} pack_job;

static void pack_task(void *arg, int ith, int nth) {
    const pack_job *j = arg;
    long lo, hi;
    tf_split_range((long)j->w->n_rows, ith, nth, &lo, &hi);
    size_t row = tf_dtype_row_size((tf_dtype)j->w->type, j->w->n_cols);
    if (lo < hi)
        tf_weight_pack_rows((tf_dtype)j->w->type, (const char *)j->w->data + (size_t)lo * row,
                            (char *)j->dst + (size_t)lo * row, hi - lo, j->w->n_cols);
}

static void r16_task(void *arg, int ith, int nth) {
    const pack_job *j = arg;
    long lo, hi;
    tf_split_range((long)((j->w->n_rows + 15) / 16), ith, nth, &lo, &hi);
    if (lo < hi) tf_weight_r16_pack((tf_dtype)j->w->type, j->w->data, j->dst, j->w->n_rows, j->w->n_cols, lo, hi);
}

static void cpu_weight_pack(tf_backend *be, void *dst, const tf_bmat *w, uint32_t layout) {
    TF_ASSERT((layout == TF_WLAYOUT_PACKED || layout == TF_WLAYOUT_R16) && w->layout == TF_WLAYOUT_FILE);
    pack_job j = {.w = w, .dst = dst};
    tf_pool_run(ctx_of(be)->pool, layout == TF_WLAYOUT_R16 ? r16_task : pack_task, &j);
}

static void cpu_embed(tf_backend *be, float *x, const tf_bmat *t, const int32_t *tok, int32_t n) {
    const tf_dequant_fn deq = ctx_of(be)->kern->dequantize[t->type];
    const size_t row = tf_dtype_row_size(t->type, t->n_cols);
    /* packed rows: a group of 512 columns at a time back to the file's blocks */
    const int64_t gcols = TF_PACK_GROUP_BLOCKS * TF_QK8_0;
    const size_t gbytes = tf_dtype_row_size(t->type, gcols);
    for (int32_t i = 0; i < n; i++) {
        const uint8_t *r = (const uint8_t *)t->data + (size_t)tok[i] * row;
        float *xi = x + (size_t)i * t->n_cols;
        int64_t c = 0;
        if (t->layout == TF_WLAYOUT_R16) { /* the row's blocks out of its group of 16, 16 at a time */
            const int64_t nb = t->n_cols / 32;
            for (int64_t b = 0; b < nb; b += TF_PACK_GROUP_BLOCKS) {
                const int64_t e = b + TF_PACK_GROUP_BLOCKS < nb ? b + TF_PACK_GROUP_BLOCKS : nb;
                _Alignas(64) uint8_t blocks[TF_PACK_GROUP_BLOCKS * 34]; /* the largest: Q8_0's */
                tf_weight_r16_unpack_blocks((tf_dtype)t->type, t->data, t->n_rows, t->n_cols, tok[i], b, e, blocks);
                deq(blocks, xi + b * 32, (e - b) * 32);
            }
            continue;
        }
        if (t->layout == TF_WLAYOUT_PACKED)
            for (; c + gcols <= t->n_cols; c += gcols, r += gbytes) {
                _Alignas(64) uint8_t blocks[TF_PACK_GROUP_BLOCKS * 34]; /* the largest group: Q8_0's */
                TF_ASSERT(gbytes <= sizeof blocks);
                tf_weight_unpack_row((tf_dtype)t->type, r, blocks, gcols);
                deq(blocks, xi + c, gcols);
            }
        if (c < t->n_cols) deq(r, xi + c, t->n_cols - c);
    }
}

/* The element-wise ops over several rows (prefill, a verification pass) are
 * split across the pool, by rows or by runs of elements: each value is
 * computed exactly as on one thread, so the results are the same bits. With
 * one row (decode) or few values they run on the calling thread: waking the
 * pool would cost more than the op. */
#define PARALLEL_MIN_ELEMS 4096

typedef struct {
    int kind; /* EW_* */
    float *y;
    const float *x, *w;
    int64_t n, dim;
    float eps;
    int32_t n_head, head_dim;
    const tf_rope_pass *rp;
} ew_job;
enum { EW_RMSNORM, EW_ROPE, EW_SILU_MUL, EW_ADD };

static void ew_task(void *arg, int ith, int nth) {
    const ew_job *j = arg;
    long lo, hi;
    if (j->kind == EW_SILU_MUL || j->kind == EW_ADD) { /* runs of 16 elements */
        tf_split_range((long)((j->n + 15) / 16), ith, nth, &lo, &hi);
        int64_t e0 = (int64_t)lo * 16, e1 = (int64_t)hi * 16 < j->n ? (int64_t)hi * 16 : j->n;
        if (e1 <= e0) return;
        if (j->kind == EW_SILU_MUL) tf_op_silu_mul(j->y + e0, j->x + e0, e1 - e0);
        else tf_op_add(j->y + e0, j->x + e0, e1 - e0);
        return;
    }
    tf_split_range((long)j->n, ith, nth, &lo, &hi);
    if (hi <= lo) return;
    if (j->kind == EW_RMSNORM) {
        tf_op_rmsnorm(j->y + lo * j->dim, j->x + lo * j->dim, j->w, hi - lo, j->dim, j->dim, j->eps);
        return;
    }
    const tf_rope_pass *rp = j->rp;
    const int64_t half = rp->n_rot / 2;
    const float *cos_t = rp->table, *sin_t = cos_t + (size_t)rp->n * (size_t)half;
    tf_op_rope(j->y + lo * j->dim, hi - lo, j->dim, j->n_head, j->head_dim, rp->n_rot, rp->neox, cos_t + lo * half,
               sin_t + lo * half);
}

/* Run j on the pool when it has `rows` >= 2 rows (or, element-wise, enough
 * elements) of at least PARALLEL_MIN_ELEMS values in all; else here. */
static void ew_run(tf_backend *be, ew_job *j, int64_t rows, int64_t elems) {
    tf_pool *pool = ctx_of(be)->pool;
    if (rows < 2 || elems < PARALLEL_MIN_ELEMS || tf_pool_size(pool) < 2) pool = NULL;
    tf_pool_run(pool, ew_task, j);
}

static void cpu_rmsnorm(tf_backend *be, float *y, const float *x, const float *w, int32_t n, int32_t dim, float eps) {
    ew_job j = {.kind = EW_RMSNORM, .y = y, .x = x, .w = w, .n = n, .dim = dim, .eps = eps};
    ew_run(be, &j, n, (int64_t)n * dim);
}

/* The table: cos [n_max][n_rot/2], then sin. */
static size_t cpu_rope_table_bytes(const tf_backend *be, int32_t n_max, int32_t n_rot) {
    (void)be;
    return 2 * sizeof(float) * (size_t)n_max * (size_t)(n_rot / 2 > 0 ? n_rot / 2 : 1);
}

static void cpu_rope_prepare(tf_backend *be, const tf_rope_pass *rp) {
    (void)be;
    float *cos_t = rp->table, *sin_t = cos_t + (size_t)rp->n * (rp->n_rot / 2);
    tf_op_rope_table(cos_t, sin_t, rp->pos, rp->n, rp->n_rot, rp->freq, rp->mscale);
}

static void cpu_rope(tf_backend *be, float *x, int64_t ld, int32_t n_head, int32_t head_dim, const tf_rope_pass *rp) {
    ew_job j = {.kind = EW_ROPE, .y = x, .n = rp->n, .dim = ld, .n_head = n_head, .head_dim = head_dim, .rp = rp};
    ew_run(be, &j, rp->n, (int64_t)rp->n * n_head * head_dim);
}

static size_t cpu_matmul_scratch(const tf_backend *be, const tf_bmat *w, int32_t n_max) {
    (void)be;
    return (size_t)n_max * tf_act_scratch_row_size((tf_dtype)w->type, w->n_cols);
}

static tf_status cpu_matmul(tf_backend *be, const tf_bmat *w, const float *x, int32_t n, float *y, int64_t ldy,
                            void *scratch, tf_err *err) {
    (void)err;
    cpu_ctx *c = ctx_of(be);
    int64_t work = w->n_rows * w->n_cols * n;
    tf_cpu_matmul(work >= PARALLEL_MIN_WORK ? c->pool : NULL, c->kern, (tf_dtype)w->type, w->data,
                  (int)w->layout, w->n_rows, w->n_cols, x, n, y, ldy, scratch);
    return TF_OK;
}

static tf_status cpu_matmul_n(tf_backend *be, int n_w, const tf_bmat *const *w, const float *x, int32_t n,
                              float *const *y, const int64_t *ldy, void *scratch, tf_err *err) {
    cpu_ctx *c = ctx_of(be);
    if (n_w < 1 || n_w > TF_MATMUL_N_MAX)
        return tf_errf(err, TF_ERR_INTERNAL, "matmul_n: %d matrices (expected 1..%d)", n_w, TF_MATMUL_N_MAX);
    const void *W[TF_MATMUL_N_MAX];
    int64_t rows[TF_MATMUL_N_MAX], work = 0;
    for (int i = 0; i < n_w; i++) {
        if (w[i]->type != w[0]->type || w[i]->layout != w[0]->layout || w[i]->n_cols != w[0]->n_cols)
            return tf_errf(err, TF_ERR_INTERNAL, "matmul_n: matrix %d differs from the first in type, layout or width",
                           i);
        W[i] = w[i]->data;
        rows[i] = w[i]->n_rows;
        work += w[i]->n_rows * w[i]->n_cols * n;
    }
    tf_cpu_matmul_n(work >= PARALLEL_MIN_WORK ? c->pool : NULL, c->kern, (tf_dtype)w[0]->type, (int)w[0]->layout, n_w,
                    W, rows, w[0]->n_cols, x, n, y, ldy, scratch);
    return TF_OK;
}

static void cpu_add_bias(tf_backend *be, float *y, const float *b, int32_t n, int64_t dim) {
    (void)be;
    tf_op_add_bias(y, b, n, dim, dim);
}

static void cpu_add(tf_backend *be, float *y, const float *x, int64_t n) {
    ew_job j = {.kind = EW_ADD, .y = y, .x = x, .n = n};
    ew_run(be, &j, n, n);
}

/* the two ops one after the other (their passes over the rows are bound by
 * memory either way; the CPU gains nothing from fusing them) */
static void cpu_add_rmsnorm(tf_backend *be, float *x, const float *d, float *y, const float *w, int32_t n,
                            int32_t dim, float eps) {
    cpu_add(be, x, d, (int64_t)n * dim);
    cpu_rmsnorm(be, y, x, w, n, dim, eps);
}

static void cpu_silu_mul(tf_backend *be, float *g, const float *u, int64_t n) {
    ew_job j = {.kind = EW_SILU_MUL, .y = g, .x = u, .n = n};
    ew_run(be, &j, n, n);
}

static void cpu_kv_store(tf_backend *be, const tf_kv_view *kv, const int32_t *slot0, int32_t n, const float *k,
                         const float *v, int64_t ld) {
    (void)be;
    const int hd = kv->lay.head_dim;
    for (int h = 0; h < kv->n_head_kv; h++)
        for (int32_t i = 0; i < n; i++)
            tf_kv_head_store(&kv->lay, tf_kv_view_k(kv, h), tf_kv_view_v(kv, h), *slot0 + i,
                             k + (size_t)i * ld + (size_t)h * hd, v + (size_t)i * ld + (size_t)h * hd);
}

static size_t cpu_attn_scratch(const tf_backend *be, int32_t n_q_max, int32_t n_head, int32_t head_dim,
                               int32_t n_kv_max) {
    return tf_attn_scratch_size(tf_pool_size(ctx_of(be)->pool), n_q_max, n_head, head_dim, n_kv_max);
}

static void cpu_attn(tf_backend *be, const tf_attn_call *a) {
    cpu_ctx *c = ctx_of(be);
    tf_attn_args aa = {.q = a->q, .ldq = a->ldq, .kv = a->kv, .n_q = a->n_q, .kv_len = a->kv_len,
                       .gap_lo = a->gap ? a->gap[0] : 0, .gap_hi = a->gap ? a->gap[1] : 0,
                       .n_head = a->n_head, .scale = a->scale, .out = a->out, .ldo = a->ldo};
    tf_cpu_attn(c->pool, c->isa, &aa, a->scratch);
}

static void cpu_argmax(tf_backend *be, int32_t *out, const float *logits, int32_t n_rows, int32_t n_vocab) {
    (void)be;
    for (int32_t r = 0; r < n_rows; r++) {
        const float *l = logits + (size_t)r * n_vocab;
        int32_t best = -1;
        for (int32_t i = 0; i < n_vocab; i++)
            if (!isnan(l[i]) && (best < 0 || l[i] > l[best])) best = i; /* strict: the first maximum */
        out[r] = best < 0 ? 0 : best;
    }
}

static void cpu_topk(tf_backend *be, int32_t *out, const float *logits, int32_t n_rows, int32_t n_vocab, int32_t k,
                     float temp) {
    (void)be;
    float *z = (float *)(out + (size_t)n_rows * k);
    int32_t *n = out + (size_t)2 * n_rows * k;
    for (int32_t r = 0; r < n_rows; r++)
        n[r] = tf_topk_scaled(logits + (size_t)r * n_vocab, n_vocab, temp, k, out + (size_t)r * k, z + (size_t)r * k);
}

static size_t cpu_rc_scratch(const tf_backend *be, const tf_rc_call *c) {
    return tf_cpu_rc_scratch(c, tf_pool_size(ctx_of(be)->pool));
}
static void cpu_rc_sums(tf_backend *be, const tf_rc_call *c) { tf_cpu_rc_sums(c, ctx_of(be)->pool); }
static void cpu_rc_select(tf_backend *be, const tf_rc_call *c) { tf_cpu_rc_select(c, ctx_of(be)->pool); }
static void cpu_rc_gather(tf_backend *be, const tf_rc_call *c) { tf_cpu_rc_gather(c, ctx_of(be)->pool); }

static const tf_backend_ops k_cpu_ops = {
    .name = "cpu",
    .host_memory = true,
    .graph_rows = 0,
    .supports = cpu_supports,
    .describe = cpu_describe,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .copy = cpu_memcpy,
    .check = cpu_ok,
    .sync = cpu_ok,
    .weight_layout = cpu_weight_layout,
    .weight_pack = cpu_weight_pack,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .rope_table_bytes = cpu_rope_table_bytes,
    .rope_prepare = cpu_rope_prepare,
    .rope = cpu_rope,
    .matmul_scratch = cpu_matmul_scratch,
    .matmul = cpu_matmul,
    .matmul_n = cpu_matmul_n,
    .add_bias = cpu_add_bias,
    .add = cpu_add,
    .add_rmsnorm = cpu_add_rmsnorm,
    .silu_mul = cpu_silu_mul,
    .kv_store = cpu_kv_store,
    .attn_scratch = cpu_attn_scratch,
    .attn = cpu_attn,
    .argmax = cpu_argmax,
    .topk = cpu_topk,
    .rc_scratch = cpu_rc_scratch,
    .rc_sums = cpu_rc_sums,
    .rc_select = cpu_rc_select,
    .rc_gather = cpu_rc_gather,
};

tf_status tf_backend_cpu_init(tf_backend *be, tf_pool *pool, tf_isa isa, tf_err *err) {
    be->ops = NULL;
    cpu_ctx *c = tf_calloc(sizeof *c);
    if (!c) return tf_errf(err, TF_ERR_NOMEM, "CPU backend: out of memory");
    c->pool = pool;
    c->isa = isa;
    c->kern = tf_cpu_kernels_get(isa);
    snprintf(c->desc, sizeof c->desc, "cpu (%s, attention %s, %d threads)", c->kern->isa,
             tf_attn_kernel_name(tf_attn_kernel_for(isa)), tf_pool_size(pool));
    be->ops = &k_cpu_ops;
    be->ctx = c;
    return TF_OK;
}
