/*
 * kv.h — a KV cache: storage reserved for n_slots tokens on a backend, in
 * that backend's layout (the sizes of backend/kv_view.h; on the CPU
 * backend/cpu/kv_layout.h: K in transposed blocks of TF_KV_BLK slots, V one
 * row per slot; f32, f16, q8_0 or q4_0), the slots in use and the position
 * each holds. The bookkeeping (pos, n_used) is host memory on every backend.
 *
 * pos[slot] is the token position the slot holds; within a cache, slots are
 * in increasing position order, so "visible to a query at position p" is
 * a prefix of the slots, less the gap [gap_lo, gap_hi) where a cache has one
 * (the streaming cache: its sinks before the gap, its window after).
 *
 * All storage is reserved at init for n_slots; appending and truncating
 * (rollback) never allocate or copy.
 */
#ifndef TF_KV_KV_H
#define TF_KV_KV_H

#include "backend/backend.h"
#include "backend/cpu/kv_layout.h"
#include "core/dtype.h"
#include "core/error.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tf_kv_cache {
    int32_t n_layer, n_head_kv, head_dim;
    int32_t n_slots;  /* capacity (multiple of TF_KV_BLK) */
    uint32_t type;    /* TF_DTYPE_F32, F16, Q8_0 or Q4_0 */
    size_t k_blk_bytes; /* bytes of one K block (TF_KV_BLK slots of one KV head) */
    size_t v_row_bytes; /* bytes of one V slot of one KV head */
    size_t head_stride; /* bytes between consecutive KV heads, K and V alike */
    size_t layer_stride;/* bytes between layers */
    size_t bytes;       /* bytes of K (and of V) */
    uint8_t *k;       /* [n_layer][n_head_kv][n_slots/BLK] blocks of k_blk_bytes */
    uint8_t *v;       /* [n_layer][n_head_kv][n_slots] rows of v_row_bytes */
    int32_t *pos;     /* [n_slots] */
    int32_t n_used;   /* slots filled: [0, n_used) */
    int32_t gap_lo, gap_hi; /* slots no new query sees (gap_lo >= gap_hi: none); new tokens go after it */
    tf_backend *be;   /* where k and v live; NULL: host memory (the CPU) */
} tf_kv_cache;

/* Whether the cache can hold type for heads of head_dim (f32 and f16 always;
 * q8_0 and q4_0 when head_dim is a multiple of 32); else an error naming both. */
tf_status tf_kv_check_type(tf_dtype type, int32_t head_dim, tf_err *err);

/* Bytes of one token's K and V for one layer and KV head of this type. */
size_t tf_kv_head_bytes(tf_dtype type, int32_t head_dim);

/* Reserve a cache for n_slots tokens (rounded up to TF_KV_BLK). */
tf_status tf_kv_init(tf_kv_cache *kv, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t n_slots,
                     tf_dtype type, tf_err *err);
/* The element type a cache asked to hold `type` has on backend be: a backend
 * whose attention reads no f32 (CUDA) keeps f32 in f16; any other type as
 * asked (tf_kv_init_on refuses what be cannot store, by name). */
tf_dtype tf_kv_type_on(const tf_backend *be, tf_dtype type);

/* The same on backend be (NULL or a host-memory backend: as tf_kv_init);
 * TF_ERR_UNSUPPORTED names the backend and type it cannot store. */
tf_status tf_kv_init_on(tf_kv_cache *kv, tf_backend *be, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                        int32_t n_slots, tf_dtype type, const char *what, tf_err *err);
void tf_kv_free(tf_kv_cache *kv);

/* Base of layer il's K / V storage for KV head h. */
static inline uint8_t *tf_kv_k(const tf_kv_cache *kv, int il, int h) {
    return kv->k + (size_t)il * kv->layer_stride + (size_t)h * kv->head_stride;
}
static inline uint8_t *tf_kv_v(const tf_kv_cache *kv, int il, int h) {
    return kv->v + (size_t)il * kv->layer_stride + (size_t)h * kv->head_stride;
}

/* The layout of one KV head of kv, and the view of layer il that attention reads. */
static inline tf_kv_layout tf_kv_layout_of(const tf_kv_cache *kv) {
    return (tf_kv_layout){.type = kv->type, .head_dim = kv->head_dim, .k_blk_bytes = kv->k_blk_bytes,
                          .v_row_bytes = kv->v_row_bytes};
}
tf_kv_view tf_kv_layer_view(const tf_kv_cache *kv, int il);

/* The functions below read and write the storage directly: host-memory
 * caches only. */

/* Write the keys/values of n tokens for layer il into slots [slot0, slot0+n).
 *   k, v: [n][n_head_kv * head_dim] f32 (row stride ld). */
void tf_kv_store(tf_kv_cache *kv, int il, int32_t slot0, int32_t n, const float *k, const float *v, int64_t ld);

/* Read back the key / value of one slot (f32), for tests and gathers. */
void tf_kv_read(const tf_kv_cache *kv, int il, int h, int32_t slot, float *k_out, float *v_out);

/* K block blk of layer il, KV head h as floats, out[head_dim][TF_KV_BLK],
 * exactly as stored (quantized values are d * q, exact in f32). */
void tf_kv_k_block_f32(const tf_kv_cache *kv, int il, int h, int32_t blk, float *out);

/* Copy n slots of layer il, KV head h (K and V) from slot s of src to slot o
 * of dst, bit for bit; both caches of the same shape and type. */
void tf_kv_copy(tf_kv_cache *dst, int32_t o, const tf_kv_cache *src, int32_t s, int32_t n, int il, int h);

/* Copy slots [s, s+n) of every layer and KV head of src (K, V and positions)
 * to slots [o, o+n) of dst, bit for bit; both of the same shape and type
 * (asserted). dst->n_used grows to at least o + n. For starting a cache from
 * another's prefix (prompt reuse) and for tests. */
void tf_kv_copy_slots(tf_kv_cache *dst, int32_t o, const tf_kv_cache *src, int32_t s, int32_t n);

/* Copy the first n slots of every layer and KV head of src (K, V and
 * positions) into dst, on dst's backend: two caches of the same shape and
 * type, both in host memory or both on one device (a device copy is ordered
 * after the work dst's backend has enqueued; the caller waits for src's).
 * dst->n_used grows to at least n. TF_ERR_INVALID_ARG names what differs. */
tf_status tf_kv_copy_prefix(tf_kv_cache *dst, const tf_kv_cache *src, int32_t n, tf_err *err);

/* Fill slots [0, n) of every layer and KV head with keys and values drawn
 * uniformly from [-1, 1) (seeded), through kv's backend (NULL: the host),
 * positions 0..n-1: a cache of a given depth without running a model (a
 * pass's cost does not depend on what the cache holds). On a device the
 * values come from a pool of 2048 random rows (each run of 1024 slots
 * starts at a random row of it), not fresh for every slot. */
tf_status tf_kv_fill_random(tf_kv_cache *kv, int32_t n, uint64_t seed, tf_err *err);

/* Forget slots [n, n_used) — rollback copies nothing. */
static inline void tf_kv_truncate(tf_kv_cache *kv, int32_t n) {
    if (n < kv->n_used) kv->n_used = n < 0 ? 0 : n;
}

#endif
