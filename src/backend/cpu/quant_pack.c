/*
 * quant_pack.c — the packed activation format of quant.h (tf_act_pack_blocks)
 * and the scalar reference of the packed dot product (tf_ref_packed_dot).
 *
 * Why a second activation format: a product over k tokens spends most of its
 * time per (weight row, token, block) on work that depends on the token only
 * (spreading the block scales over lanes, gathering offset sums) or on the
 * row only. Packed activations hold those token-only terms as ready vectors,
 * and put 4 quants of 16 different blocks in each 64-byte vector, so that the
 * integer dot product of a whole block accumulates in one int32 lane
 * (vpdpbusd accumulates) and the float work is one step per 16 blocks instead
 * of one per 2. The block sums are exact integers, so the way a kernel
 * computes them does not change any result; the float steps are fixed by the
 * format (tf_ref_packed_dot spells them out), which keeps the product of a
 * token bitwise independent of the tile it is computed in.
 */
#include "backend/cpu/quant.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/fp16.h"

/* Offset of the packed (u8 x s8) weight quant that ex compensates in the
 * integer formats (0: the format has an f32 ex term instead, or none). */
static int pack_int_offset(tf_dtype wtype) {
    switch (wtype) {
    case TF_DTYPE_Q8_0: case TF_DTYPE_IQ4_NL: case TF_DTYPE_IQ4_XS: return 128;
    case TF_DTYPE_Q4_0: return 8;
    case TF_DTYPE_Q5_0: return 16;
    default: return 0;
    }
}

/* The registry's family Q32 has the packed format. */
static int pack_supported(tf_dtype wtype) {
    switch (wtype) {
#define TF_PACK_FAMILY_Q32 1
#define TF_PACK_FAMILY_QK 0
#define TF_PACK_FAMILY_FLOAT 0
#define TF_PACKED_(ID, nm, id, bs, bytes, act, fam, ...) case TF_DTYPE_##ID: return TF_PACK_FAMILY_##fam;
        TF_DTYPE_LIST(TF_PACKED_)
#undef TF_PACKED_
    default: return 0;
    }
}

size_t tf_act_packed_row_size(tf_dtype type, int64_t n) {
    if (!pack_supported(type)) return 0;
    int64_t nb = n / TF_QK8_0, tail = nb % TF_PACK_GROUP_BLOCKS;
    return (size_t)(nb / TF_PACK_GROUP_BLOCKS) * TF_PACK_GROUP_BYTES + (size_t)((tail + 1) / 2) * TF_PACK_PAIR_BYTES;
}

size_t tf_act_scratch_row_size(tf_dtype type, int64_t n) {
    size_t a = tf_act_row_size(type, n), p = tf_act_packed_row_size(type, n);
    return a > p ? a : p;
}

/* Block b of the standard activation blocks: its scale, quants and sum. */
static void act_block(tf_dtype wtype, const void *blocks, int64_t b, float *d, const int8_t **qs) {
    if (tf_act_type(wtype) == TF_DTYPE_Q8_1) {
        const tf_block_q8_1 *x = (const tf_block_q8_1 *)blocks + b;
        *d = tf_f16_to_f32(x->d);
        *qs = x->qs;
    } else {
        const tf_block_q8_0 *x = (const tf_block_q8_0 *)blocks + b;
        *d = tf_f16_to_f32(x->d);
        *qs = x->qs;
    }
}

/* The ex term of a block scale d and a quant sum s (see quant.h). */
static void pack_ex(tf_dtype wtype, float d, int s, void *ex) {
    int off = pack_int_offset(wtype);
    if (off) {
        int32_t v = -off * s;
        memcpy(ex, &v, 4);
    } else {
        float v = d * (float)s;
        memcpy(ex, &v, 4);
    }
}

void tf_act_pack_blocks(tf_dtype wtype, const void *blocks, void *packed, int64_t n) {
    TF_ASSERT(pack_supported(wtype));
    int64_t nb = n / TF_QK8_0, n_groups = nb / TF_PACK_GROUP_BLOCKS;
    char *y = packed;
    for (int64_t g = 0; g < n_groups; g++, y += TF_PACK_GROUP_BYTES) {
        float *ad = (float *)(y + 512);
        char *ex = y + 576;
        for (int lane = 0; lane < 16; lane++) {
            float d;
            const int8_t *qs;
            act_block(wtype, blocks, 16 * g + tf_pack_lane_block(lane), &d, &qs);
            int s = 0;
            for (int v = 0; v < 8; v++) memcpy(y + 64 * v + 4 * lane, qs + 4 * v, 4);
            for (int i = 0; i < TF_QK8_0; i++) s += qs[i];
            ad[lane] = d;
            pack_ex(wtype, d, s, ex + 4 * lane);
        }
    }
    for (int64_t b0 = n_groups * TF_PACK_GROUP_BLOCKS; b0 < nb; b0 += 2, y += TF_PACK_PAIR_BYTES) {
        memset(y, 0, TF_PACK_PAIR_BYTES);
        for (int h = 0; h < 2 && b0 + h < nb; h++) {
            float d;
            const int8_t *qs;
            act_block(wtype, blocks, b0 + h, &d, &qs);
            memcpy(y + 32 * h, qs, 32);
            for (int l = 0; l < 8; l++) {
                int lane = 8 * h + l, s = qs[4 * l] + qs[4 * l + 1] + qs[4 * l + 2] + qs[4 * l + 3];
                ((float *)(y + 64))[lane] = d;
                pack_ex(wtype, d, s, y + 128 + 4 * lane);
            }
        }
    }
}

void tf_ref_act_pack(tf_dtype wtype, const float *x, void *packed, int64_t n) {
    /* a group at a time: packing the blocks of 512 columns gives one group,
     * packing the rest of the row gives its tail pairs */
    tf_block_q8_1 blocks[TF_PACK_GROUP_BLOCKS];
    char *y = packed;
    for (int64_t c = 0; c < n; c += TF_PACK_GROUP_BLOCKS * TF_QK8_0) {
        int64_t nc = n - c < TF_PACK_GROUP_BLOCKS * TF_QK8_0 ? n - c : TF_PACK_GROUP_BLOCKS * TF_QK8_0;
        tf_ref_act_quantize(wtype, x + c, blocks, nc);
        tf_act_pack_blocks(wtype, blocks, y, nc);
        y += tf_act_packed_row_size(wtype, nc);
    }
}

/* ---- scalar reference of the packed dot product ----------------------------- */

/* Weight block b of a row (IQ4_XS: sub-block b % 8 of super-block b / 8):
 * scale d, offset m (0 where none), and the 32 quants as the kernels' u8
 * operand (Q8_0: w + 128; Q4_x, Q5_x: q as stored; IQ4: table value + 128). */
static void weight_block(tf_dtype wtype, const void *row, int64_t b, float *d, float *m, int u[32]) {
    *m = 0.0f;
    switch (wtype) {
    case TF_DTYPE_Q8_0: {
        const tf_block_q8_0 *x = (const tf_block_q8_0 *)row + b;
        *d = tf_f16_to_f32(x->d);
        for (int i = 0; i < 32; i++) u[i] = x->qs[i] + 128;
        break;
    }
    case TF_DTYPE_IQ4_NL: case TF_DTYPE_IQ4_XS: {
        const uint8_t *qs;
        if (wtype == TF_DTYPE_IQ4_NL) {
            const tf_block_iq4_nl *x = (const tf_block_iq4_nl *)row + b;
            *d = tf_f16_to_f32(x->d);
            qs = x->qs;
        } else {
            const tf_block_iq4_xs *x = (const tf_block_iq4_xs *)row + b / 8;
            *d = tf_f16_to_f32(x->d) * (float)(tf_iq4_xs_scale(x, (int)(b % 8)) - 32);
            qs = x->qs + 16 * (b % 8);
        }
        for (int i = 0; i < 16; i++) {
            u[i] = tf_iq4_values[qs[i] & 0xF] + 128;
            u[i + 16] = tf_iq4_values[qs[i] >> 4] + 128;
        }
        break;
    }
    case TF_DTYPE_Q4_0: case TF_DTYPE_Q4_1: {
        const uint8_t *qs;
        if (wtype == TF_DTYPE_Q4_0) {
            const tf_block_q4_0 *x = (const tf_block_q4_0 *)row + b;
            *d = tf_f16_to_f32(x->d);
            qs = x->qs;
        } else {
            const tf_block_q4_1 *x = (const tf_block_q4_1 *)row + b;
            *d = tf_f16_to_f32(x->d);
            *m = tf_f16_to_f32(x->m);
            qs = x->qs;
        }
        for (int i = 0; i < 16; i++) {
            u[i] = qs[i] & 0xF;
            u[i + 16] = qs[i] >> 4;
        }
        break;
    }
    default: {
        const uint8_t *qs, *qh;
        if (wtype == TF_DTYPE_Q5_0) {
            const tf_block_q5_0 *x = (const tf_block_q5_0 *)row + b;
            *d = tf_f16_to_f32(x->d);
            qs = x->qs;
            qh = x->qh;
        } else {
            const tf_block_q5_1 *x = (const tf_block_q5_1 *)row + b;
            *d = tf_f16_to_f32(x->d);
            *m = tf_f16_to_f32(x->m);
            qs = x->qs;
            qh = x->qh;
        }
        uint32_t h;
        memcpy(&h, qh, 4);
        for (int i = 0; i < 16; i++) {
            u[i] = (qs[i] & 0xF) | (int)((h >> i) & 1) << 4;
            u[i + 16] = (qs[i] >> 4) | (int)((h >> (i + 16)) & 1) << 4;
        }
        break;
    }
    }
}

/* One lane step: acc = fma(isum, d_w d_a, acc), then the offset term. */
static float lane_step(tf_dtype wtype, float acc, int32_t isum, float wd, float wm, float ad, const char *ex) {
    acc = fmaf((float)isum, wd * ad, acc);
    if (wtype == TF_DTYPE_Q4_1 || wtype == TF_DTYPE_Q5_1) {
        float e;
        memcpy(&e, ex, 4);
        acc = fmaf(wm, e, acc);
    }
    return acc;
}

/* int32 start of a lane's integer sum: the int ex term, or 0. */
static int32_t lane_init(tf_dtype wtype, const char *ex) {
    int32_t v = 0;
    if (pack_int_offset(wtype)) memcpy(&v, ex, 4);
    return v;
}

/* Sum of 16 lanes in the order of _mm512_reduce_add_ps: halves of 8, then of
 * 4, then elements (0 + 2) + (1 + 3). */
static float reduce16(const float a[16]) {
    float s8[8], s4[4];
    for (int i = 0; i < 8; i++) s8[i] = a[i + 8] + a[i];
    for (int i = 0; i < 4; i++) s4[i] = s8[i + 4] + s8[i];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

float tf_ref_packed_dot(tf_dtype wtype, int64_t n, const void *w, const void *packed) {
    TF_ASSERT(pack_supported(wtype));
    int64_t nb = n / TF_QK8_0, n_groups = nb / TF_PACK_GROUP_BLOCKS;
    const char *a = packed;
    float acc[16] = {0};
    int u[32];
    float wd, wm;
    for (int64_t g = 0; g < n_groups; g++, a += TF_PACK_GROUP_BYTES) {
        const float *ad = (const float *)(a + 512);
        for (int lane = 0; lane < 16; lane++) {
            weight_block(wtype, w, 16 * g + tf_pack_lane_block(lane), &wd, &wm, u);
            int32_t s = lane_init(wtype, a + 576 + 4 * lane);
            for (int v = 0; v < 8; v++)
                for (int i = 0; i < 4; i++) s += u[4 * v + i] * (int8_t)a[64 * v + 4 * lane + i];
            acc[lane] = lane_step(wtype, acc[lane], s, wd, wm, ad[lane], a + 576 + 4 * lane);
        }
    }
    for (int64_t b0 = n_groups * TF_PACK_GROUP_BLOCKS; b0 < nb; b0 += 2, a += TF_PACK_PAIR_BYTES) {
        const float *ad = (const float *)(a + 64);
        for (int lane = 0; lane < 16; lane++) {
            int h = lane / 8, l = lane % 8;
            if (b0 + h < nb) weight_block(wtype, w, b0 + h, &wd, &wm, u);
            else {
                /* the absent block of an odd tail: zero weights and scales;
                 * a Q8_0 weight enters as 0 + 128 against zero activations */
                wd = wm = 0.0f;
                for (int i = 0; i < 32; i++) u[i] = wtype == TF_DTYPE_Q8_0 ? 128 : 0;
            }
            int32_t s = lane_init(wtype, a + 128 + 4 * lane);
            for (int i = 0; i < 4; i++) s += u[4 * l + i] * (int8_t)a[32 * h + 4 * l + i];
            acc[lane] = lane_step(wtype, acc[lane], s, wd, wm, ad[lane], a + 128 + 4 * lane);
        }
    }
    return reduce16(acc);
}
