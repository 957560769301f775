/* attn_bf16_isa.h — the AVX-512 BF16 instructions behind attn_kernel.inc's
 * conversion and bf16 primitives, for the variants that have them
 * (attn_bf16_avx512.c, attn_amx_avx512.c); include before the kernel. */
#ifndef TF_BACKEND_CPU_ATTN_BF16_ISA_H
#define TF_BACKEND_CPU_ATTN_BF16_ISA_H

#include <immintrin.h>
#define CVT_LOAD16(src) ((v16f)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src))))
/* acc += pairs a . pairs b (see bf16_dot_emu for the order) */
#define BF16_DOT(acc, a, b) ((v16f)_mm512_dpbf16_ps((__m512)(acc), (__m512bh)(a), (__m512bh)(b)))
/* VCVTNE2PS2BF16 puts lo's 16 results in words 0-15 and hi's in 16-31;
 * VPERMW interleaves them into pairs (lo[i], hi[i]). */
#define BF16_PACK2(lo, hi)                                                                             \
    ((v16u)_mm512_permutexvar_epi16(                                                                   \
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, \
                         20, 4, 19, 3, 18, 2, 17, 1, 16, 0),                                          \
        (__m512i)_mm512_cvtne2ps_pbh((__m512)(hi), (__m512)(lo))))
#define CVT_I8V(c) ((v16f)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32((__m128i)(c))))
#define CVT_F16_1(h) _cvtsh_ss(h)

#endif
