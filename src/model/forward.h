/*
 * forward.h — the one llama forward pass, shared by every decoding level.
 *
 *   tf_forward(fwd, kv, tokens[n], pos[n], slot0, kv_len[n]) -> logits
 *
 * The caller decides what attention sees through the KV cache it passes, the
 * slots the new tokens are written to and each row's visible length: the full
 * cache (slots = positions, kv_len[i] = slot0 + i + 1) or any other view kept
 * in position order. Weights and kernels are the same for all.
 *
 * The pass is written once against the backend table (backend/backend.h):
 * the same code runs on the CPU and on a CUDA device.
 *
 * A tf_fwd holds the scratch buffers for batches of up to n_batch tokens and
 * up to n_logits rows of logits; it is reserved once, so a forward call never
 * allocates.
 */
#ifndef TF_MODEL_FORWARD_H
#define TF_MODEL_FORWARD_H

#include "backend/backend.h"
#include "backend/cpu/quant.h"
#include "kv/kv.h"
#include "model/model.h"
#include "model/weights.h"

#define TF_FWD_GRAPHS 12

/* What a pass writes besides the cache and the logits, when its caller asks
 * (tf_forward's out; backend buffers owned by the caller, NULL: not written):
 *   q:  [n_layer][q_max][n_head*head_dim]  post-RoPE queries of rows
 *       [q_row, q_row + q_max) (the retrieval cache's scoring);
 *   k, v: [n_layer][n_batch][n_head_kv*head_dim]  pre-RoPE keys and values of
 *       every row (the streaming cache's sinks, rotated by slot later). */
typedef struct tf_fwd_out {
    float *q;
    int32_t q_row, q_max;
    float *k, *v;
} tf_fwd_out;

typedef struct tf_fwd {
    tf_backend *be;               /* not owned (except own_be below) */
    const tf_bweights *w;         /* not owned (except own_w below) */
    const tf_model *m;
    int32_t n_batch, n_logits, n_kv_max;
    /* scratch (backend buffers), rows of n_batch: */
    float *x, *xn;                /* [n_batch][n_embd] residual stream, normed */
    float *q, *att;               /* [n_batch][n_head*head_dim] */
    float *k, *v;                 /* [n_batch][n_head_kv*head_dim] */
    float *tmp;                   /* [n_batch][n_embd] */
    float *gate, *up;             /* [n_batch][n_ff] */
    void *rope_table, *mm_scratch, *attn_scratch;
    float *logits;                /* [n_logits][n_vocab]; host memory on the CPU */
    int32_t *argmax_d;            /* [n_logits] */
    int32_t *topk_d;              /* [n_logits * (2 TF_TOPK_MAX + 1)]: backend.h's topk layout */
    /* Per-call values in one buffer, uploaded from host staging (the same
     * memory on a host-memory backend): tokens[n_batch] pos[n_batch]
     * kv_len[n_batch] slot0[1]. */
    int32_t *args_d, *args_h;
    int32_t *tok_d, *pos_d, *len_d, *slot0_d, *gap_d; /* gap_d: the cache's gap [2] */
    size_t args_bytes;
    bool pending;                 /* the staging may still be read by an enqueued copy */
    size_t bytes;                 /* total reserved */
    /* Graphs (backends with graph_rows > 0, when use_graphs is set): passes
     * of up to graph_rows rows are captured once per shape (rows, logits
     * rows, cache, captures) and replayed. graph_kv_step 0: a graph's
     * attention covers every slot of the cache (small caches); > 0: the
     * longest row's keys rounded up to a multiple of it, a graph per such
     * bound (a large cache, whose slots are mostly past the rows' keys). */
    bool use_graphs;
    int32_t graph_kv_step;
    struct {
        int32_t n, logits_from, max_kv;
        const void *kv;
        tf_fwd_out out;
        void *g;
    } graph[TF_FWD_GRAPHS];
    int n_graph;
    int64_t graph_launches, graph_captures;
    /* what tf_fwd_init made for itself (the CPU convenience) */
    tf_backend own_be;
    tf_bweights own_w;
} tf_fwd;

/* Scratch for passes of w's model on w's backend. n_kv_max: the most slots
 * any cache used with this scratch will hold. */
tf_status tf_fwd_init_on(tf_fwd *f, const tf_bweights *w, int32_t n_batch, int32_t n_logits, int32_t n_kv_max,
                         tf_err *err);
/* The same on the CPU: a CPU backend on pool with isa, over m's own memory. */
tf_status tf_fwd_init(tf_fwd *f, const tf_model *m, int32_t n_batch, int32_t n_logits, int32_t n_kv_max,
                      tf_pool *pool, tf_isa isa, tf_err *err);
void tf_fwd_free(tf_fwd *f);

/* Run n tokens (1 <= n <= n_batch). Their K/V go to slots [slot0, slot0+n)
 * of kv (a cache on the same backend; kv->n_used becomes at least slot0+n;
 * pos[] is recorded per slot); row i attends to slots [0, kv_len[i]) (NULL:
 * slot0 + i + 1, the causal full-cache view). Logits of rows
 * [logits_from, n) are written to f->logits (at most n_logits rows;
 * logits_from == n computes none); out (NULL: none) asks for the rows
 * tf_fwd_out describes. On a device the work is enqueued: read
 * the results with tf_fwd_argmax / tf_fwd_logits. */
tf_status tf_forward(tf_fwd *f, tf_kv_cache *kv, const int32_t *tokens, const int32_t *pos, int32_t n,
                     int32_t slot0, const int32_t *kv_len, int32_t logits_from, const tf_fwd_out *out, tf_err *err);

/* Greedy tokens of the first n_rows logits rows of the last pass, to host out. */
tf_status tf_fwd_argmax(tf_fwd *f, int32_t n_rows, int32_t *out, tf_err *err);
/* Sampling's k candidates (1 <= k <= TF_TOPK_MAX, temp > 0) of the first
 * n_rows logits rows, to host out in the backend topk op's layout: ids
 * [n_rows][k], z [n_rows][k] (floats), counts [n_rows] (backend.h). */
tf_status tf_fwd_topk(tf_fwd *f, int32_t n_rows, int32_t k, float temp, int32_t *out, tf_err *err);
/* The first n_rows logits rows, to host out [n_rows][n_vocab]. */
tf_status tf_fwd_logits(tf_fwd *f, int32_t n_rows, float *out, tf_err *err);

#endif
