/* attn_item.h — one attention work item (see attn_kernel.inc), shared by the ISA variants. */
#ifndef TF_BACKEND_CPU_ATTN_ITEM_H
#define TF_BACKEND_CPU_ATTN_ITEM_H

#include "backend/cpu/kv_layout.h"

typedef struct attn_item {
    const float *q;         /* first query row of the item, at head g0 of the group; row stride ldq */
    int64_t ldq;
    const uint8_t *kbase;   /* K storage of the KV head (blocked) */
    const uint8_t *vbase;   /* V storage of the KV head */
    uint32_t kv_type;
    size_t k_blk_bytes;     /* bytes of a K block (TF_KV_BLK slots) and of a V slot (kv.h) */
    size_t v_row_bytes;
    int hd;                 /* head_dim */
    int g;                  /* query heads per KV head */
    int n_qpos;             /* query positions in the item */
    const int32_t *kv_len;  /* [n_qpos] */
    int32_t k0, k1;         /* key slot range; k0 a multiple of TF_KV_BLK */
    int32_t klo;            /* the first visible slot, in [k0, k0 + TF_KV_BLK): [k0, klo) is masked */
    float scale;
    float *m, *l, *acc;     /* outputs: [n_qpos*g], [n_qpos*g], [n_qpos*g][hd] */
    float *qbuf;            /* scratch [n_qpos*g][hd] floats (bf16 path: [n_qpos*g][hd/2] pairs) */
    float *kt_buf, *v_buf;  /* scratch [64][hd] floats each (bf16 path: half of it, pairs) */
    float *lvec;            /* scratch [n_qpos*g][16]: bf16 path, the softmax sum l per lane */
    float *amx;             /* scratch of the AMX variant (TF_ATTN_AMX_SCRATCH floats, 64-byte aligned) */
} attn_item;

/* Floats of the AMX variant's scratch: scores [16][64], weights [16][64] bf16,
 * P V [16][head_dim]. */
#define TF_ATTN_AMX_SCRATCH(hd) (16 * 64 + 16 * 32 + 16 * (hd))

/* One variant per ISA (attn_kernel.inc compiled by attn_<isa>.c). Besides the
 * item kernel each exports its bf16 primitives on 16 lanes, for the test that
 * the emulation and the instructions agree bit for bit:
 *   dot:   acc[i] = (acc[i] + a1*b1) + a0*b0 over the bf16 pairs of a[i], b[i]
 *          (VDPBF16PS);
 *   pack2: out[i] = (bf16(hi[i]) << 16) | bf16(lo[i]) (VCVTNE2PS2BF16 + interleave). */
#define TF_ATTN_VARIANT(isa)                                                                          \
    void tf_attn_item_##isa(const attn_item *it);                                                     \
    void tf_attn_bf16_dot_##isa(float acc[16], const uint32_t a[16], const uint32_t b[16]);           \
    void tf_attn_bf16_pack2_##isa(uint32_t out[16], const float lo[16], const float hi[16]);
TF_ATTN_VARIANT(amx_avx512)
TF_ATTN_VARIANT(bf16_avx512)
TF_ATTN_VARIANT(f32_avx512)
TF_ATTN_VARIANT(f32_vnni_avx512)
TF_ATTN_VARIANT(avx512)
TF_ATTN_VARIANT(avx2)
TF_ATTN_VARIANT(vnni_avx2)
TF_ATTN_VARIANT(f32_generic)
TF_ATTN_VARIANT(f32_avx2)
TF_ATTN_VARIANT(f32_vnni_avx2)
TF_ATTN_VARIANT(generic)
#undef TF_ATTN_VARIANT

#endif
