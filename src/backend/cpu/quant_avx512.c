/*
 * quant_avx512.c — weight-format kernels for AVX-512 (F/BW/VL/DQ + FMA/F16C),
 * in two flavours for the integer formats: plain (maddubs + madd) and VNNI
 * (vpdpbusd), chosen by quant_dispatch.c after a run-time check.
 *
 * Every dot product is computed as a tile: up to 4 weight rows against up
 * to 4 activation rows, all 16 accumulators in registers, so that a weight
 * vector loaded (and unpacked) once serves every token of the tile. The
 * kernel bodies are always-inline functions of constant (R, T, format)
 * arguments; the *_tile functions at the bottom instantiate them.
 *
 * Integer formats, per 64-byte vector (two Q8_0/Q4_0 blocks, or a quarter of a
 * 256-element K-quant super-block): a u8 x s8 dot gives 16 int32 lanes of 4
 * products each; lanes are converted to float and scaled per block.
 *   Q8_0 (s8 x s8): VNNI adds 128 to the activation (u8) and starts the
 *        accumulator at -128 * sum(w); plain negates the activation where
 *        the weight is negative and uses |w| as the unsigned operand.
 *   Q4_0 (q - 8 with q in 0..15) and Q5_0 (q - 16 with q in 0..31, the
 *        fifth bit added under a byte mask built from qh): the accumulator
 *        starts at -8 (-16) * sum(a).
 *   Q4_1 / Q5_1 (d q + m with q in 0..15 / 0..31, Q8_1 activations): q
 *        against a; the offset term m * d_a * sum(a), from the activation's
 *        stored sum, is spread over the block's 8 lanes (1/8 each).
 *   IQ4_NL / IQ4_XS (d V[q], V the s8 value table; an IQ4_XS sub-block of
 *        32 is a block with scale d (ls - 32)): the nibbles are looked up
 *        with vpshufb. VNNI looks up V + 128 (u8) and starts the
 *        accumulator at -128 * sum(a), as Q4_0 with offset 128; plain looks
 *        up V and goes on as Q8_0.
 *   K-quants (Q2_K .. Q6_K): each row's super-block is unpacked once into u8
 *        quants plus float scale vectors; the mins (Q2_K, Q4_K, Q5_K) and the
 *        offsets (Q3_K's -4, Q6_K's -32) are one int16 madd with the
 *        activation's bsums per super-block.
 * Activations from tf_*_quantize_* lie in [-127, 127], which the plain Q8_0
 * path needs (it negates them).
 *
 * The VNNI table's matrix products for Q8_0 / Q4_x / Q5_x / IQ4 use the packed path
 * instead (quant_packed_avx512.c): whole-block int32 sums over packed
 * activations, tiles of one weight row by up to 16 tokens. The q0_* tiles
 * remain the vec_dot_tile kernels of both tables and the matrix
 * product of the non-VNNI table.
 */
#include "backend/cpu/quant_avx512_inl.h"

/* out[t * ldo + r] = sum of the lanes of acc[r][t]. */
TF_AI void store_sums(int R, int T, __m512 acc[TF_TILE_ROWS_MAX][TF_TILE_TOKS_MAX], float *out, int64_t ldo) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        if (R == 4) {
            _mm_storeu_ps(out + t * ldo, hsum4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
            continue;
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) out[t * ldo + r] = hsum_tree(acc[r][t]);
    }
}

/* ---- float weights (f32, f16, bf16) against f32 activations ------------------ */

TF_AI __m512 load_w16(int kind, const char *row, int64_t i, __mmask16 m, int masked) {
    if (kind == K_F32)
        return masked ? _mm512_maskz_loadu_ps(m, (const float *)row + i) : _mm512_loadu_ps((const float *)row + i);
    const uint16_t *p = (const uint16_t *)row + i;
    __m256i h = masked ? _mm256_maskz_loadu_epi16(m, p) : _mm256_loadu_si256((const __m256i *)p);
    if (kind == K_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

TF_AI void float_kernel(int kind, int R, int T, int64_t n, const char *w, size_t ws, const char *a, size_t as,
                        float *out, int64_t ldo) {
    __m512 acc[TF_TILE_ROWS_MAX][TF_TILE_TOKS_MAX];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 av[TF_TILE_TOKS_MAX];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) av[t] = _mm512_loadu_ps((const float *)(a + t * as) + i);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 wv = load_w16(kind, w + r * ws, i, 0, 0);
            /* keep wv in a register: GCC would otherwise fold the load into
             * each of the T FMAs, which runs at half speed */
            __asm__("" : "+v"(wv));
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) acc[r][t] = _mm512_fmadd_ps(wv, av[t], acc[r][t]);
        }
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 av[TF_TILE_TOKS_MAX];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) av[t] = _mm512_maskz_loadu_ps(m, (const float *)(a + t * as) + i);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 wv = load_w16(kind, w + r * ws, i, m, 1);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) acc[r][t] = _mm512_fmadd_ps(wv, av[t], acc[r][t]);
        }
    }
    store_sums(R, T, acc, out, ldo);
}

/* ---- Q8_0 / Q4_x / Q5_x / IQ4 weights against Q8_0 / Q8_1 activations ------ */

/* As block_scales_f32 from f16 scales (0 for a missing second block). */
TF_AI __m512 block_scales(int kind, uint16_t d0, uint16_t d1) {
    return block_scales_f32(kind, _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)d0 | (uint32_t)d1 << 16))));
}

/* 32 int8 quants at q0 and at q1 (q1 only if two) as [q0 | q1]. */
TF_AI __m512i load_q8_pair(const int8_t *q0, const int8_t *q1, int two) {
    __m256i lo = _mm256_loadu_si256((const __m256i *)q0);
    if (!two) return _mm512_inserti64x4(_mm512_setzero_si512(), lo, 0);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), _mm256_loadu_si256((const __m256i *)q1), 1);
}

/* Quants of Q8_0 blocks b[0], b[1] (b[1] only if two) as [q0 | q1]. */
TF_AI __m512i load_q8_0_pair(const tf_block_q8_0 *b, int two) { return load_q8_pair(b[0].qs, b[1].qs, two); }

/* Nibbles of the 16 bytes at q0 and at q1 (q1 only if two: Q4_x / Q5_x
 * blocks) as u8 [lo0 | lo1 | hi0 | hi1]. */
TF_AI __m512i load_nibble_pair(const uint8_t *qs0, const uint8_t *qs1, int two) {
    __m128i q0 = _mm_loadu_si128((const __m128i *)qs0);
    __m256i y = two ? _mm256_inserti128_si256(_mm256_castsi128_si256(q0), _mm_loadu_si128((const __m128i *)qs1), 1)
                    : _mm256_inserti128_si256(_mm256_setzero_si256(), q0, 0);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(y), _mm256_srli_epi16(y, 4), 1);
    return _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
}

/* Quants of two Q5_0 / Q5_1 blocks (the second only if two) as u8 [lo0 |
 * lo1 | hi0 | hi1]: the nibbles, plus 16 under a byte mask built from the
 * blocks' 32-bit qh. */
TF_AI __m512i load_q5_pair(const uint8_t *qh0, const uint8_t *qs0, const uint8_t *qh1, const uint8_t *qs1, int two) {
    __m512i z = load_nibble_pair(qs0, qs1, two);
    uint32_t h0, h1 = 0;
    memcpy(&h0, qh0, 4);
    if (two) memcpy(&h1, qh1, 4);
    __mmask64 hi = (uint64_t)(h0 & 0xFFFF) | (uint64_t)(h1 & 0xFFFF) << 16 | (uint64_t)(h0 >> 16) << 32 |
                   (uint64_t)(h1 >> 16) << 48;
    return _mm512_or_si512(z, _mm512_maskz_mov_epi8(hi, _mm512_set1_epi8(0x10)));
}

/* One step (two blocks, or the last single block) of the Q8_0 / Q4_x / Q5_x tile. */
TF_AI void q0_step(int kind, int vnni, int R, int T, int64_t ib, int two, const char *w, size_t ws, const char *a,
                   size_t as, __m512 acc[TF_TILE_ROWS_MAX][TF_TILE_TOKS_MAX]) {
    __m512i wq[4], wx[4];
    __mmask64 wneg[4];
    __m512 wd[4], wm[4];
    const __m512i zero = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const char *row = w + r * ws;
        if (kind == K_Q8_0) {
            const tf_block_q8_0 *b = (const tf_block_q8_0 *)row + ib;
            wq[r] = load_q8_0_pair(b, two);
            wd[r] = block_scales(kind, b[0].d, two ? b[1].d : 0);
            if (vnni) /* accumulator start: -128 * sum(w) per lane */
                wx[r] = _mm512_sub_epi32(zero, dpbusd_vnni(zero, _mm512_set1_epi8((char)0x80), wq[r]));
        } else if (K0_IS_IQ4(kind)) {
            /* VNNI: u8 V + 128; plain: s8 V, then as Q8_0 */
            if (kind == K_IQ4_NL) {
                const tf_block_iq4_nl *b = (const tf_block_iq4_nl *)row + ib;
                wq[r] = load_nibble_pair(b[0].qs, b[1].qs, two);
                wd[r] = block_scales(kind, b[0].d, two ? b[1].d : 0);
            } else { /* ib even: both sub-blocks in one super-block, the second 16 bytes on */
                float d0, d1;
                const uint8_t *qs = iq4xs_sub(row, ib, &d0);
                iq4xs_sub(row, ib + 1, &d1);
                wq[r] = load_nibble_pair(qs, qs + 16, 1);
                wd[r] = block_scales_f32(kind, _mm_setr_ps(d0, d1, 0.0f, 0.0f));
            }
            wq[r] = _mm512_shuffle_epi8(iq4_table(vnni ? 128 : 0), wq[r]);
        } else if (kind == K_Q4_0) {
            const tf_block_q4_0 *b = (const tf_block_q4_0 *)row + ib;
            wq[r] = load_nibble_pair(b[0].qs, b[1].qs, two);
            wd[r] = block_scales(kind, b[0].d, two ? b[1].d : 0);
        } else if (kind == K_Q4_1) {
            const tf_block_q4_1 *b = (const tf_block_q4_1 *)row + ib;
            wq[r] = load_nibble_pair(b[0].qs, b[1].qs, two);
            wd[r] = block_scales(kind, b[0].d, two ? b[1].d : 0);
            wm[r] = block_scales(kind, b[0].m, two ? b[1].m : 0);
        } else if (kind == K_Q5_0) {
            const tf_block_q5_0 *b = (const tf_block_q5_0 *)row + ib;
            wq[r] = load_q5_pair(b[0].qh, b[0].qs, b[1].qh, b[1].qs, two);
            wd[r] = block_scales(kind, b[0].d, two ? b[1].d : 0);
        } else {
            const tf_block_q5_1 *b = (const tf_block_q5_1 *)row + ib;
            wq[r] = load_q5_pair(b[0].qh, b[0].qs, b[1].qh, b[1].qs, two);
            wd[r] = block_scales(kind, b[0].d, two ? b[1].d : 0);
            wm[r] = block_scales(kind, b[0].m, two ? b[1].m : 0);
        }
        if (!vnni && (kind == K_Q8_0 || K0_IS_IQ4(kind))) { /* s8 weights: |w| and the sign */
            wx[r] = _mm512_abs_epi8(wq[r]);
            wneg[r] = _mm512_movepi8_mask(wq[r]);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        __m512i aq;
        __m512 ad, am = _mm512_setzero_ps();
        if (K0_HAS_MIN(kind)) {
            const tf_block_q8_1 *ab = (const tf_block_q8_1 *)(a + t * as) + ib;
            aq = load_q8_pair(ab[0].qs, ab[1].qs, two);
            ad = block_scales(kind, ab[0].d, two ? ab[1].d : 0);
            /* d_a * sum(a) / 8 per lane: exact (11 x 12 significant bits, then a power of 2) */
            __m128 sums = _mm_cvtepi32_ps(_mm_setr_epi32(ab[0].sum, two ? ab[1].sum : 0, 0, 0));
            am = _mm512_mul_ps(ad, _mm512_permutexvar_ps(block_lane_map(kind), _mm512_castps128_ps512(
                                                              _mm_mul_ps(sums, _mm_set1_ps(0.125f)))));
        } else {
            const tf_block_q8_0 *ab = (const tf_block_q8_0 *)(a + t * as) + ib;
            aq = load_q8_0_pair(ab, two);
            ad = block_scales(kind, ab[0].d, two ? ab[1].d : 0);
        }
        __m512i abias = zero, au = zero;
        if (kind != K_Q8_0) aq = _mm512_shuffle_i64x2(aq, aq, _MM_SHUFFLE(3, 1, 2, 0)); /* [lo0 lo1 hi0 hi1] order */
        if (kind == K_Q4_0 || kind == K_Q5_0 || (K0_IS_IQ4(kind) && vnni)) {
            const __m512i off = _mm512_set1_epi8((char)(kind == K_Q4_0 ? 8 : kind == K_Q5_0 ? 16 : 128));
            if (vnni) abias = _mm512_sub_epi32(zero, dpbusd_vnni(zero, off, aq));
            else abias = _mm512_maddubs_epi16(off, aq); /* int16 pair sums of 8 a (16 a) */
        } else if (kind == K_Q8_0 && vnni) {
            au = _mm512_xor_si512(aq, _mm512_set1_epi8((char)0x80)); /* a + 128 as u8 */
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m512i s;
            if (kind == K_Q8_0 || (K0_IS_IQ4(kind) && !vnni)) {
                if (vnni) s = dpbusd_vnni(wx[r], au, wq[r]);
                else s = dpbusd_plain(wx[r], _mm512_mask_sub_epi8(aq, wneg[r], zero, aq));
            } else if (kind == K_Q4_0 || kind == K_Q5_0 || K0_IS_IQ4(kind)) {
                if (vnni) s = dpbusd_vnni(abias, wq[r], aq);
                else s = _mm512_madd_epi16(_mm512_sub_epi16(_mm512_maddubs_epi16(wq[r], aq), abias),
                                           _mm512_set1_epi16(1));
            } else {
                s = vnni ? dpbusd_vnni(zero, wq[r], aq) : dpbusd_plain(wq[r], aq);
            }
            acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd[r], ad), acc[r][t]);
            if (K0_HAS_MIN(kind)) acc[r][t] = _mm512_fmadd_ps(wm[r], am, acc[r][t]);
        }
    }
}

TF_AI void q0_kernel(int kind, int vnni, int R, int T, int64_t n, const char *w, size_t ws, const char *a,
                     size_t as, float *out, int64_t ldo) {
    __m512 acc[TF_TILE_ROWS_MAX][TF_TILE_TOKS_MAX];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    int64_t nb = n / 32, ib = 0;
    for (; ib + 2 <= nb; ib += 2) q0_step(kind, vnni, R, T, ib, 1, w, ws, a, as, acc);
    if (ib < nb) q0_step(kind, vnni, R, T, ib, 0, w, ws, a, as, acc);
    store_sums(R, T, acc, out, ldo);
}

/* ---- K-quant weights against Q8_K activations ------------------------------------ */

/* One weight row's super-block, unpacked: quants as u8 in element order,
 * per-lane float scales for each 64-element quarter (lane l of quarter g
 * covers elements 64 g + 4 l .. +3), int16 weights for the activation's 16
 * bsums and the float factor of that correction term. Row value:
 *   sum_g sum_lanes scale * dot(q, a)  -  corr * sum_k m16[k] * bsums[k]
 * all times the activation scale. */
typedef struct {
    uint8_t q[TF_QK_K];
    __m512 scale[4];
    __m256i m16;
    float corr;
} kq_row;

TF_AI void q4k_prep(const tf_block_q4_k *b, kq_row *k) {
    uint64_t sc, m;
    q4k_unpack_scales(b->scales, &sc, &m);
    __m512 scf = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc))),
                               _mm512_set1_ps(f16(b->d)));
    for (int g = 0; g < 4; g++) { /* lanes 0..7: sub-block 2g, 8..15: 2g+1 */
        __m512i idx = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(2 * g), _mm512_set1_epi32(2 * g + 1));
        k->scale[g] = _mm512_permutexvar_ps(idx, scf);
    }
    __m128i mb = _mm_cvtsi64_si128((long long)m);
    k->m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb)); /* m_j twice: bsums come per 16 */
    k->corr = f16(b->dmin);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int g = 0; g < 4; g++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * g));
        __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, low4)),
                                       _mm256_and_si256(_mm256_srli_epi16(v, 4), low4), 1);
        _mm512_storeu_si512(k->q + 64 * g, z);
    }
}

TF_AI void q6k_prep(const tf_block_q6_k *b, kq_row *k) {
    float d = f16(b->d);
    __m128i s8 = _mm_loadu_si128((const __m128i *)b->scales);
    __m512 scf = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s8)), _mm512_set1_ps(d));
    for (int g = 0; g < 4; g++) { /* lane l of quarter g: group 4g + l/4 */
        __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(4 * g),
                                       _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0));
        k->scale[g] = _mm512_permutexvar_ps(idx, scf);
    }
    k->m16 = _mm256_cvtepi8_epi16(s8);
    k->corr = 32.0f * d;
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        __m512i l = _mm512_loadu_si512(b->ql + 64 * h);
        __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        __m512i hz = _mm512_inserti64x4(_mm512_castsi256_si512(hb), _mm256_srli_epi16(hb, 2), 1);
        __m512i q01 = _mm512_or_si512(_mm512_and_si512(l, low4), _mm512_and_si512(_mm512_slli_epi16(hz, 4), bits45));
        __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4), _mm512_and_si512(hz, bits45));
        _mm512_storeu_si512(k->q + 128 * h, q01);
        _mm512_storeu_si512(k->q + 128 * h + 64, q23);
    }
}

TF_AI void q5k_prep(const tf_block_q5_k *b, kq_row *k) {
    uint64_t sc, m;
    q4k_unpack_scales(b->scales, &sc, &m);
    __m512 scf = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc))),
                               _mm512_set1_ps(f16(b->d)));
    for (int g = 0; g < 4; g++) { /* lanes 0..7: sub-block 2g, 8..15: 2g+1 */
        __m512i idx = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(2 * g), _mm512_set1_epi32(2 * g + 1));
        k->scale[g] = _mm512_permutexvar_ps(idx, scf);
    }
    __m128i mb = _mm_cvtsi64_si128((long long)m);
    k->m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb));
    k->corr = f16(b->dmin);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i hb = _mm256_loadu_si256((const __m256i *)b->qh);
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * g));
        __m256i lo = _mm256_or_si256(_mm256_and_si256(v, low4), bit_move(hb, 2 * g, 4));
        __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), bit_move(hb, 2 * g + 1, 4));
        _mm512_storeu_si512(k->q + 64 * g, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
    }
}

/* Per-16 int8 scales (s8) times d as the per-lane scales of the 4 quarters
 * (lane l of quarter g: group 4g + l/4), as q6k_prep. */
TF_AI void kq_scales16(kq_row *k, __m128i s8, float d) {
    __m512 scf = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s8)), _mm512_set1_ps(d));
    for (int g = 0; g < 4; g++) {
        __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(4 * g),
                                       _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0));
        k->scale[g] = _mm512_permutexvar_ps(idx, scf);
    }
}

/* Q3_K: quants 0..7 (value q - 4) with scale d (sc - 32) per 16; the -4
 * offset is 4 d sum_g (sc_g - 32) bsums_g. */
TF_AI void q3k_prep(const tf_block_q3_k *b, kq_row *k) {
    float d = f16(b->d);
    __m128i s8 = _mm_sub_epi8(q3k_unpack_scales(b->scales), _mm_set1_epi8(32));
    kq_scales16(k, s8, d);
    k->m16 = _mm256_cvtepi8_epi16(s8);
    k->corr = 4.0f * d;
    q2bits_unpack(b->qs, b->hmask, k->q);
}

/* Q2_K: quants 0..3, scale d (sc & 15) and min dmin (sc >> 4) per 16. */
TF_AI void q2k_prep(const tf_block_q2_k *b, kq_row *k) {
    __m128i sb = _mm_loadu_si128((const __m128i *)b->scales);
    const __m128i low4 = _mm_set1_epi8(0x0F);
    kq_scales16(k, _mm_and_si128(sb, low4), f16(b->d));
    k->m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), low4));
    k->corr = f16(b->dmin);
    q2bits_unpack(b->qs, NULL, k->q);
}

TF_AI void kq_prep(int kind, const char *row, int64_t ib, kq_row *k) {
    switch (kind) {
    case K_Q4_K: q4k_prep((const tf_block_q4_k *)row + ib, k); break;
    case K_Q6_K: q6k_prep((const tf_block_q6_k *)row + ib, k); break;
    case K_Q5_K: q5k_prep((const tf_block_q5_k *)row + ib, k); break;
    case K_Q3_K: q3k_prep((const tf_block_q3_k *)row + ib, k); break;
    default: q2k_prep((const tf_block_q2_k *)row + ib, k); break;
    }
}

TF_AI void kq_kernel(int kind, int vnni, int R, int T, int64_t n, const char *w, size_t ws, const char *a,
                     size_t as, float *out, int64_t ldo) {
    __m512 acc[TF_TILE_ROWS_MAX][TF_TILE_TOKS_MAX];
    kq_row rows[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    for (int64_t ib = 0; ib < n / TF_QK_K; ib++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) kq_prep(kind, w + r * ws, ib, &rows[r]);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const tf_block_q8_k *ab = (const tf_block_q8_k *)(a + t * as) + ib;
            __m256i bs = _mm256_loadu_si256((const __m256i *)ab->bsums);
            __m512 ad = _mm512_set1_ps(ab->d);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const kq_row *k = &rows[r];
                __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 4
                for (int g = 0; g < 4; g++) {
                    __m512i q = _mm512_loadu_si512(k->q + 64 * g), av = _mm512_loadu_si512(ab->qs + 64 * g);
                    __m512i s = vnni ? dpbusd_vnni(zero, q, av) : dpbusd_plain(q, av);
                    sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), k->scale[g], sum);
                }
                __m256 c = _mm256_cvtepi32_ps(_mm256_madd_epi16(k->m16, bs));
                sum = _mm512_fmadd_ps(_mm512_zextps256_ps512(c), _mm512_set1_ps(-k->corr), sum);
                acc[r][t] = _mm512_fmadd_ps(sum, ad, acc[r][t]);
            }
        }
    }
    store_sums(R, T, acc, out, ldo);
}

/* ---- tile entry points --------------------------------------------------------- */

/* The tile contract of tf_vec_dot_tile_fn. Float formats (fam 0) take up to
 * 8 rows x 3 tokens (24 accumulators: each activation vector loaded serves 8
 * FMAs), integer formats up to 4 x 4; other row counts run as a 4-row
 * kernel plus 1-row kernels. `fam` selects the kernel family (0 float,
 * 1 Q8_0/Q4_0/Q5_0, 2 K-quants), `kind` its format. */
TF_AI void run_kernel(int fam, int kind, int vnni, int R, int T, int64_t n, const char *w, size_t ws,
                      const char *a, size_t as, float *out, int64_t ldo) {
    if (fam == TF_X86_FAM_FLOAT) float_kernel(kind, R, T, n, w, ws, a, as, out, ldo);
    else if (fam == TF_X86_FAM_Q32) q0_kernel(kind, vnni, R, T, n, w, ws, a, as, out, ldo);
    else kq_kernel(kind, vnni, R, T, n, w, ws, a, as, out, ldo);
}

TF_AI void run_rows(int fam, int kind, int vnni, int R, int nt, int64_t n, const char *w, size_t ws, const char *a,
                    size_t as, float *out, int64_t ldo) {
    switch (nt) {
    case 1: run_kernel(fam, kind, vnni, R, 1, n, w, ws, a, as, out, ldo); return;
    case 2: run_kernel(fam, kind, vnni, R, 2, n, w, ws, a, as, out, ldo); return;
    case 3: run_kernel(fam, kind, vnni, R, 3, n, w, ws, a, as, out, ldo); return;
    default: run_kernel(fam, kind, vnni, R, 4, n, w, ws, a, as, out, ldo); return;
    }
}

TF_AI void tile_dispatch(int fam, int kind, int vnni, int64_t n, const void *vw, size_t ws, int nr, const void *va,
                         size_t as, int nt, float *out, int64_t ldo) {
    const char *w = vw, *a = va;
    int r = 0;
    if (fam == TF_X86_FAM_FLOAT && nr == 8) {
        switch (nt) {
        case 1: run_kernel(fam, kind, vnni, 8, 1, n, w, ws, a, as, out, ldo); return;
        case 2: run_kernel(fam, kind, vnni, 8, 2, n, w, ws, a, as, out, ldo); return;
        default: run_kernel(fam, kind, vnni, 8, 3, n, w, ws, a, as, out, ldo); return;
        }
    }
    if (nr >= 4) {
        run_rows(fam, kind, vnni, 4, nt, n, w, ws, a, as, out, ldo);
        r = 4;
    }
    for (; r < nr; r++) run_rows(fam, kind, vnni, 1, nt, n, w + r * ws, ws, a, as, out + r, ldo);
}

/* tf_avx512_tile_<nm> for every type, tf_avx512vnni_tile_<nm> for the integer families. */
#define VNNI_ENTRY_FLOAT(ID, nm)
#define VNNI_ENTRY_Q32(ID, nm) TF_X86_TILE_ENTRY(avx512vnni, nm, TF_X86_FAM_Q32, K_##ID, 1)
#define VNNI_ENTRY_QK(ID, nm) TF_X86_TILE_ENTRY(avx512vnni, nm, TF_X86_FAM_QK, K_##ID, 1)
#define TILE_ENTRY_(ID, nm, id, bs, bytes, act, fam, ...)                                                   \
    TF_X86_TILE_ENTRY(avx512, nm, TF_X86_FAM_##fam, K_##ID, 0) VNNI_ENTRY_##fam(ID, nm)
TF_DTYPE_LIST(TILE_ENTRY_)
#undef TILE_ENTRY_
#undef VNNI_ENTRY_FLOAT
#undef VNNI_ENTRY_Q32
#undef VNNI_ENTRY_QK

/* ---- activation quantization ------------------------------------------------------- */

/* f32 -> Q8_0, bitwise equal to the reference (same d, 1/d and rounding). */
void tf_avx512_quantize_q8_0(const float *x, void *vy, int64_t n) {
    tf_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / TF_QK8_0; i++, x += TF_QK8_0) {
        __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        __m512 vid = _mm512_set1_ps(id);
        y[i].d = tf_f32_to_f16(d);
        _mm_storeu_si128((__m128i *)y[i].qs, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x0, vid))));
        _mm_storeu_si128((__m128i *)(y[i].qs + 16),
                         _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x1, vid))));
    }
}

/* f32 -> Q8_1 (Q8_0 plus the sum of the quants), bitwise equal to the reference. */
void tf_avx512_quantize_q8_1(const float *x, void *vy, int64_t n) {
    tf_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / TF_QK8_0; i++, x += TF_QK8_0) {
        __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        __m512 vid = _mm512_set1_ps(id);
        __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, vid)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, vid));
        y[i].d = tf_f32_to_f16(d);
        y[i].sum = (int16_t)_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        _mm_storeu_si128((__m128i *)y[i].qs, _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(y[i].qs + 16), _mm512_cvtepi32_epi8(q1));
    }
}

/* f32 -> Q8_K (d = amax / 127, bsums per 16), bitwise equal to the reference. */
void tf_avx512_quantize_q8_k(const float *x, void *vy, int64_t n) {
    tf_block_q8_k *y = vy;
    for (int64_t i = 0; i < n / TF_QK_K; i++, x += TF_QK_K) {
        __m512 m = _mm512_setzero_ps();
        for (int g = 0; g < 16; g++) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * g)));
        float amax = _mm512_reduce_max_ps(m);
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        __m512 vid = _mm512_set1_ps(id);
        y[i].d = d;
        for (int g = 0; g < 16; g++) {
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), vid));
            _mm_storeu_si128((__m128i *)(y[i].qs + 16 * g), _mm512_cvtepi32_epi8(q));
            y[i].bsums[g] = (int16_t)_mm512_reduce_add_epi32(q);
        }
    }
}
