/* attn_f32_generic.c — the f32 variant's arithmetic (attn_kernel_f32.inc: f16
 * caches in f32 FMAs, fmaf lane by lane here) for any x86-64: never chosen to
 * run (it is slow), it gives the f32 variants' bits on every machine, so that
 * tests/test_attn.c compares the AVX2 and AVX-512 builds with it bit for bit
 * wherever they run. */
#include "backend/cpu/attn_generic_isa.h"
#define ATTN_F32 1
#define ATTN_ISA(name) ATTN_CAT_(name, _f32_generic)
#include "backend/cpu/attn_kernel.inc"
