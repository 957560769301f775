/* attn_avx2.c — attention work item compiled for AVX2 + FMA + F16C. */
#include <immintrin.h>
#define CVT_F16x16(src, dst)                                                                            \
    do {                                                                                                \
        _mm256_storeu_ps((dst), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src))));              \
        _mm256_storeu_ps((dst) + 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src) + 1)));      \
    } while (0)
#define ATTN_ITEM_FN tf_attn_item_avx2
#include "backend/cpu/attn_kernel.inc"
