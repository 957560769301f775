/* attn_vnni_isa.h — the AVX512_VNNI instructions behind attn_kernel.inc's
 * integer dot products (the q8_0 and q4_0 caches' scores and sums), for the
 * variants compiled with them (attn_bf16_avx512.c, attn_amx_avx512.c through
 * attn_bf16_isa.h, and attn_f32_vnni_avx512.c); include before
 * attn_avx512_isa.h, whose exact emulations they replace. */
#ifndef TF_BACKEND_CPU_ATTN_VNNI_ISA_H
#define TF_BACKEND_CPU_ATTN_VNNI_ISA_H

#include <immintrin.h>
#define DPBUSD(acc, a, b) ((v16i)_mm512_dpbusd_epi32((__m512i)(acc), (__m512i)(a), _mm512_set1_epi32(b)))
#define DPWSSD(acc, a, b) ((v16i)_mm512_dpwssd_epi32((__m512i)(acc), (__m512i)(a), _mm512_set1_epi32(b)))

#endif
