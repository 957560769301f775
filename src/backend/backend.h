/*
 * backend.h — a compute backend: one table of function pointers that the
 * forward pass (model/forward.c) is written against, so the layer loop exists
 * once for the CPU and the GPU.
 *
 *   tf_backend be;  tf_backend_cpu_init(&be, pool, isa, err)   (backend/cpu/backend_cpu.h)
 *                   tf_backend_cuda_open(&be, device, err)     (backend/cuda/backend_cuda.h)
 *   be.ops->matmul(&be, &w, x, n, y, ldy, scratch, err) ...
 *   tf_backend_free(&be);
 *
 * Memory. Buffers come from ops->alloc (zero-filled) and live where the
 * backend computes: host memory on the CPU (host_memory is true and the
 * pointers may be read directly), device memory on CUDA. upload / download
 * copy between the host and a buffer; download waits for the work enqueued
 * before it. Per-call inputs that ops read (token ids, positions, visible
 * lengths, the first slot) are buffers too, so a captured graph can replay a
 * pass with new values.
 *
 * Ops enqueue work and return at once (the CPU runs them before returning).
 * Launch errors are collected by ops->check, execution errors by the next
 * synchronizing call (sync, download).
 *
 * supports(op, type) says whether an op runs for a weight or cache type (0
 * for ops that have none); callers refuse what is unsupported by name before
 * they start (tf_backend_require). supports and check_heads may be asked of a
 * probe whose ctx is NULL (choosing a device before opening it). Optional
 * entries are NULL where a backend has none (graph capture on the CPU), and
 * so are the ops supports() denies.
 */
#ifndef TF_BACKEND_BACKEND_H
#define TF_BACKEND_BACKEND_H

#include "backend/kv_view.h"
#include "core/error.h"
#include "core/threads.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum tf_op {
    TF_OP_EMBED,     /* type: the embedding table's */
    TF_OP_RMSNORM,
    TF_OP_ROPE,      /* adjacent pairs (2i, 2i+1) */
    TF_OP_ROPE_NEOX, /* rotate-half pairs (i, i + n_rot/2) */
    TF_OP_MATMUL,    /* type: the weight's */
    TF_OP_ADD_BIAS,
    TF_OP_ADD,
    TF_OP_SILU_MUL,
    TF_OP_KV_STORE,  /* type: the cache's */
    TF_OP_ATTN,      /* type: the cache's */
    TF_OP_ARGMAX,
    TF_OP_TOPK,      /* sampling's candidates (core/topk.h) */
    TF_OP_GRAPH,     /* capture and replay of a whole pass */
    TF_OP_RC_SUMS,   /* the retrieval cache's chunk key sums; type: the cache's */
    TF_OP_RC_SELECT, /* its choice of chunks by the newest query */
    TF_OP_RC_GATHER, /* its copy of the chosen slots into a view; type: the cache's */
    TF_OP_COUNT
} tf_op;

/* "matmul", "rope_neox", ... */
const char *tf_op_name(tf_op op);

/* A weight matrix as the backend holds it: row-major [n_rows][n_cols] of type
 * in backend memory, each row the file's blocks (layout 0) or the backend's
 * own arrangement of them (layout != 0, from ops->weight_pack; a row keeps
 * its size). */
typedef struct tf_bmat {
    const void *data;
    uint32_t type;
    uint32_t layout;
    int64_t n_rows, n_cols;
} tf_bmat;

/* RoPE of one pass: positions (a buffer), the per-pair frequencies (a buffer
 * [n_rot/2]), the magnitude scale, the rotated dims and the pairing; table is
 * the backend's per-pass scratch (ops->rope_table_bytes), filled by
 * ops->rope_prepare once per pass and read by every ops->rope call. */
typedef struct tf_rope_pass {
    const int32_t *pos;
    const float *freq;
    float mscale;
    int32_t n, n_rot;
    bool neox;
    void *table;
} tf_rope_pass;

/* Attention of n_q query rows over one layer's KV view: for row i and head
 * hq (KV head hq / (n_head / n_head_kv)), softmax(scale * q . K[s]) . V[s]
 * over slots s < kv_len[i] outside the gap [gap[0], gap[1]) (a streaming
 * cache's sinks before it, its window after it). */
typedef struct tf_attn_call {
    const float *q;          /* [n_q][n_head * head_dim], row stride ldq, after RoPE */
    int64_t ldq;
    tf_kv_view kv;
    int32_t n_q, n_head;
    const int32_t *kv_len;   /* [n_q] (a buffer), each 1..max_kv */
    int32_t max_kv;          /* bound on kv_len[] */
    const int32_t *gap;      /* a buffer [2]: gap[0] >= gap[1] is none; each row sees at least one slot */
    float scale;
    float *out;              /* [n_q][n_head * head_dim], row stride ldo */
    int64_t ldo;
    void *scratch;           /* ops->attn_scratch bytes */
} tf_attn_call;

/* The retrieval cache's work over every layer of a KV cache (kv/retrieval.h
 * says what each step means and owns the bookkeeping; the backend does the
 * arithmetic and the copies). Layer il of the full cache C_p is full.k/v +
 * il * full_layer_stride; pairs (layer, KV head) are independent. Chunk j is
 * slots [j * chunk, j * chunk + chunk). */
typedef struct tf_rc_call {
    tf_kv_view full;          /* layer 0 of C_p */
    size_t full_layer_stride;
    tf_kv_view view;          /* gather: layer 0 of the view C_r */
    size_t view_layer_stride;
    int32_t n_layer, n_head;  /* n_head: query heads (select) */
    int32_t chunk, n_chunk_cap, max_sel;
    float *sums;              /* [n_layer][n_head_kv][n_chunk_cap][head_dim] f32 */
    int32_t *sel;             /* [n_layer][n_head_kv][max_sel] chosen chunks, ascending */
    void *scratch;            /* ops->rc_scratch bytes */
    /* sums: every chunk overlapping [s0, s1) becomes the sum, in slot order
     * from zero, of its keys in slots below s1 */
    int32_t s0, s1;
    /* select and gather: the slots [0, n_tok) the sums cover, and the plan
     * (tf_rc_plan): n_full complete chunks, part slots of a partial one, k
     * middle chunks chosen (-1: all), r_chunks recent ones, n_sel_chunks in all */
    int32_t n_tok, n_full, part, k, r_chunks, n_sel_chunks, budget;
    const float *q;           /* select: [n_layer][n_head * head_dim], the newest query after RoPE */
} tf_rc_call;

/* The runs of consecutive chunks in one selection sel[0, n_sel_chunks): from
 * *t = 0, each call gives the next run's first slot *s and length *n (its
 * slots below n_tok); 0 when none is left. Runs go to the view back to back. */
static inline int tf_rc_next_run(const int32_t *sel, int32_t n_sel_chunks, int32_t chunk, int32_t n_tok, int32_t *t,
                                 int32_t *s, int32_t *n) {
    if (*t >= n_sel_chunks) return 0;
    int32_t u = *t + 1;
    while (u < n_sel_chunks && sel[u] == sel[u - 1] + 1) u++;
    int32_t e = (sel[u - 1] + 1) * chunk;
    *s = sel[*t] * chunk;
    *n = (e < n_tok ? e : n_tok) - *s;
    *t = u;
    return 1;
}

typedef struct tf_backend tf_backend;

typedef struct tf_backend_ops {
    const char *name;   /* "cpu", "cuda" */
    bool host_memory;   /* buffers are host memory */
    int32_t graph_rows; /* passes of up to this many rows may be captured (0: no graphs) */

    bool (*supports)(const tf_backend *be, tf_op op, uint32_t type);
    /* "cpu (avx512_vnni, attention amx_bf16, 2 threads)", "NVIDIA H100 ... (sm_90, 79.1 GiB)" */
    const char *(*describe)(const tf_backend *be);
    void (*destroy)(tf_backend *be);
    /* Optional: TF_ERR_UNSUPPORTED naming the limit when attention cannot run
     * this head shape. */
    tf_status (*check_heads)(const tf_backend *be, int32_t n_head, int32_t n_head_kv, int32_t head_dim, tf_err *err);

    /* ---- memory ---- */
    tf_status (*alloc)(tf_backend *be, void **p, size_t bytes, const char *what, tf_err *err);
    void (*free)(tf_backend *be, void *p);
    /* Host memory for staging uploads (page-locked where that matters). */
    tf_status (*host_alloc)(tf_backend *be, void **p, size_t bytes, const char *what, tf_err *err);
    void (*host_free)(tf_backend *be, void *p);
    tf_status (*upload)(tf_backend *be, void *dst, const void *src, size_t bytes, tf_err *err);
    tf_status (*download)(tf_backend *be, void *dst, const void *src, size_t bytes, tf_err *err);
    tf_status (*copy)(tf_backend *be, void *dst, const void *src, size_t bytes, tf_err *err);
    tf_status (*check)(tf_backend *be, const char *what, tf_err *err);
    tf_status (*sync)(tf_backend *be, const char *what, tf_err *err);

    /* ---- weights (optional) ---- */
    /* The layout in which this backend's matmul and embed read weights of
     * `type` fastest (0: the file's rows as they are). */
    uint32_t (*weight_layout)(const tf_backend *be, uint32_t type);
    /* Write w's rows (file layout, host memory) into dst in `layout`. */
    void (*weight_pack)(tf_backend *be, void *dst, const tf_bmat *w, uint32_t layout);

    /* ---- the forward pass's ops (activations f32 row-major) ---- */
    /* x[i] = row tok[i] of table, i < n. */
    void (*embed)(tf_backend *be, float *x, const tf_bmat *table, const int32_t *tok, int32_t n);
    /* y = x / sqrt(mean(x^2) + eps) * w for n rows of dim (row stride dim). */
    void (*rmsnorm)(tf_backend *be, float *y, const float *x, const float *w, int32_t n, int32_t dim, float eps);
    size_t (*rope_table_bytes)(const tf_backend *be, int32_t n_max, int32_t n_rot);
    void (*rope_prepare)(tf_backend *be, const tf_rope_pass *rp);
    /* Rotate every head of rp->n rows of x (row stride ld). */
    void (*rope)(tf_backend *be, float *x, int64_t ld, int32_t n_head, int32_t head_dim, const tf_rope_pass *rp);
    size_t (*matmul_scratch)(const tf_backend *be, const tf_bmat *w, int32_t n_max);
    /* y[t][r] = w[r] . x[t], t < n (x: [n][n_cols]; y row stride ldy). */
    tf_status (*matmul)(tf_backend *be, const tf_bmat *w, const float *x, int32_t n, float *y, int64_t ldy,
                        void *scratch, tf_err *err);
    /* Optional (NULL: the caller makes n_w matmul calls): y[i] = the matmul
     * of w[i] and x, for 1 <= n_w <= 4 matrices of one type, layout and
     * n_cols (a layer's q/k/v or gate/up projections), each y[i] with the bits
     * matmul gives it; a backend converts x once and runs them as one job. */
    tf_status (*matmul_n)(tf_backend *be, int n_w, const tf_bmat *const *w, const float *x, int32_t n,
                          float *const *y, const int64_t *ldy, void *scratch, tf_err *err);
    /* y[r][i] += b[i] for n rows of dim (row stride dim). */
    void (*add_bias)(tf_backend *be, float *y, const float *b, int32_t n, int64_t dim);
    void (*add)(tf_backend *be, float *y, const float *x, int64_t n);
    /* x += d, then y = rmsnorm(x) * w, for n rows of dim, with the bits of
     * add then rmsnorm (the residual add and the next norm of the forward
     * pass; a backend may fuse them into one pass, as CUDA's does). */
    void (*add_rmsnorm)(tf_backend *be, float *x, const float *d, float *y, const float *w, int32_t n, int32_t dim,
                        float eps);
    /* g = silu(g) * u */
    void (*silu_mul)(tf_backend *be, float *g, const float *u, int64_t n);
    /* Store n rows of keys / values ([n][ld], KV heads side by side) into
     * slots [*slot0, *slot0 + n) of a layer (slot0: a buffer). */
    void (*kv_store)(tf_backend *be, const tf_kv_view *kv, const int32_t *slot0, int32_t n, const float *k,
                     const float *v, int64_t ld);
    size_t (*attn_scratch)(const tf_backend *be, int32_t n_q_max, int32_t n_head, int32_t head_dim,
                           int32_t n_kv_max);
    void (*attn)(tf_backend *be, const tf_attn_call *a);
    /* out[r] = argmax of row r of logits [n_rows][n_vocab] (out: a buffer);
     * NaN never wins, ties go to the lowest id. */
    void (*argmax)(tf_backend *be, int32_t *out, const float *logits, int32_t n_rows, int32_t n_vocab);
    /* The k best candidates of each row of logits [n_rows][n_vocab] at
     * temperature temp, as tf_topk_scaled selects them (1 <= k <= TF_TOPK_MAX,
     * temp > 0), into one buffer out of n_rows * (2k + 1) words: the ids
     * [n_rows][k], then their z [n_rows][k] (floats), then how many each row
     * kept [n_rows] (entries past that count are unspecified). */
    void (*topk)(tf_backend *be, int32_t *out, const float *logits, int32_t n_rows, int32_t n_vocab, int32_t k,
                 float temp);

    /* ---- the retrieval cache (tf_rc_call) ---- */
    size_t (*rc_scratch)(const tf_backend *be, const tf_rc_call *c);
    void (*rc_sums)(tf_backend *be, const tf_rc_call *c);
    /* Per pair: the first chunk, the k middle chunks of highest score (sum of
     * the group's queries . the chunk's key sum; ties to the lower index), the
     * r_chunks recent complete chunks and the partial one, ascending. */
    void (*rc_select)(tf_backend *be, const tf_rc_call *c);
    /* Per pair: the chosen chunks' slots (below n_tok) to view slots 0, 1, ... */
    void (*rc_gather)(tf_backend *be, const tf_rc_call *c);

    /* ---- graph capture (optional) ---- */
    tf_status (*graph_begin)(tf_backend *be, tf_err *err);
    tf_status (*graph_end)(tf_backend *be, void **graph, tf_err *err);
    tf_status (*graph_launch)(tf_backend *be, void *graph, tf_err *err);
    void (*graph_free)(tf_backend *be, void *graph);
} tf_backend_ops;

struct tf_backend {
    const tf_backend_ops *ops; /* NULL: not initialized */
    void *ctx;                 /* the implementation's state */
};

static inline bool tf_backend_supports(const tf_backend *be, tf_op op, uint32_t type) {
    return be->ops->supports(be, op, type);
}

/* TF_OK if be runs op for type; else TF_ERR_UNSUPPORTED naming the backend,
 * the op, the type (when the op has one) and `what` (a tensor, a cache). */
tf_status tf_backend_require(const tf_backend *be, tf_op op, uint32_t type, const char *what, tf_err *err);

/* Open backend `name` ("cpu": on pool, instruction sets capped at isa, a
 * tf_isa; "cuda": device 0, which needs a CUDA build). */
tf_status tf_backend_open(tf_backend *be, const char *name, tf_pool *pool, int isa, tf_err *err);

/* Release the backend's state (NULL ops: nothing). */
void tf_backend_free(tf_backend *be);

#endif
