/* attn_avx512.c — attention work item compiled for AVX-512 without the BF16 instructions
 * (F16 conversion with vcvtph2ps zmm; bf16 dot products emulated exactly). */
#include <immintrin.h>
#define CVT_LOAD16(src) ((v16f)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src))))
#define ATTN_ISA(name) ATTN_CAT_(name, _avx512)
#include "backend/cpu/attn_kernel.inc"
