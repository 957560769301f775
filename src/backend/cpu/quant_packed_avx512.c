/*
 * quant_packed_avx512.c — the packed path of the VNNI table's matrix products
 * (quant.h "Packed activations" and "Packed weight rows"): tiles of one
 * weight row, in the file's layout or the packed weight layout, by up to 16
 * tokens of packed activations, and act_pack. Its reference is
 * tf_ref_packed_dot (quant_pack.c), bit for bit.
 */
#include "backend/cpu/quant_avx512_inl.h"

/* ---- Q8_0 / Q4_x / Q5_x / IQ4 / Q4_K / Q5_K weights against packed activations -- */

/* The packed path (quant.h, quant_pack.c): per group of 16 blocks a weight
 * row is loaded and rearranged once into 8 u8 vectors whose int32 lane L
 * holds 4 quants of block tf_pack_lane_block(L), matching the packed
 * activations; then per token the exact block dot products are 8 vpdpbusd
 * into one int32 vector (the format's ex term as start value for the
 * integer offsets), and the float work is one cvt, one mul and one FMA (plus
 * one FMA for the offset m of Q4_1 / Q5_1 / Q4_K / Q5_K) per 16 blocks, with the token's
 * vectors read straight from memory. Tail blocks (n / 32 not a multiple of
 * 16) go two at a time in natural order. */

/* The packed path's kinds: the Q32 family's (K_Q8_0 .. K_IQ4_XS) and the
 * sub-blocks of 32 of Q4_K and Q5_K, each with its scale d sc and offset
 * -dmin m. */
#define K_PK_Q4_K (K_IQ4_XS + 1)
#define K_PK_Q5_K (K_IQ4_XS + 2)
/* Q6_K: a block of 32 is two sub-blocks of 16 with a scale each; the lane's
 * two halves are summed apart (quant.h) */
#define K_PK_Q6_K (K_IQ4_XS + 3)
/* Q3_K: the same with 3-bit quants (offset 4 instead of 32) and 6-bit scales;
 * Q2_K: 2-bit quants without an offset, 4-bit scales, and a 4-bit min per
 * half (times -dmin) */
#define K_PK_Q3_K (K_IQ4_XS + 4)
#define K_PK_Q2_K (K_IQ4_XS + 5)
#define PK_HALVES(kind) ((kind) == K_PK_Q6_K || (kind) == K_PK_Q3_K || (kind) == K_PK_Q2_K)
/* log2 of the halves' quant offset (32, 4; Q2_K has none) */
#define PK_HALF_SHIFT(kind) ((kind) == K_PK_Q3_K ? 2 : 5)
#define PK_IS_KQ(kind) ((kind) == K_PK_Q4_K || (kind) == K_PK_Q5_K)
/* Formats whose lanes carry an offset term: acc = fma(m, ex, acc). */
#define PK_HAS_MIN(kind) (K0_HAS_MIN(kind) || PK_IS_KQ(kind))

/* Bytes per block and offsets of qs / qh within it; kinds as K0_*. IQ4_XS
 * has no blocks of 32 of its own: its sub-blocks are addressed through
 * iq4xs_sub, and its "qs offset" is that of the indices iq4xs_sub returns. */
TF_AI int pk_block_bytes(int kind) {
    switch (kind) {
    case K_Q8_0: return sizeof(tf_block_q8_0);
    case K_Q4_0: return sizeof(tf_block_q4_0);
    case K_Q4_1: return sizeof(tf_block_q4_1);
    case K_Q5_0: return sizeof(tf_block_q5_0);
    case K_IQ4_NL: return sizeof(tf_block_iq4_nl);
    default: return sizeof(tf_block_q5_1);
    }
}
/* Bytes of a group of 16 blocks (IQ4_XS, Q4_K: two super-blocks). */
TF_AI int pk_group_bytes(int kind) {
    if (kind == K_PK_Q4_K) return 2 * (int)sizeof(tf_block_q4_k);
    if (kind == K_PK_Q5_K) return 2 * (int)sizeof(tf_block_q5_k);
    if (kind == K_PK_Q6_K) return 2 * (int)sizeof(tf_block_q6_k);
    if (kind == K_PK_Q3_K) return 2 * (int)sizeof(tf_block_q3_k);
    if (kind == K_PK_Q2_K) return 2 * (int)sizeof(tf_block_q2_k);
    return kind == K_IQ4_XS ? 2 * (int)sizeof(tf_block_iq4_xs) : TF_PACK_GROUP_BLOCKS * pk_block_bytes(kind);
}
TF_AI int pk_qs_offset(int kind) {
    switch (kind) {
    case K_IQ4_XS: return 0;
    case K_Q8_0: case K_Q4_0: case K_IQ4_NL: return 2;
    case K_Q4_1: return 4;
    case K_Q5_0: return 6;
    default: return 8;
    }
}
TF_AI int pk_qh_offset(int kind) { return kind == K_Q5_0 ? 2 : 4; }
#define PK_IS_Q5(kind) ((kind) == K_Q5_0 || (kind) == K_Q5_1 || (kind) == K_PK_Q5_K)
/* Formats whose ex term is the int32 start value of the block sums. */
#define PK_INT_EX(kind) ((kind) == K_Q8_0 || (kind) == K_Q4_0 || (kind) == K_Q5_0 || K0_IS_IQ4(kind))

/* 16 bytes at p, p + stride, p + 2 stride, p + 3 stride as the four 128-bit
 * chunks of a vector. */
TF_AI __m512i load_4x16(const char *p, size_t stride) {
    __m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p));
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + stride)), 1);
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + 2 * stride)), 2);
    return _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + 3 * stride)), 3);
}

/* In every 128-bit chunk c, the 4 x 4 dword transpose of x[0..3]: dword j of
 * chunk c of x[k] (a block 4 k + c) moves to lane 4 c + k of y[j]. */
TF_AI void transpose_4x4_dwords(const __m512i x[4], __m512i y[4]) {
    __m512i t0 = _mm512_unpacklo_epi32(x[0], x[1]), t1 = _mm512_unpackhi_epi32(x[0], x[1]);
    __m512i t2 = _mm512_unpacklo_epi32(x[2], x[3]), t3 = _mm512_unpackhi_epi32(x[2], x[3]);
    y[0] = _mm512_unpacklo_epi64(t0, t2);
    y[1] = _mm512_unpackhi_epi64(t0, t2);
    y[2] = _mm512_unpacklo_epi64(t1, t3);
    y[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* The 32 byte quants of 16 blocks of bs bytes (quants at byte qoff) in lanes:
 * bytes 4 L .. 4 L + 3 of q[v] are quants 4 v .. 4 v + 3 of block
 * tf_pack_lane_block(L). Blocks 4 k .. 4 k + 3 are loaded as two vectors of
 * two whole blocks, split into their first and second 16 quants (x: quants
 * 0..15, h: 16..31), and each set transposed. */
TF_AI void pk_group_quants32(const char *blocks, int bs, int qoff, __m512i q[8]) {
    __m512i x[4], h[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const char *b = blocks + 4 * k * bs + qoff;
        __m512i p01 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b)),
                                         _mm256_loadu_si256((const __m256i *)(b + bs)), 1);
        __m512i p23 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b + 2 * bs))),
                                         _mm256_loadu_si256((const __m256i *)(b + 3 * bs)), 1);
        x[k] = _mm512_shuffle_i64x2(p01, p23, _MM_SHUFFLE(2, 0, 2, 0));
        h[k] = _mm512_shuffle_i64x2(p01, p23, _MM_SHUFFLE(3, 1, 3, 1));
    }
    transpose_4x4_dwords(x, q);
    transpose_4x4_dwords(h, q + 4);
}

/* Byte offsets of the blocks of a group in lane order (for gathers). */
TF_AI __m512i pk_lane_offsets(int kind, int extra) {
    const __m512i blk = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_add_epi32(_mm512_mullo_epi32(blk, _mm512_set1_epi32(pk_block_bytes(kind))),
                            _mm512_set1_epi32(extra));
}

/* The 16-bit words at byte `off` of the 16 blocks of a group, in lane order
 * (word L from block tf_pack_lane_block(L)): the group is loaded as whole
 * vectors (the last one masked to the group's end) and each pair of vectors
 * gives its blocks' words through one two-table permute; cheaper than a
 * gather, and the loads hit the lines the quants come from. */
TF_AI __m256i pk_group_words(int kind, const char *blocks, int off) {
    const int bs = pk_block_bytes(kind), nbytes = 16 * bs, nz = (nbytes + 63) / 64;
    __m512i z[10];
#pragma GCC unroll 10
    for (int i = 0; i < nz; i++)
        z[i] = 64 * (i + 1) <= nbytes ? _mm512_loadu_si512(blocks + 64 * i)
                                      : _mm512_maskz_loadu_epi8((__mmask64)((1ull << (nbytes - 64 * i)) - 1),
                                                                blocks + 64 * i);
    if (nz % 2) z[nz] = _mm512_setzero_si512();
    __m512i r = _mm512_setzero_si512();
#pragma GCC unroll 5
    for (int p = 0; p < (nz + 1) / 2; p++) {
        uint16_t idx[32] = {0};
        __mmask32 m = 0;
        for (int lane = 0; lane < 16; lane++) {
            int pos = (bs * tf_pack_lane_block(lane) + off) / 2;
            if (pos / 64 == p) {
                idx[lane] = (uint16_t)(pos % 64);
                m |= 1u << lane;
            }
        }
        __m512i perm = _mm512_permutex2var_epi16(z[2 * p], _mm512_loadu_si512(idx), z[2 * p + 1]);
        r = _mm512_mask_mov_epi16(r, m, perm);
    }
    return _mm512_castsi512_si256(r);
}

/* IQ4_XS: the scales d (ls - 32) of the 16 sub-blocks of two super-blocks
 * whose first 8 bytes (d, scales_h, scales_l) are at h0 and h1, in lane
 * order (lane L: sub-block tf_pack_lane_block(L)). */
TF_AI __m512 pk_iq4xs_scales(const char *h0, const char *h1) {
    uint32_t l0, l1;
    uint16_t d0, d1, sh0, sh1;
    memcpy(&d0, h0 + offsetof(tf_block_iq4_xs, d), 2);
    memcpy(&d1, h1 + offsetof(tf_block_iq4_xs, d), 2);
    memcpy(&sh0, h0 + offsetof(tf_block_iq4_xs, scales_h), 2);
    memcpy(&sh1, h1 + offsetof(tf_block_iq4_xs, scales_h), 2);
    memcpy(&l0, h0 + offsetof(tf_block_iq4_xs, scales_l), 4);
    memcpy(&l1, h1 + offsetof(tf_block_iq4_xs, scales_l), 4);
    /* lanes 0..7: sub-blocks 0..7 of b[0], lanes 8..15: of b[1] */
    const __m512i sub = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
    __m512i lo = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32((int)l0), _mm512_set1_epi32((int)l1));
    __m512i hi = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(sh0), _mm512_set1_epi32(sh1));
    lo = _mm512_and_si512(_mm512_srlv_epi32(lo, _mm512_slli_epi32(sub, 2)), _mm512_set1_epi32(0xF));
    hi = _mm512_and_si512(_mm512_srlv_epi32(hi, _mm512_slli_epi32(sub, 1)), _mm512_set1_epi32(3));
    __m512i ls = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
    __m512 d = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(f16(d0)), _mm512_set1_ps(f16(d1)));
    const __m512i lane_block = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(lane_block, _mm512_mul_ps(_mm512_cvtepi32_ps(ls), d));
}

/* Q4_K, Q5_K: the scales d sc and offsets -(dmin m) of the 16 sub-blocks of a
 * packed record's group, from its fields at f (24 bytes of 6-bit fields, then
 * d, dmin of each super-block; quant.h), already in lane order; the products
 * are exact, as tf_ref_packed_dot's. The fields: each 32-bit lane of a
 * 256-bit vector takes the three bytes [b0 b1 b2] of four fields as bytes
 * [b1 b0 b2 b1], which puts the fields at bits 10..15 and 4..9 of its low
 * 16-bit half and 6..11 and 0..5 of its high half; masked, an unsigned high
 * multiply moves the first and third down to bytes 0 and 2, a low multiply
 * the second and fourth up to bytes 1 and 3, and an OR joins them: byte i of
 * the vector is field i. */
TF_AI void pk_q4k_scales(const char *f, __m512 *d, __m512 *m) {
    __m256i x = _mm256_loadu_si256((const __m256i *)f); /* the 24 field bytes, then the 8 of d, dmin */
    x = _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 1, 2, 2, 3, 4, 5, 5));
    x = _mm256_shuffle_epi8(x, _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10, 1, 0, 2, 1, 4, 3, 5,
                                                4, 7, 6, 8, 7, 10, 9, 11, 10));
    const __m256i hi = _mm256_mulhi_epu16(_mm256_and_si256(x, _mm256_set1_epi32(0x0fc0fc00)),
                                          _mm256_set1_epi32(0x04000040));
    const __m256i lo = _mm256_mullo_epi16(_mm256_and_si256(x, _mm256_set1_epi32(0x003f03f0)),
                                          _mm256_set1_epi32(0x01000010));
    const __m256i v = _mm256_or_si256(hi, lo); /* bytes 0..15: the scales, 16..31: the mins */
    const __m512i sc = _mm512_cvtepu8_epi32(_mm256_castsi256_si128(v));
    const __m512i mn = _mm512_cvtepu8_epi32(_mm256_extracti128_si256(v, 1));
    /* d0, dmin0, d1, dmin1 in every 128-bit chunk; lane L's super-block is the second where L % 4 >= 2 */
    const __m512 dd = _mm512_broadcast_f32x4(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(f + 24))));
    const __m512i id = _mm512_setr_epi32(0, 0, 2, 2, 0, 0, 2, 2, 0, 0, 2, 2, 0, 0, 2, 2);
    *d = _mm512_mul_ps(_mm512_permutexvar_ps(id, dd), _mm512_cvtepi32_ps(sc));
    /* -(dmin m): the sign flip is exact */
    __m512 dm = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_add_epi32(id, _mm512_set1_epi32(1)), dd), _mm512_cvtepi32_ps(mn));
    *m = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(dm), _mm512_set1_epi32((int)0x80000000u)));
}

/* One weight row's group (or tail pair), ready for the tokens. */
typedef struct {
    __m512i q[8];
    __m512 d, m;
    __m512i sc0, sc1; /* Q6_K, Q3_K, Q2_K: the scales of the lanes' two halves */
    __m512i mn;       /* Q2_K: the mins of the two halves as int16, the first in the low bits */
} pk_wgroup;

/* The nibbles of a 4-bit group's lane vector v made the kernel's u8 operand:
 * IQ4 indices to V + 128; for Q5, bit 4 of quant 4 v + i (bit 4 v + i of the
 * lane's block qh, in lane order in qh) to bit 4 of byte i of its lane, by a
 * 16-entry table of 4-bit patterns. */
TF_AI __m512i pk_finish_vec(int kind, __m512i y, int v, __m512i qh) {
    if (K0_IS_IQ4(kind)) y = _mm512_shuffle_epi8(iq4_table(128), y);
    if (PK_IS_Q5(kind)) {
        const __m512i spread = _mm512_setr_epi32(
            0x00000000, 0x00000010, 0x00001000, 0x00001010, 0x00100000, 0x00100010, 0x00101000, 0x00101010,
            0x10000000, 0x10000010, 0x10001000, 0x10001010, 0x10100000, 0x10100010, 0x10101000, 0x10101010);
        y = _mm512_or_si512(y, _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 4 * v), spread));
    }
    return y;
}

/* pk_finish_vec for the 8 vectors of a group. */
TF_AI void pk_finish_quants(int kind, pk_wgroup *wg, __m512i qh) {
#pragma GCC unroll 8
    for (int v = 0; v < 8; v++) wg->q[v] = pk_finish_vec(kind, wg->q[v], v, qh);
}

TF_AI void pk_load_group_w(int kind, const char *p, pk_wgroup *wg);

/* Group of 16 blocks starting at `blocks`. */
TF_AI void pk_load_group(int kind, const char *blocks, pk_wgroup *wg) {
    const int bs = pk_block_bytes(kind), qs = pk_qs_offset(kind);
    __m512i x[4];
    if (PK_IS_KQ(kind) || PK_HALVES(kind)) {
        /* the file's layout is the rare case (the CPU backend packs the K-quants
         * at load): rearranged into a record here by the scalar packer */
        _Alignas(64) char rec[2 * sizeof(tf_block_q6_k)];
        tf_weight_pack_row(kind == K_PK_Q6_K   ? TF_DTYPE_Q6_K
                           : kind == K_PK_Q3_K ? TF_DTYPE_Q3_K
                           : kind == K_PK_Q2_K ? TF_DTYPE_Q2_K
                           : kind == K_PK_Q5_K ? TF_DTYPE_Q5_K
                                               : TF_DTYPE_Q4_K,
                           blocks, rec, 2 * TF_QK_K);
        pk_load_group_w(kind, rec, wg);
        return;
    }
    if (kind == K_Q8_0) {
        pk_group_quants32(blocks, bs, qs, wg->q);
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) wg->q[v] = _mm512_xor_si512(wg->q[v], _mm512_set1_epi8((char)0x80));
    } else {
        __m512i y[4];
        /* IQ4_XS: blocks 4 k .. 4 k + 3 are sub-blocks 4 (k % 2) .. of super-block k / 2, 16 bytes apart */
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            x[k] = kind == K_IQ4_XS ? load_4x16(blocks + (k / 2) * (int)sizeof(tf_block_iq4_xs) +
                                                     (int)offsetof(tf_block_iq4_xs, qs) + 64 * (k % 2), 16)
                                     : load_4x16(blocks + 4 * k * bs + qs, bs);
        transpose_4x4_dwords(x, y);
        const __m512i low4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            wg->q[j] = _mm512_and_si512(y[j], low4);
            wg->q[j + 4] = _mm512_and_si512(_mm512_srli_epi16(y[j], 4), low4);
        }
        pk_finish_quants(kind, wg,
                         PK_IS_Q5(kind) ? _mm512_i32gather_epi32(pk_lane_offsets(kind, pk_qh_offset(kind)), blocks, 1)
                                        : _mm512_setzero_si512());
    }
    /* d (and m) of each block: the f16 words at the block's start */
    wg->d = kind == K_IQ4_XS ? pk_iq4xs_scales(blocks, blocks + sizeof(tf_block_iq4_xs))
                              : _mm512_cvtph_ps(pk_group_words(kind, blocks, 0));
    wg->m = K0_HAS_MIN(kind) ? _mm512_cvtph_ps(pk_group_words(kind, blocks, 2)) : _mm512_setzero_ps();
}

/* A group record of the packed weight layout (quant.h) at p, piece by piece:
 * the fifth bits of a Q5 record's lanes, */
TF_AI __m512i pk_w_qh(int kind, const char *p) {
    if (!PK_IS_Q5(kind)) return _mm512_setzero_si512();
    return _mm512_loadu_si512(p + (kind == K_PK_Q5_K ? 256 : K0_HAS_MIN(kind) ? 320 : 288));
}

/* its vector v as the kernel's u8 operand (the nibbles of y[v % 4], the high
 * 2 bits of Q6_K's quant 4 v + i at bits 2 (v % 4) of byte i of H[v / 4], the
 * fifth bits of Q5; Q3_K's low 2 bits at bits 2 (v % 4) of byte i of L[v / 4],
 * its third bit at bit v of byte i of H; Q2_K's 2 bits as Q3_K's low ones), */
TF_AI __m512i pk_w_vec(int kind, const char *p, int v, __m512i qh) {
    if (kind == K_Q8_0) return _mm512_loadu_si512(p + 64 * v);
    if (kind == K_PK_Q2_K)
        return _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(p + 64 * (v / 4)), 2 * (v % 4)),
                                _mm512_set1_epi8(3));
    /* The high bits below are moved to their place by 16-bit shifts and taken
     * by a mask in the OR (one vpternlogd: a | (b & mask)); a shift's bits
     * carried across a byte boundary land outside the mask. */
    if (kind == K_PK_Q3_K) {
        const __m512i l = _mm512_loadu_si512(p + 64 * (v / 4)), h = _mm512_loadu_si512(p + 128);
        const __m512i lo = _mm512_and_si512(_mm512_srli_epi16(l, 2 * (v % 4)), _mm512_set1_epi8(3));
        /* bit v of each byte of H to bit 2 */
        const __m512i hs = v < 2 ? _mm512_slli_epi16(h, 2 - v) : v == 2 ? h : _mm512_srli_epi16(h, v - 2);
        return _mm512_ternarylogic_epi32(lo, hs, _mm512_set1_epi8(4), 0xF8);
    }
    __m512i y = _mm512_loadu_si512(p + 64 * (v & 3));
    if (v >= 4) y = _mm512_srli_epi16(y, 4);
    y = _mm512_and_si512(y, _mm512_set1_epi8(0x0F));
    if (kind == K_PK_Q6_K) {
        /* bits 2 (v % 4), + 1 of each byte of H[v / 4] to bits 4, 5 */
        const __m512i h = _mm512_loadu_si512(p + 256 + 64 * (v / 4));
        const int m = v % 4;
        const __m512i hs = m < 2 ? _mm512_slli_epi16(h, 4 - 2 * m) : m == 2 ? h : _mm512_srli_epi16(h, 2);
        return _mm512_ternarylogic_epi32(y, hs, _mm512_set1_epi8(0x30), 0xF8);
    }
    return pk_finish_vec(kind, y, v, qh);
}

/* its scales d and offsets m in lane order (Q6_K: d of the lane's super-block), */
TF_AI void pk_w_scales(int kind, const char *p, __m512 *d, __m512 *m) {
    if (kind == K_Q8_0) {
        *d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 512)));
        *m = _mm512_setzero_ps();
    } else if (PK_IS_KQ(kind)) {
        pk_q4k_scales(p + (kind == K_PK_Q5_K ? 320 : 256), d, m);
    } else if (kind == K_IQ4_XS) {
        *d = pk_iq4xs_scales(p + 256, p + 264);
        *m = _mm512_setzero_ps();
    } else if (kind == K_PK_Q2_K) {
        uint16_t dm[4]; /* d, dmin of each super-block */
        memcpy(dm, p + 160, 8);
        *d = _mm512_mask_blend_ps(0xCCCC, _mm512_set1_ps(f16(dm[0])), _mm512_set1_ps(f16(dm[2])));
        *m = _mm512_mask_blend_ps(0xCCCC, _mm512_set1_ps(-f16(dm[1])), _mm512_set1_ps(-f16(dm[3])));
    } else if (PK_HALVES(kind)) {
        uint16_t d2[2];
        memcpy(d2, p + (kind == K_PK_Q3_K ? 216 : 416), 4);
        /* lane L's super-block is the second where L % 4 >= 2 */
        *d = _mm512_mask_blend_ps(0xCCCC, _mm512_set1_ps(f16(d2[0])), _mm512_set1_ps(f16(d2[1])));
        *m = _mm512_setzero_ps();
    } else {
        *d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 256)));
        *m = K0_HAS_MIN(kind) ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 288))) : _mm512_setzero_ps();
    }
}

/* and the scales of the lanes' first (half 0) or second halves of Q6_K, Q3_K
 * or Q2_K as int32 (Q6_K: int8 pairs per lane, sign-extended; Q3_K: the low nibbles
 * of byte L, the high 2 bits in nibble L of the next 8 bytes, less 32; Q2_K:
 * the low nibbles of bytes 2 L + half), */
TF_AI __m512i pk_w_half_scales(int kind, const char *p, int half) {
    if (kind == K_PK_Q2_K) {
        const __m512i x = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(p + 128)));
        return _mm512_and_si512(half ? _mm512_srli_epi32(x, 16) : x, _mm512_set1_epi32(0xF));
    }
    if (kind == K_PK_Q3_K) {
        const __m128i lo = _mm_loadu_si128((const __m128i *)(p + 192));
        const __m128i h8 = _mm_loadl_epi64((const __m128i *)(p + 208)), m4 = _mm_set1_epi8(0x0F);
        /* byte L: nibble L of the 8 bytes */
        const __m128i hn = _mm_unpacklo_epi8(_mm_and_si128(h8, m4), _mm_and_si128(_mm_srli_epi16(h8, 4), m4));
        const __m512i l32 = _mm512_cvtepu8_epi32(lo), h32 = _mm512_cvtepu8_epi32(hn);
        const __m512i low = half ? _mm512_srli_epi32(l32, 4) : _mm512_and_si512(l32, _mm512_set1_epi32(0xF));
        const __m512i high = _mm512_and_si512(half ? _mm512_srli_epi32(h32, 2) : h32, _mm512_set1_epi32(3));
        return _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)), _mm512_set1_epi32(32));
    }
    const __m512i s16 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(p + 384)));
    return half ? _mm512_srai_epi32(s16, 16) : _mm512_srai_epi32(_mm512_slli_epi32(s16, 16), 16);
}

/* and Q2_K's mins of the lanes' two halves: int16 pairs (the high nibbles of
 * bytes 2 L, 2 L + 1), the layout of the activations' half sums in ex. */
TF_AI __m512i pk_w_q2k_mins(const char *p) {
    const __m512i x = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(p + 128)));
    return _mm512_and_si512(_mm512_srli_epi16(x, 4), _mm512_set1_epi16(0xF));
}

/* The whole record at p: the vectors of pk_load_group without the
 * rearrangement. */
TF_AI void pk_load_group_w(int kind, const char *p, pk_wgroup *wg) {
    const __m512i qh = pk_w_qh(kind, p);
#pragma GCC unroll 8
    for (int v = 0; v < 8; v++) wg->q[v] = pk_w_vec(kind, p, v, qh);
    pk_w_scales(kind, p, &wg->d, &wg->m);
    if (PK_HALVES(kind)) {
        wg->sc0 = pk_w_half_scales(kind, p, 0);
        wg->sc1 = pk_w_half_scales(kind, p, 1);
    }
    wg->mn = kind == K_PK_Q2_K ? pk_w_q2k_mins(p) : _mm512_setzero_si512();
}

/* The 32 quants of one block (NULL: absent, zeros) as u8 in element order
 * (Q8_0 as w + 128, IQ4 as V + 128). */
TF_AI __m256i pk_block_quants(int kind, const char *block) {
    if (!block) return kind == K_Q8_0 ? _mm256_set1_epi8((char)0x80) : _mm256_setzero_si256();
    const char *qs = block + pk_qs_offset(kind);
    if (kind == K_Q8_0)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)qs), _mm256_set1_epi8((char)0x80));
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m256i y = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    y = _mm256_and_si256(y, _mm256_set1_epi8(0x0F));
    if (K0_IS_IQ4(kind)) y = _mm256_shuffle_epi8(_mm512_castsi512_si256(iq4_table(128)), y);
    if (PK_IS_Q5(kind)) {
        uint32_t h;
        memcpy(&h, block + pk_qh_offset(kind), 4);
        y = _mm256_or_si256(y, _mm256_maskz_mov_epi8(h, _mm256_set1_epi8(0x10)));
    }
    return y;
}

/* Tail pair: block b of a row and, if two, the next one. */
TF_AI void pk_load_pair(int kind, const char *row, int64_t b, int two, pk_wgroup *wg) {
    float d[2] = {0.0f, 0.0f}, m[2] = {0.0f, 0.0f};
    if (PK_HALVES(kind)) { /* a tail super-block, in the file's layout: by the scalar helpers */
        _Alignas(64) uint8_t u8[64] = {0};
        _Alignas(64) int32_t scv[16] = {0}, mnv[16] = {0};
        for (int h = 0; h < 1 + two; h++) {
            const int j = (int)((b + h) % 8);
            if (kind == K_PK_Q2_K) { /* lane l: its half's scale, and its min in the low 16 bits */
                const tf_block_q2_k *x = (const tf_block_q2_k *)row + (b + h) / 8;
                d[h] = f16(x->d);
                m[h] = -f16(x->dmin);
                for (int k = 0; k < 32; k++) u8[32 * h + k] = (uint8_t)tf_q2bits_get(x->qs, 32 * j + k);
                for (int l = 0; l < 8; l++) {
                    scv[8 * h + l] = x->scales[2 * j + l / 4] & 0xF;
                    mnv[8 * h + l] = x->scales[2 * j + l / 4] >> 4;
                }
                continue;
            }
            if (kind == K_PK_Q3_K) {
                const tf_block_q3_k *x = (const tf_block_q3_k *)row + (b + h) / 8;
                d[h] = f16(x->d);
                for (int k = 0; k < 32; k++) u8[32 * h + k] = (uint8_t)tf_q3k_get(x, 32 * j + k);
                for (int l = 0; l < 8; l++) scv[8 * h + l] = tf_q3k_scale(x->scales, 2 * j + l / 4) - 32;
                continue;
            }
            const tf_block_q6_k *x = (const tf_block_q6_k *)row + (b + h) / 8;
            d[h] = f16(x->d);
            for (int k = 0; k < 32; k++) u8[32 * h + k] = (uint8_t)tf_q6k_get(x, 32 * j + k);
            for (int l = 0; l < 8; l++) scv[8 * h + l] = x->scales[2 * j + l / 4]; /* lane l: quants 4 l .. */
        }
        wg->q[0] = _mm512_load_si512(u8);
        wg->d = block_scales_f32(K_Q8_0, _mm_setr_ps(d[0], d[1], 0.0f, 0.0f));
        wg->m = block_scales_f32(K_Q8_0, _mm_setr_ps(m[0], m[1], 0.0f, 0.0f));
        wg->sc0 = _mm512_load_si512(scv);
        wg->sc1 = _mm512_setzero_si512();
        wg->mn = _mm512_load_si512(mnv);
        return;
    }
    __m256i q[2];
    for (int h = 0; h < 2; h++) {
        const char *blk = NULL;
        if ((h == 0 || two) && PK_IS_KQ(kind)) {
            /* Q4_K and Q5_K share d, dmin and the scales at the block's start */
            const int q5 = kind == K_PK_Q5_K, j = (int)((b + h) % 8);
            const char *x = row + (b + h) / 8 * (q5 ? sizeof(tf_block_q5_k) : sizeof(tf_block_q4_k));
            uint16_t dm[2];
            uint64_t sc, mn;
            memcpy(dm, x, 4);
            q4k_unpack_scales((const uint8_t *)x + offsetof(tf_block_q4_k, scales), &sc, &mn);
            d[h] = f16(dm[0]) * (float)(uint8_t)(sc >> 8 * j);
            m[h] = -(f16(dm[1]) * (float)(uint8_t)(mn >> 8 * j));
            const char *qs = x + (q5 ? offsetof(tf_block_q5_k, qs) : offsetof(tf_block_q4_k, qs)) + 32 * (j / 2);
            __m256i y = _mm256_loadu_si256((const __m256i *)qs);
            q[h] = _mm256_and_si256(_mm256_srli_epi16(y, 4 * (j % 2)), _mm256_set1_epi8(0x0F));
            if (q5) { /* bit j of qh byte k: bit 4 of quant k */
                __m256i hb = _mm256_loadu_si256((const __m256i *)(x + offsetof(tf_block_q5_k, qh)));
                hb = _mm256_and_si256(_mm256_srli_epi16(hb, j), _mm256_set1_epi8(1));
                q[h] = _mm256_or_si256(q[h], _mm256_slli_epi16(hb, 4));
            }
            continue;
        }
        if (h == 0 || two) {
            if (kind == K_IQ4_XS) blk = (const char *)iq4xs_sub(row, b + h, &d[h]);
            else {
                uint16_t w16[2];
                blk = row + (b + h) * pk_block_bytes(kind);
                memcpy(w16, blk, 4);
                d[h] = f16(w16[0]);
                if (K0_HAS_MIN(kind)) m[h] = f16(w16[1]);
            }
        }
        q[h] = pk_block_quants(kind, blk);
    }
    wg->q[0] = _mm512_inserti64x4(_mm512_castsi256_si512(q[0]), q[1], 1);
    /* lanes 0..7: block 0, 8..15: block 1 */
    wg->d = block_scales_f32(K_Q8_0, _mm_setr_ps(d[0], d[1], 0.0f, 0.0f));
    wg->m = block_scales_f32(K_Q8_0, _mm_setr_ps(m[0], m[1], 0.0f, 0.0f));
}

/* acc += one group (nv = 8 vectors) or tail pair (nv = 1) of one token,
 * whose packed vectors start at ap (quants, then d, then ex). Two integer
 * chains when few tokens share the weights (latency); integer sums are exact,
 * so the split changes no result. */
TF_AI __m512 pk_token_step(int kind, int nv, int chains, const pk_wgroup *wg, const char *ap, __m512 acc) {
    const char *ad = ap + 64 * nv, *ex = ad + 64;
    if (PK_HALVES(kind)) { /* tf_ref_packed_dot's halves_isum, lane by lane */
        __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
        if (nv == 8) {
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) {
                lo = dpbusd_vnni_mem(lo, wg->q[v], ap + 64 * v);
                hi = dpbusd_vnni_mem(hi, wg->q[v + 4], ap + 64 * (v + 4));
            }
        } else {
            lo = dpbusd_vnni_mem(lo, wg->q[0], ap);
        }
        const __m512i e = _mm512_loadu_si512(ex);
        if (kind != K_PK_Q2_K) {
            lo = _mm512_sub_epi32(lo, _mm512_slli_epi32(_mm512_srai_epi32(_mm512_slli_epi32(e, 16), 16),
                                                        PK_HALF_SHIFT(kind)));
            hi = _mm512_sub_epi32(hi, _mm512_slli_epi32(_mm512_srai_epi32(e, 16), PK_HALF_SHIFT(kind)));
        }
        const __m512i s = _mm512_add_epi32(_mm512_mullo_epi32(lo, wg->sc0), _mm512_mullo_epi32(hi, wg->sc1));
        const __m512 a_d = _mm512_loadu_ps((const float *)ad);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wg->d, a_d), acc);
        if (kind == K_PK_Q2_K) /* the mins: mn0 e_lo + mn1 e_hi, exact, times -dmin d_a */
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(e, wg->mn)), _mm512_mul_ps(wg->m, a_d), acc);
        return acc;
    }
    __m512i s0 = PK_INT_EX(kind) ? _mm512_loadu_si512(ex) : _mm512_setzero_si512();
    if (nv == 8 && chains == 2) {
        __m512i s1 = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int v = 0; v < 8; v += 2) {
            s0 = dpbusd_vnni_mem(s0, wg->q[v], ap + 64 * v);
            s1 = dpbusd_vnni_mem(s1, wg->q[v + 1], ap + 64 * (v + 1));
        }
        s0 = _mm512_add_epi32(s0, s1);
    } else {
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) s0 = dpbusd_vnni_mem(s0, wg->q[v], ap + 64 * v);
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), _mm512_mul_ps(wg->d, _mm512_loadu_ps((const float *)ad)), acc);
    if (PK_HAS_MIN(kind)) acc = _mm512_fmadd_ps(wg->m, _mm512_loadu_ps((const float *)ex), acc);
    return acc;
}

/* One weight row (wpk: in the packed weight layout) against T tokens of
 * packed activations (as bytes apart). */
TF_AI void pk_row_kernel(int kind, int wpk, int T, int64_t n, const char *row, const char *a, size_t as, float *out,
                         int64_t ldo, const char *pf) {
    const int gbytes = pk_group_bytes(kind), chains = T <= 2 ? 2 : 1;
    int64_t nb = n / 32, n_groups = nb / TF_PACK_GROUP_BLOCKS;
    __m512 acc[TF_PACK_TOKS_MAX];
#pragma GCC unroll 16
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    pk_wgroup wg;
    for (int64_t g = 0; g < n_groups; g++) {
        if (pf) /* a row two tiles on: its lines of this group, into L2 (pk_tile) */
            for (int64_t b = g * gbytes / 64 * 64; b < (g + 1) * gbytes; b += 64) _mm_prefetch(pf + b, _MM_HINT_T1);
        if (wpk) pk_load_group_w(kind, row + g * gbytes, &wg);
        else pk_load_group(kind, row + g * gbytes, &wg);
        const char *ap = a + g * TF_PACK_GROUP_BYTES;
#pragma GCC unroll 16
        for (int t = 0; t < T; t++) acc[t] = pk_token_step(kind, 8, chains, &wg, ap + t * as, acc[t]);
    }
    const char *ap = a + n_groups * TF_PACK_GROUP_BYTES;
    for (int64_t b = n_groups * TF_PACK_GROUP_BLOCKS; b < nb; b += 2, ap += TF_PACK_PAIR_BYTES) {
        pk_load_pair(kind, row, b, b + 1 < nb, &wg);
#pragma GCC unroll 16
        for (int t = 0; t < T; t++) acc[t] = pk_token_step(kind, 1, chains, &wg, ap + t * as, acc[t]);
    }
    int t = 0;
#pragma GCC unroll 4
    for (; t + 4 <= T; t += 4) {
        const __m128 s4 = hsum4(acc[t], acc[t + 1], acc[t + 2], acc[t + 3]);
        _mm_store_ss(out + t * ldo, s4);
        _mm_store_ss(out + (t + 1) * ldo, _mm_movehdup_ps(s4));
        _mm_store_ss(out + (t + 2) * ldo, _mm_movehl_ps(s4, s4));
        _mm_store_ss(out + (t + 3) * ldo, _mm_shuffle_ps(s4, s4, 3));
    }
#pragma GCC unroll 3
    for (; t < T; t++) out[t * ldo] = hsum_tree(acc[t]);
}

/* ---- Several tokens over packed weight rows: register tiles ------------------- */

/* Where the tile's activations exceed L1 (min(nt, 16) x as >
 * PK_RT_MIN_ACT_BYTES: prefill tiles at 4,096 columns, verification passes at
 * the 14,336 columns of an 8B model's down projection), pk_row_kernel, which
 * takes one row against all the tile's tokens over the whole row, reads
 * every activation vector from L2 once per product and runs at a quarter of
 * the VNNI unit's rate. There a tile is taken two rows by up to PK_RT(kind)
 * tokens at a time: per vector index v of a group the two rows' weight
 * vectors are made once and each token's activation vector loaded once for
 * both rows, so 2 T integer chains are in flight and every load serves two
 * products. The float accumulators of the 2 T (row, token) pairs stay in
 * registers across a chunk of groups (PK_CHUNK_BYTES of one token tile's
 * activations, read from L1 by every row pair of the tile) and in memory
 * between chunks. Each (row, token) takes the same steps as in
 * pk_row_kernel (the block sums, exact in int32, then the same float
 * operations per group in group order, then the tail pairs and hsum_tree):
 * the same bits for any tile shape and either path. Below the bound
 * pk_row_kernel is as fast or faster (its weights stay in registers for all
 * the tokens). */

/* Tokens per register tile: Q5_x's fifth bits take three more registers,
 * Q6_K's and Q3_K's two sums per lane twice the integer accumulators. */
#define PK_RT(kind) (PK_IS_Q5(kind) || PK_HALVES(kind) ? 4 : 6)
/* Activation bytes of one chunk of groups (per token tile). */
#define PK_CHUNK_BYTES (24 * 1024)
/* Tile activations above which the register tiles run (about L1). */
#define PK_RT_MIN_ACT_BYTES (48 * 1024)

/* What the register tiles expand once per chunk of a tile call (pk_expand)
 * instead of making it again for every token tile: the u8 vectors of Q5_K
 * (its fifth bits take a permute per vector) and of Q6_K, Q3_K and Q2_K (high
 * bits or 2-bit fields), and the scales of those and of the kinds whose
 * scales are unpacked from 6-bit or 4-bit fields (Q4_K, IQ4_XS). Measured
 * per kind with dev/packed_tile_lab.c (docs/BENCHMARKS.md): expanding the
 * vectors of Q4_0 and Q4_1 was slower (a store and a load of every vector
 * against an AND and a shift), of Q5_0 and Q5_1 even. */
#define PK_XQ(kind) ((kind) == K_PK_Q5_K || PK_HALVES(kind))
#define PK_XS(kind) (PK_XQ(kind) || (kind) == K_PK_Q4_K || (kind) == K_IQ4_XS)
/* An expanded group: its 8 u8 vectors as pk_w_vec makes them (PK_XQ), then
 * d and m as pk_w_scales makes them, then for Q6_K, Q3_K and Q2_K the int32
 * scales of the lanes' two halves and Q2_K's mins (pk_w_half_scales,
 * pk_w_q2k_mins): the same values, so the same bits. */
#define PK_X_SCALES(kind) (PK_XQ(kind) ? 512 : 0)
#define PK_X_GROUP(kind) (PK_X_SCALES(kind) + 128 + (PK_HALVES(kind) ? 192 : 0))
/* Bound of the expanded rows of one chunk (on the stack). */
#define PK_X_BYTES (40 * 1024)

/* Rows [0, nr) of the packed rows w (ws bytes apart), groups [g0, g1),
 * expanded into x: row r's group g at x + ((g1 - g0) r + g - g0) PK_X_GROUP(kind). */
TF_AI void pk_expand(int kind, const char *w, size_t ws, int nr, int64_t g0, int64_t g1, char *x) {
    const int gbytes = pk_group_bytes(kind);
    for (int r = 0; r < nr; r++)
        for (int64_t g = g0; g < g1; g++, x += PK_X_GROUP(kind)) {
            const char *p = w + r * ws + g * gbytes;
            if (PK_XQ(kind)) {
                const __m512i qh = pk_w_qh(kind, p);
#pragma GCC unroll 8
                for (int v = 0; v < 8; v++) _mm512_store_si512(x + 64 * v, pk_w_vec(kind, p, v, qh));
            }
            __m512 d, m;
            pk_w_scales(kind, p, &d, &m);
            _mm512_store_ps(x + PK_X_SCALES(kind), d);
            _mm512_store_ps(x + PK_X_SCALES(kind) + 64, m);
            if (PK_HALVES(kind)) {
                _mm512_store_si512(x + PK_X_SCALES(kind) + 128, pk_w_half_scales(kind, p, 0));
                _mm512_store_si512(x + PK_X_SCALES(kind) + 192, pk_w_half_scales(kind, p, 1));
                _mm512_store_si512(x + PK_X_SCALES(kind) + 256,
                                   kind == K_PK_Q2_K ? pk_w_q2k_mins(p) : _mm512_setzero_si512());
            }
        }
}

/* Rows w0, w1 (packed layout) x T tokens of activations a (as bytes apart),
 * groups [g0, g1): c0[t] and c1[t] (row 0's and row 1's accumulators of
 * token t) updated in place. Where the kind expands (PK_XS), x0 and x1 are
 * the rows' expanded groups (pk_expand; group g0 first). */
TF_AI void pk_rt_groups(int kind, int T, const char *w0, const char *w1, const char *x0, const char *x1,
                        const char *a, size_t as, int64_t g0, int64_t g1, __m512 *c0, __m512 *c1) {
    const int gbytes = pk_group_bytes(kind);
    if (PK_XS(kind)) { /* the expanded groups start at g0 */
        x0 -= g0 * PK_X_GROUP(kind);
        x1 -= g0 * PK_X_GROUP(kind);
    }
    __m512 f0[8], f1[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) f0[t] = c0[t], f1[t] = c1[t];
    for (int64_t g = g0; g < g1; g++) {
        const char *p0 = w0 + g * gbytes, *p1 = w1 + g * gbytes, *ap = a + g * TF_PACK_GROUP_BYTES;
        const char *e0 = PK_XS(kind) ? x0 + g * PK_X_GROUP(kind) : NULL;
        const char *e1 = PK_XS(kind) ? x1 + g * PK_X_GROUP(kind) : NULL;
        __m512i s0[8], s1[8];
        if (PK_HALVES(kind)) {
            /* pk_token_step's Q6_K / Q3_K sums: each lane's first half (v < 4) and second half, less 32 (4)
             * times the activations' half sums, times the halves' scales, in int32 */
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) s0[t] = s1[t] = _mm512_setzero_si512();
            for (int half = 0; half < 2; half++) {
                __m512i h0[8], h1[8];
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) h0[t] = h1[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int v = 4 * half; v < 4 * half + 4; v++) {
                    const __m512i u0 = PK_XQ(kind) ? _mm512_load_si512(e0 + 64 * v)
                                                   : pk_w_vec(kind, p0, v, _mm512_setzero_si512());
                    const __m512i u1 = PK_XQ(kind) ? _mm512_load_si512(e1 + 64 * v)
                                                   : pk_w_vec(kind, p1, v, _mm512_setzero_si512());
#pragma GCC unroll 8
                    for (int t = 0; t < T; t++) {
                        const __m512i x = _mm512_loadu_si512(ap + t * as + 64 * v);
                        h0[t] = dpbusd_vnni(h0[t], u0, x);
                        h1[t] = dpbusd_vnni(h1[t], u1, x);
                    }
                }
                const __m512i sc0 = PK_XS(kind) ? _mm512_load_si512(e0 + PK_X_SCALES(kind) + 128 + 64 * half)
                                                : pk_w_half_scales(kind, p0, half);
                const __m512i sc1 = PK_XS(kind) ? _mm512_load_si512(e1 + PK_X_SCALES(kind) + 128 + 64 * half)
                                                : pk_w_half_scales(kind, p1, half);
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    if (kind == K_PK_Q2_K) { /* no offset */
                        s0[t] = _mm512_add_epi32(s0[t], _mm512_mullo_epi32(h0[t], sc0));
                        s1[t] = _mm512_add_epi32(s1[t], _mm512_mullo_epi32(h1[t], sc1));
                        continue;
                    }
                    const __m512i e = _mm512_loadu_si512(ap + t * as + 576);
                    const __m512i corr = _mm512_slli_epi32(
                        half ? _mm512_srai_epi32(e, 16) : _mm512_srai_epi32(_mm512_slli_epi32(e, 16), 16),
                        PK_HALF_SHIFT(kind));
                    s0[t] = _mm512_add_epi32(s0[t], _mm512_mullo_epi32(_mm512_sub_epi32(h0[t], corr), sc0));
                    s1[t] = _mm512_add_epi32(s1[t], _mm512_mullo_epi32(_mm512_sub_epi32(h1[t], corr), sc1));
                }
            }
        } else {
            const __m512i qh0 = PK_XQ(kind) ? _mm512_setzero_si512() : pk_w_qh(kind, p0);
            const __m512i qh1 = PK_XQ(kind) ? _mm512_setzero_si512() : pk_w_qh(kind, p1);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                s0[t] = PK_INT_EX(kind) ? _mm512_loadu_si512(ap + t * as + 576) : _mm512_setzero_si512();
                s1[t] = s0[t];
            }
#pragma GCC unroll 8
            for (int v = 0; v < 8; v++) {
                const __m512i u0 = PK_XQ(kind) ? _mm512_load_si512(e0 + 64 * v) : pk_w_vec(kind, p0, v, qh0);
                const __m512i u1 = PK_XQ(kind) ? _mm512_load_si512(e1 + 64 * v) : pk_w_vec(kind, p1, v, qh1);
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    const __m512i x = _mm512_loadu_si512(ap + t * as + 64 * v);
                    s0[t] = dpbusd_vnni(s0[t], u0, x);
                    s1[t] = dpbusd_vnni(s1[t], u1, x);
                }
            }
        }
        __m512 d0, m0, d1, m1;
        if (PK_XS(kind)) {
            d0 = _mm512_load_ps(e0 + PK_X_SCALES(kind)), m0 = _mm512_load_ps(e0 + PK_X_SCALES(kind) + 64);
            d1 = _mm512_load_ps(e1 + PK_X_SCALES(kind)), m1 = _mm512_load_ps(e1 + PK_X_SCALES(kind) + 64);
        } else {
            pk_w_scales(kind, p0, &d0, &m0);
            pk_w_scales(kind, p1, &d1, &m1);
        }
        const __m512i mn0 = kind != K_PK_Q2_K ? _mm512_setzero_si512()
                            : PK_XS(kind)      ? _mm512_load_si512(e0 + PK_X_SCALES(kind) + 256)
                                               : pk_w_q2k_mins(p0);
        const __m512i mn1 = kind != K_PK_Q2_K ? _mm512_setzero_si512()
                            : PK_XS(kind)      ? _mm512_load_si512(e1 + PK_X_SCALES(kind) + 256)
                                               : pk_w_q2k_mins(p1);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const __m512 ad = _mm512_loadu_ps((const float *)(ap + t * as + 512));
            f0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0[t]), _mm512_mul_ps(d0, ad), f0[t]);
            f1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1[t]), _mm512_mul_ps(d1, ad), f1[t]);
            if (kind == K_PK_Q2_K) { /* pk_token_step's mins */
                const __m512i e = _mm512_loadu_si512(ap + t * as + 576);
                f0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(e, mn0)), _mm512_mul_ps(m0, ad), f0[t]);
                f1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(e, mn1)), _mm512_mul_ps(m1, ad), f1[t]);
            }
            if (PK_HAS_MIN(kind)) {
                const __m512 ex = _mm512_loadu_ps((const float *)(ap + t * as + 576));
                f0[t] = _mm512_fmadd_ps(m0, ex, f0[t]);
                f1[t] = _mm512_fmadd_ps(m1, ex, f1[t]);
            }
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) c0[t] = f0[t], c1[t] = f1[t];
}

/* The register-tiled product of nr packed rows by nt >= 1 tokens. */
TF_AI void pk_tile_rt(int kind, int64_t n, const char *w, size_t ws, int nr, const char *a, size_t as, int nt,
                      float *out, int64_t ldo) {
    const int RT = PK_RT(kind);
    const int64_t nb = n / 32, n_groups = nb / TF_PACK_GROUP_BLOCKS;
    int64_t chunk = PK_CHUNK_BYTES / ((int64_t)RT * TF_PACK_GROUP_BYTES);
    /* expanded rows: as many groups as fit PK_X_BYTES for all nr rows */
    const int xp = PK_XS(kind);
    if (xp && chunk * nr * PK_X_GROUP(kind) > PK_X_BYTES) chunk = PK_X_BYTES / (nr * PK_X_GROUP(kind));
    if (chunk < 1) chunk = 1;
    _Alignas(64) char xbuf[PK_X_BYTES];
    /* the next tile's rows, as pk_tile requests them for pk_row_kernel; into
     * L2 only for prefill's tiles of TF_PACK_ROWS_MAX rows, which would not
     * fit L1 beside the activations */
    for (int r = 0; r < nr; r++)
        for (size_t b = 0; b < ws; b += 64) {
            if (nr <= 4) _mm_prefetch(w + (nr + r) * ws + b, _MM_HINT_T0);
            else _mm_prefetch(w + (nr + r) * ws + b, _MM_HINT_T1);
        }
    __m512 acc[TF_PACK_ROWS_MAX + 1][TF_WPACK_TOKS_MAX];
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++) acc[r][t] = _mm512_setzero_ps();
    for (int t = 0; t < nt; t++) acc[TF_PACK_ROWS_MAX][t] = _mm512_setzero_ps(); /* the spare row */
    for (int64_t g0 = 0; g0 < n_groups; g0 += chunk) {
        const int64_t g1 = g0 + chunk < n_groups ? g0 + chunk : n_groups;
        if (xp) pk_expand(kind, w, ws, nr, g0, g1, xbuf);
        const size_t xs = (size_t)(g1 - g0) * PK_X_GROUP(kind);
        /* token tiles of near-equal sizes (16 tokens: 6 + 5 + 5, not 6 + 6 + 4) */
        const int n_tt = (nt + RT - 1) / RT;
        for (int i = 0, t0 = 0; i < n_tt; i++) {
            const int T = (nt - t0) / (n_tt - i);
            for (int r = 0; r < nr; r += 2) {
                /* an odd last row pairs with itself; its second results go to the spare row */
                const char *w0 = w + r * ws, *w1 = r + 1 < nr ? w0 + ws : w0;
                const char *x0 = xbuf + r * xs, *x1 = r + 1 < nr ? x0 + xs : x0;
                __m512 *c0 = acc[r] + t0, *c1 = r + 1 < nr ? acc[r + 1] + t0 : acc[TF_PACK_ROWS_MAX] + t0;
                switch (T) {
#define PK_RT_CASE(TT) \
    case TT: pk_rt_groups(kind, TT, w0, w1, x0, x1, a + t0 * as, as, g0, g1, c0, c1); break;
                    PK_RT_CASE(1) PK_RT_CASE(2) PK_RT_CASE(3) PK_RT_CASE(4) PK_RT_CASE(5)
                    default: pk_rt_groups(kind, 6, w0, w1, x0, x1, a + t0 * as, as, g0, g1, c0, c1); break;
#undef PK_RT_CASE
                }
            }
            t0 += T;
        }
    }
    pk_wgroup wg;
    const char *ap = a + n_groups * TF_PACK_GROUP_BYTES;
    for (int64_t b = n_groups * TF_PACK_GROUP_BLOCKS; b < nb; b += 2, ap += TF_PACK_PAIR_BYTES)
        for (int r = 0; r < nr; r++) {
            pk_load_pair(kind, w + r * ws, b, b + 1 < nb, &wg);
            for (int t = 0; t < nt; t++) acc[r][t] = pk_token_step(kind, 1, 1, &wg, ap + t * as, acc[r][t]);
        }
    /* a whole tile's token: its 16 rows' sums at once (hsum4: hsum_tree's additions) */
    const int r_sum = nr == TF_PACK_ROWS_MAX ? nr : 0;
    for (int t = 0; t < nt && r_sum; t++) {
        __m512 v = _mm512_castps128_ps512(hsum4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
        v = _mm512_insertf32x4(v, hsum4(acc[4][t], acc[5][t], acc[6][t], acc[7][t]), 1);
        v = _mm512_insertf32x4(v, hsum4(acc[8][t], acc[9][t], acc[10][t], acc[11][t]), 2);
        v = _mm512_insertf32x4(v, hsum4(acc[12][t], acc[13][t], acc[14][t], acc[15][t]), 3);
        _mm512_storeu_ps(out + t * ldo, v);
    }
    for (int r = r_sum; r < nr; r++)
        for (int t = 0; t < nt; t++) out[t * ldo + r] = hsum_tree(acc[r][t]);
}

/* A row of at most this many bytes is requested in one burst (pk_tile): the
 * line fill buffers of an Intel core (16 on Golden Cove) */
#define PK_PF_BURST_MAX (16 * 64)

/* Up to TF_PACK_TOKS_MAX tokens through the one-row kernel, a row at a time. */
TF_AI void pk_tile_rows(int kind, int wpk, int64_t n, const char *w, size_t ws, int nr, const char *a, size_t as,
                        int nt, float *out, int64_t ldo) {
    for (int r = 0; r < nr; r++) {
        const char *row = w + r * ws;
        float *o = out + r;
        /* the next rows' lines, requested as this row is read. A row of at most 16 lines (the
         * core's line fill buffers) requests the row nr rows on (the next tile's) at once, into
         * L1: with several tokens a row takes long enough that the hardware prefetchers' streams
         * fall behind, with one their streams through the short rows of small matrices never
         * reach speed (a burst per row against four streams per thread far apart, one token over
         * SmolLM2's or TinyLlama's matrices: 12-20% faster, docs/BENCHMARKS.md). A longer row requests
         * the row two tiles on, into L2, a group's lines per group step (pk_row_kernel; the tail pairs'
         * lines here): its lines at once would fill the buffers and stall the products until
         * they return, so the products and the stream from DRAM did not overlap (the 1B shapes
         * and the 8B cut: Q8_0 k-row passes 1.1-1.5x faster, Q4_K, Q5_K, Q6_K one-row passes
         * 1.05-1.15x and k-row passes up to 1.26x; docs/BENCHMARKS.md, "Q8_0 verification
         * passes" and "The weight stream at every token count"). Prefill's tiles of
         * TF_PACK_ROWS_MAX rows keep the burst: their products take long enough for it to return
         * (the spread measured 0.88x and 0.98x at Q4_K prefill) */
        const char *pf = NULL;
        if (ws > PK_PF_BURST_MAX && nr < TF_PACK_ROWS_MAX) {
            pf = row + 2 * (size_t)nr * ws;
            const size_t groups_bytes = (size_t)(n / (32 * TF_PACK_GROUP_BLOCKS)) * (size_t)pk_group_bytes(kind);
            for (size_t b = groups_bytes / 64 * 64; b < ws; b += 64) _mm_prefetch(pf + b, _MM_HINT_T1);
        } else {
            for (size_t b = 0; b < ws; b += 64) _mm_prefetch(row + nr * ws + b, _MM_HINT_T0);
        }
        switch (nt) {
#define PK_CASE(T) \
    case T: pk_row_kernel(kind, wpk, T, n, row, a, as, o, ldo, pf); break;
            PK_CASE(1) PK_CASE(2) PK_CASE(3) PK_CASE(4) PK_CASE(5) PK_CASE(6) PK_CASE(7) PK_CASE(8)
            PK_CASE(9) PK_CASE(10) PK_CASE(11) PK_CASE(12) PK_CASE(13) PK_CASE(14) PK_CASE(15)
            default: pk_row_kernel(kind, wpk, 16, n, row, a, as, o, ldo, pf); break;
#undef PK_CASE
        }
    }
}

TF_AI void pk_tile(int kind, int wpk, int64_t n, const void *vw, size_t ws, int nr, const void *va, size_t as,
                   int nt, float *out, int64_t ldo) {
    const char *w = vw, *a = va;
    /* the register tiles where 16 tokens' activations pass the bound, for all
     * the tokens of the call (up to TF_WPACK_TOKS_MAX); else the one-row
     * kernel, 16 tokens at a time */
    if (wpk && (size_t)(nt < TF_PACK_TOKS_MAX ? nt : TF_PACK_TOKS_MAX) * as > PK_RT_MIN_ACT_BYTES) {
        pk_tile_rt(kind, n, w, ws, nr, a, as, nt, out, ldo);
        return;
    }
    for (int t0 = 0; t0 < nt; t0 += TF_PACK_TOKS_MAX)
        pk_tile_rows(kind, wpk, n, w, ws, nr, a + (size_t)t0 * as, as,
                     nt - t0 < TF_PACK_TOKS_MAX ? nt - t0 : TF_PACK_TOKS_MAX, out + (int64_t)t0 * ldo, ldo);
}

#define PK_ENTRIES(nm, KIND)                                                                                  \
    void tf_avx512vnni_packed_tile_##nm(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, \
                                        int nt, float *out, int64_t ldo) {                                     \
        pk_tile(KIND, 0, n, w, ws, nr, a, as, nt, out, ldo);                                                   \
    }                                                                                                          \
    void tf_avx512vnni_wpacked_tile_##nm(int64_t n, const void *w, size_t ws, int nr, const void *a,           \
                                         size_t as, int nt, float *out, int64_t ldo) {                         \
        pk_tile(KIND, 1, n, w, ws, nr, a, as, nt, out, ldo);                                                   \
    }
PK_ENTRIES(q8_0, K_Q8_0)
PK_ENTRIES(q4_0, K_Q4_0)
PK_ENTRIES(q4_1, K_Q4_1)
PK_ENTRIES(q5_0, K_Q5_0)
PK_ENTRIES(q5_1, K_Q5_1)
PK_ENTRIES(iq4_nl, K_IQ4_NL)
PK_ENTRIES(iq4_xs, K_IQ4_XS)
PK_ENTRIES(q4_k, K_PK_Q4_K)
PK_ENTRIES(q5_k, K_PK_Q5_K)
PK_ENTRIES(q6_k, K_PK_Q6_K)
PK_ENTRIES(q3_k, K_PK_Q3_K)
PK_ENTRIES(q2_k, K_PK_Q2_K)
#undef PK_ENTRIES

/* tf_act_pack_blocks for one whole group of 16 Q8_0 / Q8_1 blocks, with
 * vectors: the quants transposed into lanes as pk_load_group does a Q8_0
 * weight group's, each block's d from a gather, its quant sum from the
 * transposed vectors (4 quants per int32 lane, summed over the 8 vectors),
 * and the ex term from it as quant.h defines it (the same bytes as the
 * scalar function, which test_quant checks through act_pack). */
static void act_pack_group(tf_dtype wtype, const void *vblocks, char *y) {
    const int q81 = tf_act_pack_type(wtype) == TF_DTYPE_Q8_1;
    const int bs = q81 ? (int)sizeof(tf_block_q8_1) : (int)sizeof(tf_block_q8_0), qoff = q81 ? 4 : 2;
    const char *blocks = vblocks;
    __m512i q[8];
    pk_group_quants32(blocks, bs, qoff, q);
    __m512i sum = _mm512_setzero_si512(), sum_lo = sum;
    const __m512i ones8 = _mm512_set1_epi8(1), ones16 = _mm512_set1_epi16(1);
#pragma GCC unroll 8
    for (int v = 0; v < 8; v++) {
        _mm512_storeu_si512(y + 64 * v, q[v]);
        sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(ones8, q[v]), ones16));
        if (v == 3) sum_lo = sum; /* quants 0..15 */
    }
    const __m512i lane_block = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512i dw = _mm512_i32gather_epi32(_mm512_mullo_epi32(lane_block, _mm512_set1_epi32(bs)), blocks, 1);
    __m512 ad = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dw)); /* the low 16 bits: d */
    _mm512_storeu_ps(y + 512, ad);
    __m512i ex;
    switch (wtype) {
    case TF_DTYPE_Q4_1: case TF_DTYPE_Q5_1: case TF_DTYPE_Q4_K: case TF_DTYPE_Q5_K: ex = _mm512_castps_si512(_mm512_mul_ps(ad, _mm512_cvtepi32_ps(sum))); break;
    case TF_DTYPE_Q4_0: ex = _mm512_mullo_epi32(sum, _mm512_set1_epi32(-8)); break;
    case TF_DTYPE_Q5_0: ex = _mm512_mullo_epi32(sum, _mm512_set1_epi32(-16)); break;
    case TF_DTYPE_Q6_K: case TF_DTYPE_Q3_K: case TF_DTYPE_Q2_K:
        /* the two halves' sums as int16: the first in the low bits */
        ex = _mm512_or_si512(_mm512_slli_epi32(_mm512_sub_epi32(sum, sum_lo), 16),
                             _mm512_and_si512(sum_lo, _mm512_set1_epi32(0xFFFF)));
        break;
    default: ex = _mm512_mullo_epi32(sum, _mm512_set1_epi32(-128)); break; /* Q8_0, IQ4_NL, IQ4_XS */
    }
    _mm512_storeu_si512(y + 576, ex);
}

/* f32 -> packed activations: the Q8_0 / Q8_1 blocks of 512 columns at a time
 * (bitwise those of the reference), rearranged by act_pack_group (a whole
 * group) or tf_act_pack_blocks (the tail pairs). */
static void act_pack(tf_dtype wtype, const float *x, void *vy, int64_t n) {
    tf_block_q8_1 blocks[TF_PACK_GROUP_BLOCKS];
    char *y = vy;
    for (int64_t c = 0; c < n; c += TF_PACK_GROUP_BLOCKS * 32) {
        int64_t nc = n - c < TF_PACK_GROUP_BLOCKS * 32 ? n - c : TF_PACK_GROUP_BLOCKS * 32;
        if (tf_act_pack_type(wtype) == TF_DTYPE_Q8_1) tf_avx512_quantize_q8_1(x + c, blocks, nc);
        else tf_avx512_quantize_q8_0(x + c, blocks, nc);
        if (nc == TF_PACK_GROUP_BLOCKS * 32) act_pack_group(wtype, blocks, y);
        else tf_act_pack_blocks(wtype, blocks, y, nc);
        y += tf_act_packed_row_size(wtype, nc);
    }
}

void tf_avx512_act_pack_q8_0(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_Q8_0, x, y, n); }
void tf_avx512_act_pack_q4_0(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_Q4_0, x, y, n); }
void tf_avx512_act_pack_q4_1(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_Q4_1, x, y, n); }
void tf_avx512_act_pack_q5_0(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_Q5_0, x, y, n); }
void tf_avx512_act_pack_q5_1(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_Q5_1, x, y, n); }
void tf_avx512_act_pack_iq4_nl(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_IQ4_NL, x, y, n); }
void tf_avx512_act_pack_iq4_xs(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_IQ4_XS, x, y, n); }
void tf_avx512_act_pack_q4_k(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_Q4_K, x, y, n); }
void tf_avx512_act_pack_q5_k(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_Q5_K, x, y, n); }
void tf_avx512_act_pack_q6_k(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_Q6_K, x, y, n); }
void tf_avx512_act_pack_q3_k(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_Q3_K, x, y, n); }
void tf_avx512_act_pack_q2_k(const float *x, void *y, int64_t n) { act_pack(TF_DTYPE_Q2_K, x, y, n); }
