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
#define CVT_I8V(c)                                                                        \
    ({                                                                                    \
        __m128i c_ = (__m128i)(c);                                                        \
        __m256 lo_ = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c_));                        \
        __m256 hi_ = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(c_, c_)));  \
        v16f r_;                                                                          \
        memcpy(&r_, &lo_, sizeof lo_);                                                    \
        memcpy((char *)&r_ + sizeof lo_, &hi_, sizeof hi_);                               \
        r_;                                                                               \
    })
#define CVT_F16_1(h) _cvtsh_ss(h)
#define ATTN_ISA(name) ATTN_CAT_(name, _avx2)
#include "backend/cpu/attn_kernel.inc"
