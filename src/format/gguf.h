/*
 * gguf.h — defensive reader for GGUF v2/v3 files (little-endian).
 *
 * Every field is untrusted: counts and lengths are checked against the bytes
 * that remain, sizes are overflow-checked, tensor data ranges must be aligned,
 * inside the file and non-overlapping, keys and tensor names unique. Strings
 * point into the mapping (not NUL-terminated); the tf_gguf owns the mapping
 * and the index arrays and frees them in tf_gguf_close.
 */
#ifndef TF_FORMAT_GGUF_H
#define TF_FORMAT_GGUF_H

#include "core/error.h"
#include "core/mem.h"
#include <stdbool.h>
#include <stdint.h>

#define TF_GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define TF_GGUF_NAME_MAX 64       /* longest tensor name (bytes) */
#define TF_GGUF_KEY_MAX 65535     /* longest metadata key (bytes) */
#define TF_GGUF_MAX_DIMS 4
#define TF_GGUF_DEFAULT_ALIGNMENT 32

typedef enum tf_gguf_type {
    TF_GGUF_UINT8 = 0, TF_GGUF_INT8 = 1, TF_GGUF_UINT16 = 2, TF_GGUF_INT16 = 3,
    TF_GGUF_UINT32 = 4, TF_GGUF_INT32 = 5, TF_GGUF_FLOAT32 = 6, TF_GGUF_BOOL = 7,
    TF_GGUF_STRING = 8, TF_GGUF_ARRAY = 9, TF_GGUF_UINT64 = 10, TF_GGUF_INT64 = 11,
    TF_GGUF_FLOAT64 = 12, TF_GGUF_TYPE_COUNT = 13,
} tf_gguf_type;

typedef struct tf_gguf_str {
    const char *data; /* into the mapping; not NUL-terminated */
    uint64_t len;
} tf_gguf_str;

typedef struct tf_gguf_kv {
    tf_gguf_str key;
    uint32_t type; /* tf_gguf_type */
    union {
        uint64_t u;    /* UINT8..UINT64, BOOL */
        int64_t i;     /* INT8..INT64 */
        double f;      /* FLOAT32, FLOAT64 */
        tf_gguf_str s; /* STRING */
    } val;
    /* ARRAY only: */
    uint32_t arr_type;       /* element type (never ARRAY: nested arrays are rejected) */
    uint64_t arr_n;          /* element count */
    const uint8_t *arr_data; /* numeric elements, packed little-endian (may be unaligned) */
    tf_gguf_str *arr_str;    /* string elements (allocated index), or NULL */
} tf_gguf_kv;

typedef struct tf_gguf_tensor {
    char name[TF_GGUF_NAME_MAX + 1]; /* NUL-terminated copy */
    uint32_t n_dims;
    int64_t ne[TF_GGUF_MAX_DIMS]; /* ne[0] is the contiguous (row) dimension; unused = 1 */
    uint32_t type;                /* tf_dtype id */
    uint64_t offset;              /* relative to the data section */
    uint64_t nbytes;
    const uint8_t *data;          /* into the mapping */
} tf_gguf_tensor;

typedef struct tf_gguf {
    char path[512];
    tf_mmap map;            /* owned when opened from a file */
    const uint8_t *base;    /* file bytes */
    size_t size;
    uint32_t version;
    uint64_t n_kv;
    tf_gguf_kv *kv;
    uint64_t n_tensors;
    tf_gguf_tensor *tensors;
    uint32_t alignment;
    uint64_t data_offset;
    /* Extra resources of a GGUF assembled in memory (a Hugging Face directory:
     * the metadata buffer, mapped shards, converted tensors), released by
     * tf_gguf_close after the index. NULL for files. */
    void (*release)(void *ud);
    void *release_ud;
} tf_gguf;

/* Map and parse a file. On failure *g is left closed (safe to tf_gguf_close). */
tf_status tf_gguf_open(tf_gguf *g, const char *path, tf_err *err);
/* Parse bytes already in memory (not copied; must outlive g). `name` is used in messages. */
tf_status tf_gguf_parse(tf_gguf *g, const char *name, const uint8_t *data, size_t size, tf_err *err);
void tf_gguf_close(tf_gguf *g);

const tf_gguf_kv *tf_gguf_find_kv(const tf_gguf *g, const char *key);
const tf_gguf_tensor *tf_gguf_find_tensor(const tf_gguf *g, const char *name);
const char *tf_gguf_type_name(uint32_t type);

/* True if two strings are equal (s is not NUL-terminated). */
bool tf_gguf_str_eq(tf_gguf_str s, const char *cstr);

/* Typed getters. A missing key gives TF_OK with *found = false (found may be
 * NULL when the key is required: then missing is TF_ERR_FORMAT). A present key
 * of the wrong type, or a value out of the target's range, is TF_ERR_FORMAT
 * naming the key. Integers accept any integer GGUF type. */
tf_status tf_gguf_get_u32(const tf_gguf *g, const char *key, uint32_t *out, bool *found, tf_err *err);
tf_status tf_gguf_get_i64(const tf_gguf *g, const char *key, int64_t *out, bool *found, tf_err *err);
tf_status tf_gguf_get_f32(const tf_gguf *g, const char *key, float *out, bool *found, tf_err *err);
tf_status tf_gguf_get_bool(const tf_gguf *g, const char *key, bool *out, bool *found, tf_err *err);
tf_status tf_gguf_get_str(const tf_gguf *g, const char *key, tf_gguf_str *out, bool *found, tf_err *err);
/* Array whose elements have type elem_type (or, if elem_type is UINT32/INT32,
 * either 32-bit integer type). */
tf_status tf_gguf_get_arr(const tf_gguf *g, const char *key, uint32_t elem_type,
                          const tf_gguf_kv **out, bool *found, tf_err *err);

/* Read element i of a numeric array as the given C type (little-endian, unaligned-safe). */
int64_t tf_gguf_arr_int(const tf_gguf_kv *kv, uint64_t i);
double tf_gguf_arr_float(const tf_gguf_kv *kv, uint64_t i);

#endif
