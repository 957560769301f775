/*
 * dtype.h — tensor element types (numbered as in GGUF/ggml) and their block
 * geometry. Quantized types store `block_size` elements in `type_size` bytes.
 */
#ifndef TF_CORE_DTYPE_H
#define TF_CORE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype_list.h"

typedef enum tf_dtype {
#define TF_DTYPE_ENUM_(ID, nm, id, ...) TF_DTYPE_##ID = id,
    TF_DTYPE_LIST(TF_DTYPE_ENUM_)
#undef TF_DTYPE_ENUM_
    TF_DTYPE_COUNT = 40, /* upper bound of ids this build knows a name for */
} tf_dtype;

#define TF_QK8_0 32
#define TF_QK4_0 32
#define TF_QK4_1 32
#define TF_QK5_0 32
#define TF_QK5_1 32
#define TF_QK4_NL 32
#define TF_QK_K 256

/* Block layouts, byte-compatible with the GGUF files in the wild. */
typedef struct { uint16_t d; int8_t qs[TF_QK8_0]; } tf_block_q8_0;         /* 34 bytes */
typedef struct { uint16_t d; uint8_t qs[TF_QK4_0 / 2]; } tf_block_q4_0;    /* 18 bytes */
typedef struct { uint16_t d, m; uint8_t qs[TF_QK4_1 / 2]; } tf_block_q4_1; /* 20 bytes: x = d * q + m */
/* Q5_0 / Q5_1: 5-bit quants; the low 4 bits as in Q4_0 (element j in the low
 * nibble of qs[j], element j + 16 in its high nibble), bit 4 of element j at
 * bit j of the little-endian 32-bit qh. x = d * (q - 16) (Q5_0), d * q + m (Q5_1). */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[TF_QK5_0 / 2]; } tf_block_q5_0;        /* 22 bytes */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[TF_QK5_1 / 2]; } tf_block_q5_1;     /* 24 bytes */
typedef struct {
    uint8_t scales[TF_QK_K / 16]; /* 16 groups of 16: 4-bit scale (low) and 4-bit min (high) */
    uint8_t qs[TF_QK_K / 4];      /* 2-bit quants */
    uint16_t d, dmin;             /* f16 super-block scales for scales / mins */
} tf_block_q2_k;                                                           /* 84 bytes */
typedef struct {
    uint8_t hmask[TF_QK_K / 8]; /* bit 2 of each quant */
    uint8_t qs[TF_QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];         /* 16 groups of 16: 6-bit scales (biased by 32), packed */
    uint16_t d;                 /* f16 super-block scale */
} tf_block_q3_k;                                                           /* 110 bytes */
typedef struct {
    uint16_t d, dmin;      /* super-block scales for scales / mins (f16) */
    uint8_t scales[12];    /* 8 sub-blocks: 6-bit scale + 6-bit min, packed */
    uint8_t qs[TF_QK_K / 2];
} tf_block_q4_k;                                                           /* 144 bytes */
typedef struct {
    uint16_t d, dmin;          /* as Q4_K */
    uint8_t scales[12];        /* as Q4_K */
    uint8_t qh[TF_QK_K / 8];   /* bit 4 of each quant */
    uint8_t qs[TF_QK_K / 2];   /* low 4 bits, laid out as Q4_K's quants */
} tf_block_q5_k;                                                           /* 176 bytes */
typedef struct {
    uint8_t ql[TF_QK_K / 2];     /* low 4 bits */
    uint8_t qh[TF_QK_K / 4];     /* high 2 bits */
    int8_t scales[TF_QK_K / 16]; /* 8-bit sub-block scales */
    uint16_t d;                  /* f16 super-block scale */
} tf_block_q6_k;                                                           /* 210 bytes */

/* IQ4_NL: 4-bit indices into the non-linear table tf_iq4_values (element j
 * in the low nibble of qs[j], element j + 16 in its high nibble, as Q4_0);
 * x = d * tf_iq4_values[index]. */
typedef struct { uint16_t d; uint8_t qs[TF_QK4_NL / 2]; } tf_block_iq4_nl;  /* 18 bytes */
/* IQ4_XS: 8 sub-blocks of 32, each an IQ4_NL block whose scale is
 * d * (ls - 32) with a 6-bit ls (tf_iq4_xs_scale); sub-block ib's indices are
 * qs[16 ib .. 16 ib + 15], laid out as IQ4_NL's. */
typedef struct {
    uint16_t d;                     /* f16 super-block scale */
    uint16_t scales_h;              /* bits 4..5 of ls of sub-block ib at bits 2 ib .. 2 ib + 1 */
    uint8_t scales_l[TF_QK_K / 64]; /* bits 0..3 of ls of sub-block ib in nibble ib % 2 of byte ib / 2 */
    uint8_t qs[TF_QK_K / 2];
} tf_block_iq4_xs;                                                         /* 136 bytes */

/* The float types' "blocks" are single values. */
typedef float tf_block_f32;
typedef uint16_t tf_block_f16, tf_block_bf16;

/* Every registry row agrees with its block struct and ids fit the tables. */
#define TF_DTYPE_CHECK_(ID, nm, id, bs, bytes, ...)                                  \
    _Static_assert(sizeof(tf_block_##nm) == (bytes), #nm " block size");              \
    _Static_assert((id) >= 0 && (id) < TF_DTYPE_COUNT, #nm " id within TF_DTYPE_COUNT");
TF_DTYPE_LIST(TF_DTYPE_CHECK_)
#undef TF_DTYPE_CHECK_

/* The 16 values of IQ4_NL / IQ4_XS indices (ggml's kvalues_iq4nl), ascending. */
extern const int8_t tf_iq4_values[16];

/* IQ4_XS: the 6-bit scale ls (0..63; the sub-block's scale is d * (ls - 32))
 * of sub-block ib (0..7). */
static inline int tf_iq4_xs_scale(const tf_block_iq4_xs *b, int ib) {
    return ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b->scales_h >> (2 * ib)) & 3) << 4);
}

/* True for the types this engine can compute with. */
bool tf_dtype_supported(uint32_t type);
/* Elements per block (1 for float types); 0 if unsupported. */
uint32_t tf_dtype_block_size(uint32_t type);
/* Bytes per block; 0 if unsupported. */
uint32_t tf_dtype_type_size(uint32_t type);
/* Name ("f32", "q4_k", ...; also ggml's names of types this engine does not
 * compute with), or "unknown". */
const char *tf_dtype_name(uint32_t type);
/* Parse the name of a supported type (case-insensitive); false if it is not one. */
bool tf_dtype_from_name(const char *name, tf_dtype *out);
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size
 * or the type is unsupported. */
size_t tf_dtype_row_size(uint32_t type, int64_t n);

#endif
