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
 * A tf_fwd holds the scratch buffers for batches of up to n_batch tokens and
 * up to n_logits rows of logits; it is reserved once, so a forward call never
 * allocates.
 */
#ifndef TF_MODEL_FORWARD_H
#define TF_MODEL_FORWARD_H

#include "backend/cpu/quant.h"
#include "kv/kv.h"
#include "model/model.h"

typedef struct tf_fwd {
    const tf_model *m;
    tf_pool *pool;                /* not owned */
    const tf_cpu_kernels *kern;
    tf_isa isa;
    int32_t n_batch, n_logits;
    /* scratch, rows of n_batch: */
    float *x, *xn;                /* [n_batch][n_embd] residual stream, normed */
    float *q, *att;               /* [n_batch][n_head*head_dim] */
    float *k, *v;                 /* [n_batch][n_head_kv*head_dim] */
    float *tmp;                   /* [n_batch][n_embd] */
    float *gate, *up;             /* [n_batch][n_ff] */
    float *rope_cos, *rope_sin;   /* [n_batch][n_rot/2] */
    int32_t *kv_len;              /* [n_batch] visible slots per row */
    void *act_buf;                /* activation conversion for the widest matrix */
    void *attn_scratch;
    float *logits;                /* [n_logits][n_vocab] */
    size_t bytes;                 /* total reserved */
    /* Optional captures, set by the caller (NULL: off), filled by tf_forward:
     *   cap_q:  [n_layer][cap_q_max][n_head*head_dim]  post-RoPE queries of
     *           rows [cap_q_row, cap_q_row + cap_q_max) (retrieval scoring);
     *   cap_k, cap_v: [n_layer][n_batch][n_head_kv*head_dim]  pre-RoPE keys
     *           and values of every row (the streaming cache stores keys
     *           unrotated and rotates them by slot position). */
    float *cap_q;
    int32_t cap_q_row, cap_q_max;
    float *cap_k, *cap_v;
} tf_fwd;

/* n_kv_max: the most slots any cache used with this scratch will hold. */
tf_status tf_fwd_init(tf_fwd *f, const tf_model *m, int32_t n_batch, int32_t n_logits, int32_t n_kv_max,
                      tf_pool *pool, tf_isa isa, tf_err *err);
void tf_fwd_free(tf_fwd *f);

/* Run n tokens (1 <= n <= n_batch). Their K/V go to slots [slot0, slot0+n)
 * of kv (kv->n_used becomes at least slot0+n; pos[] is recorded per slot);
 * row i attends to slots [0, kv_len[i]) (NULL: slot0 + i + 1, the causal
 * full-cache view). Logits of rows [logits_from, n) are written to f->logits
 * (at most n_logits rows; logits_from == n computes none). */
tf_status tf_forward(tf_fwd *f, tf_kv_cache *kv, const int32_t *tokens, const int32_t *pos, int32_t n,
                     int32_t slot0, const int32_t *kv_len, int32_t logits_from, tf_err *err);

/* The argument checks of tf_forward, shared by every backend's forward pass:
 * 1 <= n <= n_batch, slots [slot0, slot0+n) inside n_slots, logits rows within
 * n_logits, token ids in the vocabulary, 1 <= kv_len[i] <= slot0+n. */
tf_status tf_forward_check(const tf_hparams *hp, int32_t n_batch, int32_t n_logits, int32_t n_slots,
                           const int32_t *tokens, int32_t n, int32_t slot0, const int32_t *kv_len,
                           int32_t logits_from, tf_err *err);

#endif
