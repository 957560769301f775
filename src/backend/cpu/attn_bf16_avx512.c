/* attn_bf16_avx512.c — attention work item for AVX-512 with AVX512_BF16 (Zen 4,
 * Sapphire Rapids and later): bf16 dot products with VDPBF16PS, K/V tiles
 * rounded with VCVTNE2PS2BF16. Chosen at run time only when the CPU has the
 * extension (attn.c); the bits equal the emulation of the other variants. */
#pragma GCC target("avx512bf16,avx512vnni")
#include "backend/cpu/attn_bf16_isa.h"
#define ATTN_ISA(name) ATTN_CAT_(name, _bf16_avx512)
#include "backend/cpu/attn_kernel.inc"
