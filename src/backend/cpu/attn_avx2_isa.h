/* attn_avx2_isa.h — the AVX2 + FMA + F16C instructions behind attn_kernel.inc's
 * conversions, comparisons and narrowing (16-lane vectors as two 256-bit
 * halves), for the AVX2 variants (attn_avx2.c, attn_vnni_avx2.c); include
 * before the kernel. */
#ifndef TF_BACKEND_CPU_ATTN_AVX2_ISA_H
#define TF_BACKEND_CPU_ATTN_AVX2_ISA_H

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
#define CVT_I8I(c)                                                                        \
    ({                                                                                    \
        __m128i c_ = (__m128i)(c);                                                        \
        __m256i lo_ = _mm256_cvtepi8_epi32(c_), hi_ = _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(c_, c_)); \
        v16i r_;                                                                          \
        memcpy(&r_, &lo_, sizeof lo_);                                                    \
        memcpy((char *)&r_ + sizeof lo_, &hi_, sizeof hi_);                               \
        r_;                                                                               \
    })
/* comparisons and narrowing in two 256-bit halves (GCC would go lane by lane) */
#define CMP_HALVES_(a, b, pred)                                                           \
    ({                                                                                    \
        v16f a_ = (a), b_ = (b);                                                          \
        __m256 al_, ah_, bl_, bh_;                                                        \
        memcpy(&al_, &a_, 32);                                                            \
        memcpy(&ah_, (char *)&a_ + 32, 32);                                               \
        memcpy(&bl_, &b_, 32);                                                            \
        memcpy(&bh_, (char *)&b_ + 32, 32);                                               \
        __m256 lo_ = _mm256_cmp_ps(al_, bl_, pred), hi_ = _mm256_cmp_ps(ah_, bh_, pred);  \
        v16i r_;                                                                          \
        memcpy(&r_, &lo_, 32);                                                            \
        memcpy((char *)&r_ + 32, &hi_, 32);                                               \
        r_;                                                                               \
    })
#define VGT_PS(a, b) CMP_HALVES_(a, b, _CMP_GT_OQ)
#define VGE_PS(a, b) CMP_HALVES_(a, b, _CMP_GE_OQ)
#define VNARROW16(u)                                                                      \
    ({                                                                                    \
        v16u u_ = (u);                                                                    \
        __m256i lo_, hi_;                                                                 \
        memcpy(&lo_, &u_, 32);                                                            \
        memcpy(&hi_, (char *)&u_ + 32, 32);                                               \
        __m256i p_ = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo_, hi_), 0xD8);       \
        v16h h_;                                                                          \
        memcpy(&h_, &p_, 32);                                                             \
        h_;                                                                               \
    })
#define ATTN_VREGS 16

#endif
