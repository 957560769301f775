/* attn_avxvnni_isa.h — AVX-VNNI's VEX VPDPBUSD / VPDPWSSD behind
 * attn_kernel.inc's integer dot products (the q8_0 and q4_0 caches' scores and
 * sums), on the two 256-bit halves of the 16 lanes, for the AVX2 variants
 * compiled with them (attn_vnni_avx2.c, attn_f32_vnni_avx2.c, each under
 * #pragma GCC target("avxvnni")); the same bits as the exact emulations they
 * replace. Include with attn_avx2_isa.h, before the kernel. */
#ifndef TF_BACKEND_CPU_ATTN_AVXVNNI_ISA_H
#define TF_BACKEND_CPU_ATTN_AVXVNNI_ISA_H

#include <immintrin.h>
#include <string.h>
/* acc + a . b per 32-bit lane, on the two 256-bit halves of the 16 lanes */
#define AVX2_VNNI_(op, acc, a, b)                                                         \
    ({                                                                                    \
        v16i acc_ = (acc), a_ = (a);                                                      \
        __m256i c0_, c1_, a0_, a1_;                                                       \
        memcpy(&c0_, &acc_, 32);                                                          \
        memcpy(&c1_, (char *)&acc_ + 32, 32);                                             \
        memcpy(&a0_, &a_, 32);                                                            \
        memcpy(&a1_, (char *)&a_ + 32, 32);                                               \
        const __m256i b_ = _mm256_set1_epi32(b);                                          \
        c0_ = op(c0_, a0_, b_);                                                           \
        c1_ = op(c1_, a1_, b_);                                                           \
        memcpy(&acc_, &c0_, 32);                                                          \
        memcpy((char *)&acc_ + 32, &c1_, 32);                                             \
        acc_;                                                                             \
    })
#define DPBUSD(acc, a, b) AVX2_VNNI_(_mm256_dpbusd_avx_epi32, acc, a, b)
#define DPWSSD(acc, a, b) AVX2_VNNI_(_mm256_dpwssd_avx_epi32, acc, a, b)

#endif
