/*
 * st_write.h — a tiny safetensors writer for tests.
 *
 * st_build lays the given tensors out back to back in the order given and
 * writes the header with cJSON (padded with spaces to a multiple of 8, as the
 * reference writer does). The dtype is any string, so tests can write dtypes
 * the reader must reject; no check is made that nbytes matches the shape.
 * st_build_raw writes an arbitrary header (any bytes, any length field) and
 * data section, for crafting malformed files. All return 0 on success, -1 on
 * failure (allocation, I/O); buffers are malloc'd and owned by the caller.
 */
#ifndef TF_TEST_ST_WRITE_H
#define TF_TEST_ST_WRITE_H

#include <stddef.h>
#include <stdint.h>

typedef struct st_entry {
    const char *name;
    const char *dtype;    /* "F32", "BF16", ... (not checked) */
    int n_dims;
    const int64_t *shape; /* n_dims entries, outermost first */
    const void *data;     /* nbytes bytes (may be NULL when nbytes is 0) */
    size_t nbytes;
} st_entry;

#define ST_LEN_AUTO UINT64_MAX /* st_build_raw: length field = header_len */

/* meta: NULL, or key, value, key, value, ..., NULL ("__metadata__"). */
int st_build(const st_entry *e, size_t n, const char *const *meta, uint8_t **out, size_t *out_len);
int st_write(const char *path, const st_entry *e, size_t n, const char *const *meta);

/* 8-byte little-endian len_field (ST_LEN_AUTO: header_len), header_len bytes
 * of header, data_len bytes of data (zeros if data is NULL). */
int st_build_raw(const void *header, size_t header_len, uint64_t len_field, const void *data, size_t data_len,
                 uint8_t **out, size_t *out_len);
int st_write_raw(const char *path, const void *header, size_t header_len, uint64_t len_field, const void *data,
                 size_t data_len);

/* Write n bytes (or a NUL-terminated text with n == (size_t)-1) to path. */
int st_write_bytes(const char *path, const void *p, size_t n);

#endif
