/* attn_f32_vnni_avx512.c — the f32 variant (attn_f32_avx512.c: f16 caches in
 * f32 FMAs, the same bits) with AVX512_VNNI's VPDPBUSD / VPDPWSSD for the
 * q8_0 and q4_0 caches' integer products in place of their emulation (the
 * same bits too): the choice on AVX-512 CPUs with VNNI where the f32
 * arithmetic is (attn.c, tf_attn_kernel_for). Without it a quantized cache's
 * attention on such a CPU ran 2-2.5x slower than its bf16 variant's
 * (docs/BENCHMARKS.md). */
#pragma GCC target("avx512vnni")
#include "backend/cpu/attn_vnni_isa.h"
#include "backend/cpu/attn_avx512_isa.h"
#define ATTN_F32 1
#define ATTN_ISA(name) ATTN_CAT_(name, _f32_vnni_avx512)
#include "backend/cpu/attn_kernel.inc"
