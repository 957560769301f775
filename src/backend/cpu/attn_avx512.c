/* attn_avx512.c — attention work item compiled for AVX-512 without the BF16 instructions
 * (F16 conversion with vcvtph2ps zmm; bf16 dot products emulated exactly). */
#include "backend/cpu/attn_avx512_isa.h"
#define ATTN_ISA(name) ATTN_CAT_(name, _avx512)
#include "backend/cpu/attn_kernel.inc"
