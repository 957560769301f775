/*
 * forward_cuda.h — the llama forward pass on a CUDA device, with the
 * semantics of tf_forward (forward.h): n tokens at positions pos[], their K/V
 * written to slots [slot0, slot0 + n) of a device KV cache, row i attending
 * to slots [0, kv_len[i]) (NULL: slot0 + i + 1), logits of rows
 * [logits_from, n). Weights, KV caches and every activation stay on the
 * device; logits stay there too (argmax or a download is asked for
 * explicitly), so greedy decoding moves 4 bytes per row to the host.
 *
 * Built only with CUDA (TF_HAVE_CUDA); the types are plain C.
 *
 * Batch invariance: batches of up to TF_CUDA_GEMV_MAX_ROWS (16) rows run the
 * GEMV matrix kernels and the split-K decode attention, whose per-row results
 * do not depend on the other rows — the GPU counterpart of the CPU's
 * guarantee that greedy speculation relies on. Larger batches (prefill) use
 * cuBLAS and the prefill attention kernel.
 *
 * CUDA graphs: with use_graphs set, calls of up to 16 rows are captured once
 * per shape (rows, logits rows, cache, captures, prologue) and replayed; the
 * per-call values (tokens, positions, kv_len, slot0, the prologue's extra
 * ints) are copied from page-locked staging by the graph's first node.
 */
#ifndef TF_MODEL_FORWARD_CUDA_H
#define TF_MODEL_FORWARD_CUDA_H

#include "backend/cuda/cuda_backend.h"
#include "model/model.h"

#include <stdbool.h>

/* Device copies of one model's weights (shared by every level using the model). */
typedef struct tf_cuda_layer {
    tf_cuda_mat wq, wk, wv, wo, w_gate, w_up, w_down;
    const float *attn_norm, *ffn_norm; /* [n_embd] */
} tf_cuda_layer;

typedef struct tf_cuda_weights {
    tf_cuda *cu;            /* not owned */
    const tf_model *m;      /* not owned */
    void *block;            /* one allocation holding everything */
    size_t bytes;
    tf_cuda_mat tok_embd, output;
    const float *output_norm;
    const float *rope_freq; /* [n_rot/2] */
    tf_cuda_layer *layers;  /* [n_layer], host array of device pointers */
} tf_cuda_weights;

/* Upload m's weights. TF_ERR_UNSUPPORTED names the first tensor whose type
 * the backend cannot compute with; TF_ERR_NOMEM names the bytes. */
tf_status tf_cuda_weights_init(tf_cuda_weights *w, tf_cuda *cu, const tf_model *m, tf_err *err);
void tf_cuda_weights_free(tf_cuda_weights *w);

/* A device KV cache (f16): k, v [n_layer][n_head_kv][n_slots][head_dim]. */
typedef struct tf_cuda_kv {
    int32_t n_layer, n_head_kv, head_dim, n_slots;
    int32_t n_used;
    uint16_t *k, *v;
    size_t bytes;           /* of k and v together */
} tf_cuda_kv;

tf_status tf_cuda_kv_init(tf_cuda_kv *kv, tf_cuda *cu, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                          int32_t n_slots, const char *what, tf_err *err);
void tf_cuda_kv_free(tf_cuda_kv *kv, tf_cuda *cu);
static inline uint16_t *tf_cuda_kv_k(const tf_cuda_kv *kv, int il) {
    return kv->k + (size_t)il * kv->n_head_kv * kv->n_slots * kv->head_dim;
}
static inline uint16_t *tf_cuda_kv_v(const tf_cuda_kv *kv, int il) {
    return kv->v + (size_t)il * kv->n_head_kv * kv->n_slots * kv->head_dim;
}

/* A prologue run on the stream after the per-call values are on the device
 * and before the layers (captured into the graph with them): the streaming
 * level builds its rotated view there from f->extra_d. */
typedef void (*tf_cuda_prologue_fn)(void *ud, const int32_t *extra_d);

#define TF_CUDA_FWD_GRAPHS 12

typedef struct tf_cuda_fwd {
    tf_cuda *cu;                 /* not owned */
    const tf_cuda_weights *w;    /* not owned */
    const tf_model *m;
    int32_t n_batch, n_logits, n_extra, n_kv_max;
    /* device scratch, rows of n_batch */
    float *x, *xn;               /* [n_batch][n_embd] */
    float *q, *att;              /* [n_batch][n_head*head_dim] */
    float *k, *v;                /* [n_batch][n_head_kv*head_dim] */
    float *tmp;                  /* [n_batch][n_embd] */
    float *gate, *up;            /* [n_batch][n_ff] */
    float *logits;               /* [n_logits][n_vocab] (device) */
    int32_t *argmax_d;           /* [n_logits] */
    void *mm_scratch, *attn_scratch;
    /* per-call values: device block and its page-locked staging, laid out as
     * tokens[n_batch] pos[n_batch] kv_len[n_batch] slot0[1] extra[n_extra] */
    int32_t *args_d, *args_h;
    int32_t *tok_d, *pos_d, *len_d, *slot0_d, *extra_d;
    int32_t *extra_h;            /* the prologue's inputs, written by the caller */
    size_t args_bytes;
    bool pending;                /* staging may still be read by an enqueued copy */
    /* optional captures (device buffers owned by the caller; NULL: off):
     *   cap_q [n_layer][cap_q_max][n_head*head_dim] post-RoPE queries of rows
     *   [cap_q_row, cap_q_row + cap_q_max); cap_k / cap_v
     *   [n_layer][n_batch][n_head_kv*head_dim] pre-RoPE keys and values */
    float *cap_q;
    int32_t cap_q_row, cap_q_max;
    float *cap_k, *cap_v;
    tf_cuda_prologue_fn prologue;
    void *prologue_ud;
    /* graphs */
    bool use_graphs;
    struct {
        int32_t n, logits_from, cap_q_row, cap_q_max;
        const void *kv, *cap_q, *cap_k, *prologue;
        tf_cuda_graph *g;
    } graph[TF_CUDA_FWD_GRAPHS];
    int n_graph;
    int64_t graph_launches, graph_captures;
    size_t bytes;
} tf_cuda_fwd;

/* n_kv_max: the most slots a cache used with this scratch holds (sizes the
 * decode attention's partial results). n_extra: ints of prologue input. */
tf_status tf_cuda_fwd_init(tf_cuda_fwd *f, const tf_cuda_weights *w, int32_t n_batch, int32_t n_logits,
                           int32_t n_kv_max, int32_t n_extra, tf_err *err);
void tf_cuda_fwd_free(tf_cuda_fwd *f);

/* As tf_forward (host arrays in, device cache; kv->n_used grows to at least
 * slot0 + n). Enqueues the work and returns; the logits are ready for
 * tf_cuda_fwd_argmax / tf_cuda_fwd_logits. */
tf_status tf_cuda_forward(tf_cuda_fwd *f, tf_cuda_kv *kv, const int32_t *tokens, const int32_t *pos, int32_t n,
                          int32_t slot0, const int32_t *kv_len, int32_t logits_from, tf_err *err);

/* Greedy tokens of the first n_rows logits rows (waits for the device). */
tf_status tf_cuda_fwd_argmax(tf_cuda_fwd *f, int32_t n_rows, int32_t *out, tf_err *err);
/* Copy the first n_rows logits rows to out [n_rows][n_vocab] (waits). */
tf_status tf_cuda_fwd_logits(tf_cuda_fwd *f, int32_t n_rows, float *out, tf_err *err);

#endif
