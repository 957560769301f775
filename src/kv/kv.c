/* kv.c — KV cache reservation, stores, reads and copies (layout in kv.h). */
#include "kv/kv.h"

#include "backend/cpu/quant.h"
#include "core/fp16.h"
#include "core/mem.h"

#include <string.h>

static int kv_quantized(uint32_t type) { return type == TF_DTYPE_Q8_0 || type == TF_DTYPE_Q4_0; }

tf_status tf_kv_check_type(tf_dtype type, int32_t head_dim, tf_err *err) {
    if (type != TF_DTYPE_F32 && type != TF_DTYPE_F16 && !kv_quantized(type))
        return tf_errf(err, TF_ERR_INVALID_ARG, "KV cache type %s: expected f32, f16, q8_0 or q4_0",
                       tf_dtype_name(type));
    if (kv_quantized(type) && head_dim % 32 != 0)
        return tf_errf(err, TF_ERR_UNSUPPORTED,
                       "KV cache type %s needs head_dim a multiple of 32 (a scale per 32 values); this model's "
                       "head_dim is %d: use f16 or f32",
                       tf_dtype_name(type), head_dim);
    return TF_OK;
}

size_t tf_kv_head_bytes(tf_dtype type, int32_t head_dim) { return tf_dtype_row_size(type, head_dim); }

tf_status tf_kv_init(tf_kv_cache *kv, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t n_slots,
                     tf_dtype type, tf_err *err) {
    memset(kv, 0, sizeof *kv);
    if (n_slots < 1 || n_layer < 1 || n_head_kv < 1 || head_dim < 1)
        return tf_errf(err, TF_ERR_INVALID_ARG, "KV cache of %d slots: expected at least 1", n_slots);
    TF_TRY(tf_kv_check_type(type, head_dim, err));
    int64_t slots = ((int64_t)n_slots + TF_KV_BLK - 1) / TF_KV_BLK * TF_KV_BLK;
    if (slots > INT32_MAX) return tf_errf(err, TF_ERR_INVALID_ARG, "KV cache of %d slots is too large", n_slots);
    kv->n_layer = n_layer;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->n_slots = (int32_t)slots;
    kv->type = type;
    kv->elem = type == TF_DTYPE_F32 ? 4 : type == TF_DTYPE_F16 ? 2 : 0;
    /* a K block holds TF_KV_BLK slots' rows, a V row one slot: the same bytes per slot */
    kv->v_row_bytes = tf_kv_head_bytes(type, head_dim);
    kv->k_blk_bytes = kv->v_row_bytes * TF_KV_BLK;
    uint64_t head, layer, total;
    if (!tf_mul_ok((uint64_t)slots, (uint64_t)kv->v_row_bytes, &head) ||
        !tf_mul_ok(head, (uint64_t)n_head_kv, &layer) || !tf_mul_ok(layer, (uint64_t)n_layer, &total) ||
        total > SIZE_MAX / 2)
        return tf_errf(err, TF_ERR_NOMEM, "KV cache of %d slots overflows the address space", n_slots);
    kv->head_stride = (size_t)head;
    kv->layer_stride = (size_t)layer;
    kv->bytes = (size_t)total;
    kv->k = tf_alloc_pages(kv->bytes); /* zero-filled: unwritten slots stay finite */
    kv->v = tf_alloc_pages(kv->bytes);
    kv->pos = tf_alloc(sizeof(int32_t) * (size_t)slots);
    if (!kv->k || !kv->v || !kv->pos) {
        tf_kv_free(kv);
        return tf_errf(err, TF_ERR_NOMEM, "cannot reserve a KV cache of %d tokens (%.1f MiB)", n_slots,
                       2.0 * (double)total / (1 << 20));
    }
    return TF_OK;
}

void tf_kv_free(tf_kv_cache *kv) {
    tf_free_pages(kv->k, kv->bytes);
    tf_free_pages(kv->v, kv->bytes);
    tf_free(kv->pos);
    memset(kv, 0, sizeof *kv);
}

/* The quantized K block of slot s: its quants and its scale rows (kv.h). */
static uint8_t *kq_block(const tf_kv_cache *kv, uint8_t *kb, int32_t s) {
    return kb + (size_t)(s / TF_KV_BLK) * kv->k_blk_bytes;
}
static size_t kq_scale_off(const tf_kv_cache *kv) {
    return (size_t)(kv->type == TF_DTYPE_Q8_0 ? kv->head_dim : kv->head_dim / 2) * TF_KV_BLK;
}

/* One key of head_dim values into lane j of a quantized K block. */
static void kq_store(const tf_kv_cache *kv, uint8_t *blk, int j, const float *k) {
    const int hd = kv->head_dim;
    uint16_t *sc = (uint16_t *)(blk + kq_scale_off(kv));
    for (int b = 0; b < hd / 32; b++) {
        if (kv->type == TF_DTYPE_Q8_0) {
            tf_block_q8_0 q;
            tf_ref_quantize_row(TF_DTYPE_Q8_0, k + 32 * b, &q, 32);
            sc[b * TF_KV_BLK + j] = q.d;
            for (int i = 0; i < 32; i++) blk[(size_t)(32 * b + i) * TF_KV_BLK + j] = (uint8_t)q.qs[i];
        } else {
            tf_block_q4_0 q;
            tf_ref_quantize_row(TF_DTYPE_Q4_0, k + 32 * b, &q, 32);
            sc[b * TF_KV_BLK + j] = q.d;
            uint8_t nib[32];
            for (int i = 0; i < 16; i++) {
                nib[i] = q.qs[i] & 15;
                nib[i + 16] = q.qs[i] >> 4;
            }
            for (int i = 0; i < 16; i++)
                blk[(size_t)(16 * b + i) * TF_KV_BLK + j] = (uint8_t)(nib[2 * i] | nib[2 * i + 1] << 4);
        }
    }
}

/* Dimension d of lane j of a quantized K block: d * q, exact in f32. */
static float kq_value(const tf_kv_cache *kv, const uint8_t *blk, int d, int j) {
    const uint16_t *sc = (const uint16_t *)(blk + kq_scale_off(kv));
    int q = kv->type == TF_DTYPE_Q8_0 ? (int8_t)blk[(size_t)d * TF_KV_BLK + j]
                                      : ((blk[(size_t)(d / 2) * TF_KV_BLK + j] >> (4 * (d & 1))) & 15) - 8;
    return tf_f16_to_f32(sc[(d / 32) * TF_KV_BLK + j]) * (float)q;
}

void tf_kv_store(tf_kv_cache *kv, int il, int32_t slot0, int32_t n, const float *k, const float *v, int64_t ld) {
    const int hd = kv->head_dim;
    for (int h = 0; h < kv->n_head_kv; h++) {
        uint8_t *kb = tf_kv_k(kv, il, h), *vb = tf_kv_v(kv, il, h);
        for (int32_t i = 0; i < n; i++) {
            int32_t s = slot0 + i;
            const float *ki = k + (size_t)i * ld + (size_t)h * hd, *vi = v + (size_t)i * ld + (size_t)h * hd;
            size_t kblk = (size_t)(s / TF_KV_BLK) * hd * TF_KV_BLK, kj = (size_t)(s % TF_KV_BLK);
            if (kv->type == TF_DTYPE_F32) {
                float *kd = (float *)kb + kblk, *vd = (float *)vb + (size_t)s * hd;
                for (int d = 0; d < hd; d++) kd[(size_t)d * TF_KV_BLK + kj] = ki[d];
                memcpy(vd, vi, sizeof(float) * hd);
            } else if (kv->type == TF_DTYPE_F16) {
                tf_f16 *kd = (tf_f16 *)kb + kblk, *vd = (tf_f16 *)vb + (size_t)s * hd;
                for (int d = 0; d < hd; d++) kd[(size_t)d * TF_KV_BLK + kj] = tf_f32_to_f16(ki[d]);
                for (int d = 0; d < hd; d++) vd[d] = tf_f32_to_f16(vi[d]);
            } else {
                kq_store(kv, kq_block(kv, kb, s), (int)kj, ki);
                tf_ref_quantize_row((tf_dtype)kv->type, vi, vb + (size_t)s * kv->v_row_bytes, hd);
            }
        }
    }
}

void tf_kv_read(const tf_kv_cache *kv, int il, int h, int32_t slot, float *k_out, float *v_out) {
    const int hd = kv->head_dim;
    const uint8_t *kb = tf_kv_k(kv, il, h), *vb = tf_kv_v(kv, il, h);
    if (kv_quantized(kv->type)) {
        if (k_out)
            for (int d = 0; d < hd; d++) k_out[d] = kq_value(kv, kq_block(kv, (uint8_t *)kb, slot), d, slot % TF_KV_BLK);
        if (v_out) tf_ref_dequantize_row((tf_dtype)kv->type, vb + (size_t)slot * kv->v_row_bytes, v_out, hd);
        return;
    }
    size_t kblk = (size_t)(slot / TF_KV_BLK) * hd * TF_KV_BLK, kj = (size_t)(slot % TF_KV_BLK);
    for (int d = 0; d < hd; d++) {
        size_t ki = kblk + (size_t)d * TF_KV_BLK + kj, vi = (size_t)slot * hd + d;
        if (kv->type == TF_DTYPE_F32) {
            if (k_out) k_out[d] = ((const float *)kb)[ki];
            if (v_out) v_out[d] = ((const float *)vb)[vi];
        } else {
            if (k_out) k_out[d] = tf_f16_to_f32(((const tf_f16 *)kb)[ki]);
            if (v_out) v_out[d] = tf_f16_to_f32(((const tf_f16 *)vb)[vi]);
        }
    }
}

void tf_kv_k_block_f32(const tf_kv_cache *kv, int il, int h, int32_t blk, float *out) {
    const int hd = kv->head_dim;
    const uint8_t *b = tf_kv_k(kv, il, h) + (size_t)blk * kv->k_blk_bytes;
    if (kv->type == TF_DTYPE_F32) {
        memcpy(out, b, sizeof(float) * (size_t)hd * TF_KV_BLK);
    } else if (kv->type == TF_DTYPE_F16) {
        for (size_t i = 0; i < (size_t)hd * TF_KV_BLK; i++) out[i] = tf_f16_to_f32(((const tf_f16 *)b)[i]);
    } else {
        for (int d = 0; d < hd; d++)
            for (int j = 0; j < TF_KV_BLK; j++) out[(size_t)d * TF_KV_BLK + j] = kq_value(kv, b, d, j);
    }
}

/* The rows of a K block: n_rows[i] rows of TF_KV_BLK lanes of lane_bytes[i]
 * bytes each, one part after the other (kv.h). */
static int k_parts(const tf_kv_cache *kv, int n_rows[2], int lane_bytes[2]) {
    const int hd = kv->head_dim;
    if (!kv_quantized(kv->type)) {
        n_rows[0] = hd;
        lane_bytes[0] = kv->elem;
        return 1;
    }
    n_rows[0] = kv->type == TF_DTYPE_Q8_0 ? hd : hd / 2;
    lane_bytes[0] = 1;
    n_rows[1] = hd / 32;
    lane_bytes[1] = 2;
    return 2;
}

/* Copy n slots of one K store from slot s of src to slot o of dst: whole
 * blocks at once where both are block-aligned, otherwise row pieces that stay
 * inside one block on both sides. */
static void copy_k(const tf_kv_cache *kv, uint8_t *dst, const uint8_t *src, int32_t s, int32_t o, int32_t n) {
    const size_t blk_bytes = kv->k_blk_bytes;
    int n_rows[2], lane[2];
    const int n_parts = k_parts(kv, n_rows, lane);
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

void tf_kv_copy(tf_kv_cache *dst, int32_t o, const tf_kv_cache *src, int32_t s, int32_t n, int il, int h) {
    const size_t row = src->v_row_bytes;
    copy_k(src, tf_kv_k(dst, il, h), tf_kv_k(src, il, h), s, o, n);
    memcpy(tf_kv_v(dst, il, h) + (size_t)o * row, tf_kv_v(src, il, h) + (size_t)s * row, (size_t)n * row);
}
