/* attn_avx2.c — attention work item compiled for AVX2 + FMA + F16C. */
#include <immintrin.h>
#define CVT_LOAD16(src)                                                                   \
    ({                                                                                    \
        __m256 lo_ = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src)));            \
        __m256 hi_ = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src) + 1));        \
        v16f r_;                                                                          \
        memcpy(&r_, &lo_, sizeof lo_);                                                    \
        memcpy((char *)&r_ + sizeof lo_, &hi_, sizeof hi_);                               \
        r_;                                                                               \
    })
#define ATTN_ISA(name) ATTN_CAT_(name, _avx2)
#include "backend/cpu/attn_kernel.inc"
