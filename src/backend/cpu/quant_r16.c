/*
 * quant_r16.c — the row-interleaved weight groups (R16) of quant.h and their
 * activation format: packing, unpacking one row (for an embedding table
 * held in the layout), the activations' side values and the scalar
 * conversion, and the reference of the products over them
 * (tf_ref_r16_dot), which quant_r16_amx_avx512.c computes.
 */
#include "backend/cpu/quant.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/fp16.h"

#define R16_ROWS 16

int tf_weight_r16_type(tf_dtype type) {
    return type == TF_DTYPE_Q8_0 || type == TF_DTYPE_Q4_0 || type == TF_DTYPE_Q4_1 || type == TF_DTYPE_IQ4_NL;
}

/* The 4-bit types: the file block is d (f16), then m (f16, Q4_1), then the 16 nibble bytes. */
static int r16_has_m(tf_dtype type) { return type == TF_DTYPE_Q4_1; }

/* Rows of group g of a matrix of n_rows rows. */
static int r16_group_rows(int64_t n_rows, int64_t g) {
    int64_t left = n_rows - g * R16_ROWS;
    return left < R16_ROWS ? (int)left : R16_ROWS;
}

/* Row i's block in / out of a record of nr rows (the file's bytes of the block). */
static void r16_block(tf_dtype type, uint8_t *rec, int nr, int i, void *blk, int unpack) {
    if (type == TF_DTYPE_Q8_0) {
        tf_block_q8_0 *x = blk;
        for (int v = 0; v < 8; v++)
            for (int k = 0; k < 4; k++) {
                uint8_t *p = rec + 4 * (nr * v + i) + k;
                if (unpack) x->qs[4 * v + k] = (int8_t)(*p - 128);
                else *p = (uint8_t)(x->qs[4 * v + k] + 128);
            }
        if (unpack) memcpy(&x->d, rec + 32 * nr + 2 * i, 2);
        else memcpy(rec + 32 * nr + 2 * i, &x->d, 2);
    } else { /* Q4_0, IQ4_NL: d, qs[16]; Q4_1: d, m, qs[16] */
        uint8_t *x = blk, *qs = x + (r16_has_m(type) ? 4 : 2);
        for (int v = 0; v < 4; v++) {
            uint8_t *p = rec + 4 * (nr * v + i);
            if (unpack) memcpy(qs + 4 * v, p, 4);
            else memcpy(p, qs + 4 * v, 4);
        }
        for (int f = 0; f < (r16_has_m(type) ? 2 : 1); f++) { /* d, then m */
            uint8_t *p = rec + (16 + 2 * f) * nr + 2 * i;
            if (unpack) memcpy(x + 2 * f, p, 2);
            else memcpy(p, x + 2 * f, 2);
        }
    }
}

void tf_weight_r16_pack(tf_dtype type, const void *rows, void *dst, int64_t n_rows, int64_t n, int64_t g0,
                        int64_t g1) {
    TF_ASSERT(tf_weight_r16_type(type));
    const size_t row = tf_dtype_row_size(type, n), bs = tf_dtype_row_size(type, 32);
    const int64_t nb = n / 32;
    for (int64_t g = g0; g < g1; g++) {
        const int nr = r16_group_rows(n_rows, g);
        const char *src = (const char *)rows + (size_t)g * R16_ROWS * row;
        uint8_t *rec = (uint8_t *)dst + (size_t)g * R16_ROWS * row;
        for (int64_t b = 0; b < nb; b++, rec += (size_t)nr * bs)
            for (int r = 0; r < nr; r++) {
                _Alignas(8) uint8_t blk[34];
                memcpy(blk, src + (size_t)r * row + (size_t)b * bs, bs);
                r16_block(type, rec, nr, r, blk, 0);
            }
    }
}

void tf_weight_r16_unpack_blocks(tf_dtype type, const void *w, int64_t n_rows, int64_t n, int64_t r, int64_t b0,
                                 int64_t b1, void *out) {
    TF_ASSERT(tf_weight_r16_type(type) && r >= 0 && r < n_rows && 0 <= b0 && b0 <= b1 && b1 <= n / 32);
    const size_t row = tf_dtype_row_size(type, n), bs = tf_dtype_row_size(type, 32);
    const int64_t g = r / R16_ROWS;
    const int nr = r16_group_rows(n_rows, g), i = (int)(r % R16_ROWS);
    uint8_t *rec = (uint8_t *)(uintptr_t)w + (size_t)g * R16_ROWS * row + (size_t)b0 * nr * bs;
    for (int64_t b = b0; b < b1; b++, rec += (size_t)nr * bs) {
        _Alignas(8) uint8_t blk[34];
        r16_block(type, rec, nr, i, blk, 1);
        memcpy((char *)out + (size_t)(b - b0) * bs, blk, bs);
    }
}

/* ---- activations and the reference product ------------------------------------ */

size_t tf_act_r16_side_offset(tf_dtype type, int64_t n) {
    size_t blocks = tf_act_row_size(type, n);
    return (blocks + 63) / 64 * 64;
}

size_t tf_act_r16_row_size(tf_dtype type, int64_t n) {
    size_t bytes = tf_act_r16_side_offset(type, n) + 8 * (size_t)(n / 32);
    return (bytes + 63) / 64 * 64;
}

/* Block b of a row of activation blocks: its scale and quants. */
static const int8_t *act_quants(tf_dtype type, const char *row, int64_t b, float *d) {
    if (tf_act_type(type) == TF_DTYPE_Q8_1) {
        const tf_block_q8_1 *x = (const tf_block_q8_1 *)row + b;
        *d = tf_f16_to_f32(x->d);
        return x->qs;
    }
    const tf_block_q8_0 *x = (const tf_block_q8_0 *)row + b;
    *d = tf_f16_to_f32(x->d);
    return x->qs;
}

void tf_act_r16_side(tf_dtype type, void *vrow, int64_t n) {
    char *row = vrow;
    const int64_t nb = n / 32;
    float *ad = (float *)(row + tf_act_r16_side_offset(type, n));
    char *ex = (char *)(ad + nb);
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *q = act_quants(type, row, b, &ad[b]);
        int s = 0;
        if (tf_act_type(type) == TF_DTYPE_Q8_1) s = ((const tf_block_q8_1 *)row)[b].sum; /* the quantizer's */
        else
            for (int i = 0; i < 32; i++) s += q[i];
        if (r16_has_m(type)) {
            float v = ad[b] * (float)s; /* exact: 11 x 12 significant bits */
            memcpy(ex + 4 * b, &v, 4);
        } else { /* the u8 weights' offset: Q8_0's +128, Q4_0's 8, IQ4_NL's table + 128 */
            int32_t v = (type == TF_DTYPE_Q4_0 ? -8 : -128) * s;
            memcpy(ex + 4 * b, &v, 4);
        }
    }
}

void tf_ref_act_r16(tf_dtype type, const float *x, void *row, int64_t n) {
    tf_ref_act_quantize(type, x, row, n);
    tf_act_r16_side(type, row, n);
}

float tf_ref_r16_dot(tf_dtype type, int64_t n, const void *w, const void *act) {
    TF_ASSERT(tf_weight_r16_type(type));
    const char *wr = w;
    const size_t bs = tf_dtype_row_size(type, 32);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        float da, dw, mw = 0.0f;
        const int8_t *qa = act_quants(type, act, b, &da);
        int32_t s = 0;
        if (type == TF_DTYPE_Q8_0) {
            const tf_block_q8_0 *x = (const tf_block_q8_0 *)(wr + (size_t)b * bs);
            dw = tf_f16_to_f32(x->d);
            for (int i = 0; i < 32; i++) s += x->qs[i] * qa[i];
        } else if (type == TF_DTYPE_Q4_1) {
            const tf_block_q4_1 *x = (const tf_block_q4_1 *)(wr + (size_t)b * bs);
            dw = tf_f16_to_f32(x->d);
            mw = tf_f16_to_f32(x->m);
            for (int i = 0; i < 16; i++) s += (x->qs[i] & 0xF) * qa[i] + (x->qs[i] >> 4) * qa[i + 16];
        } else if (type == TF_DTYPE_Q4_0) {
            const tf_block_q4_0 *x = (const tf_block_q4_0 *)(wr + (size_t)b * bs);
            dw = tf_f16_to_f32(x->d);
            for (int i = 0; i < 16; i++) s += ((x->qs[i] & 0xF) - 8) * qa[i] + ((x->qs[i] >> 4) - 8) * qa[i + 16];
        } else {
            const tf_block_iq4_nl *x = (const tf_block_iq4_nl *)(wr + (size_t)b * bs);
            dw = tf_f16_to_f32(x->d);
            for (int i = 0; i < 16; i++)
                s += tf_iq4_values[x->qs[i] & 0xF] * qa[i] + tf_iq4_values[x->qs[i] >> 4] * qa[i + 16];
        }
        acc = fmaf((float)s, dw * da, acc);
        if (type == TF_DTYPE_Q4_1) {
            int sa = 0;
            for (int i = 0; i < 32; i++) sa += qa[i];
            acc = fmaf(mw, da * (float)sa, acc);
        }
    }
    return acc;
}
