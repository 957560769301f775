/*
 * dtype_list.h — the weight-type registry: one row per type this engine
 * computes with. Everything per type that is not a kernel (the enum, block
 * geometry, names, activation format, kernel family, the file type written
 * to GGUF, the CPU kernel tables' slots and declarations) is generated from
 * these rows, so adding a type is one row here, its block struct in dtype.h,
 * its kernels and one test entry.
 *
 * Plain preprocessor text, so CUDA sources include it too.
 *
 *   X(ID, name, ggml id, values per block, bytes per block, act, family, ftype)
 *
 *   ID      suffix of TF_DTYPE_<ID>; name: lower case, as GGUF tools print it;
 *           tf_block_<name> is the block's struct (a scalar for float types)
 *   act     activation format of its dot products (tf_act_type): f32, q8_0,
 *           q8_1 (Q8_0 plus the quants' sum, for types with an offset m) or
 *           q8_k (256-value blocks with group sums)
 *   family  FLOAT: float weights over f32 activations;
 *           Q32: integer dot products over 32-value (sub-)blocks, with the
 *                packed path of quant.h;
 *           QK: K-quants, 256-value super-blocks over Q8_K activations
 *                (Q4_K and Q5_K also have the packed path, over Q8_1 blocks
 *                of 32)
 *   ftype   general.file_type (llama.cpp's LLAMA_FTYPE_MOSTLY_*) of a file
 *           whose matrices all have this type; for K-quants the "_S" variant
 *
 * Rows are in the order users read them in lists (TF_DTYPE_NAMES).
 */
#ifndef TF_CORE_DTYPE_LIST_H
#define TF_CORE_DTYPE_LIST_H

/* clang-format off */
#define TF_DTYPE_LIST(X)                                   \
    X(F32,    f32,     0,   1,   4, f32,  FLOAT,  0)       \
    X(F16,    f16,     1,   1,   2, f32,  FLOAT,  1)       \
    X(BF16,   bf16,   30,   1,   2, f32,  FLOAT, 32)       \
    X(Q8_0,   q8_0,    8,  32,  34, q8_0, Q32,    7)       \
    X(Q4_0,   q4_0,    2,  32,  18, q8_0, Q32,    2)       \
    X(Q4_1,   q4_1,    3,  32,  20, q8_1, Q32,    3)       \
    X(Q5_0,   q5_0,    6,  32,  22, q8_0, Q32,    8)       \
    X(Q5_1,   q5_1,    7,  32,  24, q8_1, Q32,    9)       \
    X(Q2_K,   q2_k,   10, 256,  84, q8_k, QK,    10)       \
    X(Q3_K,   q3_k,   11, 256, 110, q8_k, QK,    11)       \
    X(Q4_K,   q4_k,   12, 256, 144, q8_k, QK,    14)       \
    X(Q5_K,   q5_k,   13, 256, 176, q8_k, QK,    16)       \
    X(Q6_K,   q6_k,   14, 256, 210, q8_k, QK,    18)       \
    X(IQ4_NL, iq4_nl, 20,  32,  18, q8_0, Q32,   25)       \
    X(IQ4_XS, iq4_xs, 23, 256, 136, q8_0, Q32,   30)
/* clang-format on */

/* " f32 f16 bf16 q8_0 ...": every name, each after one space (a string
 * literal, to paste into messages: "expected one of:" TF_DTYPE_NAMES). */
#define TF_DTYPE_NAME_SP_(ID, nm, ...) " " #nm
#define TF_DTYPE_NAMES TF_DTYPE_LIST(TF_DTYPE_NAME_SP_)

#endif
