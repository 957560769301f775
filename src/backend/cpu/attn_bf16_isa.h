/* attn_bf16_isa.h — the AVX-512 BF16 instructions behind attn_kernel.inc's
 * bf16 primitives, with attn_avx512_isa.h's, for the variants that have them
 * (attn_bf16_avx512.c, attn_amx_avx512.c); include before the kernel. */
#ifndef TF_BACKEND_CPU_ATTN_BF16_ISA_H
#define TF_BACKEND_CPU_ATTN_BF16_ISA_H

/* the q8_0 path's integer dot products (AVX512_VNNI: every CPU with
 * AVX512_BF16 has it; attn.c checks both) */
#include "backend/cpu/attn_vnni_isa.h"
#include "backend/cpu/attn_avx512_isa.h"
/* acc += pairs a . pairs b (see bf16_dot_emu for the order) */
#define BF16_DOT(acc, a, b) ((v16f)_mm512_dpbf16_ps((__m512)(acc), (__m512bh)(a), (__m512bh)(b)))
/* VCVTNE2PS2BF16 puts lo's 16 results in words 0-15 and hi's in 16-31;
 * VPERMW interleaves them into pairs (lo[i], hi[i]). */
#define BF16_PACK2(lo, hi)                                                                             \
    ((v16u)_mm512_permutexvar_epi16(                                                                   \
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, \
                         20, 4, 19, 3, 18, 2, 17, 1, 16, 0),                                          \
        (__m512i)_mm512_cvtne2ps_pbh((__m512)(hi), (__m512)(lo))))
/* VCVTNEPS2BF16 rounds as bf16_round does (it reads a subnormal as zero: the
 * weights have none) */
#define BF16_NARROW(x, h)                                                                  \
    ({                                                                                     \
        __m256i h_ = (__m256i)_mm512_cvtneps_pbh((__m512)(x));                             \
        memcpy(&(h), &h_, sizeof h_);                                                      \
        (v16u)_mm512_slli_epi32(_mm512_cvtepu16_epi32(h_), 16);                            \
    })

#endif
