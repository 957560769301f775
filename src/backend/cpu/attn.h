/*
 * attn.h — attention over a KV cache on the CPU (prefill and decode alike).
 *
 * For every query row i (a token) and head hq, with KV head h = hq / (n_head /
 * n_head_kv):   out[i][hq] = softmax(scale * q[i][hq] . K[h][s]) . V[h][s]
 * over the visible slots s < kv_len[i]. Flash-attention style: key tiles with
 * an online softmax, so memory is O(tile), never O(n_q * n_kv). Work is split
 * over (KV head, query tile, key range) items and merged exactly.
 *
 * Batch invariance: for batches of up to 16 rows (decode and speculative
 * verification) every row's output is bitwise identical to computing that
 * row alone, on any thread count — greedy speculative decoding relies on it.
 */
#ifndef TF_BACKEND_CPU_ATTN_H
#define TF_BACKEND_CPU_ATTN_H

#include "backend/cpu/quant.h"
#include "core/threads.h"
#include "kv/kv.h"

typedef struct tf_attn_args {
    const float *q;        /* [n_q][n_head * head_dim], row stride ldq */
    int64_t ldq;
    const tf_kv_cache *kv; /* K/V storage */
    int layer;
    int32_t n_q;           /* query rows */
    const int32_t *kv_len; /* [n_q] visible slots of each row (>= 1, <= kv->n_used) */
    int32_t n_head;        /* query heads (multiple of kv->n_head_kv) */
    float scale;           /* usually 1/sqrt(head_dim) */
    float *out;            /* [n_q][n_head * head_dim], row stride ldo */
    int64_t ldo;
} tf_attn_args;

/* Scratch bytes tf_cpu_attn needs for up to n_q_max rows and n_kv_max visible
 * slots with n_threads. */
size_t tf_attn_scratch_size(int n_threads, int32_t n_q_max, int32_t n_head, int32_t head_dim, int32_t n_kv_max);

/* Fast path on the pool with the given ISA (capped to the CPU's). */
void tf_cpu_attn(tf_pool *pool, tf_isa isa, const tf_attn_args *a, void *scratch);

/* Scalar double-precision reference (single-threaded, allocation-free). */
void tf_ref_attn(const tf_attn_args *a);

#endif
