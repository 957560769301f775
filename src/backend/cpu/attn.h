/*
 * attn.h — attention over a KV cache on the CPU (prefill and decode alike).
 *
 * For every query row i (a token) and head hq, with KV head h = hq / (n_head /
 * n_head_kv):   out[i][hq] = softmax(scale * q[i][hq] . K[h][s]) . V[h][s]
 * over the visible slots s < kv_len[i]. Flash-attention style: key tiles with
 * an online softmax, so memory is O(tile), never O(n_q * n_kv). Work is split
 * over (KV head, query tile, key range) items and merged exactly.
 *
 * Arithmetic, f16 cache (the default) and head_dim a multiple of 16: bf16
 * inputs, f32 accumulation. The pre-scaled query, K, V and the softmax weights
 * are rounded to bf16 (nearest even) and their products summed in f32 in the
 * order of the AVX512_BF16 dot instruction; the softmax and the merge are f32.
 * The relative error is that of bf16 inputs, about 2^-9 per value, averaging
 * down over a head's dimensions and keys. q8_0 and q4_0 caches: integer
 * products (VPDPBUSD / VPDPWSSD or their exact emulation): the query quantized
 * to int8 per 32 dimensions, the scores exact int32 sums per segment then
 * scaled in f32; the softmax weights times the V scales rounded to int16 per
 * tile, summed with the int8 (q4_0: 4-bit) V quants in int32 (attn_kernel.inc,
 * "q8_0 and q4_0 caches"). f32 caches and other head sizes: f32 throughout,
 * one query row at a time (the full-precision choice, slower).
 *
 * Batch invariance: for batches of up to 16 rows (decode and speculative
 * verification) every row's output is bitwise identical to computing that
 * row alone, on any thread count and with every kernel variant (the bf16
 * instructions where the CPU has them, an exact emulation elsewhere) —
 * greedy speculative decoding relies on it.
 *
 * The AMX variant (TF_ATTN_AMX, chosen at TF_ISA_AMX) computes the same bf16
 * products on the tile unit for head_dim a multiple of 32: each 64-key tile's
 * scores and P V are tile products of up to 16 query rows, and a row's
 * accumulator becomes acc * corr + (P V of the tile). A tile product's output
 * row depends on its own input row only, so the variant is batch invariant
 * too, but its summation order is the unit's, not VDPBF16PS's: its bits are
 * its own (the same on every machine with AMX), not the other variants'.
 * Other head sizes, f32, q8_0 and q4_0 caches take the AVX-512 BF16 variant's code
 * (the same bits as every other variant).
 *
 * The f32 variant (TF_ATTN_AVX512_F32) computes an f16 cache's attention in
 * f32 instead: K and V converted exactly, f32 FMAs, f32 softmax weights, no
 * bf16 rounding (attn_kernel_f32.inc). Batch invariant the same way, its bits
 * its own. It is the AVX-512 choice where VDPBF16PS is slow or missing (on an
 * Intel Xeon measured here, a quarter of the FMA rate: half the multiply-adds
 * a second); tf_attn_kernel_for says where. Its other paths are the shared
 * ones; TF_ATTN_AVX512_F32_VNNI is the same variant with the VNNI instructions
 * for the q8_0 and q4_0 caches' integer products (else emulated, exactly).
 * TF_ATTN_AVX2_F32 (and _VNNI, with AVX-VNNI) computes the same bits on 8-lane
 * vectors (attn_kernel_f32_h8.inc), the AVX2 choice; TF_ATTN_GENERIC_F32 on
 * any x86-64 (fmaf per lane), for the tests: never chosen.
 */
#ifndef TF_BACKEND_CPU_ATTN_H
#define TF_BACKEND_CPU_ATTN_H

#include "backend/cpu/kv_layout.h"
#include "backend/cpu/quant.h"
#include "core/threads.h"

typedef struct tf_attn_args {
    const float *q;        /* [n_q][n_head * head_dim], row stride ldq */
    int64_t ldq;
    tf_kv_view kv;         /* one layer's K/V storage (kv/kv.h: tf_kv_layer_view) */
    int32_t n_q;           /* query rows */
    const int32_t *kv_len; /* [n_q] visible slots of each row (>= 1, <= the slots written) */
    int32_t gap_lo, gap_hi; /* slots [gap_lo, gap_hi) are visible to no row (gap_lo >= gap_hi: none); every
                             * row sees at least one slot */
    int32_t n_head;        /* query heads (multiple of kv.n_head_kv) */
    float scale;           /* usually 1/sqrt(head_dim) */
    float *out;            /* [n_q][n_head * head_dim], row stride ldo */
    int64_t ldo;
} tf_attn_args;

/* Scratch bytes tf_cpu_attn needs for up to n_q_max rows and n_kv_max visible
 * slots with n_threads. */
size_t tf_attn_scratch_size(int n_threads, int32_t n_q_max, int32_t n_head, int32_t head_dim, int32_t n_kv_max);

/* Fast path on the pool with the given ISA (capped to the CPU's): the variant
 * tf_attn_kernel_for(isa) names. */
void tf_cpu_attn(tf_pool *pool, tf_isa isa, const tf_attn_args *a, void *scratch);

/* The kernel variants, for tests and benchmarks; all give the same bits but
 * TF_ATTN_AMX and the f32 variants (tf_attn_kernel_bits). */
typedef enum tf_attn_kernel {
    TF_ATTN_GENERIC = 0,     /* any x86-64 */
    TF_ATTN_AVX2 = 1,        /* AVX2 + FMA + F16C */
    TF_ATTN_AVX512 = 2,      /* AVX-512 F/BW/VL/DQ, bf16 emulated */
    TF_ATTN_AVX512_BF16 = 3, /* ... with AVX512_BF16 (VDPBF16PS) */
    TF_ATTN_AMX = 4,         /* ... and the AMX-BF16 tile products (its own bits, see above) */
    TF_ATTN_AVX512_F32 = 5,  /* AVX-512, f16 caches in f32 FMAs (its own bits, see above) */
    TF_ATTN_AVX512_F32_VNNI = 6, /* ... with AVX512_VNNI for the q8_0 / q4_0 products (TF_ATTN_AVX512_F32's bits) */
    TF_ATTN_AVX2_VNNI = 7,   /* AVX2 with AVX-VNNI for the q8_0 / q4_0 products (the generic bits) */
    TF_ATTN_GENERIC_F32 = 8, /* any x86-64, f16 caches in f32 FMAs (TF_ATTN_AVX512_F32's bits; for tests) */
    TF_ATTN_AVX2_F32 = 9,    /* AVX2, f16 caches in f32 FMAs on 8-lane halves (TF_ATTN_AVX512_F32's bits) */
    TF_ATTN_AVX2_F32_VNNI = 10, /* ... with AVX-VNNI for the q8_0 / q4_0 products (the same bits) */
    TF_ATTN_KERNEL_COUNT
} tf_attn_kernel;

/* The variant tf_cpu_attn runs for isa (capped to the CPU's). */
tf_attn_kernel tf_attn_kernel_for(tf_isa isa);

/* Whether this CPU can run kernel variant k; its name ("avx512_bf16", ...). */
int tf_attn_kernel_supported(tf_attn_kernel k);
const char *tf_attn_kernel_name(tf_attn_kernel k);

/* The variant whose bits k gives for caches of type with heads of head_dim:
 * TF_ATTN_AMX on its tile path, TF_ATTN_AVX512_F32 for both f32 variants on
 * theirs, otherwise TF_ATTN_GENERIC (every other path is shared bit for bit). */
tf_attn_kernel tf_attn_kernel_bits(tf_attn_kernel k, uint32_t type, int head_dim);

/* tf_cpu_attn with variant k (which must be supported). */
void tf_cpu_attn_kernel(tf_pool *pool, tf_attn_kernel k, const tf_attn_args *a, void *scratch);

/* Variant k's bf16 primitives on 16 lanes (see attn_item.h), for the test that
 * every variant computes the same bits. */
void tf_attn_bf16_dot(tf_attn_kernel k, float acc[16], const uint32_t a[16], const uint32_t b[16]);
void tf_attn_bf16_pack2(tf_attn_kernel k, uint32_t out[16], const float lo[16], const float hi[16]);

/* Scalar double-precision reference (single-threaded, allocation-free). */
void tf_ref_attn(const tf_attn_args *a);

#endif
