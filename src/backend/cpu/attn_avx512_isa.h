/* attn_avx512_isa.h — the AVX-512 instructions behind attn_kernel.inc's
 * conversion and softmax primitives, for every AVX-512 variant (attn_avx512.c,
 * and through attn_bf16_isa.h attn_bf16_avx512.c and attn_amx_avx512.c);
 * include before the kernel. */
#ifndef TF_BACKEND_CPU_ATTN_AVX512_ISA_H
#define TF_BACKEND_CPU_ATTN_AVX512_ISA_H

#include <immintrin.h>
#define CVT_LOAD16(src) ((v16f)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src))))
#define CVT_I8V(c) ((v16f)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32((__m128i)(c))))
#define CVT_F16_1(h) _cvtsh_ss(h)
#define CVT_I8I(c) ((v16i)_mm512_cvtepi8_epi32((__m128i)(c)))
/* the q8_0 path's integer steps (attn_kernel.inc): VPMADDWD + VPADDD is
 * VPDPWSSD exactly (no pair here is two -32768s); the V pairs by byte
 * interleave within 128-bit lanes and sign extension; float to int32 by the
 * MXCSR rounding, which the kernel leaves at nearest-even */
#ifndef DPWSSD
#define DPWSSD(acc, a, b) ((v16i)_mm512_add_epi32((__m512i)(acc), _mm512_madd_epi16((__m512i)(a), _mm512_set1_epi32(b))))
#endif
#define V_I16PAIRS(p0, p1, lo, hi)                                                                                \
    do {                                                                                                          \
        const __m256i a_ = _mm256_loadu_si256((const __m256i *)(p0)), b_ = _mm256_loadu_si256((const __m256i *)(p1)); \
        (lo) = (v16i)_mm512_cvtepi8_epi16(_mm256_unpacklo_epi8(a_, b_));                                         \
        (hi) = (v16i)_mm512_cvtepi8_epi16(_mm256_unpackhi_epi8(a_, b_));                                         \
    } while (0)
/* q4_0: the two slots' 16 bytes of nibbles interleaved byte by byte, then
 * split into their low and high nibbles less 8, sign-extended: pairs in
 * dimension order (attn_kernel.inc, V_I16PAIRS_Q4) */
#define V_I16PAIRS_Q4(p0, p1, lo, hi)                                                                             \
    do {                                                                                                          \
        const __m128i x0_ = _mm_loadu_si128((const __m128i *)(p0)), x1_ = _mm_loadu_si128((const __m128i *)(p1)); \
        const __m256i y_ = _mm256_set_m128i(_mm_unpackhi_epi8(x0_, x1_), _mm_unpacklo_epi8(x0_, x1_));            \
        const __m256i m_ = _mm256_set1_epi8(15), e_ = _mm256_set1_epi8(8);                                         \
        (lo) = (v16i)_mm512_cvtepi8_epi16(_mm256_sub_epi8(_mm256_and_si256(y_, m_), e_));                          \
        (hi) = (v16i)_mm512_cvtepi8_epi16(_mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(y_, 4), m_), e_));    \
    } while (0)
/* The f16 values at base + j * stride (bytes) for lanes j < n, 0 in the
 * others: one VPGATHERDD of the 4 bytes at each (a V block's scale and its
 * first quants; the 2 above the value are dropped), where 16 scalar loads
 * into a buffer then read as one vector stall until the stores complete
 * (attn_kernel.inc's gather_f16) */
#define GATHER_F16(base, stride, n)                                                                               \
    ((v16f)_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_mask_i32gather_epi32(                                   \
        _mm512_setzero_si512(), (n) >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n)) - 1),                    \
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),              \
                           _mm512_set1_epi32((int)(stride))),                                                    \
        (const void *)(base), 1))))
#define VCVT_RNE(x) ((v16i)_mm512_cvtps_epi32((__m512)(x)))
/* the softmax weights' steps (attn_kernel.inc): one instruction each, the
 * same results as the vector-extension steps they replace */
#define VRINT(t) ((v16f)_mm512_roundscale_ps((__m512)(t), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define VSCALE2(p, n) ((v16f)_mm512_scalef_ps((__m512)(p), (__m512)(n)))
#define VANY_GT(a, b) (_mm512_cmp_ps_mask((__m512)(a), (__m512)(b), _CMP_GT_OQ) != 0)
#define VMAX_PS(a, b) ((v16f)_mm512_max_ps((__m512)(a), (__m512)(b)))

#endif
