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
#include "backend/cpu/quant_impl.h"

#include <math.h>
#include <stddef.h>
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

/* Q6_K, Q3_K and Q2_K: a block of 32 is two sub-blocks of 16, each with its
 * scale (Q2_K: and its min), so a lane's two halves are summed apart. */
static int pack_halves(tf_dtype wtype) {
    return wtype == TF_DTYPE_Q6_K || wtype == TF_DTYPE_Q3_K || wtype == TF_DTYPE_Q2_K;
}

/* The registry's family Q32 has the packed format, and Q4_K and Q5_K (whose
 * sub-blocks of 32 carry their own scale and offset), Q6_K, Q3_K and Q2_K. */
static int pack_supported(tf_dtype wtype) {
    if (wtype == TF_DTYPE_Q4_K || wtype == TF_DTYPE_Q5_K || pack_halves(wtype)) return 1;
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

tf_dtype tf_act_pack_type(tf_dtype wtype) {
    return wtype == TF_DTYPE_Q4_1 || wtype == TF_DTYPE_Q5_1 || wtype == TF_DTYPE_Q4_K || wtype == TF_DTYPE_Q5_K
               ? TF_DTYPE_Q8_1
               : TF_DTYPE_Q8_0;
}

/* Weight types whose lanes carry an offset term (acc = fma(m_w, ex, acc)). */
static int pack_has_min(tf_dtype wtype) { return tf_act_pack_type(wtype) == TF_DTYPE_Q8_1; }

size_t tf_act_packed_row_size(tf_dtype type, int64_t n) {
    if (!pack_supported(type)) return 0;
    int64_t nb = n / TF_QK8_0, tail = nb % TF_PACK_GROUP_BLOCKS;
    return (size_t)(nb / TF_PACK_GROUP_BLOCKS) * TF_PACK_GROUP_BYTES + (size_t)((tail + 1) / 2) * TF_PACK_PAIR_BYTES;
}

size_t tf_act_scratch_row_size(tf_dtype type, int64_t n) {
    size_t a = tf_act_row_size(type, n), p = tf_act_packed_row_size(type, n);
    size_t r = tf_weight_r16_type(type) ? tf_act_r16_row_size(type, n) : 0;
    if (p > a) a = p;
    return r > a ? r : a;
}

/* Block b of the standard activation blocks: its scale, quants and sum. */
static void act_block(tf_dtype wtype, const void *blocks, int64_t b, float *d, const int8_t **qs) {
    if (tf_act_pack_type(wtype) == TF_DTYPE_Q8_1) {
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

/* The ex term of Q6_K, Q3_K and Q2_K: the activation sums of the two halves of the lane's quants
 * (int16 each: at most 16 x 127 in magnitude), the first in the low 16 bits. */
static void pack_ex_q6k(int s_lo, int s_hi, void *ex) {
    uint32_t v = (uint32_t)(uint16_t)s_lo | (uint32_t)(uint16_t)s_hi << 16;
    memcpy(ex, &v, 4);
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
            int s = 0, s_lo = 0;
            for (int v = 0; v < 8; v++) memcpy(y + 64 * v + 4 * lane, qs + 4 * v, 4);
            for (int i = 0; i < TF_QK8_0; i++) s += qs[i];
            for (int i = 0; i < TF_QK8_0 / 2; i++) s_lo += qs[i];
            ad[lane] = d;
            if (pack_halves(wtype)) pack_ex_q6k(s_lo, s - s_lo, ex + 4 * lane);
            else pack_ex(wtype, d, s, ex + 4 * lane);
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
                if (pack_halves(wtype)) pack_ex_q6k(s, 0, y + 128 + 4 * lane);
                else pack_ex(wtype, d, s, y + 128 + 4 * lane);
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
        tf_ref_quantize_row(tf_act_pack_type(wtype), x + c, blocks, nc);
        tf_act_pack_blocks(wtype, blocks, y, nc);
        y += tf_act_packed_row_size(wtype, nc);
    }
}

/* ---- scalar reference of the packed dot product ----------------------------- */

/* Weight block b of a row (IQ4_XS, Q4_K, Q5_K: sub-block b % 8 of
 * super-block b / 8): scale d, offset m (0 where none), and the 32 quants as
 * the kernels' u8 operand (Q8_0: w + 128; Q4_x, Q5_x, Q4_K, Q5_K: q as
 * stored; IQ4: table value + 128). Q4_K's and Q5_K's value d sc q - dmin m
 * gives d = d sc and m = -(dmin m), both exact in f32 (11 x 6 significant
 * bits). */
static void weight_block(tf_dtype wtype, const void *row, int64_t b, float *d, float *m, int u[32]) {
    *m = 0.0f;
    switch (wtype) {
    case TF_DTYPE_Q4_K: case TF_DTYPE_Q5_K: {
        const int q5 = wtype == TF_DTYPE_Q5_K, j = (int)(b % 8);
        const tf_block_q4_k *x4 = (const tf_block_q4_k *)row + b / 8;
        const tf_block_q5_k *x5 = (const tf_block_q5_k *)row + b / 8;
        int sc, mn;
        tf_q4k_scale_min(q5 ? x5->scales : x4->scales, j, &sc, &mn);
        *d = tf_f16_to_f32(q5 ? x5->d : x4->d) * (float)sc;
        *m = -(tf_f16_to_f32(q5 ? x5->dmin : x4->dmin) * (float)mn);
        const uint8_t *qs = (q5 ? x5->qs : x4->qs) + 32 * (j / 2);
        for (int i = 0; i < 32; i++) u[i] = (qs[i] >> 4 * (j % 2) & 0xF) | (q5 ? (x5->qh[i] >> j & 1) << 4 : 0);
        break;
    }
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

/* Q6_K, Q3_K or Q2_K, block b of a row (the 32 quants of sub-blocks 2 (b % 8)
 * and 2 (b % 8) + 1 of super-block b / 8): the super-block's d, the two
 * sub-blocks' scales as signed values, and the quants q as stored (Q6_K:
 * 0..63, the value is d sc (q - 32); Q3_K: 0..7, the value d sc (q - 4);
 * Q2_K: 0..3, the value d sc q - dmin mn, with m = -dmin and the two mins mn;
 * the others: m = 0, mn = 0). */
static void halves_block(tf_dtype wtype, const void *row, int64_t b, float *d, float *m, int sc[2], int mn[2],
                         int u[32]) {
    const int j = (int)(b % 8);
    *m = 0.0f;
    mn[0] = mn[1] = 0;
    if (wtype == TF_DTYPE_Q2_K) {
        const tf_block_q2_k *x = (const tf_block_q2_k *)row + b / 8;
        *d = tf_f16_to_f32(x->d);
        *m = -tf_f16_to_f32(x->dmin);
        for (int h = 0; h < 2; h++) sc[h] = x->scales[2 * j + h] & 0xF, mn[h] = x->scales[2 * j + h] >> 4;
        for (int i = 0; i < 32; i++) u[i] = tf_q2bits_get(x->qs, 32 * j + i);
        return;
    }
    if (wtype == TF_DTYPE_Q3_K) {
        const tf_block_q3_k *x = (const tf_block_q3_k *)row + b / 8;
        *d = tf_f16_to_f32(x->d);
        for (int h = 0; h < 2; h++) sc[h] = tf_q3k_scale(x->scales, 2 * j + h) - 32;
        for (int i = 0; i < 32; i++) u[i] = tf_q3k_get(x, 32 * j + i);
        return;
    }
    const tf_block_q6_k *x = (const tf_block_q6_k *)row + b / 8;
    *d = tf_f16_to_f32(x->d);
    sc[0] = x->scales[2 * j];
    sc[1] = x->scales[2 * j + 1];
    for (int i = 0; i < 32; i++) u[i] = tf_q6k_get(x, 32 * j + i);
}

/* The quants' offset of Q6_K (32), Q3_K (4) or Q2_K (0). */
static int halves_offset(tf_dtype wtype) { return wtype == TF_DTYPE_Q3_K ? 4 : wtype == TF_DTYPE_Q2_K ? 0 : 32; }

/* Their exact lane sum from the integer dot products of the lane's two
 * halves of quants (s_lo, s_hi) and its ex term (their activation sums): the
 * quants' offset taken out, each half times its scale. */
static int32_t halves_isum(int off, const int sc[2], int32_t s_lo, int32_t s_hi, const char *ex) {
    uint32_t e;
    memcpy(&e, ex, 4);
    const int32_t e_lo = (int16_t)(uint16_t)(e & 0xFFFF), e_hi = (int16_t)(uint16_t)(e >> 16);
    return sc[0] * (s_lo - off * e_lo) + sc[1] * (s_hi - off * e_hi);
}

/* A lane step of these types: acc = fma(isum, d_w d_a, acc), then for Q2_K
 * the mins' term, its integer sum mn0 e_lo + mn1 e_hi (exact) times m_w d_a
 * (m_w = -dmin). */
static float halves_step(tf_dtype wtype, float acc, int32_t isum, const int mn[2], float wd, float wm, float ad,
                         const char *ex) {
    acc = fmaf((float)isum, wd * ad, acc);
    if (wtype == TF_DTYPE_Q2_K) {
        uint32_t e;
        memcpy(&e, ex, 4);
        const int32_t msum = mn[0] * (int16_t)(uint16_t)(e & 0xFFFF) + mn[1] * (int16_t)(uint16_t)(e >> 16);
        acc = fmaf((float)msum, wm * ad, acc);
    }
    return acc;
}

/* One lane step: acc = fma(isum, d_w d_a, acc), then the offset term. */
static float lane_step(tf_dtype wtype, float acc, int32_t isum, float wd, float wm, float ad, const char *ex) {
    acc = fmaf((float)isum, wd * ad, acc);
    if (pack_has_min(wtype)) {
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
    const int q6 = pack_halves(wtype), off = halves_offset(wtype);
    int sc[2], mn[2];
    for (int64_t g = 0; g < n_groups; g++, a += TF_PACK_GROUP_BYTES) {
        const float *ad = (const float *)(a + 512);
        for (int lane = 0; lane < 16; lane++) {
            if (q6) {
                halves_block(wtype, w, 16 * g + tf_pack_lane_block(lane), &wd, &wm, sc, mn, u);
                int32_t s[2] = {0, 0};
                for (int v = 0; v < 8; v++)
                    for (int i = 0; i < 4; i++) s[v / 4] += u[4 * v + i] * (int8_t)a[64 * v + 4 * lane + i];
                acc[lane] = halves_step(wtype, acc[lane], halves_isum(off, sc, s[0], s[1], a + 576 + 4 * lane), mn,
                                        wd, wm, ad[lane], a + 576 + 4 * lane);
                continue;
            }
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
            if (q6) { /* the lane's 4 quants lie in one half: that half's scale (and min) */
                int one[2] = {0, 0}, onem[2] = {0, 0}, s = 0;
                wd = wm = 0.0f;
                if (b0 + h < nb) {
                    halves_block(wtype, w, b0 + h, &wd, &wm, sc, mn, u);
                    one[0] = sc[l / 4];
                    onem[0] = mn[l / 4];
                    for (int i = 0; i < 4; i++) s += u[4 * l + i] * (int8_t)a[32 * h + 4 * l + i];
                }
                acc[lane] = halves_step(wtype, acc[lane], halves_isum(off, one, s, 0, a + 128 + 4 * lane), onem, wd,
                                        wm, ad[lane], a + 128 + 4 * lane);
                continue;
            }
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

/* ---- the packed weight layout (quant.h, "Packed weight rows") ---------------- */

int tf_weight_packs(tf_dtype type) { return pack_supported(type); }

/* A packed group record as a permutation of the group's file bytes, in 16-bit
 * units (every field of every format is a whole number of them, at even
 * offsets): record unit i holds file unit src[i], XORed with flip for the
 * first n_flip units (Q8_0's quants, stored as w + 128). */
typedef struct {
    int n;             /* units of a record (= of the group's blocks) */
    uint16_t src[272]; /* largest record: Q8_0's 16 x 34 bytes */
    uint16_t flip;
    int n_flip;
} wpack_map;

static void wpack_map_init(tf_dtype type, wpack_map *mp) {
    const int bs = (int)tf_dtype_row_size(type, TF_QK8_0 * (type == TF_DTYPE_IQ4_XS ? 8 : 1));
    int i = 0; /* byte offset in the record; units are filled two bytes at a time */
    uint16_t *src = mp->src;
#define UNIT(file_byte) (src[i / 2] = (uint16_t)((file_byte) / 2), i += 2)
    mp->flip = 0;
    mp->n_flip = 0;
    if (type == TF_DTYPE_Q8_0) { /* q[8], then d */
        while (i < 512) UNIT(tf_pack_lane_block(i % 64 / 4) * bs + 2 + 4 * (i / 64) + i % 4);
        mp->flip = 0x8080;
        mp->n_flip = 256;
        for (int k = 0; k < 32; k += 2) UNIT(tf_pack_lane_block(k / 2) * bs);
    } else if (type == TF_DTYPE_IQ4_XS) { /* y[4] over the 16 sub-blocks, then two 8-byte headers */
        while (i < 256) {
            int sb = tf_pack_lane_block(i % 64 / 4);
            UNIT((sb / 8) * bs + 8 + 16 * (sb % 8) + 4 * (i / 64) + i % 4);
        }
        for (int h = 0; h < 16; h += 2) UNIT((h / 8) * bs + h % 8);
    } else { /* y[4], d, then m and / or qh */
        const int has_m = type == TF_DTYPE_Q4_1 || type == TF_DTYPE_Q5_1;
        const int qh = type == TF_DTYPE_Q5_0 ? 2 : type == TF_DTYPE_Q5_1 ? 4 : -1;
        const int qs = type == TF_DTYPE_Q4_1 ? 4 : type == TF_DTYPE_Q5_0 ? 6 : type == TF_DTYPE_Q5_1 ? 8 : 2;
        while (i < 256) UNIT(tf_pack_lane_block(i % 64 / 4) * bs + qs + 4 * (i / 64) + i % 4);
        for (int k = 0; k < 32; k += 2) UNIT(tf_pack_lane_block(k / 2) * bs);
        if (has_m)
            for (int k = 0; k < 32; k += 2) UNIT(tf_pack_lane_block(k / 2) * bs + 2);
        if (qh >= 0)
            for (int k = 0; k < 64; k += 2) UNIT(tf_pack_lane_block(k / 4) * bs + qh + k % 4);
    }
#undef UNIT
    mp->n = i / 2;
    TF_ASSERT(i == (int)tf_dtype_row_size(type, TF_PACK_GROUP_BLOCKS * TF_QK8_0));
}

static void wpack_rows(const wpack_map *mp, tf_dtype type, const char *src, char *dst, int64_t n_rows, int64_t n,
                       int unpack) {
    const size_t row = tf_dtype_row_size(type, n), rec = 2 * (size_t)mp->n;
    const int64_t n_groups = n / (TF_PACK_GROUP_BLOCKS * TF_QK8_0);
    for (int64_t r = 0; r < n_rows; r++) {
        const char *s = src + (size_t)r * row;
        char *d = dst + (size_t)r * row;
        for (int64_t g = 0; g < n_groups; g++, s += rec, d += rec) {
            uint16_t in[272], out[272];
            memcpy(in, s, rec);
            for (int i = 0; i < mp->n; i++) {
                uint16_t f = i < mp->n_flip ? mp->flip : 0;
                if (unpack) out[mp->src[i]] = (uint16_t)(in[i] ^ f);
                else out[i] = (uint16_t)(in[mp->src[i]] ^ f);
            }
            memcpy(d, out, rec);
        }
        memcpy(d, s, row - (size_t)n_groups * rec); /* the tail blocks as they are */
    }
}

/* The packers' word steps (at load, over every weight of the model): 4 bytes
 * of a lane's record vectors at a time, each byte's field taken from the
 * same byte of 4 consecutive file bytes. */
static uint32_t ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static void st32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* Bytes 4 L .. 4 L + 3 of the four nibble vectors y[r] of a record: byte i of
 * y[r] holds quant 4 r + i (low nibble) and 16 + 4 r + i (high) of the lane's
 * block, whose quant k is the nibble at bit sh of src[k]. */
static void pack_lane_nibbles(uint8_t *rec, int lane, const uint8_t *src, int sh) {
    for (int r = 0; r < 4; r++)
        st32(rec + 64 * r + 4 * lane,
             (ld32(src + 4 * r) >> sh & 0x0F0F0F0Fu) | (ld32(src + 16 + 4 * r) >> sh & 0x0F0F0F0Fu) << 4);
}

/* Bytes 4 L .. of the vectors V[p] (p = 0, 1) whose byte i holds the 2-bit
 * fields (at bit sh of src[k]) of quants 16 p + 4 m + i at bits 2 m. */
static void pack_lane_2bits(uint8_t *rec, int lane, const uint8_t *src, int sh) {
    for (int p = 0; p < 2; p++) {
        uint32_t w = 0;
        for (int m = 0; m < 4; m++) w |= (ld32(src + 16 * p + 4 * m) >> sh & 0x03030303u) << 2 * m;
        st32(rec + 64 * p + 4 * lane, w);
    }
}

/* Q4_K / Q5_K: a group of two super-blocks (the file's 288 / 352 bytes at
 * src) to its record (quant.h) at dst, or back (unpack). Every quant's low
 * nibble is moved from its place in the file (sub-block j's quant k: nibble
 * j % 2 of qs byte 32 (j / 2) + k) to its place in the record (nibble k / 16
 * of byte 64 (k % 16 / 4) + 4 L + k % 4, L the lane of the sub-block); Q5_K's
 * fifth bits (quant k of sub-block j: bit j of qh byte k) become a u32 per
 * lane (bit k); the 6-bit scales and mins of the 16 sub-blocks (12 bytes per
 * super-block, every bit used) are rewritten in lane order as 32 fields of 6
 * bits, four to three bytes (kq_fields_put: exactly the same 192 bits), and
 * the f16 d, dmin of each follow. */

/* The 32 6-bit values v (the scales of lanes 0..15, then their mins) as 24
 * bytes s: bytes 3 k .. 3 k + 2 hold v[4 k .. 4 k + 3] from the high bits
 * down (the order pk_q4k_scales unpacks with two 16-bit multiplies). */
static void kq_fields_put(const int v[32], uint8_t s[24]) {
    for (int k = 0; k < 8; k++) {
        const int *x = v + 4 * k;
        s[3 * k] = (uint8_t)(x[0] << 2 | x[1] >> 4);
        s[3 * k + 1] = (uint8_t)((x[1] & 15) << 4 | x[2] >> 2);
        s[3 * k + 2] = (uint8_t)((x[2] & 3) << 6 | x[3]);
    }
}

static void kq_fields_get(const uint8_t s[24], int v[32]) {
    for (int k = 0; k < 8; k++) {
        const uint8_t *b = s + 3 * k;
        v[4 * k] = b[0] >> 2;
        v[4 * k + 1] = (b[0] & 3) << 4 | b[1] >> 4;
        v[4 * k + 2] = (b[1] & 15) << 2 | b[2] >> 6;
        v[4 * k + 3] = b[2] & 63;
    }
}
static void kq_pack_group(tf_dtype type, const uint8_t *src, uint8_t *dst, int unpack) {
    const int q5 = type == TF_DTYPE_Q5_K;
    const int bs = q5 ? (int)sizeof(tf_block_q5_k) : (int)sizeof(tf_block_q4_k);
    const int qs = q5 ? (int)offsetof(tf_block_q5_k, qs) : (int)offsetof(tf_block_q4_k, qs);
    const int sco = (int)offsetof(tf_block_q4_k, scales), qho = (int)offsetof(tf_block_q5_k, qh);
    const int f0 = q5 ? 320 : 256; /* the scale fields of the record */
    uint8_t rec[2 * sizeof(tf_block_q5_k)] = {0}, file[2 * sizeof(tf_block_q5_k)] = {0};
    const size_t bytes = 2 * (size_t)bs;
    if (unpack) memcpy(rec, src, bytes);
    else memcpy(file, src, bytes);
    int fields[32] = {0}; /* the record's: lane order, scales then mins */
    if (unpack) kq_fields_get(rec + f0, fields);
    int sc[16], mn[16]; /* by sub-block of the pair */
    for (int lane = 0; lane < 16; lane++) {
        const int sb = tf_pack_lane_block(lane), j = sb % 8;
        uint8_t *fb = file + (sb / 8) * bs;
        uint32_t hbits = 0;
        if (q5 && unpack) memcpy(&hbits, rec + 256 + 4 * lane, 4);
        if (!unpack) {
            pack_lane_nibbles(rec, lane, fb + qs + 32 * (j / 2), 4 * (j % 2));
            for (int m = 0; q5 && m < 8; m++) { /* bit j of qh bytes 4 m .. 4 m + 3 to bits 4 m .. */
                const uint32_t b = ld32(fb + qho + 4 * m) >> j & 0x01010101u;
                hbits |= ((b | b >> 7 | b >> 14 | b >> 21) & 0xFu) << 4 * m;
            }
        }
        for (int k = 0; k < 32 && unpack; k++) {
            const int f = qs + 32 * (j / 2) + k, fsh = 4 * (j % 2);
            const int r = 64 * (k % 16 / 4) + 4 * lane + k % 4, rsh = 4 * (k / 16);
            fb[f] |= (uint8_t)((rec[r] >> rsh & 0xF) << fsh);
            if (q5) fb[qho + k] |= (uint8_t)((hbits >> k & 1) << j);
        }
        if (q5 && !unpack) memcpy(rec + 256 + 4 * lane, &hbits, 4);
        if (unpack) {
            sc[sb] = fields[lane];
            mn[sb] = fields[16 + lane];
        } else {
            tf_q4k_scale_min(fb + sco, j, &sc[sb], &mn[sb]);
            fields[lane] = sc[sb];
            fields[16 + lane] = mn[sb];
        }
    }
    for (int h = 0; h < 2; h++) {
        uint8_t *b = file + h * bs, *dm = rec + f0 + 24 + 4 * h;
        if (!unpack) {
            memcpy(dm, b, 4); /* d, dmin */
            continue;
        }
        memcpy(b, dm, 4);
        tf_q4k_pack_scales(b + sco, sc + 8 * h, mn + 8 * h);
    }
    if (!unpack) kq_fields_put(fields, rec + f0);
    memcpy(dst, unpack ? file : rec, bytes);
}

/* Q6_K: a group of two super-blocks (the file's 420 bytes at src) to its
 * record (quant.h) at dst, or back (unpack). Quant k (0..31) of lane L's block
 * (sub-blocks 2 j, 2 j + 1 of super-block s, tf_pack_lane_block(L) = 8 s + j):
 * its low 4 bits at nibble k / 16 of byte 64 (k % 16 / 4) + 4 L + k % 4 (as
 * Q4_K's record), its high 2 bits at bits 2 (k % 16 / 4) of byte
 * 256 + 64 (k / 16) + 4 L + k % 4; the two scales at bytes 384 + 2 L, + 1;
 * then d of each super-block. Every bit of the file is used once. */
static void q6k_pack_group(const uint8_t *src, uint8_t *dst, int unpack) {
    uint8_t rec[2 * sizeof(tf_block_q6_k)] = {0};
    tf_block_q6_k sb[2];
    if (unpack) {
        memcpy(rec, src, sizeof rec);
        memset(sb, 0, sizeof sb);
    } else {
        memcpy(sb, src, sizeof sb);
    }
    for (int lane = 0; lane < 16; lane++) {
        const int b = tf_pack_lane_block(lane), s = b / 8, j = b % 8;
        if (!unpack) {
            /* elements 32 j + k of the super-block: low 4 bits at bit 0 or 4 of ql[64 (j / 4) +
             * 32 (j % 2) + k], high 2 bits at bit 2 (j % 4) of qh[32 (j / 4) + k] (tf_q6k_get) */
            pack_lane_nibbles(rec, lane, sb[s].ql + 64 * (j / 4) + 32 * (j % 2), j % 4 < 2 ? 0 : 4);
            pack_lane_2bits(rec + 256, lane, sb[s].qh + 32 * (j / 4), 2 * (j % 4));
        }
        for (int k = 0; k < 32 && unpack; k++) {
            const int nb = 64 * (k % 16 / 4) + 4 * lane + k % 4, nsh = 4 * (k / 16);
            const int hb = 256 + 64 * (k / 16) + 4 * lane + k % 4, hsh = 2 * (k % 16 / 4);
            tf_q6k_put(&sb[s], 32 * j + k, (rec[nb] >> nsh & 0xF) | (rec[hb] >> hsh & 3) << 4);
        }
        for (int h = 0; h < 2; h++) {
            if (unpack) sb[s].scales[2 * j + h] = (int8_t)rec[384 + 2 * lane + h];
            else rec[384 + 2 * lane + h] = (uint8_t)sb[s].scales[2 * j + h];
        }
    }
    for (int s = 0; s < 2; s++) {
        if (unpack) memcpy(&sb[s].d, rec + 416 + 2 * s, 2);
        else memcpy(rec + 416 + 2 * s, &sb[s].d, 2);
    }
    if (unpack) memcpy(dst, sb, sizeof sb);
    else memcpy(dst, rec, sizeof rec);
}

/* Q3_K: a group of two super-blocks (the file's 220 bytes at src) to its
 * record (quant.h) at dst, or back (unpack). Quant k (0..31) of lane L's block
 * (sub-blocks 2 j, 2 j + 1 of super-block s, tf_pack_lane_block(L) = 8 s + j):
 * its low 2 bits at bits 2 (k % 16 / 4) of byte 64 (k / 16) + 4 L + k % 4, its
 * high bit at bit k / 4 of byte 128 + 4 L + k % 4; the two 6-bit scales' low
 * 4 bits as the nibbles of byte 192 + L, their high 2 bits as bits 0-1 and
 * 2-3 of nibble L of bytes 208..215; then d of each super-block. Every bit of
 * the file is used once. */
static void q3k_pack_group(const uint8_t *src, uint8_t *dst, int unpack) {
    uint8_t rec[2 * sizeof(tf_block_q3_k)] = {0};
    tf_block_q3_k sb[2];
    int sc[2][16];
    if (unpack) {
        memcpy(rec, src, sizeof rec);
        memset(sb, 0, sizeof sb);
    } else {
        memcpy(sb, src, sizeof sb);
    }
    for (int lane = 0; lane < 16; lane++) {
        const int b = tf_pack_lane_block(lane), s = b / 8, j = b % 8;
        if (!unpack) {
            /* elements 32 j + k: low 2 bits at bit 2 (j % 4) of qs[32 (j / 4) + k], the third at
             * bit 4 (j / 4) + j % 4 of hmask[k] (tf_q3k_get) */
            const int msh = 4 * (j / 4) + j % 4;
            uint32_t h = 0;
            pack_lane_2bits(rec, lane, sb[s].qs + 32 * (j / 4), 2 * (j % 4));
            for (int m = 0; m < 8; m++) h |= (ld32(sb[s].hmask + 4 * m) >> msh & 0x01010101u) << m;
            st32(rec + 128 + 4 * lane, h);
        }
        for (int k = 0; k < 32 && unpack; k++) {
            const int lb = 64 * (k / 16) + 4 * lane + k % 4, lsh = 2 * (k % 16 / 4);
            const int hb = 128 + 4 * lane + k % 4, hsh = k / 4;
            tf_q3k_put(&sb[s], 32 * j + k, (rec[lb] >> lsh & 3) | (rec[hb] >> hsh & 1) << 2);
        }
        const int nsh = 4 * (lane % 2);
        for (int h = 0; h < 2; h++) {
            if (unpack) {
                sc[s][2 * j + h] = (rec[192 + lane] >> 4 * h & 0xF) | (rec[208 + lane / 2] >> (nsh + 2 * h) & 3) << 4;
            } else {
                const int v = tf_q3k_scale(sb[s].scales, 2 * j + h);
                rec[192 + lane] |= (uint8_t)((v & 0xF) << 4 * h);
                rec[208 + lane / 2] |= (uint8_t)((v >> 4) << (nsh + 2 * h));
            }
        }
    }
    for (int s = 0; s < 2; s++) {
        if (unpack) {
            memcpy(&sb[s].d, rec + 216 + 2 * s, 2);
            tf_q3k_pack_scales(sb[s].scales, sc[s]);
        } else {
            memcpy(rec + 216 + 2 * s, &sb[s].d, 2);
        }
    }
    if (unpack) memcpy(dst, sb, sizeof sb);
    else memcpy(dst, rec, sizeof rec);
}

/* Q2_K: a group of two super-blocks (the file's 168 bytes at src) to its
 * record (quant.h) at dst, or back (unpack). Quant k (0..31) of lane L's block
 * (sub-blocks 2 j, 2 j + 1 of super-block s, tf_pack_lane_block(L) = 8 s + j)
 * at bits 2 (k % 16 / 4) of byte 64 (k / 16) + 4 L + k % 4 (as Q3_K's low
 * bits); the file's scale bytes of the two sub-blocks (scale in the low
 * nibble, min in the high) at bytes 128 + 2 L, + 1; then d, dmin of each
 * super-block. Every bit of the file is used once. */
static void q2k_pack_group(const uint8_t *src, uint8_t *dst, int unpack) {
    uint8_t rec[2 * sizeof(tf_block_q2_k)] = {0};
    tf_block_q2_k sb[2];
    if (unpack) {
        memcpy(rec, src, sizeof rec);
        memset(sb, 0, sizeof sb);
    } else {
        memcpy(sb, src, sizeof sb);
    }
    for (int lane = 0; lane < 16; lane++) {
        const int b = tf_pack_lane_block(lane), s = b / 8, j = b % 8;
        /* elements 32 j + k: at bit 2 (j % 4) of qs[32 (j / 4) + k] (tf_q2bits_get) */
        if (!unpack) pack_lane_2bits(rec, lane, sb[s].qs + 32 * (j / 4), 2 * (j % 4));
        for (int k = 0; k < 32 && unpack; k++) {
            const int lb = 64 * (k / 16) + 4 * lane + k % 4, lsh = 2 * (k % 16 / 4);
            tf_q2bits_put(sb[s].qs, 32 * j + k, rec[lb] >> lsh & 3);
        }
        for (int h = 0; h < 2; h++) {
            if (unpack) sb[s].scales[2 * j + h] = rec[128 + 2 * lane + h];
            else rec[128 + 2 * lane + h] = sb[s].scales[2 * j + h];
        }
    }
    for (int s = 0; s < 2; s++) {
        if (unpack) memcpy(&sb[s].d, rec + 160 + 4 * s, 4); /* d, dmin */
        else memcpy(rec + 160 + 4 * s, &sb[s].d, 4);
    }
    if (unpack) memcpy(dst, sb, sizeof sb);
    else memcpy(dst, rec, sizeof rec);
}

static void kq_pack_rows(tf_dtype type, const char *src, char *dst, int64_t n_rows, int64_t n, int unpack) {
    const size_t row = tf_dtype_row_size(type, n), rec = tf_dtype_row_size(type, 2 * TF_QK_K);
    const int64_t n_groups = n / (2 * TF_QK_K);
    for (int64_t r = 0; r < n_rows; r++) {
        const char *s = src + (size_t)r * row;
        char *d = dst + (size_t)r * row;
        for (int64_t g = 0; g < n_groups; g++, s += rec, d += rec) {
            if (type == TF_DTYPE_Q6_K) q6k_pack_group((const uint8_t *)s, (uint8_t *)d, unpack);
            else if (type == TF_DTYPE_Q3_K) q3k_pack_group((const uint8_t *)s, (uint8_t *)d, unpack);
            else if (type == TF_DTYPE_Q2_K) q2k_pack_group((const uint8_t *)s, (uint8_t *)d, unpack);
            else kq_pack_group(type, (const uint8_t *)s, (uint8_t *)d, unpack);
        }
        memcpy(d, s, row - (size_t)n_groups * rec); /* an odd last super-block as it is */
    }
}

void tf_weight_pack_rows(tf_dtype type, const void *rows, void *packed, int64_t n_rows, int64_t n) {
    TF_ASSERT(pack_supported(type) && rows != packed);
    if (type == TF_DTYPE_Q4_K || type == TF_DTYPE_Q5_K || pack_halves(type)) {
        kq_pack_rows(type, rows, packed, n_rows, n, 0);
        return;
    }
    wpack_map mp;
    wpack_map_init(type, &mp);
    wpack_rows(&mp, type, rows, packed, n_rows, n, 0);
}

void tf_weight_pack_row(tf_dtype type, const void *row, void *packed, int64_t n) {
    tf_weight_pack_rows(type, row, packed, 1, n);
}

void tf_weight_unpack_row(tf_dtype type, const void *packed, void *row, int64_t n) {
    TF_ASSERT(pack_supported(type) && row != packed);
    if (type == TF_DTYPE_Q4_K || type == TF_DTYPE_Q5_K || pack_halves(type)) {
        kq_pack_rows(type, packed, row, 1, n, 1);
        return;
    }
    wpack_map mp;
    wpack_map_init(type, &mp);
    wpack_rows(&mp, type, packed, row, 1, n, 1);
}
