/* kv.c — KV cache reservation, stores and reads (layout in kv.h). */
#include "kv/kv.h"

#include "core/fp16.h"
#include "core/mem.h"

#include <string.h>

tf_status tf_kv_init(tf_kv_cache *kv, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t n_slots,
                     tf_dtype type, tf_err *err) {
    memset(kv, 0, sizeof *kv);
    if (type != TF_DTYPE_F32 && type != TF_DTYPE_F16)
        return tf_errf(err, TF_ERR_INVALID_ARG, "KV cache type %s: expected f32 or f16", tf_dtype_name(type));
    if (n_slots < 1 || n_layer < 1 || n_head_kv < 1 || head_dim < 1)
        return tf_errf(err, TF_ERR_INVALID_ARG, "KV cache of %d slots: expected at least 1", n_slots);
    int64_t slots = ((int64_t)n_slots + TF_KV_BLK - 1) / TF_KV_BLK * TF_KV_BLK;
    if (slots > INT32_MAX) return tf_errf(err, TF_ERR_INVALID_ARG, "KV cache of %d slots is too large", n_slots);
    kv->n_layer = n_layer;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->n_slots = (int32_t)slots;
    kv->type = type;
    kv->elem = type == TF_DTYPE_F32 ? 4 : 2;
    uint64_t head, layer, total;
    if (!tf_mul_ok((uint64_t)slots * (uint64_t)head_dim, (uint64_t)kv->elem, &head) ||
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
            } else {
                tf_f16 *kd = (tf_f16 *)kb + kblk, *vd = (tf_f16 *)vb + (size_t)s * hd;
                for (int d = 0; d < hd; d++) kd[(size_t)d * TF_KV_BLK + kj] = tf_f32_to_f16(ki[d]);
                for (int d = 0; d < hd; d++) vd[d] = tf_f32_to_f16(vi[d]);
            }
        }
    }
}

void tf_kv_read(const tf_kv_cache *kv, int il, int h, int32_t slot, float *k_out, float *v_out) {
    const int hd = kv->head_dim;
    const uint8_t *kb = tf_kv_k(kv, il, h), *vb = tf_kv_v(kv, il, h);
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
