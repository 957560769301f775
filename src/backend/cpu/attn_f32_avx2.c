/* attn_f32_avx2.c — attention work item for AVX2 + FMA + F16C whose f16 caches
 * take f32 FMAs over the exactly converted values (attn_kernel_f32.inc, on
 * 8-lane halves: attn_kernel_f32_h8.inc), the AVX-512 f32 variant's bits: the
 * AVX2 choice (attn.c, tf_attn_kernel_for; with AVX-VNNI,
 * attn_f32_vnni_avx2.c). The other caches' paths are the shared ones, with
 * the generic bits. */
#include "backend/cpu/attn_avx2_isa.h"
#define ATTN_F32 1
#define ATTN_ISA(name) ATTN_CAT_(name, _f32_avx2)
#include "backend/cpu/attn_kernel.inc"
