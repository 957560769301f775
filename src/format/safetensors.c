/*
 * safetensors.c — safetensors reader and sharded checkpoint sets. See
 * safetensors.h for the trust model.
 *
 * A file is checked in three passes: the raw header bytes (length bound,
 * UTF-8, no control characters or escaped NULs), the JSON tree (cJSON) entry
 * by entry into tf_st_tensor records, then the checks across entries (unique
 * names and metadata keys, byte ranges that tile the data section exactly:
 * no overlap, no gap, nothing after the last tensor). The cJSON tree lives
 * only during parsing: names and metadata are copied out.
 */
#include "format/safetensors.h"

#include "core/dtype.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SHOW_MAX 96 /* bytes of a name or value quoted in a message */

static const struct {
    const char *name;
    uint8_t size;
    int8_t engine;
} k_dtypes[] = {
    [TF_ST_F64] = {"F64", 8, TF_ST_ENGINE_NONE},     [TF_ST_F32] = {"F32", 4, TF_DTYPE_F32},
    [TF_ST_F16] = {"F16", 2, TF_DTYPE_F16},          [TF_ST_BF16] = {"BF16", 2, TF_DTYPE_BF16},
    [TF_ST_I64] = {"I64", 8, TF_ST_ENGINE_NONE},     [TF_ST_I32] = {"I32", 4, TF_ST_ENGINE_NONE},
    [TF_ST_I16] = {"I16", 2, TF_ST_ENGINE_NONE},     [TF_ST_I8] = {"I8", 1, TF_ST_ENGINE_NONE},
    [TF_ST_U8] = {"U8", 1, TF_ST_ENGINE_NONE},       [TF_ST_BOOL] = {"BOOL", 1, TF_ST_ENGINE_NONE},
    [TF_ST_U16] = {"U16", 2, TF_ST_ENGINE_NONE},     [TF_ST_U32] = {"U32", 4, TF_ST_ENGINE_NONE},
    [TF_ST_U64] = {"U64", 8, TF_ST_ENGINE_NONE},     [TF_ST_F8_E4M3] = {"F8_E4M3", 1, TF_ST_ENGINE_NONE},
    [TF_ST_F8_E5M2] = {"F8_E5M2", 1, TF_ST_ENGINE_NONE},
};
_Static_assert(sizeof k_dtypes / sizeof k_dtypes[0] == TF_ST_DTYPE_COUNT, "one entry per safetensors dtype");

#define DTYPE_LIST "F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL U16 U32 U64 F8_E4M3 F8_E5M2"

const char *tf_st_dtype_name(tf_st_dtype dtype) {
    return (unsigned)dtype < TF_ST_DTYPE_COUNT ? k_dtypes[dtype].name : "invalid";
}

uint32_t tf_st_dtype_size(tf_st_dtype dtype) {
    return (unsigned)dtype < TF_ST_DTYPE_COUNT ? k_dtypes[dtype].size : 0;
}

bool tf_st_dtype_from_name(const char *name, tf_st_dtype *out) {
    for (int i = 0; i < TF_ST_DTYPE_COUNT; i++)
        if (strcmp(name, k_dtypes[i].name) == 0) {
            *out = (tf_st_dtype)i;
            return true;
        }
    return false;
}

/* ---- message helpers ---- */

/* Copy s into buf (cap >= 8) for quoting in a message: control characters
 * become '?'; a string that does not fit is cut at a UTF-8 character boundary
 * and ends with "...". Returns buf. */
static const char *show(char *buf, size_t cap, const char *s) {
    size_t n = strlen(s);
    bool cut = n > cap - 1;
    if (cut) {
        n = cap - 4;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        buf[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    memcpy(buf + n, cut ? "..." : "", cut ? 4 : 1);
    return buf;
}

/* A short description of a JSON value for "X is <value> (expected ...)". */
static const char *describe(char *buf, size_t cap, const cJSON *v) {
    char tmp[64];
    if (!v) snprintf(buf, cap, "missing");
    else if (cJSON_IsNumber(v)) {
        snprintf(buf, cap, "%.15g", v->valuedouble);
        if (strtod(buf, NULL) != v->valuedouble) snprintf(buf, cap, "%.17g", v->valuedouble);
    } else if (cJSON_IsString(v)) snprintf(buf, cap, "the string \"%s\"", show(tmp, sizeof tmp, v->valuestring));
    else if (cJSON_IsArray(v)) snprintf(buf, cap, "an array of %d elements", cJSON_GetArraySize(v));
    else if (cJSON_IsObject(v)) snprintf(buf, cap, "an object");
    else if (cJSON_IsBool(v)) snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNull(v)) snprintf(buf, cap, "null");
    else snprintf(buf, cap, "an invalid value");
    return buf;
}

/* "[2, 3, 4]" */
static const char *shape_str(char *buf, size_t cap, const tf_st_tensor *t) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < t->n_dims && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}

/* True if v is a JSON number holding an integer in [0, 2^53]; *out gets it.
 * cJSON keeps numbers as doubles, so fractions, negatives, values past 2^53
 * (no longer exact) and infinities are all rejected here. */
static bool json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d <= (double)TF_ST_INT_MAX)) return false;
    uint64_t u = (uint64_t)d;
    if ((double)u != d) return false;
    *out = u;
    return true;
}

/* ---- JSON documents (headers and index files) ---- */

/* Parse text[0..len) (NUL-terminated at len) as one JSON value followed only
 * by whitespace. `what` names the document in messages ("header"), `base` is
 * the file offset of text[0]. On success *root owns the tree. */
static tf_status parse_doc(const char *path, const char *what, const char *text, size_t len, size_t base,
                           cJSON **root, tf_err *err) {
    const char *end = NULL;
    char raw[32], near[40];
    *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
    if (!*root) {
        size_t k = 0;
        for (; k < 24 && at + k < len; k++) raw[k] = text[at + k];
        raw[k] = '\0';
        return tf_errf(err, TF_ERR_FORMAT, "%s: %s is not valid JSON: error at file offset %zu near '%s'%s", path,
                       what, base + at, show(near, sizeof near, raw),
                       len && text[0] != '{' ? " (expected it to start with '{')" : "");
    }
    for (size_t i = at; i < len; i++)
        if (!strchr(" \t\r\n", text[i])) {
            cJSON_Delete(*root);
            *root = NULL;
            return tf_errf(err, TF_ERR_FORMAT,
                           "%s: %s has %zu bytes of non-whitespace after its JSON value (from file offset %zu)",
                           path, what, len - i, base + i);
        }
    if (!cJSON_IsObject(*root)) {
        char v[SHOW_MAX];
        describe(v, sizeof v, *root);
        cJSON_Delete(*root);
        *root = NULL;
        return tf_errf(err, TF_ERR_FORMAT, "%s: %s is %s (expected a JSON object)", path, what, v);
    }
    return TF_OK;
}

/* Reject what JSON or our C-string copies cannot carry: bytes that are not
 * UTF-8, control characters other than whitespace, and escaped NULs
 * ("\u0000", which would silently cut a name short). */
static tf_status check_header_bytes(const tf_st_file *f, const uint8_t *h, uint64_t n, tf_err *err) {
    for (uint64_t i = 0; i < n;) {
        uint8_t c = h[i];
        if (c < 0x80) {
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
                return tf_errf(err, TF_ERR_FORMAT,
                               "%s: header byte at file offset %llu is 0x%02x (control characters are not allowed "
                               "in the JSON header%s)",
                               f->path, (unsigned long long)(8 + i), c,
                               c == 0 ? "; NUL bytes suggest a wrong header length" : "");
            if (c == '\\' && i + 1 < n && h[i + 1] >= 0x20 && h[i + 1] < 0x80) {
                if (h[i + 1] == 'u' && n - i >= 6 && memcmp(h + i + 2, "0000", 4) == 0)
                    return tf_errf(err, TF_ERR_FORMAT,
                                   "%s: header has an escaped NUL (\\u0000) at file offset %llu (names and "
                                   "metadata must not contain NUL)",
                                   f->path, (unsigned long long)(8 + i));
                i += 2; /* the escaped character cannot start another escape */
            } else {
                i++;
            }
            continue;
        }
        uint32_t len = 0, cp = 0;
        if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
        bool ok = len != 0 && len <= n - i;
        for (uint32_t k = 1; ok && k < len; k++) {
            ok = (h[i + k] & 0xC0) == 0x80;
            cp = (cp << 6) | (h[i + k] & 0x3F);
        }
        if (ok && ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
                   (cp >= 0xD800 && cp <= 0xDFFF)))
            ok = false;
        if (!ok)
            return tf_errf(err, TF_ERR_FORMAT, "%s: header is not valid UTF-8 at file offset %llu (byte 0x%02x)",
                           f->path, (unsigned long long)(8 + i), c);
        i += len;
    }
    return TF_OK;
}

/* A guess at what a file with an absurd header length really is, or "". */
static const char *format_hint(const uint8_t *p, size_t size) {
    if (size >= 4 && memcmp(p, "GGUF", 4) == 0) return " (this looks like a GGUF file, not safetensors)";
    if (size >= 4 && memcmp(p, "PK\x03\x04", 4) == 0)
        return " (this looks like a zip archive such as a PyTorch checkpoint, not safetensors)";
    if (size >= 8 && memcmp(p, "version ", 8) == 0)
        return " (this looks like a Git LFS pointer, not the file itself: fetch it with `git lfs pull`)";
    if (size >= 1 && p[0] == '{') return " (the file starts with '{': is it a JSON file rather than safetensors?)";
    return "";
}

/* The first 8 bytes: N must be non-zero, at most TF_ST_HEADER_MAX and fit. */
static tf_status check_header_len(tf_st_file *f, tf_err *err) {
    if (f->size < 8)
        return tf_errf(err, TF_ERR_FORMAT,
                       "%s: file is %zu bytes, too short for the 8-byte header length (empty or truncated file?)",
                       f->path, f->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | f->base[i];
    f->header_len = n;
    const char *hint = format_hint(f->base, f->size);
    if (n == 0)
        return tf_errf(err, TF_ERR_FORMAT, "%s: header length is 0 (expected the length of a JSON object)%s",
                       f->path, hint);
    if (n > TF_ST_HEADER_MAX)
        return tf_errf(err, TF_ERR_FORMAT, "%s: header length %llu exceeds the limit of %u bytes%s", f->path,
                       (unsigned long long)n, TF_ST_HEADER_MAX, *hint ? hint : " (is this a safetensors file?)");
    if (n > f->size - 8)
        return tf_errf(err, TF_ERR_FORMAT, "%s: header length %llu exceeds the file's size %zu%s", f->path,
                       (unsigned long long)n, f->size, *hint ? hint : " (truncated file?)");
    return TF_OK;
}

/* ---- one tensor entry ---- */

/* Fill t from the header entry e ("name": {...}); checks everything that
 * concerns this entry alone, including its range against the data section. */
static tf_status parse_entry(const tf_st_file *f, const cJSON *e, tf_st_tensor *t, tf_err *err) {
    char nm[SHOW_MAX], v[SHOW_MAX], sh[160];
    size_t len = strlen(e->string);
    show(nm, sizeof nm, e->string);
    if (len == 0)
        return tf_errf(err, TF_ERR_FORMAT, "%s: a tensor name is empty (expected 1..%d bytes)", f->path,
                       TF_ST_NAME_MAX);
    if (len > TF_ST_NAME_MAX)
        return tf_errf(err, TF_ERR_FORMAT, "%s: tensor name '%s' is %zu bytes long (expected at most %d)", f->path,
                       nm, len, TF_ST_NAME_MAX);
    memcpy(t->name, e->string, len + 1);
    if (!cJSON_IsObject(e))
        return tf_errf(err, TF_ERR_FORMAT,
                       "%s: tensor '%s': entry is %s (expected an object with \"dtype\", \"shape\" and "
                       "\"data_offsets\")",
                       f->path, nm, describe(v, sizeof v, e));
    const cJSON *dt = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *c = e->child; c; c = c->next) {
        const cJSON **slot = strcmp(c->string, "dtype") == 0 ? &dt
                             : strcmp(c->string, "shape") == 0 ? &shape
                             : strcmp(c->string, "data_offsets") == 0 ? &offs : NULL;
        if (!slot) continue; /* unknown keys are ignored, as by the reference reader */
        if (*slot)
            return tf_errf(err, TF_ERR_FORMAT, "%s: tensor '%s': key \"%s\" appears more than once", f->path, nm,
                           c->string);
        *slot = c;
    }

    if (!cJSON_IsString(dt))
        return tf_errf(err, TF_ERR_FORMAT, "%s: tensor '%s': \"dtype\" is %s (expected a string such as \"F16\")",
                       f->path, nm, describe(v, sizeof v, dt));
    if (!tf_st_dtype_from_name(dt->valuestring, &t->dtype))
        return tf_errf(err, TF_ERR_UNSUPPORTED,
                       "%s: tensor '%s': unknown dtype \"%s\" (expected one of " DTYPE_LIST ")", f->path, nm,
                       show(v, sizeof v, dt->valuestring));
    t->dtype_name = k_dtypes[t->dtype].name;
    t->elem_size = k_dtypes[t->dtype].size;
    t->engine_type = k_dtypes[t->dtype].engine;

    if (!cJSON_IsArray(shape))
        return tf_errf(err, TF_ERR_FORMAT, "%s: tensor '%s': \"shape\" is %s (expected an array of dimensions)",
                       f->path, nm, describe(v, sizeof v, shape));
    int nd = cJSON_GetArraySize(shape);
    if (nd > TF_ST_MAX_DIMS)
        return tf_errf(err, TF_ERR_FORMAT, "%s: tensor '%s': shape has %d dimensions (expected at most %d)",
                       f->path, nm, nd, TF_ST_MAX_DIMS);
    t->n_dims = (uint32_t)nd;
    bool zero = false;
    int d = 0;
    for (const cJSON *c = shape->child; c; c = c->next, d++) {
        uint64_t dim;
        if (!json_uint(c, &dim))
            return tf_errf(err, TF_ERR_FORMAT, "%s: tensor '%s': shape[%d] is %s (expected an integer from 0 to 2^53)",
                           f->path, nm, d, describe(v, sizeof v, c));
        t->shape[d] = (int64_t)dim;
        zero |= dim == 0;
    }
    uint64_t count = 1;
    for (d = 0; d < nd && !zero; d++)
        if (!tf_mul_ok(count, (uint64_t)t->shape[d], &count))
            return tf_errf(err, TF_ERR_FORMAT, "%s: tensor '%s': shape %s has more than 2^64 elements", f->path, nm,
                           shape_str(sh, sizeof sh, t));
    t->n_elements = zero ? 0 : count;

    uint64_t begin, end;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2)
        return tf_errf(err, TF_ERR_FORMAT,
                       "%s: tensor '%s': \"data_offsets\" is %s (expected an array of two integers [begin, end])",
                       f->path, nm, describe(v, sizeof v, offs));
    if (!json_uint(offs->child, &begin))
        return tf_errf(err, TF_ERR_FORMAT,
                       "%s: tensor '%s': data_offsets[0] is %s (expected an integer from 0 to 2^53)", f->path, nm,
                       describe(v, sizeof v, offs->child));
    if (!json_uint(offs->child->next, &end))
        return tf_errf(err, TF_ERR_FORMAT,
                       "%s: tensor '%s': data_offsets[1] is %s (expected an integer from 0 to 2^53)", f->path, nm,
                       describe(v, sizeof v, offs->child->next));
    if (begin > end)
        return tf_errf(err, TF_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] has begin > end", f->path,
                       nm, (unsigned long long)begin, (unsigned long long)end);
    if (!tf_mul_ok(t->n_elements, t->elem_size, &t->nbytes))
        return tf_errf(err, TF_ERR_FORMAT, "%s: tensor '%s': dtype %s x shape %s is more than 2^64 bytes", f->path,
                       nm, t->dtype_name, shape_str(sh, sizeof sh, t));
    if (t->nbytes != end - begin)
        return tf_errf(err, TF_ERR_FORMAT,
                       "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but dtype %s (%u bytes) x shape "
                       "%s (%llu elements) needs %llu",
                       f->path, nm, (unsigned long long)begin, (unsigned long long)end,
                       (unsigned long long)(end - begin), t->dtype_name, t->elem_size, shape_str(sh, sizeof sh, t),
                       (unsigned long long)t->n_elements, (unsigned long long)t->nbytes);
    if (end > f->data_size)
        return tf_errf(err, TF_ERR_FORMAT,
                       "%s: tensor '%s': data_offsets [%llu, %llu] end beyond the %llu-byte data section (file "
                       "size %zu, data at offset %llu; truncated file?)",
                       f->path, nm, (unsigned long long)begin, (unsigned long long)end,
                       (unsigned long long)f->data_size, f->size, (unsigned long long)(8 + f->header_len));
    t->offset = begin;
    t->data = f->data + begin;
    return TF_OK;
}

/* ---- metadata ---- */

static int cmp_meta(const void *a, const void *b) {
    return strcmp(((const tf_st_meta *)a)->key, ((const tf_st_meta *)b)->key);
}

/* Append a copy of key/value to (*meta, *n) (capacity known by the caller). */
static tf_status meta_add(tf_st_meta *meta, uint64_t *n, const char *key, const char *value, const char *path,
                          tf_err *err) {
    tf_st_meta *m = &meta[*n];
    m->key = strdup(key);
    m->value = strdup(value);
    (*n)++;
    if (!m->key || !m->value) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory copying metadata", path);
    return TF_OK;
}

/* Sort by key and reject duplicates; `what` names the object in messages. */
static tf_status meta_finish(tf_st_meta *meta, uint64_t n, const char *path, const char *what, tf_err *err) {
    char k[SHOW_MAX];
    if (n > 1) qsort(meta, (size_t)n, sizeof *meta, cmp_meta);
    for (uint64_t i = 1; i < n; i++)
        if (strcmp(meta[i - 1].key, meta[i].key) == 0)
            return tf_errf(err, TF_ERR_FORMAT, "%s: %s key '%s' appears more than once", path, what,
                           show(k, sizeof k, meta[i].key));
    return TF_OK;
}

static void meta_free(tf_st_meta *meta, uint64_t n) {
    for (uint64_t i = 0; meta && i < n; i++) {
        free(meta[i].key);
        free(meta[i].value);
    }
    free(meta);
}

static const char *meta_find(const tf_st_meta *meta, uint64_t n, const char *key) {
    if (!meta || !key) return NULL;
    tf_st_meta probe = {.key = (char *)key};
    const tf_st_meta *m = bsearch(&probe, meta, (size_t)n, sizeof *meta, cmp_meta);
    return m ? m->value : NULL;
}

/* "__metadata__": an object of string -> string. */
static tf_status parse_file_meta(tf_st_file *f, const cJSON *obj, tf_err *err) {
    char v[SHOW_MAX], k[SHOW_MAX];
    if (!cJSON_IsObject(obj))
        return tf_errf(err, TF_ERR_FORMAT, "%s: \"__metadata__\" is %s (expected an object of strings)", f->path,
                       describe(v, sizeof v, obj));
    int n = cJSON_GetArraySize(obj);
    f->meta = calloc((size_t)(n ? n : 1), sizeof *f->meta);
    if (!f->meta) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", f->path);
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (!cJSON_IsString(c))
            return tf_errf(err, TF_ERR_FORMAT, "%s: __metadata__ key '%s' has value %s (expected a string)", f->path,
                           show(k, sizeof k, c->string), describe(v, sizeof v, c));
        TF_TRY(meta_add(f->meta, &f->n_meta, c->string, c->valuestring, f->path, err));
    }
    return meta_finish(f->meta, f->n_meta, f->path, "__metadata__", err);
}

/* ---- the whole file ---- */

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const tf_st_tensor *)a)->name, ((const tf_st_tensor *)b)->name);
}
static int cmp_tensor_range(const void *a, const void *b) {
    const tf_st_tensor *x = *(const tf_st_tensor *const *)a, *y = *(const tf_st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Sort tensors by name (rejecting duplicates), then check that no two
 * non-empty byte ranges overlap (sorted by begin, neighbours suffice). */
static tf_status check_tensors(tf_st_file *f, tf_err *err) {
    char a[SHOW_MAX], b[SHOW_MAX];
    if (f->n_tensors > 1) qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, cmp_tensor_name);
    for (uint64_t i = 1; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0)
            return tf_errf(err, TF_ERR_FORMAT, "%s: tensor name '%s' appears more than once in the header", f->path,
                           show(a, sizeof a, f->tensors[i].name));
    const tf_st_tensor **idx = malloc((size_t)(f->n_tensors ? f->n_tensors : 1) * sizeof *idx);
    if (!idx) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", f->path);
    size_t n = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].nbytes) idx[n++] = &f->tensors[i];
    qsort(idx, n, sizeof *idx, cmp_tensor_range);
    tf_status st = TF_OK;
    for (size_t i = 1; i < n && st == TF_OK; i++) {
        const tf_st_tensor *p = idx[i - 1], *q = idx[i];
        if (p->offset + p->nbytes > q->offset)
            st = tf_errf(err, TF_ERR_FORMAT, "%s: tensor '%s' data [%llu, %llu) overlaps tensor '%s' data [%llu, %llu)",
                         f->path, show(a, sizeof a, p->name), (unsigned long long)p->offset,
                         (unsigned long long)(p->offset + p->nbytes), show(b, sizeof b, q->name),
                         (unsigned long long)q->offset, (unsigned long long)(q->offset + q->nbytes));
        else if (p->offset + p->nbytes < q->offset)
            st = tf_errf(err, TF_ERR_FORMAT,
                         "%s: tensor '%s' data begins at byte %llu of the data section but tensor '%s' ends at byte "
                         "%llu (the format stores tensors back to back; a gap means a damaged header)",
                         f->path, show(a, sizeof a, q->name), (unsigned long long)q->offset,
                         show(b, sizeof b, p->name), (unsigned long long)(p->offset + p->nbytes));
    }
    /* The non-empty ranges tile the data section exactly, as the reference
     * reader demands: a header length that is off by a few bytes would
     * otherwise shift every weight and still parse. */
    if (st == TF_OK && n && idx[0]->offset != 0)
        st = tf_errf(err, TF_ERR_FORMAT,
                     "%s: the first tensor's data ('%s') begins at byte %llu of the data section (expected 0; the "
                     "format stores tensors back to back from the start of the data section)",
                     f->path, show(a, sizeof a, idx[0]->name), (unsigned long long)idx[0]->offset);
    uint64_t used = n ? idx[n - 1]->offset + idx[n - 1]->nbytes : 0;
    if (st == TF_OK && used != f->data_size)
        st = tf_errf(err, TF_ERR_FORMAT,
                     "%s: the data section is %llu bytes but the tensors end at byte %llu (%llu bytes after the "
                     "last tensor: the header length %llu is wrong or bytes were appended)",
                     f->path, (unsigned long long)f->data_size, (unsigned long long)used,
                     (unsigned long long)(f->data_size - used), (unsigned long long)f->header_len);
    free(idx);
    for (uint64_t i = 0; i < f->n_tensors && st == TF_OK; i++)
        f->total_bytes += f->tensors[i].nbytes; /* disjoint ranges: at most data_size */
    return st;
}

/* Walk the header object: "__metadata__" once, every other key a tensor. */
static tf_status parse_root(tf_st_file *f, const cJSON *root, tf_err *err) {
    const cJSON *meta = NULL;
    uint64_t n = 0;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") != 0) n++;
        else if (meta) return tf_errf(err, TF_ERR_FORMAT, "%s: key \"__metadata__\" appears more than once", f->path);
        else meta = c;
    }
    f->tensors = calloc((size_t)(n ? n : 1), sizeof *f->tensors);
    if (!f->tensors)
        return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory for %llu tensors", f->path, (unsigned long long)n);
    for (const cJSON *c = root->child; c; c = c->next)
        if (c != meta) TF_TRY(parse_entry(f, c, &f->tensors[f->n_tensors++], err));
    if (meta) TF_TRY(parse_file_meta(f, meta, err));
    return check_tensors(f, err);
}

static tf_status parse(tf_st_file *f, tf_err *err) {
    TF_TRY(check_header_len(f, err));
    uint64_t n = f->header_len;
    const uint8_t *hdr = f->base + 8;
    TF_TRY(check_header_bytes(f, hdr, n, err));
    f->data = hdr + n;
    f->data_size = f->size - 8 - n;
    /* a NUL-terminated copy, so that no cJSON code path can read past the header */
    char *text = malloc((size_t)n + 1);
    if (!text)
        return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory for a %llu-byte header", f->path, (unsigned long long)n);
    memcpy(text, hdr, (size_t)n);
    text[n] = '\0';
    cJSON *root = NULL;
    tf_status st = parse_doc(f->path, "header", text, (size_t)n, 8, &root, err);
    if (st == TF_OK) st = parse_root(f, root, err);
    cJSON_Delete(root);
    free(text);
    return st;
}

static void free_index(tf_st_file *f) {
    free(f->tensors);
    meta_free(f->meta, f->n_meta);
    f->tensors = NULL;
    f->meta = NULL;
    f->n_tensors = f->n_meta = f->total_bytes = 0;
}

tf_status tf_st_parse(tf_st_file *f, const char *name, const uint8_t *data, size_t size, tf_err *err) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", name);
    f->base = data;
    f->size = data ? size : 0;
    tf_status st = parse(f, err);
    if (st != TF_OK) free_index(f);
    return st;
}

tf_status tf_st_open(tf_st_file *f, const char *path, tf_err *err) {
    memset(f, 0, sizeof *f);
    tf_mmap map;
    TF_TRY(tf_mmap_open(&map, path, err));
    tf_status st = tf_st_parse(f, path, map.data, map.size, err);
    if (st != TF_OK) {
        tf_mmap_close(&map);
        memset(f, 0, sizeof *f);
        return st;
    }
    f->map = map;
    return TF_OK;
}

void tf_st_close(tf_st_file *f) {
    if (!f) return;
    free_index(f);
    tf_mmap_close(&f->map);
    memset(f, 0, sizeof *f);
}

const tf_st_tensor *tf_st_find(const tf_st_file *f, const char *name) {
    if (!f->tensors || !name || strlen(name) > TF_ST_NAME_MAX) return NULL;
    tf_st_tensor probe;
    strcpy(probe.name, name);
    return bsearch(&probe, f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, cmp_tensor_name);
}

const char *tf_st_meta_get(const tf_st_file *f, const char *key) { return meta_find(f->meta, f->n_meta, key); }

/* ---- sharded sets ---- */

/* out = dir + "/" + name; TF_ERR_INVALID_ARG if it does not fit. */
static tf_status join(char *out, size_t cap, const char *dir, const char *name, tf_err *err) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    int w = snprintf(out, cap, "%.*s/%s", (int)n, dir, name);
    if (w < 0 || (size_t)w >= cap)
        return tf_errf(err, TF_ERR_INVALID_ARG, "%.200s...: path of %s is longer than %zu bytes", dir, name, cap - 1);
    return TF_OK;
}

static bool exists(const char *path) {
    struct stat st;
    /* errors other than "no such file" (permissions, I/O): let open report them */
    return stat(path, &st) == 0 || (errno != ENOENT && errno != ENOTDIR);
}

/* Why a shard name from the index is not a plain file name, or NULL if it is. */
static const char *bad_file_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0) return "it is empty";
    if (n > TF_ST_SHARD_NAME_MAX) return "it is longer than 255 bytes";
    if (strchr(s, '/') || strchr(s, '\\')) return "it contains a path separator";
    if (strstr(s, "..") || strcmp(s, ".") == 0) return "it contains \"..\" or is \".\"";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20) return "it contains a control character";
    return NULL;
}

typedef struct wm_pair {
    const char *tensor, *shard; /* into the cJSON tree */
} wm_pair;

static int cmp_pair_tensor(const void *a, const void *b) {
    return strcmp(((const wm_pair *)a)->tensor, ((const wm_pair *)b)->tensor);
}
static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The index's "metadata": strings, numbers and booleans kept as text. */
static tf_status parse_index_meta(tf_st_set *s, const char *ipath, const cJSON *obj, tf_err *err) {
    char v[SHOW_MAX];
    if (!cJSON_IsObject(obj))
        return tf_errf(err, TF_ERR_FORMAT, "%s: \"metadata\" is %s (expected an object)", ipath,
                       describe(v, sizeof v, obj));
    int n = cJSON_GetArraySize(obj);
    s->meta = calloc((size_t)(n ? n : 1), sizeof *s->meta);
    if (!s->meta) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", ipath);
    for (const cJSON *c = obj->child; c; c = c->next) {
        uint64_t u;
        const char *text = v;
        if (cJSON_IsString(c)) text = c->valuestring;
        else if (json_uint(c, &u)) snprintf(v, sizeof v, "%llu", (unsigned long long)u);
        else if (cJSON_IsNumber(c) || cJSON_IsBool(c)) describe(v, sizeof v, c);
        else continue; /* null, arrays and objects carry nothing we use */
        TF_TRY(meta_add(s->meta, &s->n_meta, c->string, text, ipath, err));
    }
    return meta_finish(s->meta, s->n_meta, ipath, "metadata", err);
}

/* Check the weight_map entries and collect them as (tensor, shard) pairs
 * sorted by tensor, and the distinct shard names sorted. */
static tf_status read_weight_map(const char *ipath, const cJSON *wm, wm_pair **pairs, size_t *n_pairs,
                                 const char ***shards, size_t *n_shards, tf_err *err) {
    char v[SHOW_MAX], k[SHOW_MAX];
    if (!cJSON_IsObject(wm) || !wm->child)
        return tf_errf(err, TF_ERR_FORMAT,
                       "%s: \"weight_map\" is %s (expected a non-empty object mapping tensor names to shard files)",
                       ipath, wm && cJSON_IsObject(wm) ? "empty" : describe(v, sizeof v, wm));
    size_t n = (size_t)cJSON_GetArraySize(wm);
    *pairs = calloc(n, sizeof **pairs);
    *shards = calloc(n, sizeof **shards);
    if (!*pairs || !*shards) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", ipath);
    for (const cJSON *c = wm->child; c; c = c->next) {
        show(k, sizeof k, c->string);
        if (!cJSON_IsString(c))
            return tf_errf(err, TF_ERR_FORMAT, "%s: weight_map entry for tensor '%s' is %s (expected a file name)",
                           ipath, k, describe(v, sizeof v, c));
        size_t len = strlen(c->string);
        if (len == 0 || len > TF_ST_NAME_MAX)
            return tf_errf(err, TF_ERR_FORMAT, "%s: weight_map tensor name '%s' is %zu bytes long (expected 1..%d)",
                           ipath, k, len, TF_ST_NAME_MAX);
        const char *why = bad_file_name(c->valuestring);
        if (why)
            return tf_errf(err, TF_ERR_FORMAT,
                           "%s: weight_map puts tensor '%s' in \"%s\", which is not a plain file name in the "
                           "directory (%s)",
                           ipath, k, show(v, sizeof v, c->valuestring), why);
        (*pairs)[*n_pairs] = (wm_pair){c->string, c->valuestring};
        (*shards)[(*n_pairs)++] = c->valuestring;
    }
    qsort(*pairs, n, sizeof **pairs, cmp_pair_tensor);
    for (size_t i = 1; i < n; i++)
        if (strcmp((*pairs)[i - 1].tensor, (*pairs)[i].tensor) == 0)
            return tf_errf(err, TF_ERR_FORMAT, "%s: tensor '%s' is listed more than once in weight_map", ipath,
                           show(k, sizeof k, (*pairs)[i].tensor));
    qsort(*shards, n, sizeof **shards, cmp_cstr);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || strcmp((*shards)[u - 1], (*shards)[i]) != 0) (*shards)[u++] = (*shards)[i];
    *n_shards = u;
    if (u > TF_ST_MAX_SHARDS)
        return tf_errf(err, TF_ERR_FORMAT, "%s: weight_map names %zu shard files (expected at most %d)", ipath, u,
                       TF_ST_MAX_SHARDS);
    return TF_OK;
}

/* Open every distinct shard of the index at ipath once and check that each
 * weight_map entry is in the shard it names. */
static tf_status open_sharded(tf_st_set *s, const char *dir, const char *ipath, tf_err *err) {
    tf_mmap map;
    TF_TRY(tf_mmap_open(&map, ipath, err));
    if (map.size == 0 || map.size > TF_ST_HEADER_MAX || memchr(map.data, '\0', map.size)) {
        size_t sz = map.size;
        tf_mmap_close(&map);
        return tf_errf(err, TF_ERR_FORMAT, "%s: index file is %zu bytes%s (expected 1..%u bytes of JSON text)", ipath,
                       sz, sz && sz <= TF_ST_HEADER_MAX ? " with a NUL byte" : "", TF_ST_HEADER_MAX);
    }
    char *text = malloc(map.size + 1);
    size_t len = map.size;
    if (text) {
        memcpy(text, map.data, len);
        text[len] = '\0';
    }
    tf_mmap_close(&map);
    if (!text) return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", ipath);

    cJSON *root = NULL;
    wm_pair *pairs = NULL;
    const char **shards = NULL;
    size_t n_pairs = 0, n_shards = 0;
    const cJSON *wm = NULL, *meta = NULL;
    tf_status st = parse_doc(ipath, "index", text, len, 0, &root, err);
    for (const cJSON *c = root ? root->child : NULL; c && st == TF_OK; c = c->next) {
        const cJSON **slot = strcmp(c->string, "weight_map") == 0 ? &wm
                             : strcmp(c->string, "metadata") == 0 ? &meta : NULL;
        if (slot && *slot) st = tf_errf(err, TF_ERR_FORMAT, "%s: key \"%s\" appears more than once", ipath, c->string);
        else if (slot) *slot = c;
    }
    if (st == TF_OK && meta) st = parse_index_meta(s, ipath, meta, err);
    if (st == TF_OK) st = read_weight_map(ipath, wm, &pairs, &n_pairs, &shards, &n_shards, err);
    if (st == TF_OK && !(s->files = calloc(n_shards, sizeof *s->files)))
        st = tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", ipath);
    for (size_t i = 0; i < n_shards && st == TF_OK; i++) {
        char path[4096];
        st = join(path, sizeof path, dir, shards[i], err);
        if (st == TF_OK) st = tf_st_open(&s->files[i], path, err);
        s->n_files = (uint32_t)i + 1;
        if (st != TF_OK) tf_err_prefix(err, "%s: shard \"%s\": ", ipath, shards[i]);
    }
    for (size_t i = 0; i < n_pairs && st == TF_OK; i++) {
        const char **hit = bsearch(&pairs[i].shard, shards, n_shards, sizeof *shards, cmp_cstr);
        TF_ASSERT(hit);
        const tf_st_file *f = &s->files[hit - shards];
        if (!tf_st_find(f, pairs[i].tensor)) {
            char k[SHOW_MAX];
            st = tf_errf(err, TF_ERR_FORMAT,
                         "%s: weight_map puts tensor '%s' in \"%s\", but that file has no such tensor (it has %llu)",
                         ipath, show(k, sizeof k, pairs[i].tensor), shards[hit - shards],
                         (unsigned long long)f->n_tensors);
        }
    }
    free(pairs);
    free(shards);
    cJSON_Delete(root);
    free(text);
    return st;
}

/* A hint for a directory without either file, or "". */
static const char *dir_hint(const char *dir, char *buf, size_t cap) {
    struct stat st;
    if (stat(dir, &st) != 0) snprintf(buf, cap, " (cannot access the directory: %s)", strerror(errno));
    else if (!S_ISDIR(st.st_mode)) snprintf(buf, cap, " (it is not a directory; expected a checkpoint directory)");
    else if (join(buf, cap, dir, "pytorch_model.bin", NULL) == TF_OK && exists(buf))
        snprintf(buf, cap, " (it holds pytorch_model.bin: PyTorch pickles are not supported; convert to safetensors)");
    else buf[0] = '\0';
    return buf;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const tf_st_set_entry *)a)->tensor->name, ((const tf_st_set_entry *)b)->tensor->name);
}

static const char *base_name(const char *path) {
    const char *p = strrchr(path, '/');
    return p ? p + 1 : path;
}

/* Index every tensor of every file by name; a name in two files is an error. */
static tf_status build_index(tf_st_set *s, tf_err *err) {
    char k[SHOW_MAX];
    uint64_t n = 0;
    for (uint32_t i = 0; i < s->n_files; i++) n += s->files[i].n_tensors; /* each bounded by its header */
    s->index = malloc((size_t)(n ? n : 1) * sizeof *s->index);
    if (!s->index)
        return tf_errf(err, TF_ERR_NOMEM, "%s: out of memory indexing %llu tensors", s->dir, (unsigned long long)n);
    for (uint32_t i = 0; i < s->n_files; i++) {
        for (uint64_t t = 0; t < s->files[i].n_tensors; t++)
            s->index[s->n_tensors++] = (tf_st_set_entry){&s->files[i].tensors[t], i};
        s->total_bytes += s->files[i].total_bytes;
    }
    if (n > 1) qsort(s->index, (size_t)n, sizeof *s->index, cmp_entry);
    for (uint64_t i = 1; i < n; i++)
        if (strcmp(s->index[i - 1].tensor->name, s->index[i].tensor->name) == 0)
            return tf_errf(err, TF_ERR_FORMAT, "%s: tensor '%s' appears in two shards: \"%s\" and \"%s\"", s->dir,
                           show(k, sizeof k, s->index[i].tensor->name), base_name(s->files[s->index[i - 1].file].path),
                           base_name(s->files[s->index[i].file].path));
    return TF_OK;
}

tf_status tf_st_set_open(tf_st_set *s, const char *dir, tf_err *err) {
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    char ipath[4096], spath[4096], hint[512];
    TF_TRY(join(ipath, sizeof ipath, dir, TF_ST_INDEX_NAME, err));
    TF_TRY(join(spath, sizeof spath, dir, TF_ST_SINGLE_NAME, err));
    tf_status st;
    if (exists(ipath)) {
        s->sharded = true;
        st = open_sharded(s, dir, ipath, err);
    } else if (exists(spath)) {
        s->files = calloc(1, sizeof *s->files);
        st = s->files ? tf_st_open(&s->files[0], spath, err) : tf_errf(err, TF_ERR_NOMEM, "%s: out of memory", dir);
        s->n_files = s->files ? 1 : 0;
    } else {
        st = tf_errf(err, TF_ERR_IO, "%s: found neither %s nor %s%s", dir, TF_ST_INDEX_NAME, TF_ST_SINGLE_NAME,
                     dir_hint(dir, hint, sizeof hint));
    }
    if (st == TF_OK) st = build_index(s, err);
    if (st != TF_OK) tf_st_set_close(s);
    return st;
}

void tf_st_set_close(tf_st_set *s) {
    if (!s) return;
    for (uint32_t i = 0; s->files && i < s->n_files; i++) tf_st_close(&s->files[i]);
    free(s->files);
    free(s->index);
    meta_free(s->meta, s->n_meta);
    memset(s, 0, sizeof *s);
}

const tf_st_tensor *tf_st_set_find(const tf_st_set *s, const char *name, const tf_st_file **file) {
    if (file) *file = NULL;
    if (!s->index || !name || strlen(name) > TF_ST_NAME_MAX) return NULL;
    tf_st_tensor probe;
    strcpy(probe.name, name);
    tf_st_set_entry key = {&probe, 0};
    const tf_st_set_entry *e = bsearch(&key, s->index, (size_t)s->n_tensors, sizeof *s->index, cmp_entry);
    if (!e) return NULL;
    if (file) *file = &s->files[e->file];
    return e->tensor;
}

const char *tf_st_set_meta_get(const tf_st_set *s, const char *key) { return meta_find(s->meta, s->n_meta, key); }
