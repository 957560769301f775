/*
 * quant_avx2.c — weight-format kernels for AVX2 + FMA + F16C.
 *
 * Same structure as quant_avx512.c with 256-bit vectors: tiles of up to 4
 * weight rows x 2 tokens keep their 8 accumulators in registers (16 ymm
 * registers are not enough for 4 x 4); a 4 x 4 tile call runs two 4 x 2
 * passes. Integer formats use maddubs + madd (u8 x s8 -> int32 lanes):
 *   Q8_0 (s8 x s8): |w| x (a with the sign of w), one block per vector.
 *   Q4_0 / Q5_0: q in 0..15 (0..31) against a, minus 8 * a (16 * a) (int16
 *        pair sums).
 *   Q4_1 / Q5_1: q in 0..15 (0..31) against a (Q8_1 blocks); the offset m
 *        times the activation's stored quant sum is spread over the 8 lanes
 *        (1/8 each).
 *   IQ4_NL / IQ4_XS: the nibbles looked up in the value table (pshufb) give
 *        s8 weights, then as Q8_0; an IQ4_XS sub-block is a block of 32 with
 *        scale d (ls - 32).
 *   K-quants (Q2_K .. Q6_K): each row's super-block unpacked once into u8
 *        quants and one float scale vector per 32 elements; mins and offsets
 *        (Q2_K/Q4_K/Q5_K mins, Q3_K's -4, Q6_K's -32) through the
 *        activation's bsums.
 * Activations from the quantizers lie in [-127, 127] (the Q8_0 path negates
 * them).
 */
#include "backend/cpu/quant_x86_inl.h"

#define AVX2_TILE_R 4 /* rows per register tile */
#define AVX2_TILE_T 2 /* tokens per register tile */

TF_AI float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* [sum(a), sum(b), sum(c), sum(d)] */
TF_AI __m128 hsum4_ps(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* out[t * ldo + r] = sum of the lanes of acc[r][t]. */
TF_AI void store_sums(int R, int T, __m256 acc[AVX2_TILE_R][AVX2_TILE_T], float *out, int64_t ldo) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        if (R == 4) {
            _mm_storeu_ps(out + t * ldo, hsum4_ps(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
            continue;
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) out[t * ldo + r] = hsum_ps(acc[r][t]);
    }
}

TF_AI int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

TF_AI float hmax_ps(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

TF_AI __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

/* u8 x s8 dot into int32 lanes of 4 products (pairs stay below 2^15 for the
 * operand ranges used here). */
TF_AI __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* Bits 0..31 of `bits` as 32 bytes, byte j = `val` where bit j is set, else 0. */
TF_AI __m256i bits_to_bytes(uint32_t bits, char val) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                            3, 3, 3, 3, 3, 3, 3);
    const __m256i sel = _mm256_set1_epi64x(0x8040201008040201LL);
    __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread), sel);
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, sel), _mm256_set1_epi8(val));
}

/* ---- float weights (f32, f16, bf16) against f32 activations ------------------ */

TF_AI __m256 load_w8(int kind, const char *row, int64_t i) {
    if (kind == K_F32) return _mm256_loadu_ps((const float *)row + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
    if (kind == K_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

TF_AI float load_w1(int kind, const char *row, int64_t i) {
    if (kind == K_F32) return ((const float *)row)[i];
    uint16_t h = ((const uint16_t *)row)[i];
    return kind == K_F16 ? tf_f16_to_f32(h) : tf_bf16_to_f32(h);
}

TF_AI void float_kernel(int kind, int R, int T, int64_t n, const char *w, size_t ws, const char *a, size_t as,
                        float *out, int64_t ldo) {
    __m256 acc[AVX2_TILE_R][AVX2_TILE_T];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 av[AVX2_TILE_T];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) av[t] = _mm256_loadu_ps((const float *)(a + t * as) + i);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256 wv = load_w8(kind, w + r * ws, i);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_ps(wv, av[t], acc[r][t]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            float s = hsum_ps(acc[r][t]);
            for (int64_t j = i; j < n; j++) s += load_w1(kind, w + r * ws, j) * ((const float *)(a + t * as))[j];
            out[t * ldo + r] = s;
        }
}

/* ---- Q8_0 / Q4_x / Q5_x / IQ4 weights against Q8_0 / Q8_1 activations ------ */


/* Nibbles of 16 bytes of a Q4_0 / Q4_1 block as u8 [elements 0..15 | elements 16..31]. */
TF_AI __m256i load_nibbles(const uint8_t *qs) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    const __m128i low4 = _mm_set1_epi8(0x0F);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, low4)),
                                   _mm_and_si128(_mm_srli_epi16(v, 4), low4), 1);
}

/* IQ4 indices (16 bytes of nibbles) as their s8 table values in element order. */
TF_AI __m256i load_iq4(const uint8_t *qs) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tf_iq4_values));
    return _mm256_shuffle_epi8(table, load_nibbles(qs));
}

/* Quants of a Q5_0 / Q5_1 block as u8 in element order: the nibbles plus bit
 * 4 from the 32 bits of qh. */
TF_AI __m256i load_q5(const uint8_t *qh4, const uint8_t *qs) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    return _mm256_or_si256(load_nibbles(qs), bits_to_bytes(qh, 0x10));
}

TF_AI void q0_kernel(int kind, int R, int T, int64_t n, const char *w, size_t ws, const char *a, size_t as,
                     float *out, int64_t ldo) {
    __m256 acc[AVX2_TILE_R][AVX2_TILE_T];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / 32; ib++) {
        __m256i wq[AVX2_TILE_R], wabs[AVX2_TILE_R];
        float wd[AVX2_TILE_R], wm[AVX2_TILE_R];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const char *row = w + r * ws;
            if (kind == K_Q8_0) {
                const tf_block_q8_0 *b = (const tf_block_q8_0 *)row + ib;
                wq[r] = _mm256_loadu_si256((const __m256i *)b->qs);
                wd[r] = f16(b->d);
            } else if (kind == K_IQ4_NL) {
                const tf_block_iq4_nl *b = (const tf_block_iq4_nl *)row + ib;
                wq[r] = load_iq4(b->qs);
                wd[r] = f16(b->d);
            } else if (kind == K_IQ4_XS) {
                wq[r] = load_iq4(iq4xs_sub(row, ib, &wd[r]));
            } else if (kind == K_Q4_0) {
                const tf_block_q4_0 *b = (const tf_block_q4_0 *)row + ib;
                wq[r] = load_nibbles(b->qs);
                wd[r] = f16(b->d);
            } else if (kind == K_Q4_1) {
                const tf_block_q4_1 *b = (const tf_block_q4_1 *)row + ib;
                wq[r] = load_nibbles(b->qs);
                wd[r] = f16(b->d);
                wm[r] = f16(b->m);
            } else if (kind == K_Q5_0) {
                const tf_block_q5_0 *b = (const tf_block_q5_0 *)row + ib;
                wq[r] = load_q5(b->qh, b->qs);
                wd[r] = f16(b->d);
            } else {
                const tf_block_q5_1 *b = (const tf_block_q5_1 *)row + ib;
                wq[r] = load_q5(b->qh, b->qs);
                wd[r] = f16(b->d);
                wm[r] = f16(b->m);
            }
            if (K0_SIGNED(kind)) wabs[r] = _mm256_sign_epi8(wq[r], wq[r]);
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            __m256i aq;
            float ad, am = 0.0f;
            if (K0_HAS_MIN(kind)) {
                const tf_block_q8_1 *ab = (const tf_block_q8_1 *)(a + t * as) + ib;
                aq = _mm256_loadu_si256((const __m256i *)ab->qs);
                ad = f16(ab->d);
                am = ad * (float)ab->sum * 0.125f; /* exact: 11 x 12 significant bits, then a power of 2 */
            } else {
                const tf_block_q8_0 *ab = (const tf_block_q8_0 *)(a + t * as) + ib;
                aq = _mm256_loadu_si256((const __m256i *)ab->qs);
                ad = f16(ab->d);
            }
            /* int16 pair sums of 8 a (Q4_0) or 16 a (Q5_0) */
            __m256i bias = kind == K_Q4_0 || kind == K_Q5_0
                               ? _mm256_maddubs_epi16(_mm256_set1_epi8(kind == K_Q4_0 ? 8 : 16), aq)
                               : aq;
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                __m256i s;
                if (K0_SIGNED(kind)) s = dot_u8s8(wabs[r], _mm256_sign_epi8(aq, wq[r]));
                else if (K0_HAS_MIN(kind)) s = dot_u8s8(wq[r], aq);
                else s = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(wq[r], aq), bias),
                                           _mm256_set1_epi16(1));
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(wd[r] * ad), acc[r][t]);
                if (K0_HAS_MIN(kind))
                    acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(wm[r]), _mm256_set1_ps(am), acc[r][t]);
            }
        }
    }
    store_sums(R, T, acc, out, ldo);
}

/* ---- K-quant weights against Q8_K activations ------------------------------------ */

/* One weight row's super-block unpacked (see quant_avx512.c): u8 quants in
 * element order, a float scale per lane for each 32 elements (lane l of
 * chunk c covers elements 32 c + 4 l .. +3), int16 weights for the 16 bsums
 * and the factor of that correction. */
typedef struct {
    uint8_t q[TF_QK_K];
    __m256 scale[8];
    __m256i m16;
    float corr;
} kq_row;

TF_AI void q4k_prep(const tf_block_q4_k *b, kq_row *k) {
    uint64_t sc, m;
    q4k_unpack_scales(b->scales, &sc, &m);
    float d = f16(b->d);
    for (int c = 0; c < 8; c++) k->scale[c] = _mm256_set1_ps(d * (float)((sc >> (8 * c)) & 0xFF));
    __m128i mb = _mm_cvtsi64_si128((long long)m);
    k->m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb));
    k->corr = f16(b->dmin);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int g = 0; g < 4; g++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * g));
        _mm256_storeu_si256((__m256i *)(k->q + 64 * g), _mm256_and_si256(v, low4));
        _mm256_storeu_si256((__m256i *)(k->q + 64 * g + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), low4));
    }
}

TF_AI void q6k_prep(const tf_block_q6_k *b, kq_row *k) {
    float d = f16(b->d);
    for (int c = 0; c < 8; c++) {
        __m128 lo = _mm_set1_ps(d * (float)b->scales[2 * c]), hi = _mm_set1_ps(d * (float)b->scales[2 * c + 1]);
        k->scale[c] = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    }
    k->m16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    k->corr = 32.0f * d;
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        __m256i h2 = _mm256_srli_epi16(hb, 2);
        uint8_t *q = k->q + 128 * h;
        _mm256_storeu_si256((__m256i *)q, _mm256_or_si256(_mm256_and_si256(l0, low4),
                                                          _mm256_and_si256(_mm256_slli_epi16(hb, 4), bits45)));
        _mm256_storeu_si256((__m256i *)(q + 32), _mm256_or_si256(_mm256_and_si256(l1, low4),
                                                                 _mm256_and_si256(_mm256_slli_epi16(h2, 4), bits45)));
        _mm256_storeu_si256((__m256i *)(q + 64),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, bits45)));
        _mm256_storeu_si256((__m256i *)(q + 96),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), _mm256_and_si256(h2, bits45)));
    }
}

TF_AI void q5k_prep(const tf_block_q5_k *b, kq_row *k) {
    uint64_t sc, m;
    q4k_unpack_scales(b->scales, &sc, &m);
    float d = f16(b->d);
    for (int c = 0; c < 8; c++) k->scale[c] = _mm256_set1_ps(d * (float)((sc >> (8 * c)) & 0xFF));
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
        _mm256_storeu_si256((__m256i *)(k->q + 64 * g), lo);
        _mm256_storeu_si256((__m256i *)(k->q + 64 * g + 32), hi);
    }
}

/* Per-16 int8 scales s[16] times d as the 8 per-32 lane scale vectors. */
TF_AI void kq_scales16(kq_row *k, const int8_t *s, float d) {
    for (int c = 0; c < 8; c++) {
        __m128 lo = _mm_set1_ps(d * (float)s[2 * c]), hi = _mm_set1_ps(d * (float)s[2 * c + 1]);
        k->scale[c] = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    }
}

/* Q3_K: quants 0..7 (value q - 4) with scale d (sc - 32): the -4 offset is
 * 4 d sum_g (sc_g - 32) bsums_g. */
TF_AI void q3k_prep(const tf_block_q3_k *b, kq_row *k) {
    float d = f16(b->d);
    __m128i s8 = _mm_sub_epi8(q3k_unpack_scales(b->scales), _mm_set1_epi8(32));
    int8_t s[16];
    _mm_storeu_si128((__m128i *)s, s8);
    kq_scales16(k, s, d);
    k->m16 = _mm256_cvtepi8_epi16(s8);
    k->corr = 4.0f * d;
    q2bits_unpack(b->qs, b->hmask, k->q);
}

/* Q2_K: quants 0..3, scale d (sc & 15), min dmin (sc >> 4) per group of 16. */
TF_AI void q2k_prep(const tf_block_q2_k *b, kq_row *k) {
    float d = f16(b->d);
    __m128i sb = _mm_loadu_si128((const __m128i *)b->scales);
    int8_t s[16];
    _mm_storeu_si128((__m128i *)s, _mm_and_si128(sb, _mm_set1_epi8(0x0F)));
    kq_scales16(k, s, d);
    k->m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0F)));
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

TF_AI void kq_kernel(int kind, int R, int T, int64_t n, const char *w, size_t ws, const char *a, size_t as,
                     float *out, int64_t ldo) {
    __m256 acc[AVX2_TILE_R][AVX2_TILE_T];
    kq_row rows[AVX2_TILE_R];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / TF_QK_K; ib++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) kq_prep(kind, w + r * ws, ib, &rows[r]);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const tf_block_q8_k *ab = (const tf_block_q8_k *)(a + t * as) + ib;
            __m256i bs = _mm256_loadu_si256((const __m256i *)ab->bsums);
            __m256 ad = _mm256_set1_ps(ab->d);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const kq_row *k = &rows[r];
                __m256 sum = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(k->m16, bs)),
                                           _mm256_set1_ps(-k->corr));
#pragma GCC unroll 8
                for (int c = 0; c < 8; c++) {
                    __m256i s = dot_u8s8(_mm256_loadu_si256((const __m256i *)(k->q + 32 * c)),
                                         _mm256_loadu_si256((const __m256i *)(ab->qs + 32 * c)));
                    sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), k->scale[c], sum);
                }
                acc[r][t] = _mm256_fmadd_ps(sum, ad, acc[r][t]);
            }
        }
    }
    store_sums(R, T, acc, out, ldo);
}

/* ---- tile entry points --------------------------------------------------------- */

TF_AI void run_kernel(int fam, int kind, int R, int T, int64_t n, const char *w, size_t ws, const char *a,
                      size_t as, float *out, int64_t ldo) {
    if (fam == TF_X86_FAM_FLOAT) float_kernel(kind, R, T, n, w, ws, a, as, out, ldo);
    else if (fam == TF_X86_FAM_Q32) q0_kernel(kind, R, T, n, w, ws, a, as, out, ldo);
    else kq_kernel(kind, R, T, n, w, ws, a, as, out, ldo);
}

/* tf_vec_dot_tile_fn contract, in register tiles of 4 (or 1) rows x 2 (or 1)
 * tokens. */
TF_AI void tile_dispatch(int fam, int kind, int64_t n, const void *vw, size_t ws, int nr, const void *va, size_t as,
                         int nt, float *out, int64_t ldo) {
    const char *w = vw, *a = va;
    for (int t = 0; t < nt; t += AVX2_TILE_T) {
        const char *at = a + t * as;
        float *ot = out + t * ldo;
        int two = nt - t >= 2;
        if (nr == 4) {
            if (two) run_kernel(fam, kind, 4, 2, n, w, ws, at, as, ot, ldo);
            else run_kernel(fam, kind, 4, 1, n, w, ws, at, as, ot, ldo);
            continue;
        }
        for (int r = 0; r < nr; r++) {
            if (two) run_kernel(fam, kind, 1, 2, n, w + r * ws, ws, at, as, ot + r, ldo);
            else run_kernel(fam, kind, 1, 1, n, w + r * ws, ws, at, as, ot + r, ldo);
        }
    }
}

/* tf_avx2_tile_<nm> for every type of the registry. */
#define TILE_ENTRY_(ID, nm, id, bs, bytes, act, fam, ...) TF_X86_TILE_ENTRY(avx2, nm, TF_X86_FAM_##fam, K_##ID)
TF_DTYPE_LIST(TILE_ENTRY_)
#undef TILE_ENTRY_

/* ---- activation quantization ------------------------------------------------------- */

/* Four vectors of int32 in [-127, 127] -> 32 int8 in order. */
TF_AI __m256i pack_i32x4_i8(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* f32 -> Q8_0, bitwise equal to the reference. */
void tf_avx2_quantize_q8_0(const float *x, void *vy, int64_t n) {
    tf_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / TF_QK8_0; i++, x += TF_QK8_0) {
        __m256 v[4];
        for (int j = 0; j < 4; j++) v[j] = _mm256_loadu_ps(x + 8 * j);
        __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])), _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3])));
        float d = hmax_ps(m) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int j = 0; j < 4; j++) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
        y[i].d = tf_f32_to_f16(d);
        _mm256_storeu_si256((__m256i *)y[i].qs, pack_i32x4_i8(q[0], q[1], q[2], q[3]));
    }
}

/* f32 -> Q8_1 (Q8_0 plus the sum of the quants), bitwise equal to the reference. */
void tf_avx2_quantize_q8_1(const float *x, void *vy, int64_t n) {
    tf_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / TF_QK8_0; i++, x += TF_QK8_0) {
        __m256 v[4];
        for (int j = 0; j < 4; j++) v[j] = _mm256_loadu_ps(x + 8 * j);
        __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])), _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3])));
        float d = hmax_ps(m) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int j = 0; j < 4; j++) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
        y[i].d = tf_f32_to_f16(d);
        y[i].sum = (int16_t)hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
        _mm256_storeu_si256((__m256i *)y[i].qs, pack_i32x4_i8(q[0], q[1], q[2], q[3]));
    }
}

/* f32 -> Q8_K (d = amax / 127, bsums per 16), bitwise equal to the reference. */
void tf_avx2_quantize_q8_k(const float *x, void *vy, int64_t n) {
    tf_block_q8_k *y = vy;
    for (int64_t i = 0; i < n / TF_QK_K; i++, x += TF_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < 32; j++) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + 8 * j)));
        float d = hmax_ps(m) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        __m256 vid = _mm256_set1_ps(id);
        y[i].d = d;
        for (int c = 0; c < 8; c++) {
            __m256i q[4];
            for (int j = 0; j < 4; j++) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * c + 8 * j), vid));
            _mm256_storeu_si256((__m256i *)(y[i].qs + 32 * c), pack_i32x4_i8(q[0], q[1], q[2], q[3]));
            y[i].bsums[2 * c] = (int16_t)hsum_epi32(_mm256_add_epi32(q[0], q[1]));
            y[i].bsums[2 * c + 1] = (int16_t)hsum_epi32(_mm256_add_epi32(q[2], q[3]));
        }
    }
}

/* ---- dequantization ------------------------------------------------------------------ */

void tf_avx2_dequantize_f16(const void *vx, float *y, int64_t n) {
    const char *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_w8(K_F16, x, i));
    for (; i < n; i++) y[i] = load_w1(K_F16, x, i);
}

void tf_avx2_dequantize_bf16(const void *vx, float *y, int64_t n) {
    const char *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_w8(K_BF16, x, i));
    for (; i < n; i++) y[i] = load_w1(K_BF16, x, i);
}

void tf_avx2_dequantize_q8_0(const void *vx, float *y, int64_t n) {
    const tf_block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / TF_QK8_0; i++, y += TF_QK8_0) {
        __m256 d = _mm256_set1_ps(f16(x[i].d));
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(x[i].qs + 8 * j)));
            _mm256_storeu_ps(y + 8 * j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

void tf_avx2_dequantize_q4_0(const void *vx, float *y, int64_t n) {
    const tf_block_q4_0 *x = vx;
    const __m256i eight = _mm256_set1_epi32(8);
    for (int64_t i = 0; i < n / TF_QK4_0; i++, y += TF_QK4_0) {
        __m256 d = _mm256_set1_ps(f16(x[i].d));
        uint8_t q[32];
        _mm256_storeu_si256((__m256i *)q, load_nibbles(x[i].qs));
        for (int j = 0; j < 4; j++) {
            __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8 * j))), eight);
            _mm256_storeu_ps(y + 8 * j, _mm256_mul_ps(_mm256_cvtepi32_ps(v), d));
        }
    }
}

void tf_avx2_dequantize_q4_1(const void *vx, float *y, int64_t n) {
    const tf_block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / TF_QK4_1; i++, y += TF_QK4_1) {
        __m256 d = _mm256_set1_ps(f16(x[i].d)), m = _mm256_set1_ps(f16(x[i].m));
        uint8_t q[32];
        _mm256_storeu_si256((__m256i *)q, load_nibbles(x[i].qs));
        for (int j = 0; j < 4; j++) {
            __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8 * j)));
            _mm256_storeu_ps(y + 8 * j, _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), d, m));
        }
    }
}

void tf_avx2_dequantize_q4_k(const void *vx, float *y, int64_t n) {
    const tf_block_q4_k *x = vx;
    kq_row k;
    for (int64_t i = 0; i < n / TF_QK_K; i++, y += TF_QK_K) {
        q4k_prep(&x[i], &k);
        uint64_t sc, m;
        q4k_unpack_scales(x[i].scales, &sc, &m);
        float d = f16(x[i].d), dmin = f16(x[i].dmin);
        for (int j = 0; j < 8; j++) {
            __m256 s = _mm256_set1_ps(d * (float)((sc >> (8 * j)) & 0xFF));
            __m256 o = _mm256_set1_ps(dmin * (float)((m >> (8 * j)) & 0xFF));
            for (int c = 0; c < 4; c++) {
                __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(k.q + 32 * j + 8 * c)));
                _mm256_storeu_ps(y + 32 * j + 8 * c, _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q), s), o));
            }
        }
    }
}

void tf_avx2_dequantize_q6_k(const void *vx, float *y, int64_t n) {
    const tf_block_q6_k *x = vx;
    kq_row k;
    const __m256i off = _mm256_set1_epi32(32);
    for (int64_t i = 0; i < n / TF_QK_K; i++, y += TF_QK_K) {
        q6k_prep(&x[i], &k);
        float d = f16(x[i].d);
        for (int g = 0; g < 16; g++) {
            __m256 s = _mm256_set1_ps(d * (float)x[i].scales[g]);
            for (int c = 0; c < 2; c++) {
                __m256i q = _mm256_sub_epi32(
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(k.q + 16 * g + 8 * c))), off);
                _mm256_storeu_ps(y + 16 * g + 8 * c, _mm256_mul_ps(_mm256_cvtepi32_ps(q), s));
            }
        }
    }
}

void tf_avx2_dequantize_q5_0(const void *vx, float *y, int64_t n) {
    const tf_block_q5_0 *x = vx;
    const __m256i sixteen = _mm256_set1_epi32(16);
    for (int64_t i = 0; i < n / TF_QK5_0; i++, y += TF_QK5_0) {
        __m256 d = _mm256_set1_ps(f16(x[i].d));
        uint8_t q[32];
        _mm256_storeu_si256((__m256i *)q, load_q5(x[i].qh, x[i].qs));
        for (int j = 0; j < 4; j++) {
            __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8 * j))), sixteen);
            _mm256_storeu_ps(y + 8 * j, _mm256_mul_ps(_mm256_cvtepi32_ps(v), d));
        }
    }
}

void tf_avx2_dequantize_q5_1(const void *vx, float *y, int64_t n) {
    const tf_block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / TF_QK5_1; i++, y += TF_QK5_1) {
        __m256 d = _mm256_set1_ps(f16(x[i].d)), m = _mm256_set1_ps(f16(x[i].m));
        uint8_t q[32];
        _mm256_storeu_si256((__m256i *)q, load_q5(x[i].qh, x[i].qs));
        for (int j = 0; j < 4; j++) {
            __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8 * j)));
            _mm256_storeu_ps(y + 8 * j, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(v), d), m));
        }
    }
}

/* y[16 g + i] = mul[g] * (q[16 g + i] - qoff) - off[g] for a super-block of
 * unpacked quants. */
static void kq_dequant_groups(const uint8_t *q, const float *mul, const float *off, int qoff, float *y) {
    const __m256i vqoff = _mm256_set1_epi32(qoff);
    for (int g = 0; g < 16; g++) {
        __m256 s = _mm256_set1_ps(mul[g]), o = _mm256_set1_ps(off[g]);
        for (int c = 0; c < 2; c++) {
            __m128i q8 = _mm_loadl_epi64((const __m128i *)(q + 16 * g + 8 * c));
            __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(q8), vqoff);
            _mm256_storeu_ps(y + 16 * g + 8 * c, _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(v), s), o));
        }
    }
}

void tf_avx2_dequantize_q5_k(const void *vx, float *y, int64_t n) {
    const tf_block_q5_k *x = vx;
    kq_row k;
    for (int64_t i = 0; i < n / TF_QK_K; i++, y += TF_QK_K) {
        q5k_prep(&x[i], &k);
        uint64_t sc, m;
        q4k_unpack_scales(x[i].scales, &sc, &m);
        float d = f16(x[i].d), dmin = f16(x[i].dmin), mul[16], off[16];
        for (int g = 0; g < 16; g++) {
            mul[g] = d * (float)((sc >> (8 * (g / 2))) & 0xFF);
            off[g] = dmin * (float)((m >> (8 * (g / 2))) & 0xFF);
        }
        kq_dequant_groups(k.q, mul, off, 0, y);
    }
}

void tf_avx2_dequantize_q3_k(const void *vx, float *y, int64_t n) {
    const tf_block_q3_k *x = vx;
    kq_row k;
    for (int64_t i = 0; i < n / TF_QK_K; i++, y += TF_QK_K) {
        q2bits_unpack(x[i].qs, x[i].hmask, k.q);
        uint8_t s[16];
        _mm_storeu_si128((__m128i *)s, q3k_unpack_scales(x[i].scales));
        float d = f16(x[i].d), mul[16], off[16] = {0};
        for (int g = 0; g < 16; g++) mul[g] = d * (float)(s[g] - 32);
        kq_dequant_groups(k.q, mul, off, 4, y);
    }
}

void tf_avx2_dequantize_q2_k(const void *vx, float *y, int64_t n) {
    const tf_block_q2_k *x = vx;
    kq_row k;
    for (int64_t i = 0; i < n / TF_QK_K; i++, y += TF_QK_K) {
        q2bits_unpack(x[i].qs, NULL, k.q);
        float d = f16(x[i].d), dmin = f16(x[i].dmin), mul[16], off[16];
        for (int g = 0; g < 16; g++) {
            mul[g] = d * (float)(x[i].scales[g] & 0xF);
            off[g] = dmin * (float)(x[i].scales[g] >> 4);
        }
        kq_dequant_groups(k.q, mul, off, 0, y);
    }
}

/* 32 s8 values at v times scale d into y[0..31]. */
TF_AI void dequant_s8x32(__m256i v, float d, float *y) {
    __m256 vd = _mm256_set1_ps(d);
    __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), vd));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), vd));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), vd));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), vd));
}

void tf_avx2_dequantize_iq4_nl(const void *vx, float *y, int64_t n) {
    const tf_block_iq4_nl *x = vx;
    for (int64_t i = 0; i < n / TF_QK4_NL; i++, y += TF_QK4_NL) dequant_s8x32(load_iq4(x[i].qs), f16(x[i].d), y);
}

void tf_avx2_dequantize_iq4_xs(const void *vx, float *y, int64_t n) {
    for (int64_t ib = 0; ib < n / 32; ib++, y += 32) {
        float d;
        const uint8_t *qs = iq4xs_sub(vx, ib, &d);
        dequant_s8x32(load_iq4(qs), d, y);
    }
}
