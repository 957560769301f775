/* attn_avx2.c — attention work item compiled for AVX2 + FMA + F16C, f16
 * caches in the emulated bf16 pairs (the generic bits; the integer products of
 * q8_0 / q4_0 caches emulated exactly; with AVX-VNNI: attn_vnni_avx2.c): the
 * AVX2 choice under TF_ATTN_ARITH=bf16 (attn.c; by default attn_f32_avx2.c). */
#include "backend/cpu/attn_avx2_isa.h"
#define ATTN_ISA(name) ATTN_CAT_(name, _avx2)
#include "backend/cpu/attn_kernel.inc"
