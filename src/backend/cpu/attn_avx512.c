/* attn_avx512.c — attention work item compiled for AVX-512 without the BF16 instructions
 * (F16 conversion with vcvtph2ps zmm; bf16 dot products emulated exactly). */
#include <immintrin.h>
#define CVT_LOAD16(src) ((v16f)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src))))
#define CVT_I8V(c) ((v16f)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32((__m128i)(c))))
#define CVT_F16_1(h) _cvtsh_ss(h)
#define ATTN_ISA(name) ATTN_CAT_(name, _avx512)
#include "backend/cpu/attn_kernel.inc"
