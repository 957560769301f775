/*
 * gguf.c — GGUF v2/v3 parser. See gguf.h for the trust model.
 *
 * The parser walks the header with a bounded cursor; every read checks the
 * bytes that remain, so a truncated or lying file fails with a message naming
 * the field and the offset where it ended.
 */
#include "format/gguf.h"

#include "core/dtype.h"

#include <stdlib.h>
#include <string.h>

typedef struct cursor {
    const uint8_t *p;
    size_t size, pos;
    const char *file;
    tf_err *err;
} cursor;

static const char *const k_type_names[TF_GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};

static const uint8_t k_type_size[TF_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *tf_gguf_type_name(uint32_t type) {
    return type < TF_GGUF_TYPE_COUNT ? k_type_names[type] : "invalid";
}

/* Geometry of every ggml type id, so the reader can validate byte ranges even
 * for types the engine cannot compute with (those fail later, by name). */
static bool ggml_type_geometry(uint32_t type, uint32_t *block, uint32_t *bytes) {
    static const struct { uint16_t block, bytes; } g[] = {
        [0] = {1, 4}, [1] = {1, 2}, [2] = {32, 18}, [3] = {32, 20}, [6] = {32, 22},
        [7] = {32, 24}, [8] = {32, 34}, [9] = {32, 36}, [10] = {256, 84}, [11] = {256, 110},
        [12] = {256, 144}, [13] = {256, 176}, [14] = {256, 210}, [15] = {256, 292},
        [20] = {32, 18}, [23] = {256, 136}, [24] = {1, 1}, [25] = {1, 2}, [26] = {1, 4}, [27] = {1, 8}, [28] = {1, 8}, [30] = {1, 2},
    };
    if (type >= sizeof g / sizeof g[0] || g[type].block == 0) return false;
    *block = g[type].block;
    *bytes = g[type].bytes;
    return true;
}

static tf_status need(cursor *c, uint64_t n, const char *what) {
    if (n > c->size - c->pos)
        return tf_errf(c->err, TF_ERR_FORMAT,
                       "%s: truncated: %s needs %llu bytes at offset %zu but only %zu remain",
                       c->file, what, (unsigned long long)n, c->pos, c->size - c->pos);
    return TF_OK;
}

static uint64_t rd_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static tf_status rd_u32(cursor *c, uint32_t *out, const char *what) {
    TF_TRY(need(c, 4, what));
    *out = (uint32_t)rd_le(c->p + c->pos, 4);
    c->pos += 4;
    return TF_OK;
}

static tf_status rd_u64(cursor *c, uint64_t *out, const char *what) {
    TF_TRY(need(c, 8, what));
    *out = rd_le(c->p + c->pos, 8);
    c->pos += 8;
    return TF_OK;
}

static tf_status rd_str(cursor *c, tf_gguf_str *s, uint64_t max_len, const char *what) {
    uint64_t len;
    TF_TRY(rd_u64(c, &len, what));
    if (len > max_len)
        return tf_errf(c->err, TF_ERR_FORMAT, "%s: %s length %llu at offset %zu exceeds the limit of %llu",
                       c->file, what, (unsigned long long)len, c->pos - 8, (unsigned long long)max_len);
    TF_TRY(need(c, len, what));
    s->data = (const char *)c->p + c->pos;
    s->len = len;
    c->pos += len;
    return TF_OK;
}

static void str_print(char *buf, size_t cap, tf_gguf_str s) {
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s.data[i];
        buf[i] = (ch >= 32 && ch < 127) ? (char)ch : '?';
    }
    buf[n] = '\0';
}

bool tf_gguf_str_eq(tf_gguf_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && memcmp(s.data, cstr, n) == 0;
}

static tf_status parse_value(cursor *c, tf_gguf_kv *kv, const char *key) {
    char what[200];
    uint32_t t = kv->type;
    if (t >= TF_GGUF_TYPE_COUNT)
        return tf_errf(c->err, TF_ERR_FORMAT, "%s: key '%s': value type %u is invalid (expected 0..12)",
                       c->file, key, t);
    snprintf(what, sizeof what, "value of key '%s'", key);
    if (t == TF_GGUF_STRING) return rd_str(c, &kv->val.s, UINT64_MAX, what);
    if (t == TF_GGUF_ARRAY) {
        TF_TRY(rd_u32(c, &kv->arr_type, what));
        TF_TRY(rd_u64(c, &kv->arr_n, what));
        uint32_t et = kv->arr_type;
        if (et >= TF_GGUF_TYPE_COUNT || et == TF_GGUF_ARRAY)
            return tf_errf(c->err, TF_ERR_FORMAT,
                           "%s: key '%s': array element type %u is invalid (expected a scalar or string type)",
                           c->file, key, et);
        if (et == TF_GGUF_STRING) {
            /* each string needs at least its 8-byte length */
            if (kv->arr_n > (c->size - c->pos) / 8)
                return tf_errf(c->err, TF_ERR_FORMAT,
                               "%s: key '%s': array of %llu strings cannot fit in the %zu bytes that remain",
                               c->file, key, (unsigned long long)kv->arr_n, c->size - c->pos);
            kv->arr_str = malloc((size_t)(kv->arr_n ? kv->arr_n : 1) * sizeof *kv->arr_str);
            if (!kv->arr_str) return tf_errf(c->err, TF_ERR_NOMEM, "%s: key '%s': out of memory", c->file, key);
            for (uint64_t i = 0; i < kv->arr_n; i++) {
                snprintf(what, sizeof what, "element %llu of array '%s'", (unsigned long long)i, key);
                TF_TRY(rd_str(c, &kv->arr_str[i], UINT64_MAX, what));
            }
            return TF_OK;
        }
        uint64_t bytes;
        if (!tf_mul_ok(kv->arr_n, k_type_size[et], &bytes))
            return tf_errf(c->err, TF_ERR_FORMAT, "%s: key '%s': array length %llu overflows",
                           c->file, key, (unsigned long long)kv->arr_n);
        TF_TRY(need(c, bytes, what));
        kv->arr_data = c->p + c->pos;
        if (et == TF_GGUF_BOOL)
            for (uint64_t i = 0; i < kv->arr_n; i++)
                if (kv->arr_data[i] > 1)
                    return tf_errf(c->err, TF_ERR_FORMAT,
                                   "%s: key '%s': element %llu of the bool array is %u (expected 0 or 1)", c->file,
                                   key, (unsigned long long)i, kv->arr_data[i]);
        c->pos += bytes;
        return TF_OK;
    }
    int n = k_type_size[t];
    TF_TRY(need(c, (uint64_t)n, what));
    uint64_t raw = rd_le(c->p + c->pos, n);
    c->pos += (size_t)n;
    switch (t) {
    case TF_GGUF_UINT8: case TF_GGUF_UINT16: case TF_GGUF_UINT32: case TF_GGUF_UINT64:
        kv->val.u = raw; break;
    case TF_GGUF_INT8: kv->val.i = (int8_t)raw; break;
    case TF_GGUF_INT16: kv->val.i = (int16_t)raw; break;
    case TF_GGUF_INT32: kv->val.i = (int32_t)raw; break;
    case TF_GGUF_INT64: kv->val.i = (int64_t)raw; break;
    case TF_GGUF_BOOL:
        if (raw > 1)
            return tf_errf(c->err, TF_ERR_FORMAT, "%s: key '%s': bool value %llu (expected 0 or 1)",
                           c->file, key, (unsigned long long)raw);
        kv->val.u = raw; break;
    case TF_GGUF_FLOAT32: { uint32_t u = (uint32_t)raw; float f; memcpy(&f, &u, 4); kv->val.f = f; break; }
    case TF_GGUF_FLOAT64: { double d; memcpy(&d, &raw, 8); kv->val.f = d; break; }
    }
    return TF_OK;
}

static int cmp_str(const tf_gguf_str *a, const tf_gguf_str *b) {
    size_t n = a->len < b->len ? (size_t)a->len : (size_t)b->len;
    int r = memcmp(a->data, b->data, n);
    if (r) return r;
    return a->len < b->len ? -1 : a->len > b->len;
}
static int cmp_kv_ptr(const void *a, const void *b) {
    return cmp_str(&(*(const tf_gguf_kv *const *)a)->key, &(*(const tf_gguf_kv *const *)b)->key);
}
static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp((*(const tf_gguf_tensor *const *)a)->name, (*(const tf_gguf_tensor *const *)b)->name);
}
static int cmp_tensor_off(const void *a, const void *b) {
    uint64_t x = (*(const tf_gguf_tensor *const *)a)->offset, y = (*(const tf_gguf_tensor *const *)b)->offset;
    return x < y ? -1 : x > y;
}

static tf_status check_unique_keys(tf_gguf *g, tf_err *err) {
    if (g->n_kv < 2) return TF_OK;
    const tf_gguf_kv **idx = malloc((size_t)g->n_kv * sizeof *idx);
    if (!idx) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", g->path);
    for (uint64_t i = 0; i < g->n_kv; i++) idx[i] = &g->kv[i];
    qsort(idx, (size_t)g->n_kv, sizeof *idx, cmp_kv_ptr);
    tf_status st = TF_OK;
    for (uint64_t i = 1; i < g->n_kv; i++)
        if (cmp_str(&idx[i - 1]->key, &idx[i]->key) == 0) {
            char k[128];
            str_print(k, sizeof k, idx[i]->key);
            st = tf_errf(err, TF_ERR_FORMAT, "%s: metadata key '%s' appears more than once", g->path, k);
            break;
        }
    free(idx);
    return st;
}

static tf_status check_tensors(tf_gguf *g, tf_err *err) {
    if (g->n_tensors == 0) return TF_OK;
    tf_gguf_tensor **idx = malloc((size_t)g->n_tensors * sizeof *idx);
    if (!idx) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", g->path);
    for (uint64_t i = 0; i < g->n_tensors; i++) idx[i] = &g->tensors[i];
    tf_status st = TF_OK;
    qsort(idx, (size_t)g->n_tensors, sizeof *idx, cmp_tensor_name);
    for (uint64_t i = 1; i < g->n_tensors && st == TF_OK; i++)
        if (strcmp(idx[i - 1]->name, idx[i]->name) == 0)
            st = tf_errf(err, TF_ERR_FORMAT, "%s: tensor name '%s' appears more than once", g->path, idx[i]->name);
    if (st == TF_OK) {
        qsort(idx, (size_t)g->n_tensors, sizeof *idx, cmp_tensor_off);
        for (uint64_t i = 1; i < g->n_tensors && st == TF_OK; i++)
            if (idx[i - 1]->nbytes > 0 && idx[i - 1]->offset + idx[i - 1]->nbytes > idx[i]->offset)
                st = tf_errf(err, TF_ERR_FORMAT,
                             "%s: tensor '%s' data [%llu, %llu) overlaps tensor '%s' starting at %llu",
                             g->path, idx[i - 1]->name, (unsigned long long)idx[i - 1]->offset,
                             (unsigned long long)(idx[i - 1]->offset + idx[i - 1]->nbytes), idx[i]->name,
                             (unsigned long long)idx[i]->offset);
    }
    free(idx);
    return st;
}

static tf_status parse_tensor_info(cursor *c, tf_gguf *g, uint64_t ti) {
    tf_gguf_tensor *t = &g->tensors[ti];
    char what[96];
    snprintf(what, sizeof what, "name of tensor %llu", (unsigned long long)ti);
    tf_gguf_str name;
    char shown[TF_GGUF_NAME_MAX + 1];
    size_t at = c->pos;
    TF_TRY(rd_str(c, &name, UINT64_MAX, what));
    str_print(shown, sizeof shown, name);
    if (name.len > TF_GGUF_NAME_MAX)
        return tf_errf(c->err, TF_ERR_FORMAT,
                       "%s: name of tensor %llu at offset %zu ('%s...') is %llu bytes long (expected at most %d)",
                       c->file, (unsigned long long)ti, at, shown, (unsigned long long)name.len, TF_GGUF_NAME_MAX);
    if (memchr(name.data, '\0', (size_t)name.len))
        return tf_errf(c->err, TF_ERR_FORMAT, "%s: name of tensor %llu ('%s') contains a NUL byte",
                       c->file, (unsigned long long)ti, shown);
    memcpy(t->name, name.data, (size_t)name.len);
    t->name[name.len] = '\0';
    TF_TRY(rd_u32(c, &t->n_dims, "tensor dimension count"));
    if (t->n_dims < 1 || t->n_dims > TF_GGUF_MAX_DIMS)
        return tf_errf(c->err, TF_ERR_FORMAT, "%s: tensor '%s': n_dims = %u (expected 1..%d)",
                       c->file, t->name, t->n_dims, TF_GGUF_MAX_DIMS);
    uint64_t nel = 1;
    for (int d = 0; d < TF_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        TF_TRY(rd_u64(c, &ne, "tensor dimension"));
        if (ne == 0 || ne > (uint64_t)INT64_MAX / 4 || !tf_mul_ok(nel, ne, &nel) || nel > (uint64_t)INT64_MAX / 4)
            return tf_errf(c->err, TF_ERR_FORMAT,
                           "%s: tensor '%s': dimension %u = %llu is zero or makes the element count overflow",
                           c->file, t->name, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
    }
    TF_TRY(rd_u32(c, &t->type, "tensor type"));
    TF_TRY(rd_u64(c, &t->offset, "tensor data offset"));
    uint32_t block, bytes;
    if (!ggml_type_geometry(t->type, &block, &bytes))
        return tf_errf(c->err, TF_ERR_UNSUPPORTED, "%s: tensor '%s': unknown element type %u",
                       c->file, t->name, t->type);
    if (t->ne[0] % block != 0)
        return tf_errf(c->err, TF_ERR_FORMAT,
                       "%s: tensor '%s': row length %lld is not a multiple of the %s block size %u",
                       c->file, t->name, (long long)t->ne[0], tf_dtype_name(t->type), block);
    if (!tf_mul_ok(nel / block, bytes, &t->nbytes))
        return tf_errf(c->err, TF_ERR_FORMAT, "%s: tensor '%s': byte size overflows", c->file, t->name);
    if (t->offset % g->alignment != 0)
        return tf_errf(c->err, TF_ERR_FORMAT,
                       "%s: tensor '%s': data offset %llu is not a multiple of the alignment %u",
                       c->file, t->name, (unsigned long long)t->offset, g->alignment);
    return TF_OK;
}

static tf_status parse(tf_gguf *g, tf_err *err) {
    cursor c = {.p = g->base, .size = g->size, .pos = 0, .file = g->path, .err = err};
    uint32_t magic;
    TF_TRY(rd_u32(&c, &magic, "magic"));
    if (magic != TF_GGUF_MAGIC)
        return tf_errf(err, TF_ERR_FORMAT, "%s: not a GGUF file (magic 0x%08x, expected 0x%08x \"GGUF\")",
                       g->path, magic, TF_GGUF_MAGIC);
    TF_TRY(rd_u32(&c, &g->version, "version"));
    if (g->version != 2 && g->version != 3) {
        if ((g->version & 0xffff) == 0 && g->version != 0)
            return tf_errf(err, TF_ERR_UNSUPPORTED,
                           "%s: GGUF version field 0x%08x looks big-endian; only little-endian files are supported",
                           g->path, g->version);
        return tf_errf(err, TF_ERR_UNSUPPORTED, "%s: GGUF version %u (expected 2 or 3)", g->path, g->version);
    }
    TF_TRY(rd_u64(&c, &g->n_tensors, "tensor count"));
    TF_TRY(rd_u64(&c, &g->n_kv, "metadata key count"));
    /* a key-value pair needs >= 8 (key len) + 4 (type) + 1 bytes; a tensor info >= 8+4+8+4+8 */
    if (g->n_kv > (c.size - c.pos) / 13)
        return tf_errf(err, TF_ERR_FORMAT, "%s: metadata key count %llu cannot fit in a %zu-byte file",
                       g->path, (unsigned long long)g->n_kv, g->size);
    if (g->n_tensors > (c.size - c.pos) / 32)
        return tf_errf(err, TF_ERR_FORMAT, "%s: tensor count %llu cannot fit in a %zu-byte file",
                       g->path, (unsigned long long)g->n_tensors, g->size);
    g->kv = calloc((size_t)(g->n_kv ? g->n_kv : 1), sizeof *g->kv);
    g->tensors = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *g->tensors);
    if (!g->kv || !g->tensors) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", g->path);

    g->alignment = TF_GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        tf_gguf_kv *kv = &g->kv[i];
        char what[64], key[128];
        snprintf(what, sizeof what, "key of metadata entry %llu", (unsigned long long)i);
        TF_TRY(rd_str(&c, &kv->key, TF_GGUF_KEY_MAX, what));
        str_print(key, sizeof key, kv->key);
        TF_TRY(rd_u32(&c, &kv->type, "metadata value type"));
        TF_TRY(parse_value(&c, kv, key));
        if (tf_gguf_str_eq(kv->key, "general.alignment")) {
            if (kv->type != TF_GGUF_UINT32 || kv->val.u == 0 || (kv->val.u & (kv->val.u - 1)) ||
                kv->val.u > (1u << 16))
                return tf_errf(err, TF_ERR_FORMAT,
                               "%s: general.alignment must be a uint32 power of two up to 65536 (got %s %llu)",
                               g->path, tf_gguf_type_name(kv->type),
                               kv->type == TF_GGUF_UINT32 ? (unsigned long long)kv->val.u : 0ull);
            g->alignment = (uint32_t)kv->val.u;
        }
    }
    TF_TRY(check_unique_keys(g, err));
    for (uint64_t i = 0; i < g->n_tensors; i++) TF_TRY(parse_tensor_info(&c, g, i));
    uint64_t data_off = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    g->data_offset = data_off;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        tf_gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        if (!tf_add_ok(data_off, t->offset, &start) || !tf_add_ok(start, t->nbytes, &end) || end > g->size)
            return tf_errf(err, TF_ERR_FORMAT,
                           "%s: tensor '%s': data [%llu, +%llu) lies beyond the end of the %zu-byte file",
                           g->path, t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                           g->size);
        t->data = g->base + start;
    }
    return check_tensors(g, err);
}

static void free_index(tf_gguf *g) {
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) free(g->kv[i].arr_str);
    free(g->kv);
    free(g->tensors);
    g->kv = NULL;
    g->tensors = NULL;
}

tf_status tf_gguf_parse(tf_gguf *g, const char *name, const uint8_t *data, size_t size, tf_err *err) {
    memset(g, 0, sizeof *g);
    snprintf(g->path, sizeof g->path, "%s", name);
    g->base = data;
    g->size = size;
    tf_status st = parse(g, err);
    if (st != TF_OK) {
        free_index(g);
        g->n_kv = g->n_tensors = 0;
    }
    return st;
}

tf_status tf_gguf_open(tf_gguf *g, const char *path, tf_err *err) {
    memset(g, 0, sizeof *g);
    tf_mmap map;
    TF_TRY(tf_mmap_open(&map, path, err));
    tf_status st = tf_gguf_parse(g, path, map.data, map.size, err);
    if (st != TF_OK) {
        tf_mmap_close(&map);
        return st;
    }
    g->map = map;
    return TF_OK;
}

void tf_gguf_close(tf_gguf *g) {
    free_index(g);
    tf_mmap_close(&g->map);
    if (g->release) g->release(g->release_ud);
    memset(g, 0, sizeof *g);
}

const tf_gguf_kv *tf_gguf_find_kv(const tf_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (tf_gguf_str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const tf_gguf_tensor *tf_gguf_find_tensor(const tf_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

static tf_status lookup(const tf_gguf *g, const char *key, bool *found, const tf_gguf_kv **out, tf_err *err) {
    *out = tf_gguf_find_kv(g, key);
    if (found) *found = *out != NULL;
    if (!*out && !found)
        return tf_errf(err, TF_ERR_FORMAT, "%s: required metadata key '%s' is missing", g->path, key);
    return TF_OK;
}

static bool is_int_type(uint32_t t) {
    return t == TF_GGUF_UINT8 || t == TF_GGUF_INT8 || t == TF_GGUF_UINT16 || t == TF_GGUF_INT16 ||
           t == TF_GGUF_UINT32 || t == TF_GGUF_INT32 || t == TF_GGUF_UINT64 || t == TF_GGUF_INT64;
}
static bool is_signed(uint32_t t) {
    return t == TF_GGUF_INT8 || t == TF_GGUF_INT16 || t == TF_GGUF_INT32 || t == TF_GGUF_INT64;
}

tf_status tf_gguf_get_i64(const tf_gguf *g, const char *key, int64_t *out, bool *found, tf_err *err) {
    const tf_gguf_kv *kv;
    TF_TRY(lookup(g, key, found, &kv, err));
    if (!kv) return TF_OK;
    if (!is_int_type(kv->type))
        return tf_errf(err, TF_ERR_FORMAT, "%s: metadata key '%s' has type %s (expected an integer)",
                       g->path, key, tf_gguf_type_name(kv->type));
    if (!is_signed(kv->type) && kv->val.u > (uint64_t)INT64_MAX)
        return tf_errf(err, TF_ERR_FORMAT, "%s: metadata key '%s' = %llu is out of range", g->path, key,
                       (unsigned long long)kv->val.u);
    *out = is_signed(kv->type) ? kv->val.i : (int64_t)kv->val.u;
    return TF_OK;
}

tf_status tf_gguf_get_u32(const tf_gguf *g, const char *key, uint32_t *out, bool *found, tf_err *err) {
    int64_t v = 0;
    bool f = true;
    TF_TRY(tf_gguf_get_i64(g, key, &v, found ? &f : NULL, err));
    if (found) *found = f;
    if (!f) return TF_OK;
    if (v < 0 || v > (int64_t)UINT32_MAX)
        return tf_errf(err, TF_ERR_FORMAT, "%s: metadata key '%s' = %lld is out of range (expected 0..%u)",
                       g->path, key, (long long)v, UINT32_MAX);
    *out = (uint32_t)v;
    return TF_OK;
}

tf_status tf_gguf_get_f32(const tf_gguf *g, const char *key, float *out, bool *found, tf_err *err) {
    const tf_gguf_kv *kv;
    TF_TRY(lookup(g, key, found, &kv, err));
    if (!kv) return TF_OK;
    if (kv->type == TF_GGUF_FLOAT32 || kv->type == TF_GGUF_FLOAT64) *out = (float)kv->val.f;
    else if (is_int_type(kv->type)) *out = is_signed(kv->type) ? (float)kv->val.i : (float)kv->val.u;
    else
        return tf_errf(err, TF_ERR_FORMAT, "%s: metadata key '%s' has type %s (expected a number)", g->path,
                       key, tf_gguf_type_name(kv->type));
    return TF_OK;
}

tf_status tf_gguf_get_bool(const tf_gguf *g, const char *key, bool *out, bool *found, tf_err *err) {
    const tf_gguf_kv *kv;
    TF_TRY(lookup(g, key, found, &kv, err));
    if (!kv) return TF_OK;
    if (kv->type != TF_GGUF_BOOL)
        return tf_errf(err, TF_ERR_FORMAT, "%s: metadata key '%s' has type %s (expected bool)", g->path, key,
                       tf_gguf_type_name(kv->type));
    *out = kv->val.u != 0;
    return TF_OK;
}

tf_status tf_gguf_get_str(const tf_gguf *g, const char *key, tf_gguf_str *out, bool *found, tf_err *err) {
    const tf_gguf_kv *kv;
    TF_TRY(lookup(g, key, found, &kv, err));
    if (!kv) return TF_OK;
    if (kv->type != TF_GGUF_STRING)
        return tf_errf(err, TF_ERR_FORMAT, "%s: metadata key '%s' has type %s (expected string)", g->path, key,
                       tf_gguf_type_name(kv->type));
    *out = kv->val.s;
    return TF_OK;
}

tf_status tf_gguf_get_arr(const tf_gguf *g, const char *key, uint32_t elem_type, const tf_gguf_kv **out,
                          bool *found, tf_err *err) {
    TF_TRY(lookup(g, key, found, out, err));
    const tf_gguf_kv *kv = *out;
    if (!kv) return TF_OK;
    bool ok = kv->type == TF_GGUF_ARRAY &&
              (kv->arr_type == elem_type ||
               ((elem_type == TF_GGUF_INT32 || elem_type == TF_GGUF_UINT32) &&
                (kv->arr_type == TF_GGUF_INT32 || kv->arr_type == TF_GGUF_UINT32)));
    if (!ok) {
        *out = NULL;
        return tf_errf(err, TF_ERR_FORMAT, "%s: metadata key '%s' has type %s%s%s (expected array of %s)",
                       g->path, key, tf_gguf_type_name(kv->type), kv->type == TF_GGUF_ARRAY ? " of " : "",
                       kv->type == TF_GGUF_ARRAY ? tf_gguf_type_name(kv->arr_type) : "",
                       tf_gguf_type_name(elem_type));
    }
    return TF_OK;
}

int64_t tf_gguf_arr_int(const tf_gguf_kv *kv, uint64_t i) {
    uint32_t t = kv->arr_type;
    uint64_t raw = rd_le(kv->arr_data + i * k_type_size[t], k_type_size[t]);
    switch (t) {
    case TF_GGUF_INT8: return (int8_t)raw;
    case TF_GGUF_INT16: return (int16_t)raw;
    case TF_GGUF_INT32: return (int32_t)raw;
    default: return (int64_t)raw;
    }
}

double tf_gguf_arr_float(const tf_gguf_kv *kv, uint64_t i) {
    uint32_t t = kv->arr_type;
    if (t == TF_GGUF_FLOAT32) {
        uint32_t u = (uint32_t)rd_le(kv->arr_data + i * 4, 4);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (t == TF_GGUF_FLOAT64) {
        uint64_t u = rd_le(kv->arr_data + i * 8, 8);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    return (double)tf_gguf_arr_int(kv, i);
}
