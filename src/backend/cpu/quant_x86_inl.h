/*
 * quant_x86_inl.h — inline helpers shared by the x86 weight-format kernels
 * (quant_avx2.c, and through quant_avx512_inl.h the AVX-512 files): the
 * kernel kinds, exact f16 scales, and the byte-level unpacking of block
 * fields in 256-bit (AVX2) operations, which every x86 table runs the same
 * way. Include only from files compiled with at least AVX2 + F16C.
 */
#ifndef TF_BACKEND_CPU_QUANT_X86_INL_H
#define TF_BACKEND_CPU_QUANT_X86_INL_H

#include "backend/cpu/quant_impl.h"

#include <immintrin.h>
#include <string.h>

#include "core/fp16.h"

#define TF_AI static inline __attribute__((always_inline))

TF_AI float f16(uint16_t h) { return _cvtsh_ss(h); } /* exact, as tf_f16_to_f32 */

/* Kernel kinds within each family of the registry (core/dtype_list.h),
 * K_<ID> for TF_DTYPE_<ID>, and the families as the kernels number them. */
enum { K_F32, K_F16, K_BF16 };                                       /* FLOAT */
enum { K_Q8_0, K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_IQ4_NL, K_IQ4_XS }; /* Q32 */
enum { K_Q4_K, K_Q6_K, K_Q5_K, K_Q3_K, K_Q2_K };                     /* QK */
#define TF_X86_FAM_FLOAT 0
#define TF_X86_FAM_Q32 1
#define TF_X86_FAM_QK 2

/* The tile entry point tf_<isa>_tile_<nm> (tf_vec_dot_tile_fn) as a call of
 * the including file's tile_dispatch(<its leading arguments>, the tile's). */
#define TF_X86_TILE_ENTRY(isa, nm, ...)                                                                      \
    void tf_##isa##_tile_##nm(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, \
                              float *out, int64_t ldo) {                                                     \
        tile_dispatch(__VA_ARGS__, n, w, ws, nr, a, as, nt, out, ldo);                                       \
    }

/* Formats x = d q + m, whose activations are Q8_1 blocks. */
#define K0_HAS_MIN(kind) ((kind) == K_Q4_1 || (kind) == K_Q5_1)
/* Formats whose weights are s8 values (Q8_0's quants, IQ4's table values). */
#define K0_SIGNED(kind) ((kind) == K_Q8_0 || (kind) == K_IQ4_NL || (kind) == K_IQ4_XS)
#define K0_IS_IQ4(kind) ((kind) == K_IQ4_NL || (kind) == K_IQ4_XS)

/* IQ4_XS: block ib of a row counted in sub-blocks of 32: its indices and its
 * scale d (ls - 32) (exact). */
TF_AI const uint8_t *iq4xs_sub(const char *row, int64_t ib, float *scale) {
    const tf_block_iq4_xs *b = (const tf_block_iq4_xs *)row + ib / 8;
    *scale = f16(b->d) * (float)(tf_iq4_xs_scale(b, (int)(ib % 8)) - 32);
    return b->qs + 16 * (ib % 8);
}

/* Q4_K / Q5_K packed 6-bit scales -> sc[0..7] in bytes 0..7 of *sc, mins likewise. */
static inline void q4k_unpack_scales(const uint8_t *s, uint64_t *sc, uint64_t *m) {
    uint32_t u[3];
    memcpy(u, s, 12);
    uint32_t sc_lo = u[0] & 0x3f3f3f3fu, m_lo = u[1] & 0x3f3f3f3fu;
    uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    uint32_t m_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    *sc = sc_lo | (uint64_t)sc_hi << 32;
    *m = m_lo | (uint64_t)m_hi << 32;
}

/* Q3_K's 16 packed 6-bit scales as bytes 0..63 (q3k_scale of quant_ref.c,
 * four groups at a time). */
static inline __m128i q3k_unpack_scales(const uint8_t *s) {
    uint32_t u[3], o[4];
    memcpy(u, s, 12);
    o[0] = (u[0] & 0x0f0f0f0fu) | ((u[2] & 0x03030303u) << 4);
    o[1] = (u[1] & 0x0f0f0f0fu) | (((u[2] >> 2) & 0x03030303u) << 4);
    o[2] = ((u[0] >> 4) & 0x0f0f0f0fu) | (((u[2] >> 4) & 0x03030303u) << 4);
    o[3] = ((u[1] >> 4) & 0x0f0f0f0fu) | (((u[2] >> 6) & 0x03030303u) << 4);
    return _mm_loadu_si128((const __m128i *)o);
}

/* Bit `from` of every byte moved to bit `to` (other bits cleared). */
TF_AI __m256i bit_move(__m256i v, int from, int to) {
    __m256i m = from < to ? _mm256_slli_epi16(v, to - from) : from > to ? _mm256_srli_epi16(v, from - to) : v;
    return _mm256_and_si256(m, _mm256_set1_epi8((char)(1 << to)));
}

/* Q2_K / Q3_K: the 2-bit fields of qs (64 bytes) as u8 quants in element
 * order (element 128 h + 32 j + l is bits 2j of qs[32 h + l]); Q3_K ORs in
 * bit 2 from hmask. */
TF_AI void q2bits_unpack(const uint8_t *qs, const uint8_t *hmask, uint8_t *q) {
    const __m256i three = _mm256_set1_epi8(3);
    __m256i hm = hmask ? _mm256_loadu_si256((const __m256i *)hmask) : _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256i x = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), three);
            if (hmask) x = _mm256_or_si256(x, bit_move(hm, 4 * h + j, 2));
            _mm256_storeu_si256((__m256i *)(q + 128 * h + 32 * j), x);
        }
    }
}

#endif
