/* attn_f32_avx512.c — attention work item for AVX-512 whose f16 caches take f32
 * FMAs over the exactly converted values (attn_kernel_f32.inc) instead of
 * bf16 pairs: the variant for CPUs where VDPBF16PS is slow or absent (attn.c,
 * tf_attn_kernel_for; on CPUs with AVX512_VNNI its build with those
 * instructions, attn_f32_vnni_avx512.c). Its f16 results are its own bits;
 * the other caches' paths are the shared ones, with the other variants' bits. */
#include "backend/cpu/attn_avx512_isa.h"
#define ATTN_F32 1
#define ATTN_ISA(name) ATTN_CAT_(name, _f32_avx512)
#include "backend/cpu/attn_kernel.inc"
