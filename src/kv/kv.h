/*
 * kv.h — KV cache storage on the CPU.
 *
 * Layout per layer and KV head (slots are cache rows; a slot holds one token):
 *   K: blocks of TF_KV_BLK slots, each block transposed to [head_dim][TF_KV_BLK]
 *      so attention scores vectorize over keys for any head_dim;
 *   V: [slot][head_dim], row-major.
 * Element type f32 or f16. pos[slot] is the token position the slot holds;
 * within a cache, slots are in increasing position order, so "visible to a
 * query at position p" is always a prefix of the slots.
 *
 * All storage is reserved at init for n_slots; appending and truncating
 * (rollback) never allocate or copy.
 */
#ifndef TF_KV_KV_H
#define TF_KV_KV_H

#include "core/dtype.h"
#include "core/error.h"

#include <stddef.h>
#include <stdint.h>

#define TF_KV_BLK 16

typedef struct tf_kv_cache {
    int32_t n_layer, n_head_kv, head_dim;
    int32_t n_slots;  /* capacity (multiple of TF_KV_BLK) */
    uint32_t type;    /* TF_DTYPE_F32 or TF_DTYPE_F16 */
    int32_t elem;     /* bytes per element */
    size_t head_stride; /* bytes between consecutive KV heads, K and V alike */
    size_t layer_stride;/* bytes between layers */
    size_t bytes;       /* bytes of K (and of V) */
    uint8_t *k;       /* [n_layer][n_head_kv][n_slots/BLK][head_dim][BLK] */
    uint8_t *v;       /* [n_layer][n_head_kv][n_slots][head_dim] */
    int32_t *pos;     /* [n_slots] */
    int32_t n_used;   /* slots filled: [0, n_used) */
} tf_kv_cache;

/* Reserve a cache for n_slots tokens (rounded up to TF_KV_BLK). */
tf_status tf_kv_init(tf_kv_cache *kv, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t n_slots,
                     tf_dtype type, tf_err *err);
void tf_kv_free(tf_kv_cache *kv);

/* Base of layer il's K / V storage for KV head h. */
static inline uint8_t *tf_kv_k(const tf_kv_cache *kv, int il, int h) {
    return kv->k + (size_t)il * kv->layer_stride + (size_t)h * kv->head_stride;
}
static inline uint8_t *tf_kv_v(const tf_kv_cache *kv, int il, int h) {
    return kv->v + (size_t)il * kv->layer_stride + (size_t)h * kv->head_stride;
}

/* Write the keys/values of n tokens for layer il into slots [slot0, slot0+n).
 *   k, v: [n][n_head_kv * head_dim] f32 (row stride ld). */
void tf_kv_store(tf_kv_cache *kv, int il, int32_t slot0, int32_t n, const float *k, const float *v, int64_t ld);

/* Read back the key / value of one slot (f32), for tests and gathers. */
void tf_kv_read(const tf_kv_cache *kv, int il, int h, int32_t slot, float *k_out, float *v_out);

/* Forget slots [n, n_used) — rollback copies nothing. */
static inline void tf_kv_truncate(tf_kv_cache *kv, int32_t n) {
    if (n < kv->n_used) kv->n_used = n < 0 ? 0 : n;
}

#endif
