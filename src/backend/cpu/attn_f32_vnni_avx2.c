/* attn_f32_vnni_avx2.c — the AVX2 f32 variant (attn_f32_avx2.c, the same
 * bits) with AVX-VNNI's integer products for the q8_0 and q4_0 caches
 * (attn_avxvnni_isa.h; the same bits as their emulation): the AVX2 choice on
 * CPUs that have them (attn.c, tf_attn_kernel_for). */
#pragma GCC target("avxvnni")
#include "backend/cpu/attn_avx2_isa.h"
#include "backend/cpu/attn_avxvnni_isa.h"
#define ATTN_F32 1
#define ATTN_ISA(name) ATTN_CAT_(name, _f32_vnni_avx2)
#include "backend/cpu/attn_kernel.inc"
