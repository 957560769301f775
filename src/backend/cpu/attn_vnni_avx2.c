/* attn_vnni_avx2.c — the AVX2 variant (attn_avx2.c) with AVX-VNNI's VEX
 * VPDPBUSD / VPDPWSSD for the q8_0 and q4_0 caches' integer products in place
 * of their exact emulation (the same bits): the AVX2 choice on CPUs that have
 * them without AVX-512 (Intel's client cores from Alder Lake, its E-core
 * Xeons; attn.c, tf_attn_kernel_for). */
#pragma GCC target("avxvnni")
#include "backend/cpu/attn_avx2_isa.h"
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
#define ATTN_ISA(name) ATTN_CAT_(name, _vnni_avx2)
#include "backend/cpu/attn_kernel.inc"
