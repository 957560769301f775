/* attn_vnni_avx2.c — the AVX2 variant (attn_avx2.c) with AVX-VNNI's VEX
 * VPDPBUSD / VPDPWSSD for the q8_0 and q4_0 caches' integer products in place
 * of their exact emulation (the same bits; attn_avxvnni_isa.h): the AVX2
 * choice on CPUs that have them under TF_ATTN_ARITH=bf16 (attn.c; by default
 * its f32 sibling, attn_f32_vnni_avx2.c). */
#pragma GCC target("avxvnni")
#include "backend/cpu/attn_avx2_isa.h"
#include "backend/cpu/attn_avxvnni_isa.h"
#define ATTN_ISA(name) ATTN_CAT_(name, _vnni_avx2)
#include "backend/cpu/attn_kernel.inc"
