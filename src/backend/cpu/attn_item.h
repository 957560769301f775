/* attn_item.h — one attention work item (see attn_kernel.inc), shared by the ISA variants. */
#ifndef TF_BACKEND_CPU_ATTN_ITEM_H
#define TF_BACKEND_CPU_ATTN_ITEM_H

#include "kv/kv.h"

typedef struct attn_item {
    const float *q;         /* first query row of the item, at head g0 of the group; row stride ldq */
    int64_t ldq;
    const uint8_t *kbase;   /* K storage of the KV head (blocked) */
    const uint8_t *vbase;   /* V storage of the KV head */
    uint32_t kv_type;
    int hd;                 /* head_dim */
    int g;                  /* query heads per KV head */
    int n_qpos;             /* query positions in the item */
    const int32_t *kv_len;  /* [n_qpos] */
    int32_t k0, k1;         /* key slot range; k0 a multiple of 64 */
    float scale;
    float *m, *l, *acc;     /* outputs: [n_qpos*g], [n_qpos*g], [n_qpos*g][hd] */
    float *qbuf;            /* scratch [n_qpos*g][hd] */
    float *kt_buf, *v_buf;  /* scratch [64][hd] each */
} attn_item;

void tf_attn_item_avx512(const attn_item *it);
void tf_attn_item_avx2(const attn_item *it);
void tf_attn_item_generic(const attn_item *it);

#endif
