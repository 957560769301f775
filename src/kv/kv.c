/* kv.c — KV cache reservation, and per-layer stores, reads and copies over
 * the CPU's layout (backend/cpu/kv_layout.h). */
#include "kv/kv.h"

#include "backend/cpu/backend_cpu.h"
#include "core/mem.h"
#include "core/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tf_status tf_kv_check_type(tf_dtype type, int32_t head_dim, tf_err *err) {
    if (type != TF_DTYPE_F32 && type != TF_DTYPE_F16 && !tf_kv_layout_quantized(type))
        return tf_errf(err, TF_ERR_INVALID_ARG, "KV cache type %s: expected f32, f16, q8_0 or q4_0",
                       tf_dtype_name(type));
    if (tf_kv_layout_quantized(type) && head_dim % 32 != 0)
        return tf_errf(err, TF_ERR_UNSUPPORTED,
                       "KV cache type %s needs head_dim a multiple of 32 (a scale per 32 values); this model's "
                       "head_dim is %d: use f16 or f32",
                       tf_dtype_name(type), head_dim);
    return TF_OK;
}

size_t tf_kv_head_bytes(tf_dtype type, int32_t head_dim) { return tf_dtype_row_size(type, head_dim); }

tf_dtype tf_kv_type_on(const tf_backend *be, tf_dtype type) {
    if (be && type == TF_DTYPE_F32 && !tf_backend_supports(be, TF_OP_ATTN, TF_DTYPE_F32) &&
        tf_backend_supports(be, TF_OP_ATTN, TF_DTYPE_F16))
        return TF_DTYPE_F16;
    return type;
}

tf_status tf_kv_init_on(tf_kv_cache *kv, tf_backend *be, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                        int32_t n_slots, tf_dtype type, const char *what, tf_err *err) {
    memset(kv, 0, sizeof *kv);
    if (n_slots < 1 || n_layer < 1 || n_head_kv < 1 || head_dim < 1)
        return tf_errf(err, TF_ERR_INVALID_ARG, "%s of %d slots: expected at least 1", what, n_slots);
    TF_TRY(tf_kv_check_type(type, head_dim, err));
    if (be) {
        TF_TRY(tf_backend_require(be, TF_OP_KV_STORE, type, what, err));
        TF_TRY(tf_backend_require(be, TF_OP_ATTN, type, what, err));
    }
    int64_t slots = ((int64_t)n_slots + TF_KV_BLK - 1) / TF_KV_BLK * TF_KV_BLK;
    if (slots > INT32_MAX) return tf_errf(err, TF_ERR_INVALID_ARG, "%s of %d slots is too large", what, n_slots);
    kv->n_layer = n_layer;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->n_slots = (int32_t)slots;
    kv->type = type;
    tf_kv_layout lay = tf_kv_layout_make(type, head_dim);
    kv->v_row_bytes = lay.v_row_bytes;
    kv->k_blk_bytes = lay.k_blk_bytes;
    uint64_t head, layer, total;
    if (!tf_mul_ok((uint64_t)slots, (uint64_t)kv->v_row_bytes, &head) ||
        !tf_mul_ok(head, (uint64_t)n_head_kv, &layer) || !tf_mul_ok(layer, (uint64_t)n_layer, &total) ||
        total > SIZE_MAX / 2)
        return tf_errf(err, TF_ERR_NOMEM, "%s of %d slots overflows the address space", what, n_slots);
    kv->head_stride = (size_t)head;
    kv->layer_stride = (size_t)layer;
    kv->bytes = (size_t)total;
    kv->pos = tf_alloc(sizeof(int32_t) * (size_t)slots);
    if (!kv->pos) {
        tf_kv_free(kv);
        return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", what);
    }
    if (be && !be->ops->host_memory) {
        /* zero-filled: slots never written stay finite, as on the host */
        kv->be = be;
        char w[256];
        snprintf(w, sizeof w, "%s (%d slots, %s)", what, (int)slots, tf_dtype_name(type));
        tf_status st = be->ops->alloc(be, (void **)&kv->k, kv->bytes, w, err);
        if (st == TF_OK) st = be->ops->alloc(be, (void **)&kv->v, kv->bytes, w, err);
        if (st != TF_OK) tf_kv_free(kv);
        return st;
    }
    kv->k = tf_alloc_pages(kv->bytes); /* zero-filled: unwritten slots stay finite */
    kv->v = tf_alloc_pages(kv->bytes);
    if (!kv->k || !kv->v) {
        tf_kv_free(kv);
        return tf_errf(err, TF_ERR_NOMEM, "cannot reserve %s of %d tokens (%.1f MiB)", what, n_slots,
                       2.0 * (double)total / (1 << 20));
    }
    return TF_OK;
}

tf_status tf_kv_init(tf_kv_cache *kv, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t n_slots,
                     tf_dtype type, tf_err *err) {
    return tf_kv_init_on(kv, NULL, n_layer, n_head_kv, head_dim, n_slots, type, "a KV cache", err);
}

void tf_kv_free(tf_kv_cache *kv) {
    if (kv->be) {
        if (kv->k) kv->be->ops->free(kv->be, kv->k);
        if (kv->v) kv->be->ops->free(kv->be, kv->v);
    } else {
        tf_free_pages(kv->k, kv->bytes);
        tf_free_pages(kv->v, kv->bytes);
    }
    tf_free(kv->pos);
    memset(kv, 0, sizeof *kv);
}

void tf_kv_store(tf_kv_cache *kv, int il, int32_t slot0, int32_t n, const float *k, const float *v, int64_t ld) {
    const tf_kv_layout L = tf_kv_layout_of(kv);
    const int hd = kv->head_dim;
    for (int h = 0; h < kv->n_head_kv; h++)
        for (int32_t i = 0; i < n; i++)
            tf_kv_head_store(&L, tf_kv_k(kv, il, h), tf_kv_v(kv, il, h), slot0 + i, k + (size_t)i * ld + (size_t)h * hd,
                             v + (size_t)i * ld + (size_t)h * hd);
}

void tf_kv_read(const tf_kv_cache *kv, int il, int h, int32_t slot, float *k_out, float *v_out) {
    const tf_kv_layout L = tf_kv_layout_of(kv);
    tf_kv_head_read(&L, tf_kv_k(kv, il, h), tf_kv_v(kv, il, h), slot, k_out, v_out);
}

void tf_kv_k_block_f32(const tf_kv_cache *kv, int il, int h, int32_t blk, float *out) {
    const tf_kv_layout L = tf_kv_layout_of(kv);
    tf_kv_head_k_block_f32(&L, tf_kv_k(kv, il, h), blk, out);
}

void tf_kv_copy(tf_kv_cache *dst, int32_t o, const tf_kv_cache *src, int32_t s, int32_t n, int il, int h) {
    const tf_kv_layout L = tf_kv_layout_of(src);
    tf_kv_head_copy(&L, tf_kv_k(dst, il, h), tf_kv_v(dst, il, h), o, tf_kv_k(src, il, h), tf_kv_v(src, il, h), s, n);
}

void tf_kv_copy_slots(tf_kv_cache *dst, int32_t o, const tf_kv_cache *src, int32_t s, int32_t n) {
    TF_ASSERT(dst->n_layer == src->n_layer && dst->n_head_kv == src->n_head_kv && dst->head_dim == src->head_dim &&
              dst->type == src->type);
    TF_ASSERT(n >= 0 && s >= 0 && o >= 0 && (int64_t)s + n <= src->n_slots && (int64_t)o + n <= dst->n_slots);
    if (n == 0) return;
    for (int il = 0; il < src->n_layer; il++)
        for (int h = 0; h < src->n_head_kv; h++) tf_kv_copy(dst, o, src, s, n, il, h);
    memcpy(dst->pos + o, src->pos + s, sizeof(int32_t) * (size_t)n);
    if (dst->n_used < o + n) dst->n_used = o + n;
}

tf_status tf_kv_copy_prefix(tf_kv_cache *dst, const tf_kv_cache *src, int32_t n, tf_err *err) {
    if (dst->n_layer != src->n_layer || dst->n_head_kv != src->n_head_kv || dst->head_dim != src->head_dim ||
        dst->type != src->type || (dst->be == NULL) != (src->be == NULL))
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "KV cache copy: %d layers x %d KV heads x %d, %s, %s into %d x %d x %d, %s, %s: expected the "
                       "same shape and type, both on the host or both on a device",
                       src->n_layer, src->n_head_kv, src->head_dim, tf_dtype_name(src->type),
                       src->be ? "device" : "host", dst->n_layer, dst->n_head_kv, dst->head_dim,
                       tf_dtype_name(dst->type), dst->be ? "device" : "host");
    if (n < 0 || n > src->n_slots || n > dst->n_slots)
        return tf_errf(err, TF_ERR_INVALID_ARG, "KV cache copy of %d slots: the caches hold %d and %d", n,
                       src->n_slots, dst->n_slots);
    if (!dst->be) {
        tf_kv_copy_slots(dst, 0, src, 0, n);
        return TF_OK;
    }
    /* whole K blocks (the slots past n in the last one are unused in both) and n V rows */
    size_t kb = (size_t)((n + TF_KV_BLK - 1) / TF_KV_BLK) * dst->k_blk_bytes, vb = (size_t)n * dst->v_row_bytes;
    for (int il = 0; il < dst->n_layer && n > 0; il++)
        for (int h = 0; h < dst->n_head_kv; h++) {
            TF_TRY(dst->be->ops->copy(dst->be, tf_kv_k(dst, il, h), tf_kv_k(src, il, h), kb, err));
            TF_TRY(dst->be->ops->copy(dst->be, tf_kv_v(dst, il, h), tf_kv_v(src, il, h), vb, err));
        }
    memcpy(dst->pos, src->pos, sizeof(int32_t) * (size_t)n);
    if (dst->n_used < n) dst->n_used = n;
    return TF_OK;
}

tf_kv_view tf_kv_layer_view(const tf_kv_cache *kv, int il) {
    return (tf_kv_view){.lay = tf_kv_layout_of(kv), .k = tf_kv_k(kv, il, 0), .v = tf_kv_v(kv, il, 0),
                        .head_stride = kv->head_stride, .n_head_kv = kv->n_head_kv};
}

/* A device cache: a pool of 2 * POOL fresh random rows goes up once and the
 * slots are stored from it POOL at a time, each run starting at another row
 * of the pool (by layer and run); drawing every value on the host would take
 * minutes at 100K+ tokens. */
static tf_status fill_from_pool(tf_kv_cache *kv, tf_backend *be, int32_t n, tf_rng *rng, tf_err *err) {
    enum { POOL = 1024 };
    const int64_t width = (int64_t)kv->n_head_kv * kv->head_dim;
    const size_t bytes = sizeof(float) * (size_t)(2 * POOL * width);
    float *k = malloc(2 * bytes), *dk = NULL, *dv = NULL;
    int32_t *d0 = NULL;
    tf_status st = k ? TF_OK : tf_errf(err, TF_ERR_NOMEM, "fill: out of memory");
    float *v = k ? k + 2 * POOL * width : NULL;
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&dk, bytes, "random keys", err);
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&dv, bytes, "random values", err);
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&d0, sizeof(int32_t), "the first slot", err);
    if (st == TF_OK) {
        for (int64_t i = 0; i < 2 * POOL * width; i++) {
            k[i] = (float)(2.0 * tf_rng_uniform(rng) - 1.0);
            v[i] = (float)(2.0 * tf_rng_uniform(rng) - 1.0);
        }
        st = be->ops->upload(be, dk, k, bytes, err);
        if (st == TF_OK) st = be->ops->upload(be, dv, v, bytes, err);
    }
    for (int il = 0; il < kv->n_layer && st == TF_OK; il++)
        for (int32_t s0 = 0; s0 < n && st == TF_OK; s0 += POOL) {
            const int32_t nr = n - s0 < POOL ? n - s0 : POOL;
            const int64_t o = (int64_t)(tf_rng_next(rng) % POOL) * width;
            st = be->ops->upload(be, d0, &s0, sizeof s0, err); /* in stream order: the store before reads it */
            const tf_kv_view view = tf_kv_layer_view(kv, il);
            if (st == TF_OK) be->ops->kv_store(be, &view, d0, nr, dk + o, dv + o, width);
            if (st == TF_OK) st = be->ops->check(be, "fill", err);
        }
    if (st == TF_OK) st = be->ops->sync(be, "fill", err);
    if (dk) be->ops->free(be, dk);
    if (dv) be->ops->free(be, dv);
    if (d0) be->ops->free(be, d0);
    free(k);
    return st;
}

tf_status tf_kv_fill_random(tf_kv_cache *kv, int32_t n, uint64_t seed, tf_err *err) {
    if (n < 0 || n > kv->n_slots)
        return tf_errf(err, TF_ERR_RANGE, "fill: %d positions (expected 0..%d, the cache's slots)", n, kv->n_slots);
    enum { ROWS = 64 }; /* tokens per kv_store call */
    tf_backend host, *be = kv->be;
    if (!be) {
        TF_TRY(tf_backend_cpu_init(&host, NULL, TF_ISA_BEST, err));
        be = &host;
    }
    tf_rng rng;
    tf_rng_seed(&rng, seed);
    if (!be->ops->host_memory) {
        TF_TRY(fill_from_pool(kv, be, n, &rng, err));
        for (int32_t s = 0; s < n; s++) kv->pos[s] = s;
        kv->n_used = n;
        return TF_OK;
    }
    const int64_t width = (int64_t)kv->n_head_kv * kv->head_dim;
    const size_t bytes = sizeof(float) * (size_t)(ROWS * width);
    float *k = malloc(2 * bytes), *dk = NULL, *dv = NULL;
    int32_t *d0 = NULL;
    tf_status st = k ? TF_OK : tf_errf(err, TF_ERR_NOMEM, "fill: out of memory");
    float *v = k ? k + ROWS * width : NULL;
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&dk, bytes, "random keys", err);
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&dv, bytes, "random values", err);
    if (st == TF_OK) st = be->ops->alloc(be, (void **)&d0, sizeof(int32_t), "the first slot", err);
    for (int il = 0; il < kv->n_layer && st == TF_OK; il++)
        for (int32_t s0 = 0; s0 < n && st == TF_OK; s0 += ROWS) {
            int32_t nr = n - s0 < ROWS ? n - s0 : ROWS;
            for (int64_t i = 0; i < nr * width; i++) {
                k[i] = (float)(2.0 * tf_rng_uniform(&rng) - 1.0);
                v[i] = (float)(2.0 * tf_rng_uniform(&rng) - 1.0);
            }
            st = be->ops->upload(be, dk, k, sizeof(float) * (size_t)(nr * width), err);
            if (st == TF_OK) st = be->ops->upload(be, dv, v, sizeof(float) * (size_t)(nr * width), err);
            if (st == TF_OK) st = be->ops->upload(be, d0, &s0, sizeof s0, err);
            if (st == TF_OK) st = be->ops->sync(be, "fill", err); /* the staging is reused */
            const tf_kv_view view = tf_kv_layer_view(kv, il);
            if (st == TF_OK) be->ops->kv_store(be, &view, d0, nr, dk, dv, width);
        }
    if (st == TF_OK) st = be->ops->sync(be, "fill", err);
    if (dk) be->ops->free(be, dk);
    if (dv) be->ops->free(be, dv);
    if (d0) be->ops->free(be, d0);
    free(k);
    if (be == &host) tf_backend_free(&host);
    if (st != TF_OK) return st;
    for (int32_t s = 0; s < n; s++) kv->pos[s] = s;
    kv->n_used = n;
    return TF_OK;
}
