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
/* the softmax weights' steps (attn_kernel.inc): one instruction each, the
 * same results as the vector-extension steps they replace */
#define VRINT(t) ((v16f)_mm512_roundscale_ps((__m512)(t), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define VSCALE2(p, n) ((v16f)_mm512_scalef_ps((__m512)(p), (__m512)(n)))
#define VANY_GT(a, b) (_mm512_cmp_ps_mask((__m512)(a), (__m512)(b), _CMP_GT_OQ) != 0)
#define VMAX_PS(a, b) ((v16f)_mm512_max_ps((__m512)(a), (__m512)(b)))

#endif
