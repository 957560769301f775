/*
 * quant_impl.h — private to the CPU weight-format kernels: the per-ISA
 * functions that quant_dispatch.c assembles into the tables of quant.h.
 *
 * Each function has the signature of its table slot (tf_act_quantize_fn,
 * tf_dequant_fn, tf_vec_dot_tile_fn) and the contract of
 * the matching tf_ref_* function; it may only be called on a CPU that has
 * the ISA in its name (avx2: AVX2+FMA+F16C; avx512: F/BW/VL/DQ+FMA+F16C;
 * avx512vnni: avx512 plus AVX512-VNNI).
 */
#ifndef TF_BACKEND_CPU_QUANT_IMPL_H
#define TF_BACKEND_CPU_QUANT_IMPL_H

#include "backend/cpu/quant.h"

/* Q4_K / Q5_K: sub-block j's 6-bit scale and min from a super-block's 12
 * bytes of scales, and the inverse for all 8 sub-blocks (quant_ref.c; the
 * packed weight layout uses both too). */
void tf_q4k_scale_min(const uint8_t *s, int j, int *sc, int *m);
void tf_q4k_pack_scales(uint8_t *s, const int *sc, const int *m);
/* Q6_K: the quant (0..63) of element e (0..255) of a super-block, and its
 * inverse for one element (quant_ref.c; the packed weight layout uses both). */
int tf_q6k_get(const tf_block_q6_k *b, int e);
void tf_q6k_put(tf_block_q6_k *b, int e, int q);
/* Q2_K / Q3_K: the 2 low bits of element e (0..255) of a super-block's qs,
 * and the inverse for one element. */
int tf_q2bits_get(const uint8_t *qs, int e);
void tf_q2bits_put(uint8_t *qs, int e, int q);
/* Q3_K: the quant (0..7, the value is q - 4) of element e and its inverse; the
 * 6-bit scale (0..63, the value is sc - 32) of group g (0..15) from a
 * super-block's 12 bytes of scales, and the inverse for all 16 groups. */
int tf_q3k_get(const tf_block_q3_k *b, int e);
void tf_q3k_put(tf_block_q3_k *b, int e, int q);
int tf_q3k_scale(const uint8_t *s, int g);
void tf_q3k_pack_scales(uint8_t *s, const int *sc);

/* Shared by every table (plain C): F32 activations are a copy. */
void tf_cpu_copy_f32(const float *x, void *y, int64_t n);
void tf_cpu_dequantize_f32(const void *x, float *y, int64_t n);

/* tf_<isa>_<op>_<name>, with isa expanded first (it may be a macro). */
#define TF_KFN_(isa, op, nm) tf_##isa##_##op##_##nm
#define TF_KFN(isa, op, nm) TF_KFN_(isa, op, nm)

/* Slots that every table fills with the same plain C function: F32 weights
 * dequantize by a copy, and F32 activations (float weights) are a copy. */
#define tf_avx2_dequantize_f32 tf_cpu_dequantize_f32
#define tf_avx2_quantize_f32 tf_cpu_copy_f32
#define tf_avx512_quantize_f32 tf_cpu_copy_f32

/* Activation formats (quant.h), per ISA. */
#define TF_ACT_DECLS(isa)                                                                                    \
    void tf_##isa##_quantize_q8_0(const float *x, void *y, int64_t n);                                      \
    void tf_##isa##_quantize_q8_1(const float *x, void *y, int64_t n);                                      \
    void tf_##isa##_quantize_q8_k(const float *x, void *y, int64_t n);
TF_ACT_DECLS(avx2)
TF_ACT_DECLS(avx512)
#undef TF_ACT_DECLS

/* Dequantization, per weight type of the registry (dtype_list.h): one set,
 * in AVX2, for every x86 table (its only use is a row per embedded token). */
#define TF_DEQUANT_DECLS_(ID, nm, ...) void tf_avx2_dequantize_##nm(const void *x, float *y, int64_t n);
TF_DTYPE_LIST(TF_DEQUANT_DECLS_)
#undef TF_DEQUANT_DECLS_

/* Per weight type, for the ISA TF_DECL_ISA: the tile (every family); the
 * VNNI variants of the integer families' tile; the packed path of family
 * Q32 and of Q4_K and Q5_K. */
#define TF_KERNEL_DECLS_(ID, nm, ...)                                                                        \
    void TF_KFN(TF_DECL_ISA, tile, nm)(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, \
                                        int nt, float *out, int64_t ldo);
#define TF_DECL_ISA avx2
TF_DTYPE_LIST(TF_KERNEL_DECLS_)
#undef TF_DECL_ISA
#define TF_DECL_ISA avx512
TF_DTYPE_LIST(TF_KERNEL_DECLS_)
#undef TF_DECL_ISA
#undef TF_KERNEL_DECLS_

#define TF_VNNI_DECLS_FLOAT(nm)
#define TF_VNNI_DECLS_Q32(nm)                                                                                \
    void tf_avx512vnni_tile_##nm(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,      \
                                 int nt, float *out, int64_t ldo);
#define TF_VNNI_DECLS_QK(nm) TF_VNNI_DECLS_Q32(nm)
#define TF_PACK_DECLS_FLOAT(nm)
#define TF_PACK_DECLS_QK(nm) TF_PACK_DECLS_QK_##nm
#define TF_PACK_DECLS_QK_q2_k TF_PACK_DECLS_Q32(q2_k)
#define TF_PACK_DECLS_QK_q3_k TF_PACK_DECLS_Q32(q3_k)
#define TF_PACK_DECLS_QK_q4_k TF_PACK_DECLS_Q32(q4_k)
#define TF_PACK_DECLS_QK_q5_k TF_PACK_DECLS_Q32(q5_k)
#define TF_PACK_DECLS_QK_q6_k TF_PACK_DECLS_Q32(q6_k)
#define TF_PACK_DECLS_Q32(nm)                                                                                \
    void tf_avx512_act_pack_##nm(const float *x, void *y, int64_t n);                                       \
    void tf_avx512vnni_packed_tile_##nm(int64_t n, const void *w, size_t ws, int nr, const void *a,         \
                                        size_t as, int nt, float *out, int64_t ldo);                        \
    void tf_avx512vnni_wpacked_tile_##nm(int64_t n, const void *w, size_t ws, int nr, const void *a,        \
                                         size_t as, int nt, float *out, int64_t ldo);
#define TF_FAMILY_DECLS_(ID, nm, id, bs, bytes, act, fam, ...) TF_VNNI_DECLS_##fam(nm) TF_PACK_DECLS_##fam(nm)
TF_DTYPE_LIST(TF_FAMILY_DECLS_)
#undef TF_FAMILY_DECLS_
#undef TF_VNNI_DECLS_FLOAT
#undef TF_VNNI_DECLS_Q32
#undef TF_VNNI_DECLS_QK
#undef TF_PACK_DECLS_FLOAT
#undef TF_PACK_DECLS_QK
#undef TF_PACK_DECLS_QK_q2_k
#undef TF_PACK_DECLS_QK_q3_k
#undef TF_PACK_DECLS_QK_q4_k
#undef TF_PACK_DECLS_QK_q5_k
#undef TF_PACK_DECLS_QK_q6_k
#undef TF_PACK_DECLS_Q32

/* The AMX table's R16 path (quant_r16_amx_avx512.c). */
#define TF_R16_DECLS(nm)                                                                                     \
    void tf_amx_act_r16_##nm(const float *x, void *y, int64_t n);                                           \
    void tf_amx_r16_rows_##nm(int64_t n, const void *w, int64_t n_rows, int64_t r0, int64_t r1, const void *act, \
                              size_t as, int nt, float *out, int64_t ldo);
TF_R16_DECLS(q8_0)
TF_R16_DECLS(q4_0)
TF_R16_DECLS(q4_1)
TF_R16_DECLS(iq4_nl)
#undef TF_R16_DECLS

#endif
