/*
 * quant_r16.c — the row-interleaved weight groups (R16) of quant.h and their
 * activation format: packing, unpacking one row (for an embedding table
 * held in the layout), the activations' side values, and the scalar
 * conversion. The products over them are in quant_r16_amx_avx512.c; their
 * reference is tf_ref_packed_dot (quant_pack.c), since they compute the
 * packed path's arithmetic.
 */
#include "backend/cpu/quant.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/fp16.h"

#define R16_ROWS 16

/* Rows of group g of a matrix of n_rows rows. */
static int r16_group_rows(int64_t n_rows, int64_t g) {
    int64_t left = n_rows - g * R16_ROWS;
    return left < R16_ROWS ? (int)left : R16_ROWS;
}

void tf_weight_r16_pack(const void *rows, void *dst, int64_t n_rows, int64_t n, int64_t g0, int64_t g1) {
    const size_t row = tf_dtype_row_size(TF_DTYPE_Q8_0, n);
    const int64_t nb = n / TF_QK8_0;
    for (int64_t g = g0; g < g1; g++) {
        const int nr = r16_group_rows(n_rows, g);
        const char *src = (const char *)rows + (size_t)g * R16_ROWS * row;
        uint8_t *rec = (uint8_t *)dst + (size_t)g * R16_ROWS * row;
        for (int64_t b = 0; b < nb; b++, rec += (size_t)nr * sizeof(tf_block_q8_0)) {
            for (int r = 0; r < nr; r++) {
                const tf_block_q8_0 *x = (const tf_block_q8_0 *)(src + (size_t)r * row) + b;
                for (int v = 0; v < 8; v++)
                    for (int i = 0; i < 4; i++) rec[4 * (nr * v + r) + i] = (uint8_t)(x->qs[4 * v + i] + 128);
                memcpy(rec + 32 * nr + 2 * r, &x->d, 2);
            }
        }
    }
}

void tf_weight_r16_unpack_blocks(const void *w, int64_t n_rows, int64_t n, int64_t r, int64_t b0, int64_t b1,
                                 void *out) {
    TF_ASSERT(r >= 0 && r < n_rows && 0 <= b0 && b0 <= b1 && b1 <= n / TF_QK8_0);
    const size_t row = tf_dtype_row_size(TF_DTYPE_Q8_0, n);
    const int64_t g = r / R16_ROWS;
    const int nr = r16_group_rows(n_rows, g), i = (int)(r % R16_ROWS);
    const uint8_t *rec = (const uint8_t *)w + (size_t)g * R16_ROWS * row + (size_t)b0 * nr * sizeof(tf_block_q8_0);
    tf_block_q8_0 *y = (tf_block_q8_0 *)out - b0;
    for (int64_t b = b0; b < b1; b++, rec += (size_t)nr * sizeof(tf_block_q8_0)) {
        for (int v = 0; v < 8; v++)
            for (int k = 0; k < 4; k++) y[b].qs[4 * v + k] = (int8_t)(rec[4 * (nr * v + i) + k] - 128);
        memcpy(&y[b].d, rec + 32 * nr + 2 * i, 2);
    }
}

/* ---- activations and the reference product ------------------------------------ */

size_t tf_act_r16_side_offset(int64_t n) {
    size_t blocks = (size_t)(n / TF_QK8_0) * sizeof(tf_block_q8_0);
    return (blocks + 63) / 64 * 64;
}

size_t tf_act_r16_row_size(int64_t n) {
    size_t bytes = tf_act_r16_side_offset(n) + 8 * (size_t)(n / TF_QK8_0);
    return (bytes + 63) / 64 * 64;
}

void tf_act_r16_side(void *vrow, int64_t n) {
    char *row = vrow;
    const int64_t nb = n / TF_QK8_0;
    const tf_block_q8_0 *x = (const tf_block_q8_0 *)row;
    float *ad = (float *)(row + tf_act_r16_side_offset(n));
    int32_t *ex = (int32_t *)(ad + nb);
    for (int64_t b = 0; b < nb; b++) {
        int s = 0;
        for (int i = 0; i < TF_QK8_0; i++) s += x[b].qs[i];
        ad[b] = tf_f16_to_f32(x[b].d);
        ex[b] = -128 * s;
    }
}

void tf_ref_act_r16(const float *x, void *row, int64_t n) {
    tf_ref_act_quantize(TF_DTYPE_Q8_0, x, row, n);
    tf_act_r16_side(row, n);
}

float tf_ref_r16_dot(int64_t n, const void *w, const void *act) {
    const tf_block_q8_0 *x = w, *a = act;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / TF_QK8_0; b++) {
        int32_t s = 0;
        for (int i = 0; i < TF_QK8_0; i++) s += x[b].qs[i] * a[b].qs[i];
        acc = fmaf((float)s, tf_f16_to_f32(x[b].d) * tf_f16_to_f32(a[b].d), acc);
    }
    return acc;
}
