/* kv_layout.c — the CPU's KV storage layout (kv_layout.h): stores, reads and copies of one KV head. */
#include "backend/cpu/kv_layout.h"

#include "backend/cpu/quant.h"
#include "core/fp16.h"

#include <string.h>

tf_kv_layout tf_kv_layout_make(uint32_t type, int32_t head_dim) {
    tf_kv_layout L = {.type = type, .head_dim = head_dim};
    L.v_row_bytes = tf_dtype_row_size(type, head_dim);
    L.k_blk_bytes = L.v_row_bytes * TF_KV_BLK;
    return L;
}

/* The quantized K block of slot s: its quants and its scale rows (kv.h). */
static uint8_t *kq_block(const tf_kv_layout *L, uint8_t *kb, int32_t s) {
    return kb + (size_t)(s / TF_KV_BLK) * L->k_blk_bytes;
}
static size_t kq_scale_off(const tf_kv_layout *L) {
    return (size_t)(L->type == TF_DTYPE_Q8_0 ? L->head_dim : L->head_dim / 2) * TF_KV_BLK;
}

/* Byte of dimension d of lane j in a q8_0 K block: 4 consecutive dimensions
 * per 32-bit lane, a row of TF_KV_BLK lanes per 4 dimensions. */
static inline size_t kq8_index(int d, int j) { return (size_t)(d / 4) * (4 * TF_KV_BLK) + (size_t)j * 4 + (size_t)(d % 4); }
/* Byte of dimension d of lane j in a q4_0 K block (8 dimensions per 32-bit
 * lane: byte k holds dimension 8 i + k in its low nibble, 8 i + 4 + k in its
 * high one), and the nibble's shift. */
static inline size_t kq4_index(int d, int j) { return (size_t)(d / 8) * (4 * TF_KV_BLK) + (size_t)j * 4 + (size_t)(d % 4); }
static inline int kq4_shift(int d) { return 4 * (d % 8 / 4); }

/* One key of head_dim values into lane j of a quantized K block. */
static void kq_store(const tf_kv_layout *L, uint8_t *blk, int j, const float *k) {
    const int hd = L->head_dim;
    uint16_t *sc = (uint16_t *)(blk + kq_scale_off(L));
    for (int b = 0; b < hd / 32; b++) {
        if (L->type == TF_DTYPE_Q8_0) {
            tf_block_q8_0 q;
            tf_ref_quantize_row(TF_DTYPE_Q8_0, k + 32 * b, &q, 32);
            sc[b * TF_KV_BLK + j] = q.d;
            for (int i = 0; i < 32; i++) blk[kq8_index(32 * b + i, j)] = (uint8_t)(q.qs[i] + 128);
        } else {
            tf_block_q4_0 q;
            tf_ref_quantize_row(TF_DTYPE_Q4_0, k + 32 * b, &q, 32);
            sc[b * TF_KV_BLK + j] = q.d;
            for (int i = 0; i < 32; i++) { /* the file's nibble order: quant i < 16 low, i + 16 high */
                const int nib = i < 16 ? q.qs[i] & 15 : q.qs[i - 16] >> 4, d = 32 * b + i;
                uint8_t *x = &blk[kq4_index(d, j)];
                *x = (uint8_t)((*x & ~(15 << kq4_shift(d))) | nib << kq4_shift(d));
            }
        }
    }
}

/* Dimension d of lane j of a quantized K block: d * q, exact in f32. */
static float kq_value(const tf_kv_layout *L, const uint8_t *blk, int d, int j) {
    const uint16_t *sc = (const uint16_t *)(blk + kq_scale_off(L));
    int q = L->type == TF_DTYPE_Q8_0 ? (int)blk[kq8_index(d, j)] - 128 : (blk[kq4_index(d, j)] >> kq4_shift(d) & 15) - 8;
    return tf_f16_to_f32(sc[(d / 32) * TF_KV_BLK + j]) * (float)q;
}

void tf_kv_head_store(const tf_kv_layout *L, uint8_t *kb, uint8_t *vb, int32_t s, const float *ki, const float *vi) {
    const int hd = L->head_dim;
    size_t kblk = (size_t)(s / TF_KV_BLK) * hd * TF_KV_BLK, kj = (size_t)(s % TF_KV_BLK);
    if (L->type == TF_DTYPE_F32) {
        float *kd = (float *)kb + kblk, *vd = (float *)vb + (size_t)s * hd;
        for (int d = 0; d < hd; d++) kd[(size_t)d * TF_KV_BLK + kj] = ki[d];
        memcpy(vd, vi, sizeof(float) * hd);
    } else if (L->type == TF_DTYPE_F16) {
        tf_f16 *kd = (tf_f16 *)kb + kblk, *vd = (tf_f16 *)vb + (size_t)s * hd;
        for (int d = 0; d < hd; d++) kd[(size_t)d * TF_KV_BLK + kj] = tf_f32_to_f16(ki[d]);
        for (int d = 0; d < hd; d++) vd[d] = tf_f32_to_f16(vi[d]);
    } else {
        kq_store(L, kq_block(L, kb, s), (int)kj, ki);
        tf_ref_quantize_row((tf_dtype)L->type, vi, vb + (size_t)s * L->v_row_bytes, hd);
    }
}

void tf_kv_head_read(const tf_kv_layout *L, const uint8_t *kb, const uint8_t *vb, int32_t slot, float *k_out,
                     float *v_out) {
    const int hd = L->head_dim;
    if (tf_kv_layout_quantized(L->type)) {
        if (k_out)
            for (int d = 0; d < hd; d++) k_out[d] = kq_value(L, kq_block(L, (uint8_t *)kb, slot), d, slot % TF_KV_BLK);
        if (v_out) tf_ref_dequantize_row((tf_dtype)L->type, vb + (size_t)slot * L->v_row_bytes, v_out, hd);
        return;
    }
    size_t kblk = (size_t)(slot / TF_KV_BLK) * hd * TF_KV_BLK, kj = (size_t)(slot % TF_KV_BLK);
    for (int d = 0; d < hd; d++) {
        size_t ki = kblk + (size_t)d * TF_KV_BLK + kj, vi = (size_t)slot * hd + d;
        if (L->type == TF_DTYPE_F32) {
            if (k_out) k_out[d] = ((const float *)kb)[ki];
            if (v_out) v_out[d] = ((const float *)vb)[vi];
        } else {
            if (k_out) k_out[d] = tf_f16_to_f32(((const tf_f16 *)kb)[ki]);
            if (v_out) v_out[d] = tf_f16_to_f32(((const tf_f16 *)vb)[vi]);
        }
    }
}

void tf_kv_head_k_block_f32(const tf_kv_layout *L, const uint8_t *kb, int32_t blk, float *out) {
    const int hd = L->head_dim;
    const uint8_t *b = kb + (size_t)blk * L->k_blk_bytes;
    if (L->type == TF_DTYPE_F32) {
        memcpy(out, b, sizeof(float) * (size_t)hd * TF_KV_BLK);
    } else if (L->type == TF_DTYPE_F16) {
        for (size_t i = 0; i < (size_t)hd * TF_KV_BLK; i++) out[i] = tf_f16_to_f32(((const tf_f16 *)b)[i]);
    } else {
        for (int d = 0; d < hd; d++)
            for (int j = 0; j < TF_KV_BLK; j++) out[(size_t)d * TF_KV_BLK + j] = kq_value(L, b, d, j);
    }
}

/* The rows of a K block: n_rows[i] rows of TF_KV_BLK lanes of lane_bytes[i]
 * bytes each, one part after the other (kv.h). */
static int k_parts(const tf_kv_layout *L, int n_rows[2], int lane_bytes[2]) {
    const int hd = L->head_dim;
    if (!tf_kv_layout_quantized(L->type)) {
        n_rows[0] = hd;
        lane_bytes[0] = L->type == TF_DTYPE_F32 ? 4 : 2;
        return 1;
    }
    n_rows[0] = L->type == TF_DTYPE_Q8_0 ? hd / 4 : hd / 8;
    lane_bytes[0] = 4;
    n_rows[1] = hd / 32;
    lane_bytes[1] = 2;
    return 2;
}

/* Copy n slots of one K store from slot s of src to slot o of dst: whole
 * blocks at once where both are block-aligned, otherwise row pieces that stay
 * inside one block on both sides. */
static void copy_k(const tf_kv_layout *L, uint8_t *dst, const uint8_t *src, int32_t s, int32_t o, int32_t n) {
    const size_t blk_bytes = L->k_blk_bytes;
    int n_rows[2], lane[2];
    const int n_parts = k_parts(L, n_rows, lane);
    while (n > 0) {
        int32_t is = s % TF_KV_BLK, io = o % TF_KV_BLK;
        if (is == 0 && io == 0 && n >= TF_KV_BLK) {
            int32_t nb = n / TF_KV_BLK;
            memcpy(dst + (size_t)(o / TF_KV_BLK) * blk_bytes, src + (size_t)(s / TF_KV_BLK) * blk_bytes,
                   (size_t)nb * blk_bytes);
            s += nb * TF_KV_BLK;
            o += nb * TF_KV_BLK;
            n -= nb * TF_KV_BLK;
            continue;
        }
        int32_t len = n;
        if (len > TF_KV_BLK - is) len = TF_KV_BLK - is;
        if (len > TF_KV_BLK - io) len = TF_KV_BLK - io;
        const uint8_t *sb = src + (size_t)(s / TF_KV_BLK) * blk_bytes;
        uint8_t *db = dst + (size_t)(o / TF_KV_BLK) * blk_bytes;
        for (int p = 0; p < n_parts; p++) {
            const size_t row = (size_t)TF_KV_BLK * lane[p], bytes = (size_t)len * lane[p];
            const uint8_t *sp = sb + (size_t)is * lane[p];
            uint8_t *dp = db + (size_t)io * lane[p];
            if (bytes == 32) /* a chunk of 8 f32 or 16 f16: fixed-size copies inline */
                for (int d = 0; d < n_rows[p]; d++) memcpy(dp + (size_t)d * row, sp + (size_t)d * row, 32);
            else if (bytes == 16)
                for (int d = 0; d < n_rows[p]; d++) memcpy(dp + (size_t)d * row, sp + (size_t)d * row, 16);
            else
                for (int d = 0; d < n_rows[p]; d++) memcpy(dp + (size_t)d * row, sp + (size_t)d * row, bytes);
            sb += (size_t)n_rows[p] * row;
            db += (size_t)n_rows[p] * row;
        }
        s += len;
        o += len;
        n -= len;
    }
}

void tf_kv_head_copy(const tf_kv_layout *L, uint8_t *dst_kb, uint8_t *dst_vb, int32_t o, const uint8_t *src_kb,
                     const uint8_t *src_vb, int32_t s, int32_t n) {
    const size_t row = L->v_row_bytes;
    copy_k(L, dst_kb, src_kb, s, o, n);
    memcpy(dst_vb + (size_t)o * row, src_vb + (size_t)s * row, (size_t)n * row);
}
