/* attn_avx2.c — attention work item compiled for AVX2 + FMA + F16C (the
 * integer products of q8_0 / q4_0 caches emulated exactly; with AVX-VNNI:
 * attn_vnni_avx2.c). */
#include "backend/cpu/attn_avx2_isa.h"
#define ATTN_ISA(name) ATTN_CAT_(name, _avx2)
#include "backend/cpu/attn_kernel.inc"
