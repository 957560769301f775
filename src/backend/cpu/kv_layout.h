/*
 * kv_layout.h — how the CPU stores keys and values, and the view of one
 * layer's storage that attention reads. The caches' bookkeeping (capacity,
 * slots in use, positions, retrieval and ring policies) is kv/'s; this is
 * only the byte layout, which belongs to the backend.
 *
 * Per layer and KV head (slots are cache rows; a slot holds one token):
 *   K: blocks of TF_KV_BLK slots, each block transposed to [head_dim][TF_KV_BLK]
 *      so attention scores vectorize over keys for any head_dim;
 *   V: [slot][head_dim], row-major.
 * Element type f32, f16, q8_0 or q4_0. The quantized types keep a scale per
 * 32 dimensions of one key or value (ggml's Q8_0 / Q4_0 rules: x = d * q with
 * d in f16, q in -127..127 / -8..7), laid out for attention's integer dot
 * products (head_dim must be a multiple of 32):
 *   q8_0 K block: uint8 [head_dim/4][BLK][4] (lane j of row i: dims 4i..4i+3
 *                 of slot j, each q + 128: the unsigned operand of the
 *                 integer dot instruction), then f16 d [head_dim/32][BLK];
 *   q4_0 K block: uint8 [head_dim/8][BLK][4] (lane j of row i: dims 8i..8i+7
 *                 of slot j, each q + 8; byte k holds dim 8i+k in its low
 *                 nibble and 8i+4+k in its high one, so that a mask, or a
 *                 shift and a mask, gives the dot instruction's 4 unsigned
 *                 bytes of dims 8i..8i+3, or 8i+4..8i+7), then f16 d
 *                 [head_dim/32][BLK];
 *   V slot: head_dim/32 blocks of ggml's block_q8_0 / block_q4_0 layout.
 * A K block and a V slot hold the same bytes per slot.
 */
#ifndef TF_BACKEND_CPU_KV_LAYOUT_H
#define TF_BACKEND_CPU_KV_LAYOUT_H

#include "backend/kv_view.h"
#include "core/dtype.h"

#include <stddef.h>
#include <stdint.h>

/* The layout of type for heads of head_dim (type and head_dim already
 * checked: f32/f16 any, q8_0/q4_0 a multiple of 32). */
tf_kv_layout tf_kv_layout_make(uint32_t type, int32_t head_dim);

/* Whether type is q8_0 or q4_0. */
static inline int tf_kv_layout_quantized(uint32_t type) { return type == TF_DTYPE_Q8_0 || type == TF_DTYPE_Q4_0; }

/* One KV head's storage: K blocks at kb, V slots at vb. */
/* Write the key k and value v (head_dim floats each) of one slot. */
void tf_kv_head_store(const tf_kv_layout *L, uint8_t *kb, uint8_t *vb, int32_t slot, const float *k, const float *v);
/* Read back the key / value of one slot as f32 (either output may be NULL). */
void tf_kv_head_read(const tf_kv_layout *L, const uint8_t *kb, const uint8_t *vb, int32_t slot, float *k_out,
                     float *v_out);
/* K block blk as floats, out[head_dim][TF_KV_BLK], exactly as stored
 * (quantized values are d * q, exact in f32). */
void tf_kv_head_k_block_f32(const tf_kv_layout *L, const uint8_t *kb, int32_t blk, float *out);
/* Copy n slots (K and V) from slot s of one head's storage to slot o of
 * another's of the same layout, bit for bit. */
void tf_kv_head_copy(const tf_kv_layout *L, uint8_t *dst_kb, uint8_t *dst_vb, int32_t o, const uint8_t *src_kb,
                     const uint8_t *src_vb, int32_t s, int32_t n);

#endif
