/*
 * quant_impl.h — private to the CPU weight-format kernels: the per-ISA
 * functions that quant_dispatch.c assembles into the tables of quant.h.
 *
 * Each function has the signature of its table slot (tf_act_quantize_fn,
 * tf_vec_dot_fn, tf_dequant_fn, tf_vec_dot_tile_fn) and the contract of
 * the matching tf_ref_* function; it may only be called on a CPU that has
 * the ISA in its name (avx2: AVX2+FMA+F16C; avx512: F/BW/VL/DQ+FMA+F16C;
 * avx512vnni: avx512 plus AVX512-VNNI).
 */
#ifndef TF_BACKEND_CPU_QUANT_IMPL_H
#define TF_BACKEND_CPU_QUANT_IMPL_H

#include "backend/cpu/quant.h"

/* Shared by every table (plain C): F32 activations are a copy. */
void tf_cpu_copy_f32(const float *x, void *y, int64_t n);
void tf_cpu_dequantize_f32(const void *x, float *y, int64_t n);

#define TF_QUANT_ISA_DECLS(isa)                                                                              \
    void tf_##isa##_quantize_q8_0(const float *x, void *y, int64_t n);                                      \
    void tf_##isa##_quantize_q8_1(const float *x, void *y, int64_t n);                                      \
    void tf_##isa##_quantize_q8_k(const float *x, void *y, int64_t n);                                      \
    void tf_##isa##_dequantize_f16(const void *x, float *y, int64_t n);                                     \
    void tf_##isa##_dequantize_bf16(const void *x, float *y, int64_t n);                                    \
    void tf_##isa##_dequantize_q8_0(const void *x, float *y, int64_t n);                                    \
    void tf_##isa##_dequantize_q4_0(const void *x, float *y, int64_t n);                                    \
    void tf_##isa##_dequantize_q4_1(const void *x, float *y, int64_t n);                                    \
    void tf_##isa##_dequantize_q5_0(const void *x, float *y, int64_t n);                                    \
    void tf_##isa##_dequantize_q5_1(const void *x, float *y, int64_t n);                                    \
    void tf_##isa##_dequantize_q2_k(const void *x, float *y, int64_t n);                                    \
    void tf_##isa##_dequantize_q3_k(const void *x, float *y, int64_t n);                                    \
    void tf_##isa##_dequantize_q5_k(const void *x, float *y, int64_t n);                                    \
    void tf_##isa##_dequantize_q4_k(const void *x, float *y, int64_t n);                                    \
    void tf_##isa##_dequantize_q6_k(const void *x, float *y, int64_t n);                                    \
    void tf_##isa##_dequantize_iq4_nl(const void *x, float *y, int64_t n);                                  \
    void tf_##isa##_dequantize_iq4_xs(const void *x, float *y, int64_t n);                                  \
    float tf_##isa##_vec_dot_f32(int64_t n, const void *w, const void *a);                                  \
    float tf_##isa##_vec_dot_f16(int64_t n, const void *w, const void *a);                                  \
    float tf_##isa##_vec_dot_bf16(int64_t n, const void *w, const void *a);                                 \
    void tf_##isa##_tile_f32(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, \
                             float *out, int64_t ldo);                                                      \
    void tf_##isa##_tile_f16(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt, \
                             float *out, int64_t ldo);                                                      \
    void tf_##isa##_tile_bf16(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,        \
                              int nt, float *out, int64_t ldo);

/* Integer-dot kernels: plain (avx2, avx512) and with VNNI (avx512vnni). */
#define TF_QUANT_ISA_INT_DECLS(isa)                                                                          \
    float tf_##isa##_vec_dot_q8_0(int64_t n, const void *w, const void *a);                                 \
    float tf_##isa##_vec_dot_q4_0(int64_t n, const void *w, const void *a);                                 \
    float tf_##isa##_vec_dot_q4_1(int64_t n, const void *w, const void *a);                                 \
    float tf_##isa##_vec_dot_q5_0(int64_t n, const void *w, const void *a);                                 \
    float tf_##isa##_vec_dot_q5_1(int64_t n, const void *w, const void *a);                                 \
    float tf_##isa##_vec_dot_q2_k(int64_t n, const void *w, const void *a);                                 \
    float tf_##isa##_vec_dot_q3_k(int64_t n, const void *w, const void *a);                                 \
    float tf_##isa##_vec_dot_q5_k(int64_t n, const void *w, const void *a);                                 \
    float tf_##isa##_vec_dot_q4_k(int64_t n, const void *w, const void *a);                                 \
    float tf_##isa##_vec_dot_q6_k(int64_t n, const void *w, const void *a);                                 \
    float tf_##isa##_vec_dot_iq4_nl(int64_t n, const void *w, const void *a);                               \
    float tf_##isa##_vec_dot_iq4_xs(int64_t n, const void *w, const void *a);                               \
    void tf_##isa##_tile_q8_0(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,        \
                              int nt, float *out, int64_t ldo);                                             \
    void tf_##isa##_tile_q4_0(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,        \
                              int nt, float *out, int64_t ldo);                                             \
    void tf_##isa##_tile_q4_1(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,        \
                              int nt, float *out, int64_t ldo);                                             \
    void tf_##isa##_tile_q5_1(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,        \
                              int nt, float *out, int64_t ldo);                                             \
    void tf_##isa##_tile_q5_0(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,        \
                              int nt, float *out, int64_t ldo);                                             \
    void tf_##isa##_tile_q2_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,        \
                              int nt, float *out, int64_t ldo);                                             \
    void tf_##isa##_tile_q3_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,        \
                              int nt, float *out, int64_t ldo);                                             \
    void tf_##isa##_tile_q5_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,        \
                              int nt, float *out, int64_t ldo);                                             \
    void tf_##isa##_tile_q4_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,        \
                              int nt, float *out, int64_t ldo);                                             \
    void tf_##isa##_tile_q6_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,        \
                              int nt, float *out, int64_t ldo);                                             \
    void tf_##isa##_tile_iq4_nl(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,      \
                                int nt, float *out, int64_t ldo);                                           \
    void tf_##isa##_tile_iq4_xs(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,      \
                                int nt, float *out, int64_t ldo);

/* Packed path (quant.h): activation packing (avx512) and the VNNI tiles. */
#define TF_PACK_DECLS(fmt)                                                                                 \
    void tf_avx512_act_pack_##fmt(const float *x, void *y, int64_t n);                                    \
    void tf_avx512vnni_packed_tile_##fmt(int64_t n, const void *w, size_t ws, int nr, const void *a,     \
                                         size_t as, int nt, float *out, int64_t ldo);
TF_PACK_DECLS(q8_0)
TF_PACK_DECLS(q4_0)
TF_PACK_DECLS(q4_1)
TF_PACK_DECLS(q5_0)
TF_PACK_DECLS(q5_1)
TF_PACK_DECLS(iq4_nl)
TF_PACK_DECLS(iq4_xs)
#undef TF_PACK_DECLS

TF_QUANT_ISA_DECLS(avx2)
TF_QUANT_ISA_INT_DECLS(avx2)
TF_QUANT_ISA_DECLS(avx512)
TF_QUANT_ISA_INT_DECLS(avx512)
TF_QUANT_ISA_INT_DECLS(avx512vnni)

#undef TF_QUANT_ISA_DECLS
#undef TF_QUANT_ISA_INT_DECLS

#endif
