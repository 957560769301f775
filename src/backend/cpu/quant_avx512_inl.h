/*
 * quant_avx512_inl.h — inline helpers shared by the AVX-512 kernel files
 * (quant_avx512.c, quant_packed_avx512.c): lane sums in the packed path's
 * reference order, vpdpbusd without a VNNI compiler flag, the block formats'
 * kinds and their scale spreading. Include only from files compiled with the
 * AVX-512 flags (*_avx512.c).
 */
#ifndef TF_BACKEND_CPU_QUANT_AVX512_INL_H
#define TF_BACKEND_CPU_QUANT_AVX512_INL_H

#include "backend/cpu/quant_x86_inl.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "core/fp16.h"

/* The sum of a's 16 lanes in the order of the packed path's reference
 * (reduce16 in quant_pack.c): halves of 8, then of 4, then (0 + 2) + (1 + 3).
 * Spelled out rather than left to _mm512_reduce_add_ps, whose order is the
 * compiler's: a row's bits must not depend on how many share its tile. */
TF_AI float hsum_tree(__m512 a) {
    __m256 s8 = _mm256_add_ps(_mm512_extractf32x8_ps(a, 1), _mm512_castps512_ps256(a));
    __m128 s4 = _mm_add_ps(_mm256_extractf128_ps(s8, 1), _mm256_castps256_ps128(s8));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* vpdpbusd (acc += u8 x s8, 4 products per int32 lane), emitted through asm so
 * that this file needs no VNNI compiler flag; only reached from the
 * avx512vnni functions, which the dispatcher hands out only on VNNI CPUs. */
TF_AI __m512i dpbusd_vnni(__m512i acc, __m512i u, __m512i s) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
    return acc;
}

/* dpbusd_vnni with the s8 operand read from memory (64 bytes at s). */
TF_AI __m512i dpbusd_vnni_mem(__m512i acc, __m512i u, const void *s) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const char(*)[64])s));
    return acc;
}

/* u8 x s8 dot into int32 lanes without VNNI (no saturation: |u*s| pairs < 2^15
 * for the operand ranges used here). */
TF_AI __m512i dpbusd_plain(__m512i u, __m512i s) {
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
}

/* [sum(a), sum(b), sum(c), sum(d)]: four horizontal sums in 14 operations
 * (fold 512 -> 128 bits across the four vectors, then within 128 bits), each
 * with hsum_tree's additions, bit for bit. */
TF_AI __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
    __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
    __m512 z = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
    z = _mm512_add_ps(z, _mm512_permute_ps(z, 0x4E)); /* (0 + 2), (1 + 3) */
    z = _mm512_add_ps(z, _mm512_permute_ps(z, 0xB1));
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12), z));
}


/* IQ4's value table V in every 128-bit lane, as s8 (offset 0) or as the u8
 * V + 128 (offset 128), for vpshufb lookups. */
TF_AI __m512i iq4_table(int offset) {
    __m128i v = _mm_loadu_si128((const __m128i *)tf_iq4_values);
    if (offset) v = _mm_xor_si128(v, _mm_set1_epi8((char)0x80));
    return _mm512_broadcast_i32x4(v);
}

/* Lane -> block maps of the int32 lanes: Q8_0 vectors hold [block0 | block1]
 * in 256-bit halves; Q4_x / Q5_x vectors hold [lo0 | lo1 | hi0 | hi1] in
 * 128-bit quarters (elements 0..15 = lo, 16..31 = hi of each block). */
TF_AI __m512i block_lane_map(int kind) {
    if (kind == K_Q8_0) return _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0);
}

/* The scales of blocks ib and ib+1 (elements 0 and 1 of f) spread over the
 * lanes of their blocks. */
TF_AI __m512 block_scales_f32(int kind, __m128 f) {
    return _mm512_permutexvar_ps(block_lane_map(kind), _mm512_castps128_ps512(f));
}

#endif
