/*
 * quant_dispatch.c — the kernel tables of quant.h and the run-time choice
 * among them.
 *
 * Five static tables: scalar (the tf_ref_* functions behind adapters), avx2,
 * avx512, avx512 with VNNI (avx512 float kernels, VNNI integer dot
 * products, the packed path of the Q32 family, Q4_K and Q5_K) and amx (the VNNI
 * table plus Q8_0, Q4_0, Q4_1 and IQ4_NL products over R16 weights on the
 * tile unit). tf_cpu_kernels_get caps the
 * request to what the CPU reports through __builtin_cpu_supports (which
 * also checks that the OS saves the vector state), so a table is never
 * handed out on a CPU that cannot run it.
 */
#include "backend/cpu/quant_impl.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

void tf_cpu_copy_f32(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }
void tf_cpu_dequantize_f32(const void *x, float *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

/* ---- scalar adapters: table signatures over the references ------------------ */

static void tf_scalar_quantize_q8_0(const float *x, void *y, int64_t n) { tf_ref_quantize_row(TF_DTYPE_Q8_0, x, y, n); }
static void tf_scalar_quantize_q8_1(const float *x, void *y, int64_t n) { tf_ref_quantize_row(TF_DTYPE_Q8_1, x, y, n); }
static void tf_scalar_quantize_q8_k(const float *x, void *y, int64_t n) { tf_ref_quantize_row(TF_DTYPE_Q8_K, x, y, n); }
#define tf_scalar_quantize_f32 tf_cpu_copy_f32

#define TF_SCALAR_ADAPTERS_(ID, nm, ...)                                                                     \
    static void tf_scalar_dequantize_##nm(const void *x, float *y, int64_t n) {                             \
        tf_ref_dequantize_row(TF_DTYPE_##ID, x, y, n);                                                      \
    }                                                                                                        \
    /* the tile contract by nr x nt calls of the reference dot product */                                    \
    static void tf_scalar_tile_##nm(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,  \
                                    int nt, float *out, int64_t ldo) {                                       \
        for (int t = 0; t < nt; t++)                                                                         \
            for (int r = 0; r < nr; r++)                                                                     \
                out[t * ldo + r] =                                                                           \
                    tf_ref_vec_dot(TF_DTYPE_##ID, n, (const char *)w + r * ws, (const char *)a + t * as);   \
    }
TF_DTYPE_LIST(TF_SCALAR_ADAPTERS_)
#undef TF_SCALAR_ADAPTERS_

/* ---- tables ------------------------------------------------------------------- */

/*
 * One table per ISA, every slot generated from the registry. A table is
 * described by the names below, defined before each KERNEL_TABLE:
 *   FLOAT_ISA  prefix of the activation functions and of the float types'
 *              dot products;
 *   DEQ_ISA    prefix of the dequantize functions (the x86 tables share
 *              AVX2's: a row per embedded token is no hot path);
 *   INT_ISA    prefix of the integer families' (Q32, QK) dot products;
 *   ROWS_*, TOKS_*  tile shape per family;
 *   PACK_*     the packed path's slots per family (empty: none).
 */
#define KSLOT(ID, fn) [TF_DTYPE_##ID] = fn,
#define ISA_FLOAT FLOAT_ISA
#define ISA_Q32 INT_ISA
#define ISA_QK INT_ISA
#define ACTQ_(ID, nm, id, bs, bytes, act, ...) KSLOT(ID, TF_KFN(FLOAT_ISA, quantize, act))
#define DEQ_(ID, nm, ...) KSLOT(ID, TF_KFN(DEQ_ISA, dequantize, nm))
#define TILE_(ID, nm, id, bs, bytes, act, fam, ...) KSLOT(ID, TF_KFN(ISA_##fam, tile, nm))
#define ROWS_(ID, nm, id, bs, bytes, act, fam, ...) KSLOT(ID, ROWS_##fam)
#define TOKS_(ID, nm, id, bs, bytes, act, fam, ...) KSLOT(ID, TOKS_##fam)
#define APACK_(ID, nm, id, bs, bytes, act, fam, ...) APACK_##fam(ID, nm)
#define PTILE_(ID, nm, id, bs, bytes, act, fam, ...) PTILE_##fam(ID, nm)
#define WTILE_(ID, nm, id, bs, bytes, act, fam, ...) WTILE_##fam(ID, nm)
#define KERNEL_TABLE(name)                                                                                   \
    {                                                                                                        \
        .isa = name, .act_quantize = {TF_DTYPE_LIST(ACTQ_)},                                            \
        .dequantize = {TF_DTYPE_LIST(DEQ_)}, .vec_dot_tile = {TF_DTYPE_LIST(TILE_)},                         \
        .tile_rows = {TF_DTYPE_LIST(ROWS_)}, .tile_toks = {TF_DTYPE_LIST(TOKS_)},                            \
        .act_pack = {TF_DTYPE_LIST(APACK_)}, .packed_tile = {TF_DTYPE_LIST(PTILE_)},                         \
        .wpacked_tile = {TF_DTYPE_LIST(WTILE_)}, .r16_act = {R16_ACT}, .r16_rows = {R16_ROWS},                \
    }
#define NO_PACK(ID, nm)
#define R16_ACT
#define R16_ROWS

#define FLOAT_ISA scalar
#define INT_ISA scalar
#define DEQ_ISA scalar
#define ROWS_FLOAT 4
#define ROWS_Q32 4
#define ROWS_QK 4
#define TOKS_FLOAT 4
#define TOKS_Q32 4
#define TOKS_QK 4
#define APACK_FLOAT NO_PACK
#define APACK_Q32 NO_PACK
#define APACK_QK NO_PACK
#define PTILE_FLOAT NO_PACK
#define PTILE_Q32 NO_PACK
#define PTILE_QK NO_PACK
#define WTILE_FLOAT NO_PACK
#define WTILE_Q32 NO_PACK
#define WTILE_QK NO_PACK
static const tf_cpu_kernels k_scalar = KERNEL_TABLE("scalar");

#undef FLOAT_ISA
#undef INT_ISA
#undef TOKS_FLOAT
#undef TOKS_Q32
#undef TOKS_QK
#undef DEQ_ISA
#define FLOAT_ISA avx2
#define INT_ISA avx2
#define DEQ_ISA avx2
#define TOKS_FLOAT 2
#define TOKS_Q32 2
#define TOKS_QK 2
static const tf_cpu_kernels k_avx2 = KERNEL_TABLE("avx2");

#undef FLOAT_ISA
#undef INT_ISA
#undef ROWS_FLOAT
#undef TOKS_FLOAT
#undef TOKS_Q32
#undef TOKS_QK
#define FLOAT_ISA avx512
#define INT_ISA avx512
#define ROWS_FLOAT 8
#define TOKS_FLOAT 3
#define TOKS_Q32 4
#define TOKS_QK 4
static const tf_cpu_kernels k_avx512 = KERNEL_TABLE("avx512");

#undef INT_ISA
#undef APACK_Q32
#undef PTILE_Q32
#undef WTILE_Q32
#define INT_ISA avx512vnni
#undef APACK_QK
#undef PTILE_QK
#undef WTILE_QK
#define APACK_Q32(ID, nm) KSLOT(ID, tf_avx512_act_pack_##nm)
#define PTILE_Q32(ID, nm) KSLOT(ID, tf_avx512vnni_packed_tile_##nm)
#define WTILE_Q32(ID, nm) KSLOT(ID, tf_avx512vnni_wpacked_tile_##nm)
/* of the K-quants, Q4_K and Q5_K (sub-blocks of 32 with a scale and offset each) and Q6_K, Q3_K and Q2_K
 * (blocks of 32 as two sub-blocks of 16 with a scale, and for Q2_K a min, each) have the packed path */
#define QK_PACKS_Q2_K(X, nm) X(Q2_K, nm)
#define QK_PACKS_Q3_K(X, nm) X(Q3_K, nm)
#define QK_PACKS_Q4_K(X, nm) X(Q4_K, nm)
#define QK_PACKS_Q5_K(X, nm) X(Q5_K, nm)
#define QK_PACKS_Q6_K(X, nm) X(Q6_K, nm)
#define APACK_QK(ID, nm) QK_PACKS_##ID(APACK_Q32, nm)
#define PTILE_QK(ID, nm) QK_PACKS_##ID(PTILE_Q32, nm)
#define WTILE_QK(ID, nm) QK_PACKS_##ID(WTILE_Q32, nm)
static const tf_cpu_kernels k_avx512_vnni = KERNEL_TABLE("avx512_vnni");

/* AMX: the VNNI table, plus Q8_0, Q4_0, Q4_1 and IQ4_NL products over R16
 * weights on the int8 tiles. */
#undef R16_ACT
#undef R16_ROWS
#define R16_ACT                                                                                              \
    KSLOT(Q8_0, tf_amx_act_r16_q8_0) KSLOT(Q4_0, tf_amx_act_r16_q4_0) KSLOT(Q4_1, tf_amx_act_r16_q4_1)        \
    KSLOT(IQ4_NL, tf_amx_act_r16_iq4_nl)
#define R16_ROWS                                                                                             \
    KSLOT(Q8_0, tf_amx_r16_rows_q8_0) KSLOT(Q4_0, tf_amx_r16_rows_q4_0) KSLOT(Q4_1, tf_amx_r16_rows_q4_1)     \
    KSLOT(IQ4_NL, tf_amx_r16_rows_iq4_nl)
static const tf_cpu_kernels k_amx = KERNEL_TABLE("amx");

/* ---- run-time choice ------------------------------------------------------------ */

static int cpu_has_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    return 0;
#endif
}

static int cpu_has_avx512(void) {
#if defined(__x86_64__) || defined(__i386__)
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

static int cpu_has_avx512_vnni(void) {
#if defined(__x86_64__) || defined(__i386__)
    return cpu_has_avx512() && __builtin_cpu_supports("avx512vnni");
#else
    return 0;
#endif
}

/* AMX-BF16 with the OS's permission to use the tile data state (Linux asks
 * processes to request it once: arch_prctl ARCH_REQ_XCOMP_PERM for
 * XFEATURE_XTILEDATA, which also enlarges the process's signal frames); asked
 * on the first call, the answer kept. TF_NO_AMX set to anything but "0" in
 * the environment: not asked, not used. */
static int cpu_has_amx(void) {
#if defined(__x86_64__) && defined(__linux__)
    static atomic_int state; /* 0 unknown, 1 usable, 2 not */
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s == 0) {
        s = 2;
        const char *off = getenv("TF_NO_AMX");
        if ((!off || strcmp(off, "0") == 0) && cpu_has_avx512() && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("amx-tile") &&
            __builtin_cpu_supports("amx-bf16") && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                                                           18 /* XFEATURE_XTILEDATA */) == 0)
            s = 1;
        atomic_store_explicit(&state, s, memory_order_release);
    }
    return s == 1;
#else
    return 0;
#endif
}

/* The AMX table: the tile unit's int8 products as well (AMX-BF16 and AMX-INT8
 * come together on every CPU that has either so far; both are checked). */
static int cpu_has_amx_int8(void) {
#if defined(__x86_64__) && defined(__linux__)
    return cpu_has_amx() && cpu_has_avx512_vnni() && __builtin_cpu_supports("amx-int8");
#else
    return 0;
#endif
}

tf_isa tf_cpu_best_isa(void) {
    if (cpu_has_amx()) return TF_ISA_AMX;
    if (cpu_has_avx512()) return TF_ISA_AVX512;
    if (cpu_has_avx2()) return TF_ISA_AVX2;
    return TF_ISA_SCALAR;
}

const tf_cpu_kernels *tf_cpu_kernels_get(tf_isa isa) {
    tf_isa best = tf_cpu_best_isa();
    if (isa > best) isa = best;
    switch (isa) {
    case TF_ISA_AMX:
        if (cpu_has_amx_int8()) return &k_amx;
        /* fall through */
    case TF_ISA_AVX512: return cpu_has_avx512_vnni() ? &k_avx512_vnni : &k_avx512;
    case TF_ISA_AVX2: return &k_avx2;
    default: return &k_scalar;
    }
}

int tf_cpu_kernels_all(const tf_cpu_kernels **out, int max) {
    const tf_cpu_kernels *all[5];
    int n = 0;
    all[n++] = &k_scalar;
    if (cpu_has_avx2()) all[n++] = &k_avx2;
    if (cpu_has_avx512()) all[n++] = &k_avx512;
    if (cpu_has_avx512_vnni()) all[n++] = &k_avx512_vnni;
    if (cpu_has_amx_int8()) all[n++] = &k_amx;
    for (int i = 0; i < n && i < max; i++) out[i] = all[i];
    return n;
}
