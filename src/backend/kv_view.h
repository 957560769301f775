/*
 * kv_view.h — what a backend's attention and KV store read and write: the
 * storage of one layer of a KV cache. The bytes inside a K block are the
 * backend's own layout (backend/cpu/kv_layout.h for the CPU; row-major f16
 * on CUDA); the sizes below are the same on every backend, so kv/ can do the
 * bookkeeping (capacity, strides, slots in use) once.
 *
 * Per layer and KV head: K in blocks of TF_KV_BLK slots (k_blk_bytes each),
 * V one row of v_row_bytes per slot; both span head_stride bytes per head.
 */
#ifndef TF_BACKEND_KV_VIEW_H
#define TF_BACKEND_KV_VIEW_H

#include <stddef.h>
#include <stdint.h>

#define TF_KV_BLK 16

/* The layout of one KV head's storage. */
typedef struct tf_kv_layout {
    uint32_t type;      /* TF_DTYPE_F32, F16, Q8_0 or Q4_0 */
    int32_t head_dim;
    size_t k_blk_bytes; /* bytes of one K block (TF_KV_BLK slots) */
    size_t v_row_bytes; /* bytes of one V slot */
} tf_kv_layout;

/* What attention reads: one layer's K and V storage, KV head h at
 * k + h * head_stride and v + h * head_stride. */
typedef struct tf_kv_view {
    tf_kv_layout lay;
    uint8_t *k, *v;      /* backend memory */
    size_t head_stride;
    int32_t n_head_kv;
} tf_kv_view;

/* KV head h of a view. */
static inline uint8_t *tf_kv_view_k(const tf_kv_view *vw, int h) { return vw->k + (size_t)h * vw->head_stride; }
static inline uint8_t *tf_kv_view_v(const tf_kv_view *vw, int h) { return vw->v + (size_t)h * vw->head_stride; }

/* Slots per head of a view (its capacity). */
static inline int32_t tf_kv_view_slots(const tf_kv_view *vw) { return (int32_t)(vw->head_stride / vw->lay.v_row_bytes); }

#endif
