/*
 * gguf_write.c — GGUF v3 writer. See gguf_write.h for the contract.
 *
 * Metadata values are serialized into their on-disk little-endian encoding
 * as soon as they are set, so writing is a plain concatenation and the file
 * size is known before the first byte goes out. Tensor data is pulled at
 * write time, chunk by chunk, through a sink that either appends to a FILE
 * or copies into a preallocated memory buffer.
 */
#include "format/gguf_write.h"

#include "core/mem.h"
#include "core/outpath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_CHUNK_BYTES ((size_t)32 << 20)

typedef struct wkv {
    char *key; /* NUL-terminated copy (keys from copy_kv may hold any bytes; key_len is authoritative) */
    size_t key_len;
    uint32_t type;
    uint8_t *val; /* encoded value (arrays: element type, count, elements) */
    size_t val_len;
} wkv;

typedef struct wtensor {
    char name[TF_GGUF_NAME_MAX + 1];
    tf_gguf_tensor_desc desc;
    uint64_t offset; /* relative to the data section; set by layout() */
    const void *data;
    tf_gguf_fill_fn fill;
    void *ud;
} wtensor;

struct tf_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint32_t alignment;
    size_t chunk_bytes;
};

/* ---- growable byte buffer used to encode values ---- */

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} bytes;

static void put(bytes *b, const void *src, size_t n) {
    if (b->oom) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2) { b->oom = true; return; }
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_le(bytes *b, uint64_t v, int n) {
    uint8_t tmp[8];
    for (int i = 0; i < n; i++) tmp[i] = (uint8_t)(v >> (8 * i));
    put(b, tmp, (size_t)n);
}

static void put_str(bytes *b, const char *s, uint64_t len) {
    put_le(b, len, 8);
    put(b, s, (size_t)len);
}

static const uint8_t k_scalar_size[TF_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static bool is_scalar(uint32_t t) { return t < TF_GGUF_TYPE_COUNT && k_scalar_size[t] != 0; }

/* ---- builder ---- */

tf_gguf_writer *tf_gguf_writer_new(void) {
    tf_gguf_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->alignment = TF_GGUF_DEFAULT_ALIGNMENT;
        w->chunk_bytes = DEFAULT_CHUNK_BYTES;
    }
    return w;
}

void tf_gguf_writer_free(tf_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

void tf_gguf_writer_set_chunk_bytes(tf_gguf_writer *w, size_t bytes_) { w->chunk_bytes = bytes_ ? bytes_ : 1; }

size_t tf_gguf_writer_n_kv(const tf_gguf_writer *w) { return w->n_kv; }
size_t tf_gguf_writer_n_tensors(const tf_gguf_writer *w) { return w->n_t; }

static wkv *find_kv(const tf_gguf_writer *w, const char *key, size_t len) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (w->kv[i].key_len == len && memcmp(w->kv[i].key, key, len) == 0) return &w->kv[i];
    return NULL;
}

bool tf_gguf_writer_has_kv(const tf_gguf_writer *w, const char *key) { return find_kv(w, key, strlen(key)) != NULL; }

bool tf_gguf_writer_remove_kv(tf_gguf_writer *w, const char *key) {
    wkv *kv = find_kv(w, key, strlen(key));
    if (!kv) return false;
    size_t i = (size_t)(kv - w->kv);
    if (kv->key_len == 17 && memcmp(kv->key, "general.alignment", 17) == 0) w->alignment = TF_GGUF_DEFAULT_ALIGNMENT;
    free(kv->key);
    free(kv->val);
    memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - i - 1) * sizeof *w->kv);
    w->n_kv--;
    return true;
}

/* Printable form of a key for messages (keys may hold any bytes). */
static void key_print(char *buf, size_t cap, const char *key, size_t len) {
    size_t n = len < cap - 1 ? len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)key[i];
        buf[i] = (c >= 32 && c < 127) ? (char)c : '?';
    }
    buf[n] = '\0';
}

/* Take ownership of the encoded value in *val and append the pair. On
 * failure *val is freed too. */
static tf_status add_kv(tf_gguf_writer *w, const char *key, size_t key_len, uint32_t type, bytes *val,
                        tf_err *err) {
    char kp[128];
    key_print(kp, sizeof kp, key, key_len);
    tf_status st = TF_OK;
    if (val->oom) st = tf_errf(err, TF_ERR_NOMEM, "gguf writer: key '%s': out of memory", kp);
    else if (key_len == 0) st = tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: metadata key is empty");
    else if (key_len > TF_GGUF_KEY_MAX)
        st = tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: key '%s...' is %zu bytes long (limit %d)", kp, key_len,
                     TF_GGUF_KEY_MAX);
    else if (find_kv(w, key, key_len))
        st = tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: metadata key '%s' is already set", kp);
    uint32_t align = 0;
    if (st == TF_OK && key_len == 17 && memcmp(key, "general.alignment", 17) == 0) {
        uint32_t a = 0;
        if (type == TF_GGUF_UINT32 && val->n == 4)
            a = (uint32_t)val->p[0] | (uint32_t)val->p[1] << 8 | (uint32_t)val->p[2] << 16 | (uint32_t)val->p[3] << 24;
        if (type != TF_GGUF_UINT32 || a == 0 || (a & (a - 1)) || a > 65536)
            st = tf_errf(err, TF_ERR_INVALID_ARG,
                         "gguf writer: general.alignment must be a uint32 power of two up to 65536 (got %s %u)",
                         tf_gguf_type_name(type), a);
        align = a;
    }
    if (st == TF_OK && w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *p = realloc(w->kv, cap * sizeof *p);
        if (!p) st = tf_errf(err, TF_ERR_NOMEM, "gguf writer: key '%s': out of memory", kp);
        else {
            w->kv = p;
            w->cap_kv = cap;
        }
    }
    char *kcopy = NULL;
    if (st == TF_OK) {
        kcopy = malloc(key_len + 1);
        if (!kcopy) st = tf_errf(err, TF_ERR_NOMEM, "gguf writer: key '%s': out of memory", kp);
    }
    if (st != TF_OK) {
        free(val->p);
        return st;
    }
    memcpy(kcopy, key, key_len);
    kcopy[key_len] = '\0';
    w->kv[w->n_kv++] = (wkv){.key = kcopy, .key_len = key_len, .type = type, .val = val->p, .val_len = val->n};
    if (align) w->alignment = align;
    return TF_OK;
}

static tf_status set_scalar(tf_gguf_writer *w, const char *key, uint32_t type, uint64_t raw, tf_err *err) {
    bytes b = {0};
    put_le(&b, raw, k_scalar_size[type]);
    return add_kv(w, key, strlen(key), type, &b, err);
}

tf_status tf_gguf_writer_set_u8(tf_gguf_writer *w, const char *key, uint8_t v, tf_err *err) {
    return set_scalar(w, key, TF_GGUF_UINT8, v, err);
}
tf_status tf_gguf_writer_set_i8(tf_gguf_writer *w, const char *key, int8_t v, tf_err *err) {
    return set_scalar(w, key, TF_GGUF_INT8, (uint8_t)v, err);
}
tf_status tf_gguf_writer_set_u16(tf_gguf_writer *w, const char *key, uint16_t v, tf_err *err) {
    return set_scalar(w, key, TF_GGUF_UINT16, v, err);
}
tf_status tf_gguf_writer_set_i16(tf_gguf_writer *w, const char *key, int16_t v, tf_err *err) {
    return set_scalar(w, key, TF_GGUF_INT16, (uint16_t)v, err);
}
tf_status tf_gguf_writer_set_u32(tf_gguf_writer *w, const char *key, uint32_t v, tf_err *err) {
    return set_scalar(w, key, TF_GGUF_UINT32, v, err);
}
tf_status tf_gguf_writer_set_i32(tf_gguf_writer *w, const char *key, int32_t v, tf_err *err) {
    return set_scalar(w, key, TF_GGUF_INT32, (uint32_t)v, err);
}
tf_status tf_gguf_writer_set_u64(tf_gguf_writer *w, const char *key, uint64_t v, tf_err *err) {
    return set_scalar(w, key, TF_GGUF_UINT64, v, err);
}
tf_status tf_gguf_writer_set_i64(tf_gguf_writer *w, const char *key, int64_t v, tf_err *err) {
    return set_scalar(w, key, TF_GGUF_INT64, (uint64_t)v, err);
}
tf_status tf_gguf_writer_set_f32(tf_gguf_writer *w, const char *key, float v, tf_err *err) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return set_scalar(w, key, TF_GGUF_FLOAT32, u, err);
}
tf_status tf_gguf_writer_set_f64(tf_gguf_writer *w, const char *key, double v, tf_err *err) {
    uint64_t u;
    memcpy(&u, &v, 8);
    return set_scalar(w, key, TF_GGUF_FLOAT64, u, err);
}
tf_status tf_gguf_writer_set_bool(tf_gguf_writer *w, const char *key, bool v, tf_err *err) {
    return set_scalar(w, key, TF_GGUF_BOOL, v ? 1 : 0, err);
}

tf_status tf_gguf_writer_set_strn(tf_gguf_writer *w, const char *key, const char *v, uint64_t len, tf_err *err) {
    bytes b = {0};
    if (len > SIZE_MAX - 8) b.oom = true;
    else put_str(&b, v, len);
    return add_kv(w, key, strlen(key), TF_GGUF_STRING, &b, err);
}

tf_status tf_gguf_writer_set_str(tf_gguf_writer *w, const char *key, const char *v, tf_err *err) {
    return tf_gguf_writer_set_strn(w, key, v, strlen(v), err);
}

/* Encode n numeric elements of type et read from a native C array. */
static void put_elems(bytes *b, uint32_t et, const void *elems, uint64_t n) {
    const uint8_t *p = elems;
    size_t sz = k_scalar_size[et];
    for (uint64_t i = 0; i < n && !b->oom; i++) {
        uint64_t raw = 0;
        switch (sz) {
        case 1: raw = p[i]; break;
        case 2: { uint16_t v; memcpy(&v, p + i * 2, 2); raw = v; break; }
        case 4: { uint32_t v; memcpy(&v, p + i * 4, 4); raw = v; break; }
        default: memcpy(&raw, p + i * 8, 8); break;
        }
        put_le(b, raw, (int)sz);
    }
}

tf_status tf_gguf_writer_set_arr(tf_gguf_writer *w, const char *key, tf_gguf_type elem_type, const void *elems,
                                 uint64_t n, tf_err *err) {
    if (!is_scalar(elem_type))
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "gguf writer: key '%s': array element type %u is not a number or bool type (strings: "
                       "tf_gguf_writer_set_arr_str)", key, (unsigned)elem_type);
    if (elem_type == TF_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)elems)[i] > 1)
                return tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: key '%s': element %llu of a bool array is %u",
                               key, (unsigned long long)i, ((const uint8_t *)elems)[i]);
    bytes b = {0};
    uint64_t total;
    if (!tf_mul_ok(n, k_scalar_size[elem_type], &total) || total > SIZE_MAX - 12) b.oom = true;
    put_le(&b, elem_type, 4);
    put_le(&b, n, 8);
    put_elems(&b, elem_type, elems, n);
    return add_kv(w, key, strlen(key), TF_GGUF_ARRAY, &b, err);
}

tf_status tf_gguf_writer_set_arr_strn(tf_gguf_writer *w, const char *key, const tf_gguf_str *strs, uint64_t n,
                                      tf_err *err) {
    bytes b = {0};
    put_le(&b, TF_GGUF_STRING, 4);
    put_le(&b, n, 8);
    for (uint64_t i = 0; i < n && !b.oom; i++) put_str(&b, strs[i].data, strs[i].len);
    return add_kv(w, key, strlen(key), TF_GGUF_ARRAY, &b, err);
}

tf_status tf_gguf_writer_set_arr_str(tf_gguf_writer *w, const char *key, const char *const *strs, uint64_t n,
                                     tf_err *err) {
    bytes b = {0};
    put_le(&b, TF_GGUF_STRING, 4);
    put_le(&b, n, 8);
    for (uint64_t i = 0; i < n && !b.oom; i++) put_str(&b, strs[i], strlen(strs[i]));
    return add_kv(w, key, strlen(key), TF_GGUF_ARRAY, &b, err);
}

tf_status tf_gguf_writer_copy_kv(tf_gguf_writer *w, const tf_gguf_kv *kv, tf_err *err) {
    bytes b = {0};
    uint32_t t = kv->type;
    if (t == TF_GGUF_STRING) {
        put_str(&b, kv->val.s.data, kv->val.s.len);
    } else if (t == TF_GGUF_ARRAY) {
        put_le(&b, kv->arr_type, 4);
        put_le(&b, kv->arr_n, 8);
        if (kv->arr_type == TF_GGUF_STRING) {
            for (uint64_t i = 0; i < kv->arr_n && !b.oom; i++) put_str(&b, kv->arr_str[i].data, kv->arr_str[i].len);
        } else if (is_scalar(kv->arr_type)) {
            uint64_t total;
            if (!tf_mul_ok(kv->arr_n, k_scalar_size[kv->arr_type], &total) || total > SIZE_MAX) b.oom = true;
            else put(&b, kv->arr_data, (size_t)total); /* already little-endian */
        } else {
            return tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: cannot copy an array of element type %u",
                           kv->arr_type);
        }
    } else if (is_scalar(t)) {
        uint64_t raw = 0;
        switch (t) {
        case TF_GGUF_INT8: case TF_GGUF_INT16: case TF_GGUF_INT32: case TF_GGUF_INT64:
            raw = (uint64_t)kv->val.i; break;
        case TF_GGUF_FLOAT32: { float f = (float)kv->val.f; uint32_t u; memcpy(&u, &f, 4); raw = u; break; }
        case TF_GGUF_FLOAT64: memcpy(&raw, &kv->val.f, 8); break;
        default: raw = kv->val.u; break;
        }
        put_le(&b, raw, k_scalar_size[t]);
    } else {
        return tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: cannot copy a value of type %u", t);
    }
    return add_kv(w, kv->key.data, (size_t)kv->key.len, t, &b, err);
}

/* ---- tensors ---- */

static tf_status add_tensor(tf_gguf_writer *w, const char *name, tf_dtype type, uint32_t n_dims, const int64_t *ne,
                            const void *data, tf_gguf_fill_fn fill, void *ud, tf_err *err) {
    size_t len = strlen(name);
    if (len == 0) return tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: tensor name is empty");
    if (len > TF_GGUF_NAME_MAX)
        return tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: tensor name '%s' is %zu bytes long (limit %d)", name,
                       len, TF_GGUF_NAME_MAX);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: tensor '%s' is already added", name);
    if (n_dims < 1 || n_dims > TF_GGUF_MAX_DIMS)
        return tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: tensor '%s': n_dims = %u (expected 1..%d)", name,
                       n_dims, TF_GGUF_MAX_DIMS);
    uint32_t block = tf_dtype_block_size(type);
    if (block == 0)
        return tf_errf(err, TF_ERR_UNSUPPORTED, "gguf writer: tensor '%s': unsupported element type %u (%s)", name,
                       (unsigned)type, tf_dtype_name(type));
    tf_gguf_tensor_desc d = {.n_dims = n_dims, .type = type, .index = w->n_t};
    uint64_t rows = 1;
    for (int i = 0; i < TF_GGUF_MAX_DIMS; i++) d.ne[i] = 1;
    for (uint32_t i = 0; i < n_dims; i++) {
        if (ne[i] < 1)
            return tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: tensor '%s': ne[%u] = %lld (expected >= 1)", name,
                           i, (long long)ne[i]);
        d.ne[i] = ne[i];
        if (i > 0 && (!tf_mul_ok(rows, (uint64_t)ne[i], &rows) || rows > (uint64_t)INT64_MAX / 4))
            return tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: tensor '%s': the row count overflows at ne[%u]",
                           name, i);
    }
    if (d.ne[0] % block != 0)
        return tf_errf(err, TF_ERR_INVALID_ARG,
                       "gguf writer: tensor '%s': row length %lld is not a multiple of the %s block size %u", name,
                       (long long)d.ne[0], tf_dtype_name(type), block);
    uint64_t row_size, nbytes;
    if (!tf_mul_ok((uint64_t)d.ne[0] / block, tf_dtype_type_size(type), &row_size) ||
        !tf_mul_ok(row_size, rows, &nbytes) || nbytes > (uint64_t)INT64_MAX / 4)
        return tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: tensor '%s': byte size overflows", name);
    d.row_size = row_size;
    d.n_rows = (int64_t)rows;
    d.nbytes = nbytes;
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *p = realloc(w->t, cap * sizeof *p);
        if (!p) return tf_errf(err, TF_ERR_NOMEM, "gguf writer: tensor '%s': out of memory", name);
        w->t = p;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len + 1);
    t->desc = d;
    t->data = data;
    t->fill = fill;
    t->ud = ud;
    return TF_OK;
}

tf_status tf_gguf_writer_add_tensor(tf_gguf_writer *w, const char *name, tf_dtype type, uint32_t n_dims,
                                    const int64_t *ne, const void *data, tf_err *err) {
    return add_tensor(w, name, type, n_dims, ne, data, NULL, NULL, err);
}

tf_status tf_gguf_writer_add_tensor_fill(tf_gguf_writer *w, const char *name, tf_dtype type, uint32_t n_dims,
                                         const int64_t *ne, tf_gguf_fill_fn fill, void *ud, tf_err *err) {
    if (!fill) return tf_errf(err, TF_ERR_INVALID_ARG, "gguf writer: tensor '%s': fill callback is NULL", name);
    return add_tensor(w, name, type, n_dims, ne, NULL, fill, ud, err);
}

/* ---- layout and output ---- */

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Assign data offsets; return the header size (before padding) and the
 * total file size. Sizes were overflow-checked when items were added and
 * each tensor is < 2^61 bytes, so the sums here cannot wrap for any count
 * that fits in memory. */
static void layout(tf_gguf_writer *w, uint64_t *header, uint64_t *total) {
    uint64_t h = 4 + 4 + 8 + 8;
    for (size_t i = 0; i < w->n_kv; i++) h += 8 + w->kv[i].key_len + 4 + w->kv[i].val_len;
    for (size_t i = 0; i < w->n_t; i++) h += 8 + strlen(w->t[i].name) + 4 + 8 * (uint64_t)w->t[i].desc.n_dims + 4 + 8;
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        off = align_up(off + w->t[i].desc.nbytes, w->alignment);
    }
    *header = h;
    *total = align_up(h, w->alignment) + off;
}

uint64_t tf_gguf_writer_file_size(const tf_gguf_writer *w) {
    uint64_t h, total;
    layout((tf_gguf_writer *)w, &h, &total);
    return total;
}

typedef struct sink {
    FILE *f;          /* file mode */
    uint8_t *mem;     /* memory mode: buffer of `total` bytes */
    uint64_t pos, total;
    const char *path; /* for messages */
    tf_progress_fn progress;
    void *progress_ud;
    tf_err *err;
} sink;

static tf_status sink_write(sink *s, const void *p, size_t n) {
    if (n == 0) return TF_OK;
    if (s->f) {
        if (fwrite(p, 1, n, s->f) != n)
            return tf_errf(s->err, TF_ERR_IO, "%s: write failed at byte %llu: %s", s->path,
                           (unsigned long long)s->pos, strerror(errno));
    } else {
        TF_ASSERT(s->pos + n <= s->total);
        if (s->mem + s->pos != (const uint8_t *)p) memcpy(s->mem + s->pos, p, n);
    }
    s->pos += n;
    return TF_OK;
}

static tf_status sink_zeros(sink *s, uint64_t n) {
    static const uint8_t zero[256];
    while (n > 0) {
        size_t k = n < sizeof zero ? (size_t)n : sizeof zero;
        TF_TRY(sink_write(s, zero, k));
        n -= k;
    }
    return TF_OK;
}

static tf_status sink_progress(sink *s) {
    if (s->progress && !s->progress(s->progress_ud, s->pos, s->total))
        return tf_errf(s->err, TF_ERR_CANCELLED, "%s: writing cancelled at byte %llu of %llu", s->path,
                       (unsigned long long)s->pos, (unsigned long long)s->total);
    return TF_OK;
}

static tf_status write_header(tf_gguf_writer *w, sink *s, uint64_t header) {
    bytes b = {0};
    put_le(&b, TF_GGUF_MAGIC, 4);
    put_le(&b, 3, 4);
    put_le(&b, w->n_t, 8);
    put_le(&b, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(&b, w->kv[i].key, w->kv[i].key_len);
        put_le(&b, w->kv[i].type, 4);
        put(&b, w->kv[i].val, w->kv[i].val_len);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        put_str(&b, t->name, strlen(t->name));
        put_le(&b, t->desc.n_dims, 4);
        for (uint32_t d = 0; d < t->desc.n_dims; d++) put_le(&b, (uint64_t)t->desc.ne[d], 8);
        put_le(&b, (uint32_t)t->desc.type, 4);
        put_le(&b, t->offset, 8);
    }
    tf_status st;
    if (b.oom) st = tf_errf(s->err, TF_ERR_NOMEM, "%s: out of memory encoding the header", s->path);
    else {
        TF_ASSERT(b.n == header);
        st = sink_write(s, b.p, b.n);
    }
    free(b.p);
    if (st == TF_OK) st = sink_zeros(s, align_up(header, w->alignment) - header);
    return st;
}

/* Stream one tensor: borrowed bytes are written directly; fill callbacks
 * produce chunks of whole rows into `scratch` (file mode) or straight into
 * the output buffer (memory mode). */
static tf_status write_tensor(tf_gguf_writer *w, sink *s, const wtensor *t, uint8_t *scratch, int64_t chunk_rows) {
    const tf_gguf_tensor_desc *d = &t->desc;
    if (t->data) {
        const uint8_t *p = t->data;
        for (uint64_t done = 0; done < d->nbytes;) {
            uint64_t n = d->nbytes - done;
            if (n > w->chunk_bytes) n = w->chunk_bytes;
            TF_TRY(sink_write(s, p + done, (size_t)n));
            done += n;
            TF_TRY(sink_progress(s));
        }
    } else {
        for (int64_t r = 0; r < d->n_rows; r += chunk_rows) {
            int64_t n = d->n_rows - r < chunk_rows ? d->n_rows - r : chunk_rows;
            uint8_t *dst = s->f ? scratch : s->mem + s->pos;
            size_t nb = (size_t)((uint64_t)n * d->row_size);
            tf_status st = t->fill(t->ud, d, r, n, dst, s->err);
            if (st != TF_OK) {
                if (s->err && s->err->status == TF_OK)
                    return tf_errf(s->err, st, "%s: tensor '%s': filling rows %lld.. failed", s->path, t->name,
                                   (long long)r);
                if (s->err) tf_err_prefix(s->err, "%s: tensor '%s': ", s->path, t->name);
                return st;
            }
            TF_TRY(sink_write(s, dst, nb));
            TF_TRY(sink_progress(s));
        }
    }
    return sink_zeros(s, align_up(d->nbytes, w->alignment) - d->nbytes);
}

static tf_status write_all(tf_gguf_writer *w, sink *s) {
    uint64_t header, total;
    layout(w, &header, &total);
    s->total = total;
    s->pos = 0;
    TF_TRY(write_header(w, s, header));
    /* one scratch buffer for the largest chunk any fill callback will get */
    uint64_t max_chunk = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const tf_gguf_tensor_desc *d = &w->t[i].desc;
        if (w->t[i].data) continue;
        int64_t rows = (int64_t)(w->chunk_bytes / d->row_size);
        if (rows < 1) rows = 1;
        if (rows > d->n_rows) rows = d->n_rows;
        if ((uint64_t)rows * d->row_size > max_chunk) max_chunk = (uint64_t)rows * d->row_size;
    }
    uint8_t *scratch = NULL;
    if (s->f && max_chunk > 0) {
        scratch = max_chunk <= SIZE_MAX ? tf_alloc((size_t)max_chunk) : NULL;
        if (!scratch)
            return tf_errf(s->err, TF_ERR_NOMEM, "%s: cannot allocate a %llu-byte write buffer", s->path,
                           (unsigned long long)max_chunk);
    }
    tf_status st = TF_OK;
    for (size_t i = 0; i < w->n_t && st == TF_OK; i++) {
        int64_t rows = (int64_t)(w->chunk_bytes / w->t[i].desc.row_size);
        st = write_tensor(w, s, &w->t[i], scratch, rows < 1 ? 1 : rows);
    }
    tf_free(scratch);
    if (st == TF_OK) TF_ASSERT(s->pos == total);
    return st;
}

tf_status tf_gguf_writer_write_mem(tf_gguf_writer *w, uint8_t **out, size_t *out_size, tf_err *err) {
    *out = NULL;
    *out_size = 0;
    uint64_t total = tf_gguf_writer_file_size(w);
    uint8_t *buf = total <= SIZE_MAX ? tf_alloc((size_t)total) : NULL;
    if (!buf)
        return tf_errf(err, TF_ERR_NOMEM, "gguf writer: cannot allocate %llu bytes for the file",
                       (unsigned long long)total);
    sink s = {.mem = buf, .path = "<memory>", .err = err};
    tf_status st = write_all(w, &s);
    if (st != TF_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    *out_size = (size_t)total;
    return TF_OK;
}

tf_status tf_gguf_writer_write_file(tf_gguf_writer *w, const char *path, tf_progress_fn progress, void *ud,
                                    tf_err *err) {
    TF_TRY(tf_out_path_check(path, NULL, err));
    size_t plen = strlen(path);
    char *tmp = malloc(plen + sizeof ".partial");
    if (!tmp) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".partial", sizeof ".partial");
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        tf_status st = tf_errf(err, TF_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return st;
    }
    sink s = {.f = f, .path = path, .progress = progress, .progress_ud = ud, .err = err};
    tf_status st = write_all(w, &s);
    if (st == TF_OK && fflush(f) != 0)
        st = tf_errf(err, TF_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    /* on disk before it takes the name: a crash leaves the old file or the new one, never a torn one */
    if (st == TF_OK && fsync(fileno(f)) != 0)
        st = tf_errf(err, TF_ERR_IO, "%s: write failed (fsync): %s", path, strerror(errno));
    if (fclose(f) != 0 && st == TF_OK) st = tf_errf(err, TF_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    if (st == TF_OK && rename(tmp, path) != 0)
        st = tf_errf(err, TF_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    if (st != TF_OK) remove(tmp);
    free(tmp);
    return st;
}
